"""A linear inequality row that the optimum without it already meets (a cost budget that does not bind) costs
one solve of the smaller model, and the answer is the brute-force optimum with the row (issue 20: on a real
51-state frame a non-binding budget turned a 0.1 s solve into minutes)."""

import itertools

import numpy as np

import dpopt

N = np.array([30, 50, 40, 20])
S2 = np.array([4.0, 1.0, 9.0, 2.0])
COST = np.array([1.0, 3.0, 2.0, 1.5])


def _brute(total, budget):
    """Least objective Σ N_i² (σ_i² + 2/ε_i²)/n_i, ε_i = log1p(expm1(1)·N_i/n_i) (Laplace, Δ = 1, docs/stratified.md)
    over Σ n = total and cost·n ≤ budget."""
    best = (np.inf, None)
    for n in itertools.product(*(range(1, int(x) + 1) for x in N)):
        if sum(n) != total or float(np.dot(COST, n)) > budget * (1 + 1e-9):
            continue
        x = np.array(n, dtype=float)
        eps = np.log1p(np.expm1(1.0) * N / x)
        g = float(np.sum(N ** 2 * (S2 + 2.0 / eps ** 2) / x))
        best = min(best, (g, n))
    return best


def test_non_binding_and_binding_budgets_against_brute_force():
    for budget, binds in ((1000.0, False), (45.0, True)):
        d = dpopt.StratifiedDesign(N, S2, 25, 1.0).add_cost_budget(COST, budget)
        sol = d.solve()
        g, n = _brute(25, budget)
        assert sol.status == dpopt.Status.OPTIMAL and tuple(sol.n) == tuple(n)
        assert abs(sol.objective - g) <= 1e-12 * g
        assert ("solved without cost budget" in sol.message) is (not binds)
        assert sol.certificate.lower_bound <= sol.objective * (1 + 1e-12)
