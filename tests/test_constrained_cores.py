"""The exact constrained solver's two ways of solving a core, and its blocks, against brute force.

Cores (the designs within a reduced-cost budget of the Lagrangian bound) are enumerated by dynamic
programming, or handed to HiGHS as secant MILPs when too many partial designs survive; ``max_states=0``
forces the MILP path, a tiny ``max_states`` switches mid-way. Min-cost designs with one target per domain
split into independent blocks. Every answer must equal the brute-force optimum over the whole box (oracle
from the plain formulas, independent of the model's increment code) and carry a bound below it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpopt import StratifiedDesign, Status
from dpopt.backends.exact.constrained import solve_constrained


def _noise(mech, eps):
    if mech == "laplace":
        return 2.0 / eps ** 2
    p = np.exp(-eps)
    return 2 * p / (1 - p) ** 2 + (1 / 12 if mech == "tulap" else 0.0)


def _terms(N, S2, shares, eps, mech, grid):
    L = np.log1p(np.expm1(eps) * N[None, :] / grid)
    return (S2[None, :, :] + _noise(mech, shares[None, None, :] * L[:, :, None])) / grid[:, :, None]


def _instance(seed):
    rs = np.random.default_rng(seed)
    k = int(rs.integers(3, 6))
    J = 1 + seed % 2
    N = rs.integers(10, 40, size=k)
    S2 = rs.uniform(0.05, 6.0, size=(k, J))
    mech = ("laplace", "dlap", "tulap")[seed % 3]
    eps = float(rs.choice([0.3, 1.0, 3.0]))
    upper = np.minimum(N, rs.integers(4, 8, size=k))
    total = int(rs.integers(k, upper.sum() + 1))
    shares = np.full(J, 1.0 / J)
    domains = ["x" if i < k // 2 + 1 else "y" for i in range(k)]
    d = StratifiedDesign(N, S2 if J > 1 else S2[:, 0], total, eps, mechanism=mech, upper=upper, domains=domains)
    grid = np.array(list(itertools.product(*[range(1, int(u) + 1) for u in upper])), dtype=float)
    T = _terms(N.astype(float), S2, shares, eps, mech, grid)
    return rs, d, grid, T


def _mean_weights(N, strata):
    w = np.zeros(N.size)
    w[strata] = (N[strata] / N[strata].sum()) ** 2
    return w


def _check(sol, best):
    if best is None:
        assert sol.status == Status.INFEASIBLE, sol.message
        return
    assert sol.status == Status.OPTIMAL, sol.message
    assert sol.objective == pytest.approx(best, rel=1e-9)
    assert sol.certificate.lower_bound <= best * (1 + 1e-9)


@pytest.mark.parametrize("max_states", [200_000, 3, 0])
@pytest.mark.parametrize("seed", range(12))
def test_fixed_total_with_cost_budget_and_domain_target(seed, max_states):
    rs, d, grid, T = _instance(seed)
    N = d.N.astype(float)
    g = np.einsum("pkj,k->p", T, N ** 2)          # population-mean objective, equal variable weights
    ok = grid.sum(axis=1) == d.total
    cost = rs.uniform(1, 4, size=d.k)
    base = d.solve().n
    budget = float(cost @ base) * rs.uniform(0.9, 1.0)
    d.add_cost_budget(cost, budget)
    ok &= grid @ cost <= budget * (1 + 1e-9)
    strata = d.strata_index("x")
    w = _mean_weights(N, strata)
    v_base = float(_terms(N, d.sigma2_matrix, d.shares, d.epsilon, d.mechanism.name, base[None, :].astype(float))
                   [0, :, 0] @ w)
    target = v_base * rs.uniform(0.85, 1.05)
    d.add_precision_target(target, strata="x", variable=0 if d.J > 1 else None)
    ok &= T[:, :, 0] @ w <= target * (1 + 1e-9)
    best = float(g[ok].min()) if ok.any() else None
    _check(solve_constrained(d, max_states=max_states), best)


@pytest.mark.parametrize("max_states", [200_000, 3, 0])
@pytest.mark.parametrize("seed", range(12))
def test_min_cost_with_one_target_per_domain_splits_into_blocks(seed, max_states):
    rs, d, grid, T = _instance(seed)
    N = d.N.astype(float)
    ref = rs.integers(2, 5, size=d.k)
    ok = np.ones(len(grid), dtype=bool)
    T_ref = _terms(N, d.sigma2_matrix, d.shares, d.epsilon, d.mechanism.name, ref[None, :].astype(float))[0]
    for dom in ("x", "y"):
        w = _mean_weights(N, d.strata_index(dom))
        for j in range(d.J):
            target = float(T_ref[:, j] @ w) * rs.uniform(0.9, 1.1)
            d.add_precision_target(target, strata=dom, variable=j if d.J > 1 else None)
            ok &= T[:, :, j] @ w <= target * (1 + 1e-9)
    cost = rs.uniform(1, 4, size=d.k)
    mc = d.min_cost(cost)
    sol = solve_constrained(mc, max_states=max_states)
    best = float((grid @ cost)[ok].min()) if ok.any() else None
    _check(sol, best)
    if best is not None:
        assert "2 independent blocks" in sol.details["steps"]     # the trail: details and the dpopt log


def test_max_states_is_validated():
    d = StratifiedDesign([20, 30], [1.0, 2.0], 10, 1.0)
    d.add_cost_budget([1.0, 2.0], 18)
    with pytest.raises(ValueError, match="max_states"):
        solve_constrained(d, max_states=-1)


@pytest.mark.parametrize("seed", range(6))
def test_dominance_keeps_exactly_the_undominated_against_brute_force(seed):
    """The core enumeration's dominance test (items sorted by group, then objective): an item is dropped only when
    an earlier item of its group has a row value no larger, and every item that no earlier item of its group
    matches or beats is kept. Checked pair by pair, with exact ties (identical strata) and values a rounding
    apart."""
    from dpopt.backends.exact.constrained.cores import segmented_first_min

    rng = np.random.default_rng(seed)
    S = 400
    group = np.sort(rng.integers(0, 7, S))
    y = np.round(rng.normal(0.0, 1.0, S), 1) * 10.0 ** rng.integers(-3, 4)     # many exact ties
    y[rng.random(S) < 0.1] += np.spacing(1.0) * 2                               # and near ties
    keep = segmented_first_min(group, y)
    for p in range(S):
        earlier = [q for q in range(p) if group[q] == group[p]]
        beaten = any(y[q] < y[p] for q in earlier)
        matched = any(y[q] <= y[p] for q in earlier)
        if beaten:
            assert not keep[p]
        if not matched:
            assert keep[p]
        if not keep[p]:
            assert matched       # never dropped without an earlier item at least as good


@pytest.mark.parametrize("fused", [10 ** 6, 2, 3, 5])
@pytest.mark.parametrize("seed", range(8))
def test_core_enumeration_with_its_last_strata_fused_matches_brute_force(seed, fused, monkeypatch):
    """Cores with two rows (no dominance) whose last ``fused`` strata are expanded together, a chunk at a time
    (cores._expand_last; 10⁶: never), on chunks of 7 partial designs so that chunks meet: the best design of the
    core within the budget is brute force's over every design of the core's box."""
    from dpopt.backends.exact.constrained import cores

    monkeypatch.setattr(cores, "FUSED", fused)
    monkeypatch.setattr(cores, "CHUNK", 7)
    found, _ = _two_row_cores_against_brute_force(100 + seed, (0.97, 1.02), (0.97, 1.02))
    assert found >= 1          # the larger budget's core (5-6 free strata, 750-8 400 designs) holds the optimum


@pytest.mark.parametrize("seed", range(12))
def test_dominance_on_the_one_row_a_core_can_break_matches_brute_force(seed):
    """Two targets, the second loose enough that no design of the core breaks it (its largest reachable value
    stays below its right-hand side): the enumeration then applies one-row dominance on the first
    (CoreTable.watched) and must still find brute force's best design of the core within the budget."""
    found, watched = _two_row_cores_against_brute_force(200 + seed, (0.97, 1.02), (1.3, 1.5))
    assert found >= 1
    assert 1 in watched        # dominance ran (one watched row) on at least one core


