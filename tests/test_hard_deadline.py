"""time_limit is a hard deadline inside HiGHS (issue 20): a MIP that HiGHS has not stopped by time_limit plus
a grace is stopped from outside by a MIP callback, and that stop reads as status time_limit (not a user
interrupt, not an error), with whatever point and bound HiGHS had."""

import numpy as np
import pytest

import dpopt
from dpopt.backends.exact.constrained import highs_milp as HM
from highs_faults import use_faulty_worker, warm_worker, was_killed
from dpopt.formulations.separable import program_of, ranges, secant_milp


def _milp(seed=0, k=40):
    rng = np.random.default_rng(seed)
    d = dpopt.StratifiedDesign(rng.integers(50, 500, k), rng.uniform(0.5, 5, k), 400, 1.0,
                               domains=[f"d{i % 4}" for i in range(k)])
    d.add_cost_budget(rng.uniform(1, 3, k), 2000.0)
    for g in range(4):
        d.add_precision_target(0.5, strata=f"d{g}", kind="se")
    prog = program_of(d)
    lo, hi = ranges(d)
    return d, secant_milp(prog, lo, hi, anchor=np.sqrt(lo * hi), obj_scale=1.0)


def test_a_mip_past_its_deadline_is_stopped_from_outside(monkeypatch):
    from dpopt.backends import _highs_run as H
    d, milp = _milp()
    free = HM.highs_solve(milp, 0.0, 0.0, 100.0)
    assert free.status == "optimal"                     # the instance itself solves
    monkeypatch.setattr(H, "INTERRUPT_GRACE", -1000.0)  # the deadline has passed at the first callback
    stopped = HM.highs_solve(milp, 0.0, 0.0, 100.0)
    assert stopped.status == "time_limit" and "killed" not in stopped.text   # HiGHS returned, interrupted
    if stopped.n is not None:                            # a point HiGHS had found is kept, with its bound
        assert stopped.bound <= free.objective * (1 + 1e-9)


STUCK_LIMIT = 2.0      # seconds: the limit of the runs made to stick

needs_proc = pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="reads /proc")


@needs_proc
def test_a_mip_stuck_inside_highs_is_killed_with_its_last_point_and_bound(monkeypatch, tmp_path):
    import highspy

    from dpopt.backends import _highs_run as H
    d, milp = _milp(4, k=60)
    free = HM.highs_solve(milp, 0.0, 0.0, 100.0)
    assert free.status == "optimal"
    marker = use_faulty_worker(monkeypatch, tmp_path, "stick")
    # a limit HiGHS's first point comes well within, also with the suite's other worker on the second core (at
    # 0.3 s HiGHS's own clock once stopped it before any point, and the fault was never met)
    run = H.run_highs(HM.milp_arrays(milp), {"mip_rel_gap": 0.0}, STUCK_LIMIT, columns=milp.k)
    assert was_killed(marker)
    assert run.killed and run.status == highspy.HighsModelStatus.kTimeLimit
    # the point HiGHS had sent before it stuck: integral, in its bounds, at the value HiGHS reported for it
    n = run.solution.col_value
    assert run.info.primal_solution_status == 2 and n.shape == (milp.k,)
    assert np.array_equal(n, np.round(n)) and np.all(n >= milp.col_lo[:milp.k]) and np.all(n <= milp.col_hi[:milp.k])
    assert run.info.objective_function_value >= free.objective / milp.obj_scale * (1 - 1e-9)
    assert run.info.mip_dual_bound <= free.objective / milp.obj_scale * (1 + 1e-9)
    # the exact route's MILP reads it as the time limit, with that point and bound
    marker.unlink()
    warm_worker()                                       # (the stuck one was killed)
    res = HM.highs_solve(milp, 0.0, 0.0, STUCK_LIMIT)
    assert was_killed(marker)
    assert res.status == "time_limit" and "killed" in res.text
    assert res.n is not None and res.objective >= free.objective * (1 - 1e-9)
    assert res.bound <= free.objective * (1 + 1e-9)


