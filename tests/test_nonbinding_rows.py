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


def test_domain_targets_with_a_budget_against_brute_force():
    """Domain SE targets (nested allocation) plus a cost budget: where the budget does not bind, the model without
    it is solved by nested allocation alone and its optimum is returned; where it binds, the general route runs.
    Both against brute force (designs enumerated, feasibility by the model's one test, objective by formula)."""
    Nd, S2d, cost, total = np.array([12, 15, 10, 8]), np.array([4.0, 1.0, 9.0, 2.0]), np.array([1.0, 3.0, 2.0, 1.5]), 16

    def model(budget=None):
        d = dpopt.StratifiedDesign(Nd, S2d, total, 1.0, domains=["A", "A", "B", "B"])
        d.add_precision_target(0.75, strata="A", kind="se").add_precision_target(0.85, strata="B", kind="se")
        return d if budget is None else d.add_cost_budget(cost, budget)

    free = model().solve()          # the targets bind: without them the design is (5, 3, 6, 2)
    assert tuple(free.n) == (4, 3, 6, 3)
    spend = float(cost @ free.n)
    # (a budget equal to the optimum's own cost is met exactly: it does not bind either)
    for budget, binds in ((spend * 1.01, False), (spend, False), (spend * 0.97, True)):
        d = model(budget)
        best = (np.inf, None)
        for n in itertools.product(*(range(1, int(x) + 1) for x in Nd)):
            if sum(n) != total or not d.is_feasible(np.array(n)):
                continue
            x = np.array(n, dtype=float)
            eps = np.log1p(np.expm1(1.0) * Nd / x)
            best = min(best, (float(np.sum(Nd ** 2 * (S2d + 2.0 / eps ** 2) / x)), n))
        sol = d.solve()
        assert best[1] is not None and sol.status == dpopt.Status.OPTIMAL and tuple(sol.n) == best[1]
        assert abs(sol.objective - best[0]) <= 1e-12 * best[0]
        assert ("nested marginal allocation" in sol.message and "solved without" in sol.message) is (not binds)
        assert sol.certificate.lower_bound <= sol.objective * (1 + 1e-12)


def test_a_tiny_time_limit_with_a_row_that_does_not_bind_is_honest():
    """A limit far too short for any solve: whatever comes back is never called optimal without being the
    brute-force optimum, and a returned design meets the budget."""
    d = dpopt.StratifiedDesign(N, S2, 25, 1.0).add_cost_budget(COST, 1000.0)
    sol = d.solve(time_limit=1e-9)
    g, n = _brute(25, 1000.0)
    if sol.status == dpopt.Status.OPTIMAL:
        assert tuple(sol.n) == tuple(n)
    if sol.n is not None:
        assert float(np.dot(COST, sol.n)) <= 1000.0 and sum(sol.n) == 25