def _min_cost_with_a_beam_before_every_core(seed, monkeypatch) -> list:
    """test_min_cost_with_one_target_per_domain_splits_into_blocks with the beam search (CoreSearch.beam) before
    every core, from the first; returns the beam widths used."""
    from dpopt.backends.exact.constrained import cores, search
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[8])
        return cores.beam_core(*args, **kwargs)

    monkeypatch.setattr(search, "BEAM_PEAK", 0)
    monkeypatch.setattr(search, "beam_core", counted)
    test_min_cost_with_one_target_per_domain_splits_into_blocks(seed, 200_000)
    return calls


@pytest.mark.parametrize("seed", [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23])      # two variables: two rows a block
def test_min_cost_with_a_beam_search_before_every_core_matches_brute_force(seed, monkeypatch):
    """The beam only offers designs: the answer is still brute force's optimum, with its certificate."""
    _min_cost_with_a_beam_before_every_core(seed, monkeypatch)


def test_the_beam_search_runs_on_two_row_blocks(monkeypatch):
    from dpopt.backends.exact.constrained.search import BEAM_WIDTHS
    widths = [w for s in (1, 3, 5, 7, 9, 11) for w in _min_cost_with_a_beam_before_every_core(s, monkeypatch)]
    assert widths and set(widths) <= set(BEAM_WIDTHS)


