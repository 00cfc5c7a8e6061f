"""The pieces the exact constrained route uses at scale (k = 20 000, benchmarks/bench_constrained.py --k20000),
checked on small instances against brute force:

* the multipliers' secant LP on ⌊x⌋, ⌈x⌉ and n_λ alone (block._hull_multipliers, above LP_STRATA strata): forced on
  every instance, every answer must still be the brute-force optimum (the narrow window may weaken the bound,
  never make it wrong), and the multipliers it ends with maximise the integer Lagrangian dual (brute force);
* the unit-move repair of nearly feasible points (formulations.repair.repair_integer_point, the one repair of every
  route): whatever it returns meets every row of the brute-force oracle, it reaches such a point from most
  perturbed optima, and on a fixed total it keeps the total and takes the cheapest single transfer that suffices."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.backends.exact.constrained import block as block_mod
from dpopt.backends.exact.constrained import incumbent as inc_mod
from dpopt.backends.exact.constrained.bound import integer_bound
from dpopt.backends.exact.constrained.deadline import Deadline
from dpopt.backends.exact.constrained.dual import solve_dual
from dpopt.formulations.repair import repair_integer_point
from dpopt.formulations.separable import program_of
from test_constrained_exact import MECHS, _alpha, _check, _oracle, _random_instance, _unit


def _min_cost_two(rs):
    """A min-cost design with a variance bound and one stratum's precision target (two inequality rows)."""
    d, mech, eps, objective = _random_instance(rs, "min-cost-two")
    cost = rs.uniform(1, 5, size=d.k)
    mc = d.min_cost(cost, variance_target=d.objective_value(d.lower) * rs.uniform(0.3, 0.95))
    dom = [d.labels[0]]
    mc.add_precision_target(1.0, strata=dom, variable=0)
    v_lo = d.precision_value(mc.precision_targets[-1], d.lower)
    mc.precision_targets[-1] = d._precision_target(v_lo * rs.uniform(0.3, 0.9), dom, 0, "variance", None,
                                                   "mean", "")
    return d, mc, mech, eps, objective


@pytest.mark.parametrize("kind", ["linear", "precision", "min-cost"])
def test_narrow_multiplier_lp_keeps_the_brute_force_optimum(kind, monkeypatch):
    monkeypatch.setattr(block_mod, "LP_STRATA", 1)
    rs = np.random.default_rng(7 + len(kind))
    outcomes = []
    for _ in range(20):
        d, mech, eps, objective = _random_instance(rs, "min-cost" if kind == "min-cost" else kind)
        base = d.solve()
        if kind == "linear":
            cost = rs.uniform(1, 5, size=d.k)
            d.add_cost_budget(cost, float(cost @ base.n) * rs.uniform(0.93, 1.0))
            outcomes.append(_check(d, _oracle(d, mech, eps, objective)))
        elif kind == "precision":
            dom = [d.labels[i] for i in sorted(rs.choice(d.k, size=int(rs.integers(1, d.k + 1)), replace=False))]
            d.add_precision_target(1.0, strata=dom, kind="se")
            v = d.precision_value(d.precision_targets[-1], base.n)
            d.precision_targets[-1] = d._precision_target(float(np.sqrt(v * rs.uniform(0.7, 1.05))), dom, None,
                                                          "se", None, "mean", "")
            outcomes.append(_check(d, _oracle(d, mech, eps, objective)))
        else:
            cost = rs.uniform(1, 5, size=d.k)
            mc = d.min_cost(cost, variance_target=d.objective_value(d.lower) * rs.uniform(0.2, 0.9))
            outcomes.append(_check(mc, _oracle(d, mech, eps, objective, min_cost=mc)))
    assert outcomes.count("optimal") >= 5


def test_repair_returns_only_points_the_oracle_accepts():
    # small instances: one unit moves a row by ~10 %; the repair is asked with no limit on the violation
    rs = np.random.default_rng(2024)
    tried = repaired = 0
    for _ in range(60):
        d, mc, mech, eps, objective = _min_cost_two(rs)
        ref = _oracle(d, mech, eps, objective, min_cost=mc)
        if ref is None:
            continue
        prog = program_of(mc)
        n = ref[1].astype(np.int64).copy()
        # remove units from the optimum until a row fails (rows are variances: fewer units, more variance)
        order = rs.permutation(d.k)
        for i in order:
            if n[i] > d.lower[i]:
                n[i] -= 1
            if not prog.feasible(n):
                break
        if prog.feasible(n):
            continue
        tried += 1
        out = repair_integer_point(prog, n)
        if out is None:
            continue
        repaired += 1
        assert np.all(out >= d.lower) and np.all(out <= d.upper)
        # the oracle's own rows: the repaired point is one of the designs it counts as feasible
        feas_ref = _oracle_feasible(d, mc, mech, eps, objective, out)
        assert feas_ref, (out, ref)
    assert tried >= 10 and repaired >= tried // 2, (tried, repaired)


