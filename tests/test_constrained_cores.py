"""The exact constrained solver's two ways of solving a core, and its blocks, against brute force.

Cores (the designs within a reduced-cost budget of the Lagrangian bound) are enumerated by dynamic
programming, or handed to HiGHS as secant MILPs when too many partial designs survive; ``max_states=0``
forces the MILP path, a tiny ``max_states`` switches mid-way. Min-cost designs with one target per domain
split into independent blocks. Every answer must equal the brute-force optimum over the whole box (oracle
from the plain formulas, independent of the model's increment code) and carry a bound below it.
"""

from __future__ import annotations

import itertools

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
    from dpopt.backends.exact.constrained.cores import _segmented_first_min

    rng = np.random.default_rng(seed)
    S = 400
    group = np.sort(rng.integers(0, 7, S))
    y = np.round(rng.normal(0.0, 1.0, S), 1) * 10.0 ** rng.integers(-3, 4)     # many exact ties
    y[rng.random(S) < 0.1] += np.spacing(1.0) * 2                               # and near ties
    keep = _segmented_first_min(group, y)
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
