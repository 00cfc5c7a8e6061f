"""The pyomo backend (SCIP / HiGHS) at the edges: extreme ε, time limits, solver names and infeasibility
claims, each checked against an independent oracle (the faults an audit found stay fixed).

1. SCIP on large ε: c·N = e^{ε}·N was written as a coefficient above SCIP's infinity (1e20), so SCIP
   claimed ``infeasible`` (or returned a wrong point). Oracle: the exact backend (integer and relaxation).
2. A time-limited solve must not return the solver's starting point (or any point violating the model)
   as an answer. Oracle: ``model.is_feasible``.
3. HiGHS gave ``error`` on a trivial ε = 700 instance (denormal cost scale → infinite costs). Oracle: exact.
4. Unknown solver names give ``unsupported`` with the supported names, never an error; names are
   case-insensitive.
Plus the safety net: an ``infeasible`` claim on a model with a known feasible point is an ``error``.
"""

import numpy as np
import pytest

import dpopt

pe = pytest.importorskip("pyomo.environ")

from dpopt import Status
from dpopt.backends.pyomo import stratified as P
from dpopt.models.stratified import StratifiedDesign

TL = 10.0
HAS_SCIP = pe.SolverFactory("scip_direct").available(exception_flag=False)
HAS_HIGHS = pe.SolverFactory("appsi_highs").available(exception_flag=False)
needs_scip = pytest.mark.skipif(not HAS_SCIP, reason="SCIP (PySCIPOpt) is not installed")
needs_highs = pytest.mark.skipif(not HAS_HIGHS, reason="HiGHS (highspy) is not installed")

BASE = {"N": [30, 40, 50], "sigma2": [1.0, 2.0, 3.0], "total": 40}


def _rel(a, b):
    return abs(a - b) / abs(b)


# ------------------------------------------------------------------------------ 1. large epsilon
@needs_scip
@pytest.mark.parametrize("mech,sens", [("laplace", 1.0), ("dlap", 2.0)])
@pytest.mark.parametrize("eps", [36.0, 45.0, 50.0, 300.0, 700.0])
def test_scip_large_epsilon_matches_exact(eps, mech, sens):
    m = StratifiedDesign(epsilon=eps, mechanism=mech, sensitivity=sens, **BASE)
    ref = m.solve(backend="exact")
    assert ref.status == Status.OPTIMAL
    s = m.solve(backend="pyomo", solver="scip", time_limit=TL)
    assert s.status != Status.INFEASIBLE, s.message
    if s.status != Status.UNSUPPORTED:
        assert s.status == Status.OPTIMAL, (s.status, s.message)
        assert m.is_feasible(s.n) and m.certificate(s.n).optimal
        assert _rel(s.objective, ref.objective) <= 1e-7, (s.n, ref.n)
    rref = m.relax(backend="exact")
    r = m.relax(backend="pyomo", solver="scip", time_limit=TL)
    assert r.status != Status.INFEASIBLE, r.message
    if r.status != Status.UNSUPPORTED:
        assert r.status == Status.OPTIMAL, (r.status, r.message)
        assert m.is_feasible(r.x, tol=1e-6)
        # SCIP's NLP tolerances (as in test_backends_cross.test_relaxations_agree)
        assert _rel(r.objective, rref.objective) <= 1e-6
        assert r.objective >= rref.objective * (1 - 1e-6)


@needs_scip
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_scip_small_epsilon_dlap_sensitivity2_not_infeasible(eps):
    """DLap Δ=2 at tiny ε: 1 − p cancels; SCIP used to claim infeasible at ε = 1e-6."""
    m = StratifiedDesign(epsilon=eps, mechanism="dlap", sensitivity=2.0, **BASE)
    ref = m.solve(backend="exact")
    s = m.solve(backend="pyomo", solver="scip", time_limit=TL)
    assert s.status in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT), (s.status, s.message)
    if s.n is not None:
        assert m.is_feasible(s.n)
        assert _rel(s.objective, ref.objective) <= 1e-7


