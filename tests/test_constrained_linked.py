"""Precision targets on disjoint domains linked only by the fixed total, under objectives that are not the
domain rows' own (A-optimal, unit-free, user weights, two variables): the exact backend enumerates the
domains one by one and joins them over the total (dpopt/backends/exact/constrained/linked.py, enumerate_linked).
Oracle: brute force over the box from the plain formulas (tests/test_constrained_exact.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.backends.exact import constrained as C
from dpopt.formulations.separable import program_of

from test_constrained_exact import _check, _grid, _oracle, _unit


def _instance(rs, J=1):
    """4-6 strata in 2-3 domains (some strata in none), every domain's target just above its value at the
    optimum under other stratum weights, so several targets bind at once."""
    k = int(rs.integers(4, 7))
    N = rs.integers(8, 30, size=k)
    S2 = rs.uniform(0.05, 4.0, size=(k, J))
    mech = ("laplace", "dlap", "tulap")[int(rs.integers(3))]
    eps = float(rs.choice([0.2, 0.7, 1.5, 4.0]))
    objective = ("a-optimal", "unit-free", "weights")[int(rs.integers(3))]
    if J > 1 and objective == "unit-free":
        objective = "a-optimal"
    if objective == "weights":
        objective = list(rs.uniform(0.5, 3.0, size=k))
    upper = np.minimum(N, rs.integers(4, 8, size=k))
    lower = np.minimum(rs.integers(1, 3, size=k), upper)
    total = int(rs.integers(lower.sum() + 1, upper.sum()))
    shares = None if J == 1 else [0.5, 0.5]
    d = StratifiedDesign(N, S2 if J > 1 else S2[:, 0], total, eps, mechanism=mech, objective=objective,
                         lower=lower, upper=upper, shares=shares, labels=[f"s{i}" for i in range(k)],
                         fpc=bool(rs.integers(2)))
    # targets a little above their values at a design under other weights: feasible, and several bind
    base = StratifiedDesign(N, S2 if J > 1 else S2[:, 0], total, eps, mechanism=mech,
                            objective=list(10.0 ** rs.uniform(-1, 1, size=k)), lower=lower, upper=upper,
                            shares=shares, fpc=d.fpc).solve()
    domains = int(rs.integers(2, 4))
    parts = np.array_split(rs.permutation(k), domains + int(rs.integers(2)))[:domains]   # maybe a rest
    for part in parts:
        dom = [d.labels[i] for i in sorted(part)]
        for j in range(J):
            var = d.variables[j] if J > 1 else None
            d.add_precision_target(1.0, strata=dom, variable=var)
            v = d.precision_value(d.precision_targets[-1], base.n)
            d.precision_targets[-1] = d._precision_target(v * rs.uniform(1.0, 1.03), dom, var, "variance",
                                                          None, "mean", "")
    return d, mech, eps, objective


def _binding(sol, prog):
    lam = sol.details.get("multipliers")
    return 0 if lam is None else sum(1 for r, v in zip(prog.rows, lam) if r.kind == "precision" and v > 0)


@pytest.mark.parametrize("seed", range(4))
def test_linked_domains_equal_brute_force(seed):
    """20 instances per seed (80 in all); the route is the group-by-group enumeration (structure checked)."""
    rs = np.random.default_rng(2200 + seed)
    outcomes, several = [], 0
    for _ in range(20):
        d, mech, eps, objective = _instance(rs, J=1 if rs.integers(3) else 2)
        prog = program_of(d)
        # the groups are the instance's domains (the targets' own strata), plus the strata in none of them
        found = C.linked_groups(prog)
        domains = {tuple(sorted(t.strata)) for t in d.precision_targets}
        rest = tuple(sorted(set(range(d.k)) - {i for dom in domains for i in dom}))
        got = None if found is None else sorted(tuple(sorted(p)) for p, _ in found[1])
        assert got == sorted(domains | ({rest} if rest else set()))
        ref = _oracle(d, mech, eps, objective)
        outcomes.append(_check(d, ref))
        if outcomes[-1] == "optimal":
            several += _binding(d.solve(), prog) >= 2
    assert outcomes.count("optimal") >= 10
    assert several >= 3            # instances where two or more domain targets bind at the optimum


def _brute_excess(d, mech, eps, objective, lb):
    ref = _oracle(d, mech, eps, objective)
    return None if ref is None else ref[0] - lb


@pytest.mark.parametrize("seed", range(3))
def test_each_budget_proves_what_it_claims(seed):
    """At every budget b the group enumeration either returns the optimum (excess ≤ b, equal to brute force)
    or proves that nothing lies within LB + b: the claim the certificate's lower bound rests on."""
    rs = np.random.default_rng(2300 + seed)
    checked = 0
    for _ in range(12):
        d, mech, eps, objective = _instance(rs)
        prog = program_of(d)
        linked = C.linked_groups(prog)
        if not C.convexity(d)[0]:
            continue
        res = C.solve_dual(prog, C.Deadline(10.0))
        if res.infeasible:
            continue
        ib = C.integer_bound(prog, res.lam)
        designs_in_box = int(np.prod((d.upper - d.lower + 1).astype(float)))
        assert designs_in_box < 10 ** 6          # precondition: the state limit below exceeds the whole box
        safe, n_lam, Om, ell = ib.lb, ib.n, ib.Om, ib.ell
        lam = res.lam
        # the enumeration's excesses are measured from the plain Lagrangian value; the certificate uses the
        # safe bound below it (rows at rhs + allowance, rounding subtracted)
        lb = float(np.sum(C.phi(prog, Om, ell, n_lam.astype(float))) - lam @ prog.rhs()) - prog.const
        assert safe <= lb
        true = _brute_excess(d, mech, eps, objective, lb)
        if true is None:
            continue
        assert true + lb >= safe                 # the safe Lagrangian bound itself
        scale = max(abs(lb), 1e-300)
        for rel in (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0):
            b = rel * scale
            r_lo, r_hi = C.reduced_ranges(prog, Om, ell, n_lam, b * (1 + 1e-12))
            out = C.enumerate_linked(prog, Om, ell, lam, n_lam, r_lo, r_hi, b, 10 ** 6, None, linked)
            # a state limit above the number of designs in the whole box can never be reached: the enumeration
            # must finish (None would mean it gave up, which proves nothing); brute force judges its answer below
            assert out is not None
            n, excess = out.n, out.excess
            if excess <= b:
                assert excess == pytest.approx(true, rel=1e-9, abs=1e-9 * scale)
                assert n is not None and d.is_feasible(n)
                assert prog.evaluate(n.astype(float))[0] == pytest.approx(lb + true, rel=1e-9)
            else:
                assert true > b * (1 - 1e-9) - 1e-9 * scale      # nothing within the budget: proven
            checked += 1
    assert checked >= 20


