"""Fair comparisons (issue 20): ``dpopt compare`` runs SCIP and HiGHS on their strongest formulation (the
secant MILP) by default and says which; a row stopped by its time limit reports the gap its solver proved,
never nan. The answers are checked against brute force over every design of a small instance."""

import itertools
import math

import numpy as np
import pytest

import dpopt
from dpopt.compare import proven_gap
from dpopt.result import Certificate, Solution, Status


def _small(seed=0):
    rng = np.random.default_rng(seed)
    d = dpopt.StratifiedDesign(rng.integers(30, 300, 4), rng.uniform(0.5, 5.0, 4) ** 2, 24, 1.0)
    return d


def _brute(d):
    lo, hi = np.asarray(d.lower, dtype=int), np.asarray(d.upper, dtype=int)
    best = math.inf
    for head in itertools.product(*[range(lo[i], hi[i] + 1) for i in range(d.k - 1)]):
        n = np.array([*head, int(d.total) - sum(head)])
        if lo[-1] <= n[-1] <= hi[-1] and d.is_feasible(n):
            best = min(best, d.objective_value(n))
    return best


def test_generic_solvers_run_the_secant_milp_by_default_and_say_so(seed=1):
    pytest.importorskip("pyomo")
    d = _small(seed)
    res = dpopt.compare(d, backends=["exact", "pyomo:scip", "pyomo:highs"], time_limit=30, progress=False)
    opt = _brute(d)
    rows = {r["backend"]: r for r in res.to_dict()["results"]}
    for name in ("pyomo:scip", "pyomo:highs"):
        r = rows[name]
        if r["status"] == "unsupported":          # solver not installed here
            continue
        assert r["formulation"] == "secant"
        assert r["status"] == "optimal" and r["objective"] == pytest.approx(opt, rel=1e-9)
        assert r["proven_gap"] is not None and r["proven_gap"] <= 1e-9
    assert "formulation" in res.table() and "secant" in res.table()
    # a formulation named by the caller is kept (HiGHS's incremental MILP)
    mine = dpopt.compare(d, backends=["pyomo:highs"], time_limit=30, progress=False,
                         options={"pyomo:highs": {"formulation": "milp"}})
    if mine[0].status != Status.UNSUPPORTED:
        assert mine.to_dict()["results"][0]["formulation"] == "milp"
        assert mine[0].objective == pytest.approx(opt, rel=1e-9)


def test_a_row_stopped_by_its_limit_reports_a_gap_never_nan():
    no_point = Solution(status=Status.TIME_LIMIT, message="stopped")
    assert proven_gap(no_point) == math.inf
    nan_cert = Solution(status=Status.TIME_LIMIT, objective=110.0, n=np.array([1, 2]),
                        certificate=Certificate("gap", False, lower_bound=float("nan"), gap=float("nan")))
    nan_cert.details["lower_bound"] = 100.0
    assert proven_gap(nan_cert) == pytest.approx(10.0 / 110.0)        # from the bound the solver reported
    nan_cert.details["lower_bound"] = float("nan")
    assert proven_gap(nan_cert) == math.inf                            # no bound: unbounded gap, not nan
