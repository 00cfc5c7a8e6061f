"""Custom linear constraints and the min-cost variant: model API, model files, refusal semantics."""

import numpy as np
import pytest

import dpopt
from dpopt.io import modelfile
from dpopt.models.stratified import MinCostDesign, StratifiedDesign


def _design(**kw):
    base = dict(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=40, epsilon=1.0, mechanism="tulap")
    base.update(kw)
    return StratifiedDesign(**base)


def test_cost_budget_brute_force():
    m = _design().add_cost_budget([1.0, 2.0, 3.0], 80)
    # independent brute force with a plain loop
    best = None
    for a in range(1, 31):
        for b in range(1, 41):
            c = 40 - a - b
            if 1 <= c <= 50 and a + 2 * b + 3 * c <= 80:
                v = m.objective_value([a, b, c])
                if best is None or v < best[0]:
                    best = (v, (a, b, c))
    for backend in ("enumerate", "cvxpy"):
        s = m.solve(backend=backend)
        assert s.status == dpopt.Status.OPTIMAL
        assert s.objective == pytest.approx(best[0], rel=1e-12)
    for backend, opts in (("pyomo", {"solver": "highs"}), ("pyomo", {"solver": "scip"})):
        s = m.solve(backend=backend, **opts)
        assert s.objective == pytest.approx(best[0], rel=1e-7)


def test_infeasible_constraints_reported():
    m2 = _design().add_constraint([[1, 1, 0]], [1], "<=")  # n1 + n2 <= 1 impossible (each >= 1)
    for backend, opts in (("enumerate", {}), ("pyomo", {"solver": "highs"}), ("pyomo", {"solver": "scip"}),
                          ("cvxpy", {})):
        s = m2.solve(backend=backend, **opts)
        assert s.status == dpopt.Status.INFEASIBLE and s.n is None, (backend, s.status, s.message)


def test_min_cost_brute_force_and_model_api():
    d = _design(mechanism="laplace", objective="a-optimal")
    cost = [1.0, 2.5, 4.0]
    V0 = 1.5
    mc = d.min_cost(cost, V0)
    assert isinstance(mc, MinCostDesign) and mc.default_backend == "exact"
    best = None
    for a in range(1, 31):
        for b in range(1, 41):
            for c in range(1, 51):
                n = np.array([a, b, c])
                if d.objective_value(n) <= V0:
                    v = float(np.dot(cost, n))
                    if best is None or v < best:
                        best = v
    s = mc.solve()
    assert s.status == dpopt.Status.OPTIMAL and s.objective == pytest.approx(best, rel=1e-12)
    assert mc.is_feasible(s.n) and s.details["variance_objective"] <= V0
    h = mc.solve(backend="pyomo", solver="highs")
    assert h.objective == pytest.approx(best, rel=1e-7)
    assert mc.solve(backend="enumerate").objective == pytest.approx(best, rel=1e-12)
    assert "total cost" in mc.report(s)
    with pytest.raises(ValueError, match="variance_target"):
        d.min_cost(cost, -1.0)
    with pytest.raises(ValueError, match="cost"):
        d.min_cost([1.0, 2.0], 1.0)


def test_min_cost_model_file(tmp_path):
    f = tmp_path / "mc.toml"
    f.write_text("""
family = "stratified_min_cost"
epsilon = 1.0
variance_target = 1.5
mechanism = "laplace"
objective = "a-optimal"
[strata]
N = [30, 40, 50]
sigma2 = [1.0, 2.0, 3.0]
cost = [1.0, 2.5, 4.0]
""")
    m, _ = modelfile.load(f)
    assert isinstance(m, MinCostDesign) and m.variance_target == 1.5
    f.write_text(f.read_text().replace("variance_target = 1.5", "variance_target = 1.5\ntotal = 3"))
    with pytest.raises(modelfile.ModelFileError, match="total"):
        modelfile.load(f)


def test_repo_model_files_load():
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1] / "models"
    m, _ = modelfile.load(root / "chen_cost_budget_tulap.toml")
    assert not m.is_plain
    plain = StratifiedDesign(N=m.N, sigma2=m.sigma2, total=m.total, epsilon=m.epsilon, mechanism="tulap")
    assert float(np.dot([1, 2, 3, 4], plain.solve().n)) > 500          # the budget binds
    s = m.solve(backend="pyomo", solver="highs")
    assert s.status == dpopt.Status.OPTIMAL and float(np.dot([1, 2, 3, 4], s.n)) <= 500
    mc, opts = modelfile.load(root / "chen_mincost_tulap.toml")
    assert isinstance(mc, MinCostDesign) and opts["solver"] == "highs"


def test_enumerate_refuses_above_its_limit():
    m = dpopt.StratifiedDesign(N=[50, 60, 70, 80], sigma2=[1, 2, 3, 4], total=100, epsilon=1.0)
    sol = m.solve(backend="enumerate", max_candidates=1000)
    assert sol.status == dpopt.Status.UNSUPPORTED and sol.n is None and "max_candidates" in sol.message
    with pytest.raises(ValueError, match="max_candidates"):
        m.solve(backend="enumerate", max_candidates=0)
    ok = m.solve(backend="enumerate", max_candidates=10 ** 6)
    assert ok.status == dpopt.Status.OPTIMAL and np.array_equal(ok.n, m.solve().n)


def test_build_cvxpy_problem_takes_user_constraints():
    """The returned cvxpy problem is the model: solving it gives exact's relaxation; a constraint the user adds
    changes the answer to the one enumerate finds with the same constraint (DLap is DCP: SCIP solves it)."""
    import cvxpy as cp
    m = dpopt.StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=40, epsilon=1.0, mechanism="dlap")
    prob, var = dpopt.build_cvxpy_problem(m)
    prob.solve(solver="CLARABEL")
    assert float(np.sum(m.terms(var["n"].value))) == pytest.approx(m.relax().objective, rel=1e-6)
    prob, var = dpopt.build_cvxpy_problem(m, integer=True)
    prob = cp.Problem(prob.objective, prob.constraints + [var["n"][0] >= 20])
    prob.solve(solver="SCIP")
    ref = m.add_constraint([[1, 0, 0]], [20], ">=").solve(backend="enumerate")
    assert np.array_equal(np.round(var["n"].value).astype(int), ref.n)
