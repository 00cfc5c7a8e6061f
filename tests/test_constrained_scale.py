"""The pieces the exact constrained route uses at scale (k = 20 000, benchmarks/bench_constrained.py --k20000),
checked on small instances against brute force:

* the multipliers' secant LP restricted to the strata whose ±1 moves cost least (block._lp_window): forced down to
  one free stratum, every answer must still be the brute-force optimum (the restriction may weaken the bound,
  never make it wrong);
* the unit-move repair of nearly feasible points (incumbent.repair): whatever it returns meets every row of the
  brute-force oracle, and it reaches such a point from most perturbed optima."""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt.backends.exact.constrained import block as block_mod
from dpopt.backends.exact.constrained import incumbent as inc_mod
from dpopt.formulations.separable import program_of
from test_constrained_exact import _check, _oracle, _random_instance


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
def test_restricted_multiplier_lp_keeps_the_brute_force_optimum(kind, monkeypatch):
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


def test_repair_returns_only_points_the_oracle_accepts(monkeypatch):
    # small instances: one unit moves a row by ~10 %, so the "nearly feasible" limit is lifted for the test
    monkeypatch.setattr(inc_mod, "REPAIR_VIOLATION", np.inf)
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
        out = inc_mod.repair(prog, n)
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


def test_repair_refuses_programs_with_equality_rows():
    rs = np.random.default_rng(3)
    d, mech, eps, objective = _random_instance(rs, "precision")
    d.add_precision_target(1e-9, strata=[d.labels[0]], kind="variance")
    prog = program_of(d)          # the fixed total is an equality row: unit moves would break it
    assert not np.all(prog.inequality())
    assert inc_mod.repair(prog, d.lower.astype(np.int64)) is None


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
