"""An infeasible constrained design says why, in the user's terms (issue 21): which precision targets
conflict with the fixed total or the cost budget, and the least total or cost they need, a bound that no
integer design beats (checked by brute force written here from docs/stratified.md's formulas)."""

import itertools
import math
import re

import numpy as np
import pytest

import dpopt

N = np.array([40, 60, 50])
S2 = np.array([4.0, 9.0, 1.0])
EPS = 1.0


def _domain_se(n, strata):
    """SE of a domain mean: Σ (N_i/N_D)² (σ_i² + 2/ε_i²)/n_i with ε_i = log1p(expm1(ε)·N_i/n_i), Laplace, Δ = 1."""
    idx = np.asarray(strata)
    n = np.asarray(n, dtype=float)[idx]
    eps_i = np.log1p(np.expm1(EPS) * N[idx] / n)
    w = N[idx] / N[idx].sum()
    return math.sqrt(float(np.sum(w ** 2 * (S2[idx] + 2.0 / eps_i ** 2) / n)))


def _brute_min(targets, cost):
    best = math.inf
    for n in itertools.product(*(range(1, int(x) + 1) for x in N)):
        if all(_domain_se(n, s) <= t for s, t in targets):
            best = min(best, float(np.dot(cost, n)))
    return best


def _number(msg, after):
    return float(re.search(after + r" ([0-9.e+]+)", msg).group(1))


def test_targets_against_the_total_name_the_target_and_the_least_total():
    targets = [([0, 1], 0.55), ([2], 0.9)]
    d = dpopt.StratifiedDesign(N, S2, 20, EPS, labels=["a", "b", "c"], domains=["x", "x", "y"])
    for strata, t in targets:
        d.add_precision_target(t, strata=strata, kind="se")
    sol = d.solve()
    assert sol.status == dpopt.Status.INFEASIBLE
    need = _number(sol.message, "need a total sample of at least")
    truth = _brute_min(targets, np.ones(3))            # the least integer total meeting both targets
    assert 20 < need <= truth * (1 + 1e-9), (need, truth)
    assert "the design's total is 20" in sol.message and "mean of y over" in sol.message
    assert sol.details["reason"]                        # the solver's own reason is kept


def test_targets_against_the_budget_and_the_total_against_the_budget():
    cost = np.array([1.0, 2.0, 3.0])
    targets = [([0, 1], 0.6)]
    d = dpopt.StratifiedDesign(N, S2, 20, EPS, domains=["x", "x", "y"])
    d.add_cost_budget(cost, 30.0).add_precision_target(0.6, strata="x", kind="se")
    sol = d.solve()
    assert sol.status == dpopt.Status.INFEASIBLE
    need = _number(sol.message, "need a cost of at least")
    assert 30 < need <= _brute_min(targets, cost) * (1 + 1e-9)
    assert "the budget is 30" in sol.message
    # a total that no design within the budget reaches: said without any target
    d2 = dpopt.StratifiedDesign(N, S2, 100, EPS).add_cost_budget(cost, 120.0)
    s2 = d2.solve()
    assert s2.status == dpopt.Status.INFEASIBLE
    least = _number(s2.message, "costs at least")
    assert least == pytest.approx(min(float(np.dot(cost, n)) for n in itertools.product(
        *(range(1, int(x) + 1) for x in N)) if sum(n) == 100), rel=1e-12)