def _oracle_feasible(d, mc, mech, eps, objective, n) -> bool:
    """Whether the brute-force oracle counts ``n`` feasible: the oracle restricted to the single point n."""
    lo, hi = d.lower.copy(), d.upper.copy()
    d.lower, d.upper = n.copy(), n.copy()
    try:
        return _oracle(d, mech, eps, objective, min_cost=mc) is not None
    finally:
        d.lower, d.upper = lo, hi


def test_repair_keeps_the_total_and_takes_the_cheapest_single_transfer():
    """Fixed-total designs with a precision target, started one unit transfer away from the brute-force optimum
    (a row then fails): the repair moves units between strata only (the total holds), its point meets every row of
    the oracle, and when one transfer from the start suffices it returns the cheapest such transfer (brute force
    over every transfer, judged by the model's feasibility test)."""
    rs = np.random.default_rng(5)
    tried = single = 0
    for _ in range(80):
        d, mech, eps, objective = _random_instance(rs, "precision")
        base = d.solve().n
        dom = [d.labels[i] for i in sorted(rs.choice(d.k, size=int(rs.integers(1, d.k + 1)), replace=False))]
        d.add_precision_target(1.0, strata=dom, kind="variance")
        v = d.precision_value(d.precision_targets[-1], base)
        d.precision_targets[-1] = d._precision_target(v * rs.uniform(0.8, 1.1), dom, None, "variance", None,
                                                      "mean", "")
        ref = _oracle(d, mech, eps, objective)
        if ref is None:
            continue
        eye = np.eye(d.k, dtype=np.int64)
        pairs = [(i, j) for i in range(d.k) for j in range(d.k) if i != j]
        starts = [ref[1] - eye[i] + eye[j] for i, j in pairs]
        starts = [n for n in starts if np.all(n >= d.lower) and np.all(n <= d.upper) and not d.is_feasible(n)]
        if not starts:
            continue
        start = starts[int(rs.integers(len(starts)))]
        tried += 1
        out = repair_integer_point(d, start)
        assert out is not None                  # the optimum is one transfer away
        assert out.sum() == d.total and _oracle_feasible(d, None, mech, eps, objective, out)
        fixes = [start - eye[i] + eye[j] for i, j in pairs]
        fixes = [n for n in fixes if np.all(n >= d.lower) and np.all(n <= d.upper) and d.is_feasible(n)]
        assert fixes
        single += 1
        assert d.objective_value(out) == pytest.approx(min(d.objective_value(n) for n in fixes), rel=1e-12)
    assert tried >= 15 and single == tried, (tried, single)


def test_incumbent_keeps_a_repaired_point_only_when_feasible(monkeypatch):
    monkeypatch.setattr(inc_mod, "REPAIR_VIOLATION", np.inf)
    rs = np.random.default_rng(11)
    for _ in range(20):
        d, mc, mech, eps, objective = _min_cost_two(rs)
        prog = program_of(mc)
        inc = inc_mod.Incumbent(prog)
        inc.offer(d.lower.astype(np.int64))
        if inc.found:
            assert _oracle_feasible(d, mc, mech, eps, objective, inc.n)
            ref = _oracle(d, mech, eps, objective, min_cost=mc)
            assert ref is not None and inc.ub >= ref[0] * (1 - 1e-12)
        else:
            sol = mc.solve()
            assert sol.status in (dpopt.Status.OPTIMAL, dpopt.Status.INFEASIBLE)


def _dual_maximum(d, mc, mech, eps, objective):
    """The integer Lagrangian dual's maximum of a min-cost design with one variance row, by brute force: at λ the
    Lagrangian is separable, each stratum's least c_i·v + λ·(its variance term) over its whole range, and it is
    concave in λ, so a golden-section search on a bracket finds its maximum."""
    vals = np.arange(1, int(d.upper.max()) + 1)
    T = _unit(d.N, d.sigma2_matrix, d.shares, eps, mech, np.repeat(vals[:, None], d.k, axis=1))[:, :, 0]
    a2 = _alpha(objective, d.N, d.sigma2_matrix) ** 2 * d.variable_weights[0]
    rhs = mc.variance_target + (float(np.sum(a2 * d.sigma2_matrix[:, 0] / d.N)) if d.fpc else 0.0)
    inside = (vals[:, None] >= d.lower[None, :]) & (vals[:, None] <= d.upper[None, :])
    cv = np.asarray(mc.cost, dtype=float)[None, :] * vals[:, None]

    def lagrangian(lam):
        return float(np.sum(np.where(inside, cv + lam * a2[None, :] * T, np.inf).min(axis=0))) - lam * rhs

    lo, hi = 0.0, 1.0
    for _ in range(200):           # the bracket: up to where the Lagrangian falls
        if lagrangian(2 * hi) < lagrangian(hi):
            break
        hi *= 2
    hi *= 2
    g = (math.sqrt(5) - 1) / 2
    for _ in range(300):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if lagrangian(a) < lagrangian(b):
            lo = a
        else:
            hi = b
    return lagrangian((lo + hi) / 2)