@needs_scip
def test_scip_large_epsilon_min_cost_matches_enumerate():
    for mech, sens in (("laplace", 1.0), ("dlap", 2.0)):
        d = StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=3, epsilon=300.0, mechanism=mech,
                             sensitivity=sens)
        mc = d.min_cost([1.0, 2.5, 4.0], 2500.0)
        ref = mc.solve(backend="enumerate")
        assert ref.status == Status.OPTIMAL
        s = mc.solve(backend="pyomo", solver="scip", time_limit=TL)
        assert s.status == Status.OPTIMAL, s.message
        assert mc.is_feasible(s.n) and s.objective == pytest.approx(ref.objective, rel=1e-9)


def _constants(expr, out):
    """Every numeric constant of a Pyomo expression tree."""
    from pyomo.core.expr.numvalue import is_constant, native_numeric_types
    if type(expr) in native_numeric_types:
        out.append(float(expr))
        return out
    if hasattr(expr, "args") and getattr(expr, "is_expression_type", lambda: False)():
        for a in expr.args:
            _constants(a, out)
    elif is_constant(expr):
        out.append(float(pe.value(expr)))
    return out


@pytest.mark.parametrize("eps", [1e-6, 1.0, 36.0, 45.0, 700.0])
@pytest.mark.parametrize("mech,sens", [("laplace", 1.0), ("dlap", 2.0), ("dlap", 1.0), ("tulap", 1.0)])
def test_minlp_has_no_huge_coefficient(eps, mech, sens):
    m = StratifiedDesign(N=[30, 40, 5000], sigma2=[1.0, 2.0, 3.0], total=400, epsilon=eps, mechanism=mech,
                         sensitivity=sens)
    pm = P.build_pyomo_model(m)
    consts = _constants(pm.obj.expr, [])
    assert consts and np.all(np.isfinite(consts))
    assert max(abs(c) for c in consts) <= 1e15, max(abs(c) for c in consts)


# ------------------------------------------------------------------------------ safety net
@needs_scip
def test_infeasible_claim_on_known_feasible_model_is_an_error(monkeypatch):
    m = StratifiedDesign(epsilon=1.0, **BASE)
    monkeypatch.setattr(P, "_solve_built",
                        lambda *a, **k: (Status.INFEASIBLE, "scip_direct: termination infeasible", float("nan")))
    for task in (m.solve, m.relax):
        s = task(backend="pyomo", solver="scip")
        assert s.status == Status.ERROR and "contradicts a known feasible point" in s.message
        assert s.point is None


@needs_scip
def test_really_infeasible_constrained_model_stays_infeasible():
    m = StratifiedDesign(epsilon=1.0, **BASE).add_constraint([[1, 1, 0]], [1], "<=")   # n0 + n1 ≥ 2 > 1
    assert m.solve(backend="enumerate").status == Status.INFEASIBLE
    s = m.solve(backend="pyomo", solver="scip", time_limit=TL)
    assert s.status == Status.INFEASIBLE and s.n is None


# ------------------------------------------------------------------------------ 2. time-limited answers
BIG = {"N": [2000, 3000, 4000, 5000], "sigma2": [1, 2, 3, 4], "total": 3000, "epsilon": 1.0}


@needs_scip
def test_time_limited_relax_returns_no_infeasible_point():
    m = StratifiedDesign(**BIG)
    s = m.relax(backend="pyomo", time_limit=0.01)
    assert s.status in (Status.TIME_LIMIT, Status.OPTIMAL), s.message
    assert s.ok == (s.x is not None)
    if s.x is not None:
        assert m.is_feasible(s.x, tol=1e-6), s.x
    else:
        assert np.isnan(s.objective)


