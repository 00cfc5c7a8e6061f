"""Backend options (issue 14 item 8, issue 12's vocabulary) for the non-Pyomo backends: every bad value raises
InvalidOption naming the option, and an accepted time_limit is honoured."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt import _validate as V
from dpopt.models.hierarchy import Hierarchy

warnings.filterwarnings("ignore", message="Solution may be inaccurate")


def _design(mechanism="laplace"):
    return dpopt.StratifiedDesign(N=[5000, 3000, 2000, 1000], sigma2=[1.0, 4.0, 9.0, 16.0], total=400, epsilon=1.0,
                                  mechanism=mechanism)


def _hierarchy():
    return dpopt.HierarchyBudget(Hierarchy([[60.0], [25.0, 35.0], [5.0, 20.0, 15.0, 20.0]],
                                           [None, [0, 0], [0, 0, 1, 1]]), 1.0)


BAD = [
    # (model factory, task, backend, options, option named in the message)
    (_design, "solve", "algorithm1", {"max_candidates": -1}, "max_candidates"),
    (_design, "solve", "algorithm1", {"max_candidates": 2.7}, "max_candidates"),
    (_design, "solve", "algorithm1", {"lambda_rule": "x"}, "lambda_rule"),
    (_design, "solve", "algorithm1", {"time_limit": math.nan}, "time_limit"),
    (_design, "solve", "enumerate", {"max_candidates": 0}, "max_candidates"),
    (_design, "solve", "enumerate", {"time_limit": 0}, "time_limit"),
    (_design, "relax", "scipy", {"tol": 0}, "tol"),
    (_design, "relax", "scipy", {"tol": -1}, "tol"),
    (_design, "relax", "scipy", {"tol": math.nan}, "tol"),
    (_design, "relax", "scipy", {"tol": 0.5}, "tol"),
    (_design, "relax", "scipy", {"tol": True}, "tol"),
    (_design, "relax", "scipy", {"max_iter": 0}, "max_iter"),
    (_design, "relax", "scipy", {"max_iter": -1}, "max_iter"),
    (_design, "relax", "scipy", {"max_iter": "x"}, "max_iter"),
    (_design, "relax", "scipy", {"method": "x"}, "method"),
    (_design, "relax", "cvxpy", {"rel_gap": 0}, "rel_gap"),
    (_design, "relax", "cvxpy", {"rel_gap": math.nan}, "rel_gap"),
    (_design, "relax", "cvxpy", {"max_iter": 0}, "max_iter"),
    (_design, "relax", "cvxpy", {"method": "x"}, "method"),
    (_hierarchy, "solve", "exact", {"tol": 0}, "tol"),
    (_hierarchy, "solve", "exact", {"tol": math.nan}, "tol"),
    (_hierarchy, "solve", "exact", {"max_iter": 0}, "max_iter"),
    (_hierarchy, "solve", "exact", {"max_iter": "x"}, "max_iter"),
    (_hierarchy, "solve", "scipy", {"ftol": 0.5}, "ftol"),
    (_hierarchy, "solve", "scipy", {"max_iter": -1}, "max_iter"),
    (_hierarchy, "solve", "scipy", {"rel_gap": 1.5}, "rel_gap"),
    (_hierarchy, "solve", "cvxpy", {"initial_cuts": 1}, "initial_cuts"),
    (_hierarchy, "solve", "cvxpy", {"max_iter": 0}, "max_iter"),
    (_hierarchy, "solve", "cvxpy", {"rel_gap": -1}, "rel_gap"),
    (_hierarchy, "solve", "cvxpy", {"solver": 3}, "solver"),
]


@pytest.mark.parametrize("factory, task, backend, options, name", BAD,
                         ids=[f"{b}-{t}-{list(o)[0]}={o[list(o)[0]]!r}" for _, t, b, o, _ in BAD])
def test_bad_option_value_raises_naming_it(factory, task, backend, options, name):
    model = factory()
    with pytest.raises(V.InvalidOption, match=name):
        getattr(model, task)(backend=backend, **options)


@pytest.mark.parametrize("backend", ["exact", "scipy", "cvxpy"])
def test_hierarchy_time_limit_is_honoured(backend):
    sol = _hierarchy().solve(backend=backend, time_limit=1e-9)
    assert sol.status == "time_limit", sol.message
    # the point returned at the limit is still within the budget
    assert math.fsum(sol.x) <= 1.0


def test_hierarchy_time_limit_generous_is_optimal():
    for backend in ("exact", "scipy", "cvxpy"):
        assert _hierarchy().solve(backend=backend, time_limit=60).status == "optimal"


def test_cvxpy_integer_tiny_time_limit_is_time_limit_not_error():
    # was: SCIP stopped without a point, cvxpy raised SolverError, reported as error
    sol = _design("dlap").solve(backend="cvxpy", time_limit=1e-4)
    assert sol.status == "time_limit", sol.message


def test_cvxpy_relax_tiny_time_limit_is_time_limit():
    assert _design("dlap").relax(backend="cvxpy", time_limit=1e-9).status == "time_limit"


def test_rel_gap_is_honoured_by_cvxpy_hierarchy():
    loose = _hierarchy().solve(backend="cvxpy", rel_gap=1e-2)
    tight = _hierarchy().solve(backend="cvxpy")
    assert loose.status == tight.status == "optimal"
    assert loose.certificate.gap <= 1e-2 and tight.certificate.gap <= 1e-12     # options.FAMILY_REL_GAP
    assert loose.details["lp_solves"] <= tight.details["lp_solves"]


def test_exact_hierarchy_feasibility_loop_is_exact():
    sol = _hierarchy().solve()
    from fractions import Fraction
    assert sum(Fraction(float(e)) for e in sol.x) <= Fraction(1)
    assert np.all(sol.x > 0)