@pytest.mark.parametrize("narrow", [False, True])
def test_multiplier_lp_reaches_the_integer_dual_maximum(narrow, monkeypatch):
    """The multipliers _hull_multipliers ends with give the integer Lagrangian dual's maximum (brute force above),
    up to the safe bound's allowance, on the ±1 window and (``narrow``) on ⌊x⌋, ⌈x⌉ and n_λ alone; the continuous
    dual's multipliers fall short of it on most instances, so the test measures the LP rounds."""
    if narrow:
        monkeypatch.setattr(block_mod, "LP_STRATA", 1)
    rs = np.random.default_rng(31 + narrow)
    below = checked = 0
    for _ in range(25):
        k = int(rs.integers(5, 13))
        N = rs.integers(80, 400, size=k)
        mech = MECHS[int(rs.integers(3))]
        eps = float(rs.choice([0.3, 1.0, 3.0]))
        objective = ["mean", "a-optimal"][int(rs.integers(2))]
        d = StratifiedDesign(N, rs.uniform(0.05, 4.0, size=k), int(N.sum() // 10), eps, mechanism=mech,
                             objective=objective, lower=np.full(k, 2), upper=np.minimum(N, 60),
                             fpc=bool(rs.integers(2)))
        v_lo, v_hi = d.objective_value(d.upper), d.objective_value(d.lower)      # the target between them
        mc = d.min_cost(rs.uniform(1, 5, size=k), variance_target=v_lo + (v_hi - v_lo) * rs.uniform(0.02, 0.5))
        prog = program_of(mc)
        dl = Deadline(30.0)
        res = solve_dual(prog, dl)
        ib0 = integer_bound(prog, res.lam)
        scale = max(abs(ib0.lb), 1e-300)
        ib, _ = block_mod._hull_multipliers(prog, res.x, ib0, res.lam, scale, dl, 1)
        best = _dual_maximum(d, mc, mech, eps, objective)
        tol = 1e-9 * abs(best)
        assert ib.lb <= best + tol                         # no multipliers bound above the maximum
        assert ib.lb >= best - ib.tolerance - tol          # ... and these reach it
        checked += 1
        below += ib0.lb < best - ib0.tolerance - tol
    assert checked == 25 and below >= 5


def test_allowance_bounds_every_design_the_feasibility_test_accepts(monkeypatch):
    """SeparableProgram.allowance, the most a design the feasibility test accepts can exceed each row's rhs by,
    checked by brute force over small boxes with the tolerance raised to 0.08 (so that designs within it
    exist): every accepted design's excess is within the allowance, on the fixed total (integral: a whole
    number, the bound's floor), an integral row on one stratum, a cost budget with fractional costs and a
    precision target; and some accepted designs miss the total by a whole unit, so an allowance of 0 there
    would fail."""
    from dpopt import feasibility
    from dpopt.formulations import separable
    tau = 0.08
    monkeypatch.setattr(separable, "FEASIBILITY_TOL", tau)
    rs = np.random.default_rng(5)
    reached = accepted = 0
    for _ in range(12):
        k = int(rs.integers(2, 4))
        N = rs.integers(20, 60, size=k)
        d = StratifiedDesign(N, rs.uniform(0.5, 3.0, size=k), int(rs.integers(3 * k, 7 * k)), 1.0,
                             lower=np.full(k, 2), upper=np.full(k, 9))
        A = np.zeros((1, k))
        A[0, 0] = -1.0
        d.add_constraint(A, [-3.0], "<=", name="at least 3 in the first")
        cost = rs.uniform(1.0, 3.0, size=k)
        d.add_cost_budget(cost, float(cost @ np.full(k, 5.0)))
        d.add_precision_target(float(d.objective_value(np.full(k, 5)) * rs.uniform(1.0, 1.3)), kind="variance")
        prog = program_of(d)
        allow = prog.allowance()
        integral = np.array([r.integral for r in prog.rows])
        assert integral.sum() == 2 and np.all(allow[integral] == np.floor(allow[integral]))
        for n in itertools.product(*[range(2, 10)] * k):
            n = np.array(n)
            if not feasibility.feasible(n, prog.lower, prog.upper, prog.rows, prog.unit_matrix, tol=tau):
                continue
            accepted += 1
            lhs = prog.evaluate(n.astype(float))[1]
            over = np.where(prog.inequality(), lhs - prog.rhs(), np.abs(lhs - prog.rhs()))
            assert np.all(over <= allow * (1 + 1e-12)), (n, over, allow)
            reached += int(np.any(integral & (over >= 1)))
    assert accepted > 100 and reached > 0, (accepted, reached)
