"""Pyomo backend for HierarchyBudget: the convex NLP solved by SCIP (``solver="scip"``: PySCIPOpt).

Epigraph form (one variable t_ℓ per level, scaled by a reference value S):

    (6)  min Σ t_ℓ   s.t.  t_ℓ ≥ w_ℓ Σ_j MSE(ε_ℓ, N_j)/S,  Σ ε_ℓ ≤ ε_total,  ε_min ≤ ε_ℓ ≤ ε_max
    (7)  min Σ ε_ℓ   s.t.  t_ℓ ≥ w_ℓ Σ_j MSE(ε_ℓ, N_j)/S,  Σ t_ℓ ≤ τ/S

(Putting the nonlinear sum directly in the objective makes pyomo's SCIP interface stall, so the
epigraph form is used.) Equal counts are grouped (``m_j (1+εz_j)e^{−εz_j}``), zero counts contribute a
constant, and counts with ``z_j ε_min > 40`` contribute exactly the untruncated ``2Δ²/ε²`` in double
precision, so the expression has one exponential per distinct small count; above ``max_terms``
exponentials the backend refuses (status ``unsupported``). SCIP is a global solver; its answer is
checked with the model's gap certificate.

Options: the common ones of :mod:`dpopt.backends.pyomo._solver` (``solver`` = "scip", ``time_limit`` (None: 300 s),
``rel_gap`` (the tolerance of the model's gap certificate, default 1e-6; SCIP stops at 10·rel_gap),
``verbose``, ``solver_options``) and ``max_terms``. The status is ``optimal`` exactly when the model's gap
certificate holds at SCIP's point (also after a time limit).

Numerics: the level budgets get necessary lower bounds (no optimum has a level whose weighted MSE exceeds
the uniform split's total), and 64 tangents per level of the convex level MSE are added as linear cuts;
without them SCIP's presolve declared a feasible 4-level tree infeasible (terms 1/ε² near 1e12 at
ε_min = 1e-6) and its dual bound stalled on trees with thousands of distinct counts.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...models.hierarchy import HierarchyBudget
from ...registry import register
from ...result import Solution, Status
from ... import _validate as V
from ...options import default_rel_gap
from . import _solver as PY

_DESC = "Pyomo models solved by SCIP (scip_direct) or HiGHS"
#: solvers of this route (the program is nonlinear: HiGHS cannot take it)
SOLVERS = ("scip",)
DEFAULT_REL_GAP = default_rel_gap("pyomo", "HierarchyBudget")   # dpopt.options.FAMILY_REL_GAP
TANGENTS = 64          # tangent cuts per level (geometric grid over its budget range)
# SCIP stops at this multiple of rel_gap: its dual bound is looser than the model's certificate at the same
# point (SCIP at 1e-6 ran out of time on points the certificate proves to 1e-8)
SCIP_GAP_FACTOR = 10.0


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


def _known_feasible(model: HierarchyBudget):
    """A point the model certifies feasible: the uniform split for a budget (always within it), the largest
    budgets for an MSE target when they meet it; else None."""
    if model.program == "budget":
        return model.uniform_split()
    _, hi = model.level_bounds()
    mse = sum(float(model.weights[l]) * model.level_terms(hi[l], l, order=0)[0] for l in range(model.n_levels))
    return hi if mse <= model.mse_target else None


def _necessary_lower_bounds(model: HierarchyBudget, lo, hi) -> np.ndarray:
    """Lower bounds on ε_ℓ that every optimum (budget) or feasible point (MSE target) satisfies.

    Each level's weighted MSE w_ℓ F_ℓ(ε_ℓ) is decreasing in ε_ℓ and at most the total: the budget optimum's
    total is at most the uniform split's, and a target bounds it directly. So ε_ℓ ≥ ℓ_ℓ with
    w_ℓ F_ℓ(ℓ_ℓ) = cap. At the box's own floor (ε_min = 1e-6) the terms 1/ε² reach ~1e12 and SCIP's presolve
    declared always-feasible budget splits infeasible (a 4-level tree of ~10⁴ school counts at ε = 1)."""
    from scipy.optimize import brentq

    cap = model.objective_value(model.uniform_split()) if model.program == "budget" else model.mse_target
    out = np.array(lo, dtype=float)
    for l in range(model.n_levels):
        def excess(log_e, l=l):
            return math.log(float(model.weights[l]) * model.level_terms(math.exp(log_e), l, order=0)[0]) \
                - math.log(cap)
        a, b = math.log(lo[l]), math.log(hi[l])
        if not (excess(a) > 0 and excess(b) < 0):
            continue                                  # the floor is already inside (or no root in the box)
        root = brentq(excess, a, b, xtol=1e-12, maxiter=200)
        out[l] = max(lo[l], math.exp(root) * (1 - 1e-9))   # a hair below the root: stays a valid bound
    return out


@register("pyomo", HierarchyBudget, "solve", _DESC)
def solve_hierarchy_pyomo(model: HierarchyBudget, solver: str = "scip", time_limit: float | None = None,
                          rel_gap: float | None = None, verbose: bool = False, solver_options: dict | None = None,
                          max_terms: int = 20000, **removed) -> Solution:
    """Options: ``solver`` ("scip"), ``time_limit`` (s; None: the 300 s default), ``rel_gap`` (the
    certificate's tolerance, default 1e-6), ``verbose``, ``solver_options`` (SCIP parameters, applied last),
    ``max_terms`` (exponential terms allowed)."""
    t0 = time.perf_counter()
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, removed,
                            where="the pyomo backend for hierarchies")
    max_terms = V.option(V.integer, "max_terms", max_terms, minimum=1)
    if getattr(model, "noise", "laplace") == "discrete_gaussian":
        return Solution(Status.UNSUPPORTED, backend="pyomo", message=(
            "discrete Gaussian noise: the truncated MSE is a sum over the noise's support (tens of thousands of "
            "exponential terms per distinct count at small rho), beyond an algebraic SCIP model; use "
            "backend='exact' (or 'scipy')"))
    gap = DEFAULT_REL_GAP if opts.rel_gap is None else opts.rel_gap
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=str(solver)[:80],
                        message=PY.unknown_solver_message(solver, SOLVERS, "hierarchies"))
    PY.check_solver_options(key, opts.solver_options)
    try:
        import pyomo.environ as pe
    except ImportError:  # pragma: no cover
        return Solution(Status.UNSUPPORTED, backend="pyomo", message="pyomo is not installed")
    opt, why = PY.open_solver(key)
    if opt is None:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=key, message=why)
    solver = key

    lo, hi = model.level_bounds()
    lo = _necessary_lower_bounds(model, lo, hi)
    L = model.n_levels
    d2 = model.sensitivity ** 2
    w = model.weights
    levels = [_level_data(model, l, float(lo[l])) for l in range(L)]
    nterms = sum(z.size for _, z, _ in levels)
    if model.loss == "truncated-laplace-mse" and nterms > max_terms:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver,
                        message=f"{nterms} distinct small counts need {nterms} exponential terms, above "
                                f"max_terms={max_terms} (raise it, or use the exact backend)")
    u = model.uniform_split()
    S = model.objective_value(u) if model.program == "budget" else model.mse_target

    # the limit covers the build and Pyomo's hand-over (timed per term; status time_limit once they would end
    # past it), and SCIP gets what is left
    clock = PY.BuildClock(t0, opts.time_limit, nterms + L, f"the hierarchy model ({nterms} exponential terms)", key)
    try:
        with PY.paused_gc():
            m = pe.ConcreteModel()
            m.L = pe.RangeSet(0, L - 1)
            ref = float(np.mean(u))                        # variables s = ε/ref are O(1)
            m.e = pe.Var(m.L, bounds=lambda _, l: (float(lo[l] / ref), float(hi[l] / ref)),
                         initialize=lambda _, l: float(u[l] / ref))
            m.t = pe.Var(m.L, bounds=(0.0, None))

            def level_expr(mm, l):
                e = mm.e[l]        # ε = ref·s: fold ref into the coefficients
                if model.loss == "laplace-variance":
                    inner = 2.0 * float(model.sizes[l])
                else:
                    const, z, mult = levels[l]
                    inner = const - sum(float(mj) * (1.0 + float(zj * ref) * e) * pe.exp(-float(zj * ref) * e)
                                        for zj, mj in zip(z, mult))
                clock.tick(clock.done + 1 + (0 if model.loss == "laplace-variance" else len(levels[l][1])))
                return mm.t[l] >= float(w[l] * d2 / (S * ref * ref)) * inner / e ** 2

            m.epi = pe.Constraint(m.L, rule=level_expr)
            # tangents of the convex level MSE (valid under-estimators): SCIP does not see that the difference of
            # exponentials is convex, and without them its dual bound stalled (ε = 0.1, 1890 terms: not proven in 300 s)
            m.tangent = pe.ConstraintList()
            for l in range(L):
                for p in np.unique(np.concatenate([np.geomspace(lo[l], hi[l], TANGENTS), [u[l]]])):
                    F, F1 = model.level_terms(float(p), l, order=1)[:2]
                    c = float(w[l]) / S
                    m.tangent.add(m.t[l] >= c * (F - F1 * float(p)) + c * F1 * ref * m.e[l])
            if model.program == "budget":
                m.budget = pe.Constraint(expr=sum(m.e[l] for l in m.L) <= float(model.epsilon_total / ref))
                m.obj = pe.Objective(expr=sum(m.t[l] for l in m.L))
            else:
                m.target = pe.Constraint(expr=sum(m.t[l] for l in m.L) <= 1.0)
                m.obj = pe.Objective(expr=sum(m.e[l] for l in m.L))
            left = clock.solver_time()
    except PY.OutOfTime as exc:
        return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                        message=f"{exc}; no point (use backend 'exact', or raise time_limit)",
                        details={"exp_terms": nterms, "build_time": clock.elapsed_build(), **opts.details()})
    settings = {**PY.limit_options(key, opts, left), "limits/gap": SCIP_GAP_FACTOR * gap, "numerics/feastol": 1e-9,
                **opts.solver_options}
    details = {"exp_terms": nterms, **opts.details()}
    try:
        status, tc, res, has_point = PY.run(opt, key, m, settings, opts.verbose)
    except (KeyboardInterrupt, V.InvalidOption):
        raise
    except Exception as exc:  # noqa: BLE001 - a solver fault becomes a status
        return Solution(Status.ERROR, backend="pyomo", solver=solver, message=f"{solver} failed: {exc}",
                        details=details)
    if status == Status.INFEASIBLE:
        known = _known_feasible(model)
        if known is not None:
            # the model itself exhibits a feasible point: the claim is a numerical failure of the solver
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            message=f"SCIP: {tc}, contradicted by the feasible point ε = {np.round(known, 6).tolist()} "
                                    "(numerical trouble in the solver, not an infeasible model)")
        return Solution(Status.INFEASIBLE, backend="pyomo", solver=solver, details=details, message=f"SCIP: {tc}")
    if not has_point:
        note = f" ({opts.note()})" if status == Status.TIME_LIMIT else ""
        return Solution(status if status == Status.TIME_LIMIT else Status.ERROR, backend="pyomo", solver=solver,
                        message=f"no solution: {tc}{note}", details=details)
    eps = model.make_feasible(ref * np.array([pe.value(m.e[l]) for l in range(L)], dtype=float))
    wall = time.perf_counter() - t0
    cert = model.certificate(eps, tol=gap)
    msg = f"SCIP: {tc}; {nterms} exponential terms"
    if status == Status.TIME_LIMIT:
        msg = f"SCIP: {tc} ({opts.note()}); {nterms} exponential terms"
    # the model's gap certificate is the proof of optimality, whatever SCIP's termination
    if cert.optimal:
        if status != Status.OPTIMAL:
            msg += f"; the point is proven optimal by the model's gap certificate ({cert.gap:.2g} <= {gap:g})"
        status = Status.OPTIMAL
    elif status != Status.TIME_LIMIT:
        status = Status.FEASIBLE
    sol = model.make_solution(x=eps, status=status, backend="pyomo", solver=solver, certificate=cert, message=msg,
                              details=details)
    sol.wall_time = wall
    return sol


solve_hierarchy_pyomo.solvers = SOLVERS    # read by compare and the CLI


# the hierarchy program is continuous: relax is the same as solve
register("pyomo", HierarchyBudget, "relax", _DESC)(solve_hierarchy_pyomo)
