"""cvxpy backend for HierarchyBudget: tangent-cut outer approximation with a certified gap.

Each level's weighted MSE F_ℓ(ε) is convex in ε, so its tangents are global under-estimators. The
backend runs Kelley's cutting-plane method on the epigraph LP (variables s = ε/ref and t_ℓ ≥ every
cut of level ℓ, all scaled to O(1)), solved through cvxpy (HiGHS by default, Clarabel as fallback):

    (6)  min Σ t_ℓ   s.t.  t_ℓ ≥ F_ℓ(p) + F_ℓ'(p)(ε_ℓ − p)  for every cut point p,  Σ ε_ℓ ≤ ε_total, box
    (7)  min Σ ε_ℓ   s.t.  the same cuts,  Σ t_ℓ ≤ τ, box

and adds one cut per level at each LP solution. The LP box is not [ε_min, ε_max] (tangents at ε_min
have coefficients ~ε_min⁻³ that break LP solvers) but a box proven to contain the optimum from the
closed-form bounds of Prop 4 (:func:`optimum_box`). The cut matrices are cvxpy Parameters (DPP), so the
problem is compiled once. Bounds:

* upper bound — the true objective at the best feasible point seen (for (7) the LP point is scaled
  up until it meets the target);
* lower bound — *rigorous*, not the LP solver's reported value: with the LP's multiplier λ ≥ 0 of the
  coupling constraint, weak duality gives LB(λ) = Σ_ℓ min_{box} (φ_ℓ(ε) + λε) − λ ε_total (for (6); the
  analogue for (7)), where φ_ℓ is the piecewise-linear minorant made of the cuts; its minimum over an
  interval is attained at a bound or a breakpoint, which we enumerate exactly.

The answer carries ``Certificate(kind="gap", lower_bound=..., gap=...)``; status ``optimal`` when
the relative gap is ≤ ``rel_gap``, else ``feasible`` (iteration limit) or ``time_limit``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...models.hierarchy import HierarchyBudget
from ... import _validate as V
from ...options import default_rel_gap, time_limit_or_default
from ...numerics import bisect
from ...registry import register
from ...result import Certificate, Solution, Status
from .. import _status
from .._highs import absorb_highs_banner

_DESC = "cvxpy models (HiGHS / Clarabel / SCIP through cvxpy)"


def _env_min(P, A, B, c, lo, hi):
    """min over s ∈ [lo, hi] of max_k(A_k + B_k s) + c·s, for tangents A+Bs of a convex function at P.

    Tangents sorted by their points are the consecutive pieces of the envelope, so the minimum is at a
    bound or at an intersection of consecutive tangents."""
    order = np.argsort(P)
    A, B = A[order], B[order]
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = (A[1:] - A[:-1]) / (B[:-1] - B[1:])
    cand = np.concatenate([[lo, hi], xs[np.isfinite(xs)]])
    cand = np.clip(cand, lo, hi)
    vals = np.max(A[None, :] + B[None, :] * cand[:, None], axis=1) + c * cand
    return float(vals.min())


def _root_increasing(f, goal, lo=-800.0, hi=800.0):
    """u with f(u) = goal for an increasing f of u = log λ (scalar bisection on L numbers)."""
    return bisect(lambda u: f(u) < goal, lo, hi, max_iter=200)


def optimum_box(model: HierarchyBudget):
    """A box that provably contains the optimal ε, from closed-form bounds only.

    With a_ℓ = w_ℓ |R_ℓ| Δ²: ``2a_ℓ ≤ −ε³F_ℓ'(ε) < 4a_ℓ`` and ``a_ℓ ≤ ε²F_ℓ(ε) < 2a_ℓ`` (Prop 4 and
    its derivative). The KKT point is ε_ℓ(λ) = clip(root of −F_ℓ' = λ), so
    e_2(λ) ≤ ε_ℓ(λ) ≤ e_4(λ) with e_c(λ) = clip((c a_ℓ/λ)^{1/3}); bounding the coupling equation
    (Σ ε = ε_total, or F(ε) = τ) with these brackets λ*, hence ε*."""
    lo, hi = model.level_bounds()
    a = model.weights * model.sizes * model.sensitivity ** 2

    def e(c, u):
        return np.clip(np.cbrt(c * a * math.exp(min(-u, 700.0))), lo, hi)

    if model.program == "budget":
        E = model.epsilon_total
        # Σ e_c decreasing in u: use −Σ as the increasing function
        u_lo = _root_increasing(lambda u: -e(2.0, u).sum(), -E)[0]     # λ* ≥ e^{u_lo}
        u_hi = _root_increasing(lambda u: -e(4.0, u).sum(), -E)[1]     # λ* ≤ e^{u_hi}
    else:
        tau = model.mse_target
        u_lo = _root_increasing(lambda u: float(np.sum(2 * a / e(2.0, u) ** 2)), tau)[0]
        u_hi = _root_increasing(lambda u: float(np.sum(a / e(4.0, u) ** 2)), tau)[1]
    blo = np.maximum(e(2.0, u_hi) * (1 - 1e-9), lo)
    bhi = np.minimum(e(4.0, u_lo) * (1 + 1e-9), hi)
    return blo, bhi


@register("cvxpy", HierarchyBudget, "solve", _DESC)
def solve_hierarchy_cvxpy(model: HierarchyBudget, solver: str | None = None, rel_gap: float = default_rel_gap("cvxpy", "HierarchyBudget"),
                          max_iter: int = 300, initial_cuts: int = 9, time_limit=None) -> Solution:
    """Options: ``solver`` (cvxpy LP solver name, case-insensitive; default HIGHS, else CLARABEL), ``rel_gap``
    (relative gap to stop at), ``max_iter`` (LP solves), ``initial_cuts`` (log-spaced cuts per level, ≥ 2),
    ``time_limit`` (checked after every LP solve)."""
    gap_tol = V.rel_gap(rel_gap)
    max_iter = V.count("max_iter", max_iter, maximum=100_000)
    if getattr(model, "noise", "laplace") == "discrete_gaussian":
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message=(
            "discrete Gaussian noise: the truncated MSE is a ratio of sums of exponentials in rho (a sum over the "
            "noise's support), which is not a DCP expression, and this backend's cut bracket is the Laplace "
            "one; use backend='exact' (or 'scipy')"))
    initial_cuts = V.count("initial_cuts", initial_cuts, minimum=2, maximum=10_000)
    if solver is not None and not isinstance(solver, str):
        raise V.InvalidOption(f"solver must be a cvxpy solver name, got {type(solver).__name__}")
    try:
        import cvxpy as cp
    except ImportError:  # pragma: no cover
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message="cvxpy is not installed")
    installed = cp.installed_solvers()
    if solver is not None:
        solver = solver.strip().upper()
    if solver is None:
        solver = next((s for s in ("HIGHS", "CLARABEL") if s in installed), None)
        if solver is None:
            return Solution(Status.UNSUPPORTED, backend="cvxpy", message="no LP solver (HiGHS/Clarabel) in cvxpy")
    elif solver not in installed:
        return Solution(Status.UNSUPPORTED, backend="cvxpy", solver=solver,
                        message=f"cvxpy solver {solver!r} is not installed; installed: {installed}")
    t0 = time.perf_counter()
    L = model.n_levels
    lo_e, hi_e = optimum_box(model)   # the LP lives in a box known to contain the optimum
    u = np.clip(model.uniform_split(), lo_e, hi_e)
    ref = float(np.mean(u))
    lo, hi = lo_e / ref, hi_e / ref
    data = model.compressed_levels()
    w = model.weights
    budget = model.program == "budget"
    S = model.objective_value(model.uniform_split()) if budget else model.mse_target     # objective scale

    def level_vals(s):
        """Scaled F_ℓ and dF_ℓ/ds at s (vector)."""
        out = [model.level_terms(s[l] * ref, l, 1, *data[l]) for l in range(L)]
        F = np.array([o[0] for o in out]) * w / S
        G = np.array([o[1] for o in out]) * w * ref / S
        return F, G

    K = initial_cuts + max_iter + 1
    pts = [np.exp(np.linspace(np.log(lo[l]), np.log(hi[l]), initial_cuts)) for l in range(L)]
    P = np.zeros((L, 0))
    Acut = np.zeros((L, 0))
    Bcut = np.zeros((L, 0))

    def add_cuts(s):
        nonlocal P, Acut, Bcut
        F, G = level_vals(s)
        P = np.hstack([P, s[:, None]])
        Acut = np.hstack([Acut, (F - G * s)[:, None]])
        Bcut = np.hstack([Bcut, G[:, None]])
        return F

    for j in range(initial_cuts):
        add_cuts(np.array([pts[l][j] for l in range(L)]))
    add_cuts(np.clip(u / ref, lo, hi))

    sv = cp.Variable(L)
    tv = cp.Variable(L)
    Ap = cp.Parameter((L, K))
    Bp = cp.Parameter((L, K))
    Smat = cp.reshape(sv, (L, 1), order="F") @ np.ones((1, K))
    cons = [cp.reshape(tv, (L, 1), order="F") @ np.ones((1, K)) >= Ap + cp.multiply(Bp, Smat), sv >= lo, sv <= hi]
    if budget:
        coupling = cp.sum(sv) <= model.epsilon_total / ref
        prob = cp.Problem(cp.Minimize(cp.sum(tv)), cons + [coupling])
    else:
        coupling = cp.sum(tv) <= model.mse_target / S
        prob = cp.Problem(cp.Minimize(cp.sum(sv)), cons + [coupling])

    lp_opts = {"HIGHS": {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
               "CLARABEL": {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12}}.get(solver, {})
    best_eps, ub, lb = None, math.inf, -math.inf
    status_msg = ""
    iters = 0
    timed_out = False
    for iters in range(1, max_iter + 1):
        k = P.shape[1]
        Ap.value = np.hstack([Acut, np.repeat(Acut[:, :1], K - k, axis=1)])
        Bp.value = np.hstack([Bcut, np.repeat(Bcut[:, :1], K - k, axis=1)])
        try:
            absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
            # every LP gets what is left of the limit (None: the one default), so one LP cannot overrun it
            left = max(time_limit_or_default(time_limit) - (time.perf_counter() - t0), 1e-3)
            prob.solve(solver=solver, **lp_opts, **({"time_limit": left} if solver in ("HIGHS", "CLARABEL") else {}))
            _status.record(prob.status)     # the solver's own reason: Solution.termination
        except Exception as exc:  # noqa: BLE001 - solver fault becomes a status
            status_msg = f"LP solver {solver} failed: {exc}"
            break
        if prob.status == "user_limit":         # the LP stopped at what was left of the limit
            timed_out = True
            break
        if prob.status not in ("optimal", "optimal_inaccurate") or sv.value is None:
            status_msg = f"LP status {prob.status}"
            break
        s = np.clip(np.asarray(sv.value, dtype=float), lo, hi)
        lam = max(float(np.atleast_1d(coupling.dual_value)[0]), 0.0) if coupling.dual_value is not None else 0.0
        # rigorous lower bound from weak duality with the LP multiplier
        if budget:
            cand = sum(_env_min(P[l], Acut[l], Bcut[l], lam, lo[l], hi[l]) for l in range(L))
            cand -= lam * model.epsilon_total / ref
            cand *= S
        else:
            if lam > 0:
                cand = sum(_env_min(P[l], Acut[l], Bcut[l], 1.0 / lam, lo[l], hi[l]) for l in range(L)) * lam
                cand -= lam * model.mse_target / S
                cand *= ref
            else:
                cand = float(np.sum(lo)) * ref
        lb = max(lb, cand)
        # candidate point: repaired to feasibility, scored with the true objective
        eps = model.make_feasible(s * ref)
        feasible = (math.fsum(eps) <= model.epsilon_total) if budget else \
            (model.objective_value(eps) <= model.mse_target)
        if feasible:
            val = model.objective_value(eps) if budget else math.fsum(eps)
            if val < ub:
                ub, best_eps = val, eps
        add_cuts(s)
        if ub < math.inf and (ub - lb) <= gap_tol * abs(ub):
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            timed_out = True
            break
    wall = time.perf_counter() - t0
    if best_eps is None and timed_out:
        # stopped before the first LP's point: the uniform split made feasible, if it is, with no bound
        eps = model.make_feasible(np.asarray(model.uniform_split(), dtype=float))
        if (math.fsum(eps) <= model.epsilon_total) if budget else (model.objective_value(eps) <= model.mse_target):
            ub, best_eps = (model.objective_value(eps) if budget else math.fsum(eps)), eps
        else:
            return Solution(Status.TIME_LIMIT, backend="cvxpy", solver=solver, wall_time=wall,
                            message="time limit reached before the first LP's point; no feasible point")
    if best_eps is None:
        return Solution(Status.ERROR, backend="cvxpy", solver=solver,
                        message=status_msg or "no feasible point found", wall_time=wall)
    gap = max(ub - lb, 0.0) / abs(ub) if ub else 0.0
    ok = gap <= gap_tol
    cert = Certificate("gap", bool(ok), lower_bound=lb, gap=gap, tolerance=gap_tol,
                       message=f"Kelley cutting planes, {P.shape[1]} cuts per level")
    status = Status.OPTIMAL if ok else (Status.TIME_LIMIT if timed_out else Status.FEASIBLE)
    sol = model.make_solution(x=best_eps, status=status, backend="cvxpy", solver=f"cutting-planes/{solver}", certificate=cert,
                              message=status_msg or f"{iters} LP solves, relative gap {gap:.3e}",
                              details={"lp_solves": iters, "lower_bound": lb, "upper_bound": ub})
    sol.wall_time = wall
    return sol


# the hierarchy program is continuous: relax is the same as solve
register("cvxpy", HierarchyBudget, "relax", _DESC)(solve_hierarchy_cvxpy)