def test_state_limit_falls_back_to_highs():
    """With a state limit of one partial design the enumeration gives up at once; the HiGHS core MILP then
    proves the same optimum."""
    rs = np.random.default_rng(2400)
    done = 0
    for _ in range(8):
        d, mech, eps, objective = _instance(rs)
        ref = _oracle(d, mech, eps, objective)
        if ref is None:
            continue
        sol = C.solve_constrained(d, max_states=1)
        assert sol.status == dpopt.Status.OPTIMAL, sol.message
        assert sol.objective == pytest.approx(ref[0], rel=1e-9)
        assert sol.certificate.lower_bound <= ref[0] * (1 + 1e-9)
        done += 1
    assert done >= 4


def test_structure_detection():
    d = StratifiedDesign([20, 30, 25, 40], [1.0, 2.0, 0.5, 3.0], 20, 1.0, objective="a-optimal",
                         labels=list("abcd"))
    d.add_precision_target(0.1, strata=["a", "b"])
    assert C.linked_groups(program_of(d)) is None           # one target: the joint enumeration keeps dominance
    d.add_precision_target(0.1, strata=["c"])
    link, groups, relaxed = C.linked_groups(program_of(d))
    assert relaxed == []
    assert sorted(sorted(map(int, pos)) for pos, _ in groups) == [[0, 1], [2], [3]]   # d in no row: a rest group
    d.add_precision_target(0.1, strata=["b", "c"])          # now every target is linked through b and c
    assert C.linked_groups(program_of(d)) is None
    e = StratifiedDesign([20, 30, 25, 40], [1.0, 2.0, 0.5, 3.0], 20, 1.0, objective="a-optimal")
    e.add_precision_target(0.1, strata=[0, 1])
    e.add_precision_target(0.1, strata=[2, 3])
    e.add_cost_budget([1.0, 2.0, 3.0, 4.0], 50.0)            # a second row over every stratum: relaxed
    prog = program_of(e)
    found = C.linked_groups(prog)
    assert sorted(sorted(map(int, pos)) for pos, _ in found.groups) == [[0, 1], [2, 3]]
    assert [prog.rows[l].kind for l in found.relaxed] == ["linear"] and len(found.relaxed) == 1
    e.add_constraint([[0.0, 1.0, 0.0, 0.0]], [3.0], ">=", "at least 3 in stratum 1")   # a row on one stratum
    prog = program_of(e)
    assert len(C.linked_groups(prog).relaxed) == 2