@pytest.mark.parametrize("seed", range(12))
def test_a_beam_wide_enough_to_keep_every_partial_design_finds_the_cores_optimum(seed):
    """beam_core at a width no partial design set of the core can exceed (the box holds at most 300 000
    designs) is the exact programme without dominance: its design is brute force's best of the core within the
    budget."""
    found, watched = _two_row_cores_against_brute_force(100 + seed, (0.97, 1.02), (0.97, 1.02), beam=300_000)
    assert found >= 1 and 2 in watched


@pytest.mark.parametrize("seed", range(12))
def test_a_narrow_beam_returns_only_feasible_designs_within_the_budget(seed):
    """A beam of 2 partial designs is no proof: what it returns must still be a design the feasibility test
    accepts, within the budget and no better than brute force's best (checked in the helper)."""
    _two_row_cores_against_brute_force(300 + seed, (0.97, 1.02), (0.97, 1.02), beam=2)


def _two_row_cores_against_brute_force(seed, first, second, beam=None):
    """Min-cost with a variance target per variable on one domain (at U(first) and U(second) times a base
    design's values): per budget, the core's enumeration (or, with ``beam`` a width, the beam search) against
    brute force over its box. Returns the number of budgets whose core held the optimum (and where the route
    must have found it: the enumeration, or a beam at least as wide as the box) and the numbers of watched rows
    seen."""
    from dpopt.backends.exact.constrained import cores
    from dpopt.backends.exact.constrained.bound import integer_bound
    from dpopt.backends.exact.constrained.deadline import Deadline
    from dpopt.backends.exact.constrained.dual import solve_dual
    from dpopt.backends.exact.constrained.fixing import reduced_ranges
    from dpopt.formulations.separable import program_of

    rs = np.random.default_rng(seed)
    k = 8
    N = rs.integers(30, 80, size=k)
    S2 = rs.uniform(0.2, 5.0, size=(k, 2))
    d = StratifiedDesign(N, S2, int(rs.integers(8 * k, 14 * k)), float(rs.choice([0.5, 1.0, 3.0])),
                         mechanism=("laplace", "dlap", "tulap")[seed % 3], upper=np.minimum(N, 30),
                         domains=["x"] * 5 + ["y"] * 3)
    base = d.solve().n
    for j, (a, b) in enumerate((first, second)):
        d.add_precision_target(1.0, strata="x", variable=j)
        v = d.precision_value(d.precision_targets[-1], base)
        d.precision_targets[-1] = d._precision_target(v * rs.uniform(a, b), d.strata_index("x"), j,
                                                      "variance", None, "mean", "")
    prog = program_of(d.min_cost(rs.uniform(1, 4, size=k)))
    res = solve_dual(prog, Deadline(10.0))
    ib = integer_bound(prog, res.lam)
    scale = abs(ib.lb)
    found, watched = 0, []
    for budget in (3e-3 * scale, 1e-2 * scale):
        r_lo, r_hi = reduced_ranges(prog, ib.Om, ib.ell, ib.n, budget)
        watched.append(int(cores.tabulate(prog, ib.Om, ib.ell, res.lam, ib.n, r_lo, r_hi).watched.size))
        if beam is None:
            out = cores.enumerate_core(prog, ib.Om, ib.ell, res.lam, ib.n, r_lo, r_hi, budget, 10 ** 7)
        else:
            n = cores.beam_core(prog, ib.Om, ib.ell, res.lam, ib.n, r_lo, r_hi, budget, beam)
            out = cores.CoreResult(n, math.nan, 0)
        grid = np.array(list(itertools.product(*[range(int(a), int(b) + 1) for a, b in zip(r_lo, r_hi)])))
        assert len(grid) <= 300_000
        # objective and rows of every design of the box from per-stratum tables; the one feasibility test then
        # judges the designs in order of objective (the first it accepts is the optimum)
        f, rows = np.zeros(len(grid)), np.zeros((len(grid), prog.m))
        for i in range(k):
            v = np.arange(r_lo[i], r_hi[i] + 1)
            T = prog.unit_matrix(v.astype(float), np.full(v.size, i))
            pos = grid[:, i] - r_lo[i]
            f += prog.row_terms(prog.objective, T, v.astype(float), np.full(v.size, i))[pos]
            for l, r in enumerate(prog.rows):
                rows[:, l] += prog.row_terms(r, T, v.astype(float), np.full(v.size, i))[pos]
        near = np.all(rows <= prog.rhs() * (1 + 1e-9), axis=1)
        order = np.flatnonzero(near)[np.argsort(f[near], kind="stable")]
        best = next((float(f[p]) for p in order if prog.feasible(grid[p])), None)
        if out.n is not None:        # whatever the route: a design of the core that the rows accept, no better
            assert prog.feasible(out.n) and np.all((out.n >= r_lo) & (out.n <= r_hi))
            assert best is not None and prog.evaluate(out.n.astype(float))[0] >= best * (1 - 1e-12)
        if beam is not None and beam < len(grid):
            continue            # a beam narrower than the box may drop the optimum: no claim to check
        if best is not None and best - ib.lb <= 0.9 * budget:
            found += 1
            assert out.n is not None and prog.feasible(out.n)
            assert prog.evaluate(out.n.astype(float))[0] == pytest.approx(best, rel=1e-12)
        elif best is None or best - ib.lb > 1.1 * budget:
            assert out.n is None or prog.evaluate(out.n.astype(float))[0] - ib.lb > budget
    return found, watched