@needs_scip
@pytest.mark.parametrize("integer", [False, True])
def test_time_limit_without_incumbent_gives_no_point(monkeypatch, integer):
    """SCIP stopped before any point (deterministic: a 1 µs solver limit): no point, not the start values."""
    m = StratifiedDesign(**BIG)
    real = P._solve_built
    monkeypatch.setattr(P, "_solve_built",
                        lambda pm, solver, time_limit, *a: real(pm, solver, 1e-6, *a))
    s = (m.solve if integer else m.relax)(backend="pyomo", solver="scip")
    assert s.status == Status.TIME_LIMIT
    assert s.point is None and not s.ok and np.isnan(s.objective)
    assert "no" in s.message


def _fake_stop(values, status):
    def fake(pm, *a, **k):
        for i, v in enumerate(values):
            pm.n[i].set_value(float(v), skip_validation=True)
        return status, "fake: termination maxTimeLimit", float("nan")
    return fake


@pytest.mark.parametrize("status", [Status.TIME_LIMIT, Status.FEASIBLE])
def test_nonoptimal_relaxation_point_must_satisfy_the_model(monkeypatch, status):
    m = StratifiedDesign(**BIG)
    monkeypatch.setattr(P, "_solve_built", _fake_stop([1, 1, 1, 1], status))    # Σ = 4 ≠ 3000
    s = m.relax(backend="pyomo", solver="scip")
    assert s.x is None and not s.ok and np.isnan(s.objective)
    assert s.status in (Status.TIME_LIMIT, Status.ERROR) and "violates" in s.message
    # a feasible point is kept
    x = m.relax(backend="exact").x
    monkeypatch.setattr(P, "_solve_built", _fake_stop(x, Status.TIME_LIMIT))
    s = m.relax(backend="pyomo", solver="scip")
    assert s.status == Status.TIME_LIMIT and s.x is not None and m.is_feasible(s.x, tol=1e-6)


def test_nonoptimal_min_cost_relaxation_point_must_satisfy_variance_bound(monkeypatch):
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=3, epsilon=1.0)
    mc = d.min_cost([1.0, 2.5, 4.0], 2500.0)
    assert not mc.is_feasible(np.array([1, 1, 1]), tol=1e-6)                     # g(1,1,1) ≫ V0
    monkeypatch.setattr(P, "_solve_built", _fake_stop([1, 1, 1], Status.TIME_LIMIT))
    s = mc.relax(backend="pyomo", solver="scip")
    assert s.status == Status.TIME_LIMIT and s.x is None and np.isnan(s.objective)


# ------------------------------------------------------------------------------ 3. HiGHS at ε = 700
@needs_highs
def test_highs_trivial_instance_at_eps_700():
    m = StratifiedDesign(N=[30, 40, 50], sigma2=[0, 1, 0], total=40, epsilon=700, mechanism="dlap")
    ref = m.solve(backend="exact")
    assert ref.n.tolist() == [1, 38, 1]
    s = m.solve(backend="pyomo", solver="highs", time_limit=TL)
    assert s.status == Status.OPTIMAL, s.message
    assert s.n.tolist() == [1, 38, 1] and _rel(s.objective, ref.objective) <= 1e-12


@needs_highs
def test_highs_all_zero_variance_at_eps_700():
    """g is constant to double precision (noise ~1e-302): any design is optimal; never an error."""
    m = StratifiedDesign(N=[30, 40, 50], sigma2=[0, 0, 0], total=40, epsilon=700, mechanism="dlap")
    ref = m.solve(backend="exact")
    s = m.solve(backend="pyomo", solver="highs", time_limit=TL)
    assert s.status in (Status.OPTIMAL, Status.FEASIBLE), s.message
    assert m.is_feasible(s.n) and _rel(s.objective, ref.objective) <= 1e-12


@needs_highs
@pytest.mark.parametrize("eps,mech", [(700.0, "laplace"), (300.0, "tulap"), (45.0, "dlap")])
def test_highs_large_epsilon_matches_exact(eps, mech):
    m = StratifiedDesign(epsilon=eps, mechanism=mech, **BASE)
    ref = m.solve(backend="exact")
    s = m.solve(backend="pyomo", solver="highs", time_limit=TL)
    assert s.status == Status.OPTIMAL, s.message
    assert _rel(s.objective, ref.objective) <= 1e-7 and m.certificate(s.n).optimal


