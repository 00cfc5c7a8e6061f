"""Acceptance test (b) of issue 19: a user's own row added to ``build_pyomo_model(model)`` of a design with a cost
budget, a precision target and two study variables solves, and its answer equals brute force.

The user row is a second domain-precision requirement written with the public expression helper
(:func:`dpopt.backends.pyomo.term_expression`), never a re-derived formula; the brute force below is written from
the formulas of docs/ (nominal budget L = log1p(expm1(ε)·N/n), variable j at s_j·L, Laplace noise 2Δ²/ε², unit
term (σ² + γ²)/n, objective Σ α² Σ_j w_j t_j, domain variance Σ (N_i/N_D)² t_ij).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign, Status


N = np.array([20, 30, 25, 16])
S2 = np.array([[1.0, 0.3], [3.0, 2.0], [0.5, 1.5], [2.0, 0.7]])
SHARES = np.array([0.4, 0.6])
EPS, TOTAL = 0.8, 24
COST = np.array([1.0, 2.0, 1.5, 1.0])
LO, HI = 2, 12


def _unit(n):
    """t_ij(n) for every design (points×k×J), from the formulas."""
    n = n.astype(float)
    L = np.log1p(np.expm1(EPS) * N[None, :] / n)
    gamma2 = 2.0 / (SHARES[None, None, :] * L[:, :, None]) ** 2
    return (S2[None, :, :] + gamma2) / n[:, :, None]


def _domain(T, strata, j):
    beta = np.zeros(N.size)
    beta[strata] = N[strata] / N[strata].sum()
    return np.sum(beta[None, :] ** 2 * T[:, :, j], axis=1)


def _design():
    return StratifiedDesign(N, S2, TOTAL, EPS, mechanism="laplace", objective="a-optimal", lower=[LO] * 4,
                            upper=[HI] * 4, shares=SHARES)


def test_user_row_on_pyomo_model_with_budget_target_and_two_variables():
    import pyomo.environ as pe

    from dpopt.backends.pyomo import solve_pyomo_model, term_expression

    grid = np.array([g for g in itertools.product(range(LO, HI + 1), repeat=4) if sum(g) == TOTAL])
    T = _unit(grid)
    f = np.sum(T, axis=(1, 2))                       # a-optimal: α = 1, w = 1
    cost = grid @ COST
    dom0 = _domain(T, [0, 1], 0)
    dom1 = _domain(T, [2, 3], 1)
    unconstrained = int(np.argmin(f))
    budget = float(cost[unconstrained] - 0.5)                               # binding
    se0 = float(np.sqrt(dom0[unconstrained] * 0.98))                         # binding
    ok2 = (cost <= budget) & (dom0 <= se0 ** 2)
    # binding too: between the least domain variance the two rows allow and that of their optimum
    user_bound = float((dom1[ok2].min() + dom1[ok2][np.argmin(f[ok2])]) / 2)

    d = _design()
    d.add_cost_budget(COST, budget)
    d.add_precision_target(se0, strata=[0, 1], variable="1", kind="se")
    m = dpopt.build_pyomo_model(d)
    assert len(m.precision) == 1 and len(m.linear) == 1 and m.dpopt_model is d
    # the user's row: Var of the domain {3, 4} mean of variable 2 ≤ user_bound, from the public helper
    ND = float(N[[2, 3]].sum())
    m.extra.add(sum((float(N[i]) / ND) ** 2 * term_expression(d, i, m.n[i], variable=1) for i in (2, 3))
                / user_bound <= 1.0)
    sol = solve_pyomo_model(m, "scip", time_limit=120)

    ok = (cost <= budget * (1 + 1e-12)) & (dom0 <= se0 ** 2 * (1 + 1e-9)) & (dom1 <= user_bound * (1 + 1e-9))
    best = float(f[ok].min())
    assert f[ok].min() > f[ok2].min() > f.min()              # every row binds
    assert isinstance(sol, dpopt.Solution)
    assert sol.status == Status.OPTIMAL, sol.message
    assert sol.certificate is not None and sol.certificate.kind == "gap" and sol.certificate.optimal
    n = np.array([round(pe.value(m.n[i])) for i in range(4)])
    assert np.array_equal(sol.n, n)
    assert d.is_feasible(n)
    assert _domain(_unit(n[None, :]), [2, 3], 1)[0] <= user_bound * (1 + 1e-9)
    assert sol.objective == pytest.approx(best, rel=1e-9)
    assert sol.objective == pytest.approx(d.objective_value(n), rel=1e-12)
    # the helper is the model's own unit term
    assert pe.value(term_expression(d, 2, 7.0, variable=1)) == pytest.approx(float(d.unit_terms([7.0], 1, [2])[0]),
                                                                               rel=1e-12)


def test_solve_pyomo_model_needs_a_built_model():
    import pyomo.environ as pe

    from dpopt.backends.pyomo import solve_pyomo_model

    with pytest.raises(TypeError, match="build_pyomo_model"):
        solve_pyomo_model(pe.ConcreteModel())


def test_row_expression_matches_the_program_row():
    import pyomo.environ as pe

    from dpopt.backends.pyomo import row_expression
    from dpopt.formulations import program_of

    d = _design()
    d.add_precision_target(0.5, strata=[0, 1], variable=1, kind="se")
    prog = program_of(d)
    row = prog.rows[-1]
    x = np.array([5.0, 6.0, 7.0, 6.0])
    expr = row_expression(d, row.W, list(x))
    assert pe.value(expr) == pytest.approx(prog.evaluate(x)[1][-1], rel=1e-12)


def test_user_row_on_cvxpy_problem_with_budget_and_target():
    """The same on build_cvxpy_problem (DLap: DCP, one variable, SCIP through cvxpy), the user row from
    dpopt.backends.cvxpy.term_expression; several variables at budget shares < 1 are refused with the reason."""
    import cvxpy as cp

    assert "SCIP" in cp.installed_solvers()      # pyscipopt is a required dependency: cvxpy must see it
    from dpopt.backends.cvxpy import CvxpyUnsupported, term_expression

    s2 = S2[:, 0]
    grid = np.array([g for g in itertools.product(range(LO, HI + 1), repeat=4) if sum(g) == TOTAL], dtype=float)
    L = np.log1p(np.expm1(EPS) * N[None, :] / grid)
    p = np.exp(-L)
    T = (s2[None, :] + 2 * p / (1 - p) ** 2) / grid            # DLap, Δ = 1
    f = np.sum(N[None, :] ** 2 * T, axis=1)
    beta2 = np.zeros(4)
    beta2[[0, 1]] = (N[[0, 1]] / N[[0, 1]].sum()) ** 2
    dom = T @ beta2
    user = T[:, 0] + T[:, 2]                                   # the user's row: t_1 + t_3 ≤ bound
    u = int(np.argmin(f))
    budget, se = float(grid[u] @ COST - 0.5), float(np.sqrt(dom[u] * 0.98))
    ok2 = (grid @ COST <= budget) & (dom <= se ** 2 * (1 + 1e-9))
    bound = float((user[ok2].min() + user[ok2][np.argmin(f[ok2])]) / 2)
    ok = ok2 & (user <= bound * (1 + 1e-9))
    assert f[ok].min() > f[ok2].min() > f.min()

    d = StratifiedDesign(N, s2, TOTAL, EPS, mechanism="dlap", lower=[LO] * 4, upper=[HI] * 4)
    d.add_cost_budget(COST, budget).add_precision_target(se, strata=[0, 1], kind="se")
    prob, var = dpopt.build_cvxpy_problem(d, integer=True)
    assert len(var["precision"]) == 1
    n = var["n"]
    row = (term_expression(d, 0, n[0]) + term_expression(d, 2, n[2])) / bound <= 1.0
    prob = cp.Problem(prob.objective, prob.constraints + [row])
    assert prob.is_dcp()
    prob.solve(solver="SCIP", scip_params={"limits/gap": 0.0})
    x = np.round(n.value).astype(np.int64)
    assert d.is_feasible(x) and d.objective_value(x) == pytest.approx(float(f[ok].min()), rel=1e-7)

    with pytest.raises(CvxpyUnsupported, match="budget share"):
        dpopt.build_cvxpy_problem(_design())