@needs_proc
@pytest.mark.parametrize("backend", ["pyomo", "cvxpy"])
def test_a_highs_solve_stuck_inside_highs_ends_at_the_time_limit(monkeypatch, tmp_path, backend):
    """Pyomo's appsi_highs and cvxpy's HIGHS each drive their own HiGHS object: it runs in a process killed past
    the limit all the same, and the route reads the stop as the time limit with HiGHS's last point."""
    d, _ = _milp(5, k=12)
    free = d.solve(backend="exact")
    assert free.status.value == "optimal"
    # the interface imported first: its import counts against the limit, and on a slow machine it took most of it,
    # so that HiGHS stopped by its own clock before it had a point (the fault is met at HiGHS's first point)
    __import__("pyomo.environ" if backend == "pyomo" else "cvxpy")
    marker = use_faulty_worker(monkeypatch, tmp_path, "stick")
    opts = {"solver": "highs"} if backend == "pyomo" else {}         # cvxpy's secant route runs HiGHS
    s = d.solve(backend=backend, time_limit=2.0, **opts)
    assert was_killed(marker)
    assert s.status.value in ("time_limit", "feasible")      # never "error", never a claim of optimality
    assert s.certificate is not None and s.certificate.lower_bound <= free.objective * (1 + 1e-9)
    if s.n is not None:                                      # the incumbent HiGHS had, judged by dpopt
        assert d.is_feasible(s.n) and s.objective >= free.objective * (1 - 1e-9)


def test_without_a_time_limit_nothing_is_subscribed():
    d, milp = _milp(1)
    assert HM.highs_solve(milp, 0.0, 0.0, None).status == "optimal"


# --- work begun after the limit (issue 20's "limit + 1 s"): a min-max level and the multipliers' LP ---

def _robust(k=30, S=4, seed=3):
    from dpopt.models.robust import RobustDesign
    rng = np.random.default_rng(seed)
    s2 = rng.uniform(1, 50, k)
    d = dpopt.StratifiedDesign(rng.integers(200, 2000, k), s2, 20 * k, 1.0)
    return RobustDesign(d, [s2 * np.exp(rng.normal(0, 0.5, k)) for _ in range(S)])


def test_without_grace_a_first_design_gets_no_time_past_the_limit():
    from dpopt.backends.exact.constrained.deadline import GRACE, Deadline
    d = Deadline(100.0)
    assert d.hard_end == d.end + GRACE                       # the solve's own grace, once per solve
    late = Deadline(0.0)
    assert late.at_least(5.0).end == late.hard_end          # a first design may use the grace ...
    assert late.without_grace().at_least(5.0).end == late.end   # ... unless the caller holds a design


def test_the_multipliers_lp_is_not_built_once_the_deadline_has_passed(monkeypatch):
    from dpopt.backends.exact.constrained.deadline import Deadline
    d, _milp_ = _milp(2)
    prog = program_of(d)
    lo, hi = ranges(d)
    anchor = np.sqrt(lo * hi)
    lam = HM.lp_multipliers(prog, lo, hi, anchor, 1.0, Deadline(None))
    assert lam is not None and lam.shape == (prog.m,) and np.all(lam[prog.inequality()] >= 0)

    def refuse(*a, **k):
        raise AssertionError("the LP was built after the deadline")
    monkeypatch.setattr(HM, "secant_milp", refuse)
    assert HM.lp_multipliers(prog, lo, hi, anchor, 1.0, Deadline(0.0)) is None


def test_a_min_max_program_begun_after_the_limit_runs_no_block(monkeypatch):
    from dpopt.backends.exact import minmax as MM
    from dpopt.backends.exact.constrained.deadline import Deadline
    from dpopt.formulations.minmax import minmax_program
    mp = minmax_program(_robust().minmax())
    prog = mp.weighted(np.full(mp.m, 1.0 / mp.m))
    kind, _, joined = MM._run(prog, True, Deadline(None), 1e-6)
    assert kind == "done" and joined.found                   # the same program, with time, is solved
    calls = []
    monkeypatch.setattr(MM, "solve_block", lambda *a, **k: calls.append(a) or None)
    monkeypatch.setattr(MM, "_by_domains", lambda *a, **k: calls.append(a) or None)
    kind, reason, joined = MM._run(prog, True, Deadline(0.0), 1e-6)
    assert (kind, reason, joined, calls) == ("stopped", "time limit", None, [])