# ------------------------------------------------------------------------------ 4. solver names
@pytest.mark.parametrize("name", ["gurobi", "cplex", "", None, 3])
@pytest.mark.parametrize("task", ["solve", "relax"])
def test_unknown_solver_is_unsupported(name, task):
    m = StratifiedDesign(epsilon=1.0, **BASE)
    s = getattr(m, task)(backend="pyomo", solver=name)
    assert s.status == Status.UNSUPPORTED and s.point is None
    assert all(w in s.message for w in ("scip", "highs", "ipopt")), s.message
    mc = StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=3, epsilon=1.0).min_cost([1, 2, 3], 2500.0)
    assert getattr(mc, task)(backend="pyomo", solver=name).status == Status.UNSUPPORTED


@needs_scip
@needs_highs
def test_solver_names_are_case_insensitive():
    m = StratifiedDesign(epsilon=1.0, **BASE)
    ref = m.solve(backend="exact")
    for name in ("SCIP", "Scip", "HiGHS", "HIGHS"):
        s = m.solve(backend="pyomo", solver=name, time_limit=TL)
        assert s.status == Status.OPTIMAL, (name, s.message)
        assert s.solver == name.lower() and s.objective == pytest.approx(ref.objective, rel=1e-9)
    r = m.relax(backend="pyomo", solver="SCIP", time_limit=TL)
    assert r.status == Status.OPTIMAL and r.objective == pytest.approx(m.relax().objective, rel=1e-6)


def test_unavailable_solver_is_unsupported_with_supported_names(monkeypatch):
    """A supported name whose solver is not installed: unsupported, naming the supported solvers."""
    class Missing:
        def available(self, exception_flag=False):
            return False

    monkeypatch.setattr(pe, "SolverFactory", lambda name: Missing())
    m = StratifiedDesign(epsilon=1.0, **BASE)
    for task, solver in (("solve", "scip"), ("solve", "HiGHS"), ("relax", "ipopt"), ("relax", "scip")):
        s = getattr(m, task)(backend="pyomo", solver=solver)
        assert s.status == Status.UNSUPPORTED and s.point is None, (task, solver, s.message)
        assert all(w in s.message for w in ("scip", "highs", "ipopt")), s.message


def test_highs_refuses_a_milp_it_cannot_load_within_the_time_limit():
    """Pyomo's hand-over of a 1.5e5-column MILP to HiGHS took ~45 s against a 5 s limit; now refused up front."""
    import time

    from dpopt.backends.pyomo.stratified import MILP_COLUMNS_PER_SECOND
    m = dpopt.datasets.chen_section54(10, 10 ** 5)
    t0 = time.perf_counter()
    sol = m.solve(backend="pyomo", solver="highs", time_limit=5)
    assert time.perf_counter() - t0 < 5
    assert sol.status == dpopt.Status.TIME_LIMIT and sol.n is None and "columns" in sol.message
    assert sol.details["milp_columns"] > 5 * MILP_COLUMNS_PER_SECOND


def test_certificate_ignores_subnormal_round_off():
    """σ² = 0 at ε = 700: every increment is ~1e-316 (subnormal, no relative precision); a design whose
    objective equals exact's to 1e-12 must not fail the exchange certificate on that noise."""
    m = dpopt.StratifiedDesign(N=[30, 40, 50], sigma2=[0, 0, 0], total=40, epsilon=700, mechanism="dlap")
    ref = m.solve()
    sol = m.solve(backend="pyomo", solver="highs")
    assert sol.status == dpopt.Status.OPTIMAL and m.certificate(sol.n).optimal
    assert sol.objective == pytest.approx(ref.objective, rel=1e-12)
