"""Pyomo backend for HierarchyBudget: the convex NLP solved by SCIP (``scip_direct``, PySCIPOpt).

Epigraph form (one variable t_ℓ per level, scaled by a reference value S):

    (6)  min Σ t_ℓ   s.t.  t_ℓ ≥ w_ℓ Σ_j MSE(ε_ℓ, N_j)/S,  Σ ε_ℓ ≤ ε_total,  ε_min ≤ ε_ℓ ≤ ε_max
    (7)  min Σ ε_ℓ   s.t.  t_ℓ ≥ w_ℓ Σ_j MSE(ε_ℓ, N_j)/S,  Σ t_ℓ ≤ τ/S

(Putting the nonlinear sum directly in the objective makes pyomo's SCIP interface stall, so the
epigraph form is used.) Equal counts are grouped (``m_j (1+εz_j)e^{−εz_j}``), zero counts contribute a
constant, and counts with ``z_j ε_min > 40`` contribute exactly the untruncated ``2Δ²/ε²`` in double
precision, so the expression has one exponential per distinct small count; above ``max_terms``
exponentials the backend refuses (status ``unsupported``). SCIP is a global solver; its answer is
checked with the model's gap certificate.
"""

from __future__ import annotations

import time

import numpy as np

from ..models.hierarchy import HierarchyBudget
from ..registry import register
from ..result import Solution, Status
from ._pyomo import quiet_pyomo_log

_DESC = "Pyomo models solved by SCIP (scip_direct) or HiGHS"


def _level_data(model: HierarchyBudget, l: int, lo: float):
    z, m = model.compressed_levels()[l]
    if m is None:
        z, m = np.unique(z, return_counts=True)
        m = m.astype(float)
    zero = z == 0
    big = z * lo > 40.0
    mid = ~(zero | big)
    n = float(m.sum())
    const = 2.0 * n - float(m[zero].sum())          # Σ m_j·2 minus the zero-count exps (=1 each)
    return const, z[mid], m[mid]


@register("pyomo", HierarchyBudget, "solve", _DESC)
def solve_hierarchy_pyomo(model: HierarchyBudget, solver: str = "scip_direct", time_limit=60.0,
                          gap: float = 1e-6, feastol: float = 1e-9, max_terms: int = 20000, tee: bool = False,
                          gap_tol: float = 1e-6) -> Solution:
    """Options: ``solver`` (``"scip_direct"``), ``time_limit`` (s), ``gap`` (SCIP limits/gap),
    ``feastol`` (SCIP numerics/feastol), ``max_terms`` (exponential terms allowed), ``tee``."""
    try:
        import pyomo.environ as pe
        from pyomo.opt import TerminationCondition as TC
    except ImportError:  # pragma: no cover
        return Solution(Status.UNSUPPORTED, backend="pyomo", message="pyomo is not installed")
    t0 = time.perf_counter()
    try:
        opt = pe.SolverFactory(solver)
        ok = opt.available(exception_flag=False)
    except Exception as exc:  # noqa: BLE001 - any plugin failure means the solver is unusable
        ok, opt = False, None
        why = str(exc)
    else:
        why = f"solver {solver!r} is not available"
    if not ok:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=why)

    lo, hi = model.level_bounds()
    L = model.n_levels
    d2 = model.sensitivity ** 2
    w = model.weights
    levels = [_level_data(model, l, float(lo[l])) for l in range(L)]
    nterms = sum(z.size for _, z, _ in levels)
    if model.objective_kind == "truncated-laplace-mse" and nterms > max_terms:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver,
                        message=f"{nterms} distinct small counts need {nterms} exponential terms, above "
                                f"max_terms={max_terms} (raise it, or use the exact backend)")
    u = model.uniform_split()
    S = model.objective_value(u) if model.program == "budget" else model.mse_target

    m = pe.ConcreteModel()
    m.L = pe.RangeSet(0, L - 1)
    ref = float(np.mean(u))                        # variables s = ε/ref are O(1)
    m.e = pe.Var(m.L, bounds=lambda _, l: (float(lo[l] / ref), float(hi[l] / ref)),
                 initialize=lambda _, l: float(u[l] / ref))
    m.t = pe.Var(m.L, bounds=(0.0, None))

    def level_expr(mm, l):
        e = mm.e[l]        # ε = ref·s: fold ref into the coefficients
        if model.objective_kind == "laplace-variance":
            inner = 2.0 * float(model.sizes[l])
        else:
            const, z, mult = levels[l]
            inner = const - sum(float(mj) * (1.0 + float(zj * ref) * e) * pe.exp(-float(zj * ref) * e)
                                for zj, mj in zip(z, mult))
        return mm.t[l] >= float(w[l] * d2 / (S * ref * ref)) * inner / e ** 2

    m.epi = pe.Constraint(m.L, rule=level_expr)
    if model.program == "budget":
        m.budget = pe.Constraint(expr=sum(m.e[l] for l in m.L) <= float(model.epsilon_total / ref))
        m.obj = pe.Objective(expr=sum(m.t[l] for l in m.L))
    else:
        m.target = pe.Constraint(expr=sum(m.t[l] for l in m.L) <= 1.0)
        m.obj = pe.Objective(expr=sum(m.e[l] for l in m.L))
    options = {"limits/gap": gap, "numerics/feastol": feastol}
    if time_limit is not None:
        options["limits/time"] = float(time_limit)
    try:
        with quiet_pyomo_log():
            res = opt.solve(m, tee=tee, options=options, load_solutions=False)
    except Exception as exc:  # noqa: BLE001 - a solver fault becomes a status
        return Solution(Status.ERROR, backend="pyomo", solver=solver, message=f"{solver} failed: {exc}")
    tc = res.solver.termination_condition
    if tc in (TC.infeasible, TC.infeasibleOrUnbounded):
        return Solution(Status.INFEASIBLE, backend="pyomo", solver=solver, message=str(tc))
    if len(res.solution) == 0:
        st = Status.TIME_LIMIT if tc in (TC.maxTimeLimit,) else Status.ERROR
        return Solution(st, backend="pyomo", solver=solver, message=f"no solution: {tc}")
    with quiet_pyomo_log():
        m.solutions.load_from(res)
    eps = model.make_feasible(ref * np.array([pe.value(m.e[l]) for l in range(L)], dtype=float))
    wall = time.perf_counter() - t0
    cert = model.certificate(eps, tol=gap_tol)
    if tc == TC.maxTimeLimit:
        status = Status.TIME_LIMIT
    else:
        status = Status.OPTIMAL if (tc == TC.optimal and cert.optimal) else Status.FEASIBLE
    sol = model.make_solution(eps, status, backend="pyomo", solver=solver, certificate=cert,
                              message=f"SCIP: {tc}; {nterms} exponential terms",
                              details={"exp_terms": nterms})
    sol.wall_time = wall
    return sol


# the hierarchy program is continuous: relax is the same as solve
register("pyomo", HierarchyBudget, "relax", _DESC)(solve_hierarchy_pyomo)