def _with_budget(rs, d):
    """``d`` with a cost budget over every stratum near its optimum's cost (it may bind) and, half the time, a
    lower bound on one stratum as a row; None when ``d`` has no design."""
    base = d.solve()
    if base.status != dpopt.Status.OPTIMAL:
        return None
    cost = rs.uniform(1.0, 5.0, size=d.k)
    d.add_cost_budget(cost, float(cost @ base.n) * float(rs.uniform(0.97, 1.02)))
    if rs.integers(2):
        i = int(rs.integers(d.k))
        row = np.zeros((1, d.k))
        row[0, i] = 1.0
        d.add_constraint(row, [float(min(base.n[i] + 1, d.upper[i]))], ">=", "one stratum")
    return d


@pytest.mark.parametrize("seed", range(3))
def test_relaxed_rows_join_bounds_every_design(seed):
    """Domain targets linked by the total and by a cost budget over every domain (plus, half the time, a row on
    one stratum): at every budget b the join over the total without those rows is a lower bound on the excess of
    every feasible design within b (brute force), its design meets every row, and the full solve is exact."""
    rs = np.random.default_rng(2500 + seed)
    checked = solved = lifted = exact_hits = 0
    for _ in range(20):
        d, mech, eps, objective = _instance(rs)
        if _with_budget(rs, d) is None or not C.convexity(d)[0]:
            continue
        prog = program_of(d)
        linked = C.linked_groups(prog)
        assert linked is not None and linked.relaxed
        ref = _oracle(d, mech, eps, objective)
        outcome = _check(d, ref)
        solved += outcome == "optimal"
        if ref is None:
            continue
        res = C.solve_dual(prog, C.Deadline(10.0))
        ib = C.integer_bound(prog, res.lam)
        lb = float(np.sum(C.phi(prog, ib.Om, ib.ell, ib.n.astype(float))) - res.lam @ prog.rhs()) - prog.const
        true = ref[0] - lb
        scale = max(abs(lb), 1e-300)
        designs_in_box = int(np.prod((d.upper - d.lower + 1).astype(float)))
        assert designs_in_box < 10 ** 6          # precondition: the state limit below exceeds the whole box
        for rel in (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0):
            b = rel * scale
            r_lo, r_hi = C.reduced_ranges(prog, ib.Om, ib.ell, ib.n, b * (1 + 1e-12))
            out = C.enumerate_linked(prog, ib.Om, ib.ell, res.lam, ib.n, r_lo, r_hi, b, 10 ** 6, None, linked)
            # no deadline and a state limit above the box: giving up (None) would prove nothing and cannot happen;
            # brute force judges the answer right after
            assert out is not None
            # nothing feasible within b lies below the join's least
            if true <= b:
                assert true >= out.excess - 1e-9 * scale
                lifted += out.excess > 1e-9 * scale        # the join lifts the bound above the Lagrangian's
            if out.n is not None:
                assert d.is_feasible(out.n)
            # the budget tracked (the relaxed row with a multiplier): the join's least is still a lower bound, and
            # when its design meets every row and no other relaxed row has a multiplier, that least is the
            # design's own excess: the least excess over every design within b (brute force)
            tracked = C.enumerate_linked(prog, ib.Om, ib.ell, res.lam, ib.n, r_lo, r_hi, b, 10 ** 6, None,
                                         linked, track=True)
            # the same precondition: each partial join is a distinct partial design of the box, so the state
            # limit exceeds them all, and there is no deadline; brute force judges the answer below
            assert tracked is not None
            priced = [l for l in linked.relaxed if res.lam[l] > 0]
            if true <= b:
                assert true >= tracked.excess - 1e-9 * scale
            if tracked.n is not None and len(priced) == 1 and np.count_nonzero(prog.rows[priced[0]].a) > 1:
                assert d.is_feasible(tracked.n)
                own = prog.evaluate(tracked.n.astype(float))[0] - lb
                assert abs(own - tracked.excess) <= 1e-9 * scale
                if true <= b:
                    assert abs(own - true) <= 1e-9 * scale
                    exact_hits += 1
            checked += 1
    assert checked >= 40 and solved >= 8 and lifted >= 10 and exact_hits >= 10


