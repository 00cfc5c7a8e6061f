"""Mechanism expression hooks (issue 12): the Pyomo MINLP and the cvxpy DNLP write a mechanism's noise variance
through its ``pyomo_variance`` / ``cvxpy_variance`` hook; a mechanism without one is refused with the reason,
and one with a hook is solved and agrees with the exact backend (an independent enumeration of the objective)."""

import numpy as np
import pytest

import dpopt
from dpopt.privacy import Mechanism


class Scaled(Mechanism):
    """Noise with variance 3Δ²/ε² + 0.25 (a user mechanism, no hooks)."""

    name = "scaled"

    def variance(self, epsilon, sensitivity=1.0):
        e = np.asarray(epsilon, dtype=float)
        return 3.0 * (sensitivity / e) ** 2 + 0.25


class ScaledWithHooks(Scaled):
    name = "scaled-hooked"

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        return 3.0 * (sensitivity / eps_scale) ** 2 / eps ** 2 + 0.25

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return 3.0 * sensitivity ** 2 * cp.power(eps, -2) + 0.25


def _design(mech, eps=0.8):
    return dpopt.StratifiedDesign([120, 400, 900], [2.0, 1.0, 0.5], 90, eps, mechanism=mech)


def test_without_hooks_refused_with_the_reason():
    d = _design(Scaled())
    sol = d.solve(backend="pyomo", solver="scip")
    assert sol.status == "unsupported" and "pyomo_variance" in sol.message
    sol = d.relax(backend="cvxpy", method="dnlp")
    assert sol.status == "unsupported" and "cvxpy_variance" in sol.message
    # the incremental MILP needs values only, not expressions: still solved
    assert d.solve(backend="pyomo", solver="highs").status == "optimal"


@pytest.mark.parametrize("eps", [0.05, 0.8, 40.0])
def test_pyomo_hook_agrees_with_exact(eps):
    d = _design(ScaledWithHooks(), eps)
    ref = d.solve(backend="exact")
    sol = d.solve(backend="pyomo", solver="scip")
    assert ref.status == "optimal" and sol.status == "optimal", sol.message
    assert sol.objective == pytest.approx(ref.objective, rel=1e-8)
    # brute force over the sum (k = 3: every split of 90 with each n_i in range)
    best = min(d.objective_value(np.array([a, b, 90 - a - b], dtype=float))
               for a in range(1, 89) for b in range(1, 90 - a))
    assert sol.objective == pytest.approx(best, rel=1e-8)


def test_cvxpy_hook_agrees_with_exact_relaxation():
    d = _design(ScaledWithHooks())
    sol = d.relax(backend="cvxpy", method="dnlp")
    ref = d.relax(backend="exact")
    assert sol.status in ("optimal", "feasible"), sol.message
    assert sol.objective == pytest.approx(ref.objective, rel=1e-6)


@pytest.mark.parametrize("mech,delta", [("laplace", 1.0), ("laplace", 3.0), ("dlap", 1.0), ("dlap", 2.0),
                                        ("dlap", 5.0), ("tulap", 1.0)])
@pytest.mark.parametrize("eps", [1e-6, 0.3, 700.0])
def test_builtin_hooks_evaluate_to_the_variance(mech, delta, eps):
    """The hooks of the built-in mechanisms, evaluated at numbers, equal Mechanism.variance (each branch:
    the budget written scaled, with the rational growth form, and its small-growth form)."""
    import cvxpy as cp
    import pyomo.environ as pe

    m = dpopt.privacy.get_mechanism(mech)
    want = float(m.variance(eps, delta))
    for scale in (1.0, 2.5):
        got = pe.value(m.pyomo_variance(pe, eps / scale, delta, eps_scale=scale))
        assert got == pytest.approx(want, rel=1e-9)
    if eps < 30:
        y = float(np.expm1(eps))
        got = pe.value(m.pyomo_variance(pe, eps, delta, growth=y, growth_max=y))
        assert got == pytest.approx(want, rel=1e-9)
    got = float(m.cvxpy_variance(cp, cp.Constant(eps), delta, large=eps / delta >= 1).value)
    assert got == pytest.approx(want, rel=1e-9)