@pytest.mark.parametrize("seed", range(12))
def test_enumeration_takes_the_cores_back_when_highs_uses_its_share(seed, monkeypatch):
    """Every enumeration counts as slow, and HiGHS always stops at its limit without a point: the cores go to
    HiGHS for its share, then back to the enumeration, and the answer is still brute force's optimum."""
    from dpopt.backends.exact.constrained import search
    from dpopt.backends.exact.constrained.highs_milp import MilpResult

    calls = []

    def stopped(milp, rel_gap, abs_gap, time_limit, *args, **kwargs):
        calls.append(time_limit)
        return MilpResult("time_limit", None, math.inf, -math.inf, "Time limit reached")

    monkeypatch.setattr(search, "_ENUM_SLOW", 0.0)
    monkeypatch.setattr(search, "highs_solve", stopped)
    rs, d, grid, T = _instance(seed)
    N = d.N.astype(float)
    ref = rs.integers(2, 5, size=d.k)
    ok = np.ones(len(grid), dtype=bool)
    T_ref = _terms(N, d.sigma2_matrix, d.shares, d.epsilon, d.mechanism.name, ref[None, :].astype(float))[0]
    w = _mean_weights(N, np.arange(d.k))
    for j in range(d.J):
        target = float(T_ref[:, j] @ w) * rs.uniform(0.9, 1.1)
        d.add_precision_target(target, strata=np.arange(d.k), variable=j if d.J > 1 else None)
        ok &= T[:, :, j] @ w <= target * (1 + 1e-9)
    cost = rs.uniform(1, 4, size=d.k)
    d.add_cost_budget(cost, float(cost @ ref) * rs.uniform(1.0, 1.2))
    ok &= grid @ cost <= float(d.constraints[-1].b[0]) * (1 + 1e-9)
    mc = d.min_cost(rs.uniform(1, 4, size=d.k))
    sol = solve_constrained(mc)
    best = float((grid @ mc.cost)[ok].min()) if ok.any() else None
    _check(sol, best)
    if calls:                 # HiGHS had its share (every call capped), then the enumeration took the core back
        assert all(c is not None and c <= search.HEDGE_MIN + 1e-9 for c in calls[:1])
        assert "HiGHS stopped after" in " ".join(sol.details["steps"])
