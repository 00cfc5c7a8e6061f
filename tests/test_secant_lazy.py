"""The secant MILP with lazily generated cuts (dpopt/backends/_secant.py, docs/constrained.md#the-secant-milp).

Oracles: brute-force enumeration of every integer design in the box (``_oracle`` of test_constrained_exact), for
the Pyomo/HiGHS and cvxpy/HiGHS routes started from only two secants per stratum (so the loop must add most of
the cuts it needs), and for the MILP written with a subset of the secants (a relaxation: never above the optimum).
"""

import numpy as np
import pytest

import dpopt
import dpopt.backends._secant as secant
from dpopt.formulations.separable import program_of, ranges, secant_milp, segments_missing
from test_constrained_exact import MECHS, _oracle


def _instance(rs):
    """k = 2–3 strata with ranges of 20–120 (far more segments than the two the loop starts from), one cost
    budget, sometimes a domain SE target; the model and its brute-force optimum."""
    k = int(rs.integers(2, 4))
    N = rs.integers(20, 121 if k == 2 else 45, size=k)
    S2 = rs.uniform(0.05, 4.0, size=k)
    mech = MECHS[int(rs.integers(3))]
    eps = float(rs.choice([0.3, 1.0, 3.0]))
    total = int(rs.integers(k * 3, int(N.sum() * 0.7)))
    d = dpopt.StratifiedDesign(N, S2, total, eps, mechanism=mech, objective="mean", lower=np.ones(k, dtype=int), upper=N,
                               fpc=bool(rs.integers(2)))
    base = d.solve().n
    cost = rs.uniform(1, 5, size=k)
    d.add_cost_budget(cost, float(cost @ base) * rs.uniform(0.98, 1.01))
    if rs.random() < 0.5:
        dom = [int(i) for i in sorted(rs.choice(k, size=int(rs.integers(1, k + 1)), replace=False))]
        d.add_precision_target(1.0, strata=dom, kind="se")
        v = d.precision_value(d.precision_targets[-1], base)
        d.precision_targets[-1] = d._precision_target(float(np.sqrt(v * rs.uniform(0.95, 1.2))), dom, None, "se",
                                                      None, "mean", "")
    return d, _oracle(d, mech, eps, "mean")


@pytest.mark.parametrize("backend", ["pyomo", "cvxpy"])
def test_lazy_secant_route_equals_brute_force(backend, monkeypatch):
    monkeypatch.setattr(secant, "INITIAL_SEGMENTS", 2)
    rs = np.random.default_rng(7 if backend == "pyomo" else 8)
    proven = rounds = 0
    for _ in range(12):
        d, ref = _instance(rs)
        opts = {"solver": "highs"} if backend == "pyomo" else {}         # cvxpy's secant route runs HiGHS
        s = d.solve(backend=backend, time_limit=60, **opts)
        if ref is None:
            assert s.status == dpopt.Status.INFEASIBLE, s.message
            continue
        assert s.n is not None and d.is_feasible(s.n), s.message
        assert s.objective >= ref[0] * (1 - 1e-12)
        if s.certificate is not None and s.certificate.lower_bound is not None:
            assert s.certificate.lower_bound <= ref[0] * (1 + 1e-9)
        if s.status == dpopt.Status.OPTIMAL:
            proven += 1
            rounds = max(rounds, s.details["secant_rounds"])
            assert s.objective == pytest.approx(ref[0], rel=1e-9)
    assert proven >= 7
    assert rounds >= 3          # the loop really added cuts


def test_fewer_secants_make_a_relaxation_exact_where_written():
    from scipy.optimize import milp
    rs = np.random.default_rng(3)
    checked = 0
    for _ in range(15):
        d, ref = _instance(rs)
        if ref is None:
            continue
        prog = program_of(d)
        lo, hi = ranges(prog)
        full = secant_milp(prog, lo, hi)
        sub = [set(int(v) for v in rs.integers(a, max(b, a + 1), size=2)) if a < b else set()
               for a, b in zip(lo, hi)]
        part = secant_milp(prog, lo, hi, segments=sub)
        r_full, r_part = milp(**full.to_scipy()), milp(**part.to_scipy())
        v_full = (r_full.fun + full.offset) * full.obj_scale
        v_part = (r_part.fun + part.offset) * part.obj_scale
        assert v_full == pytest.approx(ref[0], rel=1e-7)           # every secant: the exact problem
        assert v_part <= ref[0] * (1 + 1e-7)                        # a subset: a relaxation
        n = np.rint(r_part.x[:d.k]).astype(np.int64)
        if not segments_missing(sub, n, lo, hi):
            # written at n: the relaxation's value there is the design's own
            assert v_part == pytest.approx(d.objective_value(n), rel=1e-7)
        checked += 1
    assert checked >= 10


def test_segments_missing_names_strata_without_a_secant_at_n():
    lo, hi = np.array([1, 5, 3]), np.array([10, 5, 9])
    segs = [{4}, set(), {8}]
    assert segments_missing(segs, np.array([5, 5, 9]), lo, hi) == []      # 5−1 ∈ {4}; fixed; 9 → segment 8
    assert segments_missing(segs, np.array([3, 5, 3]), lo, hi) == [0, 2]
    assert segments_missing(segs, np.array([4, 5, 8]), lo, hi) == []


@pytest.mark.parametrize("good_round", [1, 2])
def test_stopped_loop_answers_with_its_best_round(good_round):
    """A loop stopped by its limit answers with the best feasible point of its rounds: here the round that is
    not cut short returns the brute-force optimum and the other a design three units away (feasible, worse)."""
    import time

    rs = np.random.default_rng(11)
    N = np.array([180, 150, 210])
    d = dpopt.StratifiedDesign(N, rs.uniform(0.5, 3.0, size=3), 60, 1.0, mechanism="laplace", objective="mean",
                               lower=np.ones(3, dtype=int), upper=N)
    cost = np.array([1.0, 2.0, 1.5])
    d.add_cost_budget(cost, 1e6)                      # never binds: the optimum is the plain design's
    ref = _oracle(d, "laplace", 1.0, "mean")
    best = np.asarray(ref[1], dtype=np.int64)
    worse = best.copy()
    worse[0] -= 3
    worse[1] += 3
    assert d.is_feasible(worse)
    prep, early = secant._prepare(d, {"time_limit": 60}, secant._PYOMO_SOLVERS)
    assert early is None
    # the optimum is not exact in the starting relaxation, so the loop goes on to a second round
    assert segments_missing(secant.initial_segments(prep["lo"], prep["hi"], prep["anchor"]), best,
                            prep["lo"], prep["hi"])
    calls = []

    def one_round(milp, deadline):
        calls.append(milp)
        first = best if good_round == 1 else worse
        if len(calls) == 1:
            return "optimal", first.copy(), 0.9 * ref[0], "optimal", "round 1"
        return "time_limit", (worse if good_round == 1 else best).copy(), 0.9 * ref[0], "time_limit", "round 2"

    s = secant.solve_outer(d, prep, one_round, time.perf_counter())
    assert len(calls) == 2
    assert s.n is not None and np.array_equal(s.n, best), (s.n, best, s.message)
    assert s.objective == pytest.approx(ref[0], rel=1e-12)
    assert s.status != dpopt.Status.OPTIMAL          # a bound 10 % below proves nothing