def test_a_min_max_solve_stopped_by_its_limit_keeps_its_design_and_bound():
    r = _robust(k=300, S=30, seed=4)
    sol = r.minmax().solve(time_limit=0.3)
    assert sol.status.value == "time_limit"
    worst = float(np.max(r.regrets(sol.n)))            # the robust model's own regrets, not the min-max engine's
    assert abs(sol.objective - worst) <= 1e-9 * worst
    assert 1.0 <= sol.details["lower_bound"] <= worst     # a regret is at least 1: each g*_s is an optimum


def test_a_convexity_check_stopped_by_its_deadline_is_unknown_and_not_remembered():
    """Gaussian terms are checked increment by increment (seconds at k = 100 000): a solve's deadline stops the
    check, which then says unknown, and a later call with time completes it (the first answer was not kept)."""
    import time
    d = dpopt.StratifiedDesign(np.full(50, 400), np.linspace(0.5, 5, 50), 2000, 1.0, mechanism="gaussian",
                               delta=1e-6)
    convex, why = d.convexity_verified(until=time.perf_counter() - 1.0)
    assert convex is None and "within the time limit" in why
    assert d.convexity_verified()[0] is True
    assert d.convexity_verified(until=time.perf_counter() - 1.0)[0] is True     # now known: no check to stop


def test_the_solve_without_the_inequality_rows_does_not_start_after_the_deadline():
    from dpopt.backends.exact.constrained.deadline import Deadline
    from dpopt.backends.exact.constrained.solve import _without_inequality_rows
    rng = np.random.default_rng(7)
    k = 30
    N, s2 = rng.integers(100, 900, k), rng.uniform(1, 9, k)
    plain = dpopt.StratifiedDesign(N, s2, 600, 1.0).solve()      # the sum-and-bounds route's certified optimum
    d = dpopt.StratifiedDesign(N, s2, 600, 1.0)
    cost = rng.uniform(1, 3, k)
    d.add_cost_budget(cost, 10.0 * float(cost @ plain.n))          # far from binding
    args = (1e-9, False, 1, 400_000, 2_000_000)
    kept = _without_inequality_rows(d, args[0], Deadline(60.0), *args[1:])
    assert kept is not None and kept.status.value == "optimal" and d.is_feasible(kept.n)
    assert kept.objective == pytest.approx(plain.objective, rel=1e-12)
    assert _without_inequality_rows(d, args[0], Deadline(0.0), *args[1:]) is None


def test_a_resumed_block_reuses_its_bound_and_still_finds_the_brute_force_optimum(monkeypatch):
    """A block resumed after its share of the time ran out takes up the first run's dual and multipliers
    (block.BlockResult.bound) instead of solving them again, and the resumed search still ends at the
    brute-force optimum: the first run is stopped before any core (its search returns at once), the second
    resumes from it."""
    from dpopt.backends.exact.constrained import block as B
    from dpopt.backends.exact.constrained import search as S
    from dpopt.backends.exact.constrained.deadline import Deadline
    from test_constrained_exact import _oracle, _random_instance

    rs = np.random.default_rng(11)
    checked = 0
    for _ in range(30):
        d, mech, eps, objective = _random_instance(rs, "precision")
        d.add_precision_target(float(d.objective_value(np.minimum(d.upper, d.lower + 2))) * 4.0, kind="variance")
        ref = _oracle(d, mech, eps, objective)
        if ref is None:
            continue
        prog = program_of(d)
        with monkeypatch.context() as m:
            m.setattr(S.CoreSearch, "run", lambda self: S.STOP)
            first = B.solve_block(prog, True, Deadline(30.0), 1e-9, 1, 400_000, False)
        best = prog.evaluate(ref[1].astype(float))[0]
        # the bound handed to the resume is a real one: never above the brute-force optimum
        assert first.bound is not None and first.bound[0].lb <= best * (1 + 1e-9) + 1e-12
        calls = []
        real = B.solve_dual
        monkeypatch.setattr(B, "solve_dual", lambda *a, **k: calls.append(1) or real(*a, **k))
        again = B.solve_block(prog, True, Deadline(30.0), 1e-9, 1, 400_000, False, resume=first)
        monkeypatch.setattr(B, "solve_dual", real)
        assert calls == [] and again.n is not None      # no second dual solve; the answer is judged below
        assert again.ub == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert again.lb <= best * (1 + 1e-9) + 1e-12 and (again.ub - again.lb) <= 1e-9 * abs(again.ub) + 1e-12
        checked += 1
    assert checked >= 10