def test_benchmark_case_e_shape_is_proven():
    """A mid-size instance of the benchmark's case (e) shape (k = 60, 6 domains of 10, A-optimal objective,
    every target tight): the general route now proves it; its answer beats every one-unit exchange between
    two strata that keeps the rows (an independent local check) and no single target can be dropped for free."""
    rs = np.random.default_rng(5)
    k = 60
    N = np.clip(np.round(rs.lognormal(math.log(300.0), 1.0, k)), 30, 3000).astype(np.int64)
    S2 = (10.0 ** rs.uniform(-1, 2, k)) ** 2
    d = StratifiedDesign(N, S2, 600, 1.0, objective="a-optimal")
    fav = 10.0 ** rs.uniform(-0.3, 0.3, 6)
    dom = np.array_split(rs.permutation(k), 6)
    w = np.empty(k)
    for f, part in zip(fav, dom):
        w[part] = f
    ref = StratifiedDesign(N, S2, 600, 1.0, objective=np.sqrt(w)).solve().n
    for part in dom:
        d.add_precision_target(1.0, strata=sorted(map(int, part)))
        v = d.precision_value(d.precision_targets[-1], ref)
        d.precision_targets[-1] = d._precision_target(v * 1.01, sorted(map(int, part)), None, "variance", None,
                                                      "mean", "")
    sol = d.solve(time_limit=60)
    assert sol.status == dpopt.Status.OPTIMAL, sol.message
    n, f = sol.n, sol.objective
    assert d.is_feasible(n)
    # every move of one unit from stratum i to stratum j that keeps the rows is no better
    for i in range(k):
        for j in range(k):
            if i == j or n[i] <= d.lower[i] or n[j] >= d.upper[j]:
                continue
            m = n.copy()
            m[i] -= 1
            m[j] += 1
            if d.is_feasible(m):
                assert d.objective_value(m) >= f * (1 - 1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_strata_clipped_to_one_value_are_enumerated_at_it(seed):
    """A core whose range for some strata is a single value other than the Lagrangian minimiser's (a row on a
    stratum clips it so): the enumeration must count that value's reduced cost and row terms, not n_λ's. Here
    every stratum is pinned to a feasible design n*. Oracle: f(n*) − the Lagrangian's value, evaluated directly
    (the identity f − L = Σ Δφ_i + λ·(rhs − rows) checked first)."""
    rs = np.random.default_rng(4100 + seed)
    done = 0
    for _ in range(30):
        d, _mech, _eps, _objective = _instance(rs)
        sol = d.solve()
        if sol.status != dpopt.Status.OPTIMAL or not C.convexity(d)[0]:
            continue
        prog = program_of(d)
        res = C.solve_dual(prog, C.Deadline(10.0))
        ib = C.integer_bound(prog, res.lam)
        design = np.asarray(sol.n, dtype=np.int64)
        if np.array_equal(design, ib.n):
            continue
        x0, x = ib.n.astype(float), design.astype(float)
        lagrangian = float(np.sum(C.phi(prog, ib.Om, ib.ell, x0)) - res.lam @ prog.rhs()) - prog.const
        f, lhs = prog.evaluate(x)
        excess = f - lagrangian
        tol = 1e-9 * max(abs(f), 1.0)
        assert abs(excess - (float(np.sum(C.phi(prog, ib.Om, ib.ell, x) - C.phi(prog, ib.Om, ib.ell, x0)))
                             + res.lam @ (prog.rhs() - lhs))) <= tol
        out = C.enumerate_core(prog, ib.Om, ib.ell, res.lam, ib.n, design, design, max(excess, 0.0) + 1.0, 10 ** 5)
        assert out is not None and out.n is not None and np.array_equal(out.n, design)
        assert abs(out.excess - excess) <= tol
        done += 1
    assert done >= 5


class _PassesAfter:
    """A deadline that passes after ``calls`` checks."""

    def __init__(self, calls):
        self.calls = calls

    def passed(self):
        self.calls -= 1
        return self.calls < 0


@pytest.mark.parametrize("seed", range(4))
def test_two_criteria_dominance_drops_only_dominated_designs(seed):
    """The dominance filter with a tracked row (cores._tracked_undominated), on random items with ties: every
    dropped item is dominated (same group, earlier in objective order, no larger row value, no larger tracked
    value) by a kept one, and every item no other dominates is kept (brute force over all pairs); stopped by a
    deadline after some levels, it keeps a superset, each of whose drops is still by a kept item."""
    from dpopt.backends.exact.constrained.cores import _tracked_undominated

    rs = np.random.default_rng(5200 + seed)
    for _ in range(40):
        S = int(rs.integers(1, 300))
        group = np.sort(rs.integers(0, 4, size=S))
        F = rs.integers(0, 20, size=S).astype(float)
        order = np.lexsort((F, group))
        group, F = group[order], F[order]
        y = rs.integers(0, 12, size=S).astype(float) * (0.1 if seed % 2 else 1e6)
        u = rs.integers(0, 12, size=S).astype(float) * rs.choice([1.0, 0.37])
        keep = _tracked_undominated(group, F, y, u)
        for stop in (0, 1, 3):
            # a deadline that passes after `stop` levels: fewer drops, never one the full filter keeps, and every
            # drop still by a kept item
            early = _tracked_undominated(group, F, y, u, _PassesAfter(stop))
            assert np.all(early[keep])
            for b in np.flatnonzero(~early):
                assert any(early[a] and group[a] == group[b] and F[a] <= F[b] and y[a] <= y[b] and u[a] <= u[b]
                           for a in range(S) if a != b)
        for b in range(S):
            dom = [a for a in range(S) if a != b and group[a] == group[b] and a < b
                   and y[a] <= y[b] and u[a] <= u[b]]
            if not keep[b]:
                assert any(keep[a] for a in dom) or any(
                    keep[a] and group[a] == group[b] and F[a] <= F[b] and y[a] <= y[b] and u[a] <= u[b]
                    for a in range(S) if a != b)
            strict = [a for a in range(S) if a != b and group[a] == group[b] and F[a] <= F[b]
                      and y[a] <= y[b] and u[a] <= u[b] and (F[a], y[a], u[a]) != (F[b], y[b], u[b])]
            if not strict and not dom:
                assert keep[b]


@pytest.mark.parametrize("seed", range(2))
def test_budget_at_the_optimums_own_use(seed):
    """Domain targets linked by the total and a cost budget set to exactly what the brute-force optimum spends
    (zero slack at the optimum, the boundary the tracked join's budget room meets): the solve is proven and equals
    brute force over the box with that budget."""
    import dataclasses

    rs = np.random.default_rng(6300 + seed)
    solved = 0
    for _ in range(20):
        d, mech, eps, objective = _instance(rs)
        if _with_budget(rs, d) is None or not C.convexity(d)[0]:
            continue
        ref = _oracle(d, mech, eps, objective)
        if ref is None:
            continue
        n = np.asarray(ref[1], dtype=float)
        d.constraints = [dataclasses.replace(c, b=c.A @ n) if c.sense == "<=" else c for c in d.constraints]
        solved += _check(d, _oracle(d, mech, eps, objective)) == "optimal"
    assert solved >= 8
