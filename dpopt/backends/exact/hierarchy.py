"""Exact backend for HierarchyBudget: KKT with nested monotone 1-D solves (docs/hierarchy.md).

Each level's weighted MSE sum F_ℓ is strictly convex and decreasing in ε, so the KKT conditions of
program (6) are ``F_ℓ'(ε_ℓ) = −λ`` on free levels (ε_ℓ clipped to [ε_min, ε_max]) and Σ ε_ℓ = ε_total.

* Inner solve (per level, vectorised over the level's nodes): ε_ℓ(λ) is the root of the decreasing
  function ``log(−F_ℓ'(e^t)) − log λ`` of t = log ε, which is almost linear (slope ≈ −3, exactly −3
  without truncation), so a bracketed Newton iteration from a warm start converges in 1–3 passes.
* Outer solve: Σ ε_ℓ(λ) is decreasing in λ; it is solved by a safeguarded Newton iteration on log λ
  (derivative from the implicit function theorem, dε_ℓ/dλ = −1/F_ℓ''), inside a bracket that the
  bounds ``2Δ² w n_ℓ ≤ −ε³F_ℓ' < 4Δ² w n_ℓ`` give in closed form; bisection is the fallback.
* Program (7) uses the same inner solves; the outer equation is the MSE target G(ε(λ)) = τ, which is
  increasing in λ.

Integer counts are regrouped into distinct values with multiplicities (a histogram) before solving,
so each pass costs O(#distinct counts). The returned point is certified with the model's
supporting-hyperplane gap bound, and Σ ε_ℓ never exceeds ε_total (checked with ``math.fsum``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...models.hierarchy import HierarchyBudget
from ...numerics import bisect
from ... import _validate as V
from ...registry import register
from ...result import Solution, Status

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


class _Levels:
    """Weighted per-level oracle (F, F', F'') on the compressed data, counting passes."""

    def __init__(self, model: HierarchyBudget):
        self.model = model
        self.data = model.compressed_levels()
        self.w = model.weights
        self.passes = 0

    def __call__(self, l: int, eps: float):
        self.passes += 1
        z, m = self.data[l]
        F, F1, F2 = self.model.level_terms(eps, l, 2, z, m)
        w = self.w[l]
        return w * F, w * F1, w * F2


def _inner(oracle: _Levels, l: int, lam: float, lo: float, hi: float, guess: float, tol: float = 4e-16,
           max_iter: int = 100):
    """Minimiser of F_ℓ(ε) + λε on [lo, hi]; returns (ε, F, F', F'', free)."""
    t_lo, t_hi = math.log(lo), math.log(hi)
    a, b = t_lo, t_hi                 # bracket of the root in t = log ε
    lo_checked = hi_checked = False
    t = min(max(math.log(guess), t_lo), t_hi)
    loglam = math.log(lam)
    for _ in range(max_iter):
        eps = math.exp(t)
        F, F1, F2 = oracle(l, eps)
        phi = math.log(-F1) - loglam          # decreasing in t; > 0 means ε is too small
        if t == t_lo and phi <= 0:
            return lo, F, F1, F2, False
        if t == t_hi and phi >= 0:
            return hi, F, F1, F2, False
        if phi > 0:
            a = t
        elif phi < 0:
            b = t
        else:
            return eps, F, F1, F2, True
        dphi = eps * F2 / F1                   # d phi / dt < 0
        tn = t - phi / dphi
        if tn <= t_lo and not lo_checked:
            lo_checked, tn = True, t_lo
        elif tn >= t_hi and not hi_checked:
            hi_checked, tn = True, t_hi
        elif not (a < tn < b):
            tn = 0.5 * (a + b)
        if abs(tn - t) <= tol * max(1.0, abs(t)) or b - a <= tol * max(1.0, abs(a)):
            if tn in (t_lo, t_hi):
                t = tn
                continue
            # converged: one more cheap evaluation at the final point is not needed for ε itself
            eps = math.exp(tn)
            F, F1, F2 = oracle(l, eps)
            return eps, F, F1, F2, True
        t = tn
    eps = math.exp(t)
    F, F1, F2 = oracle(l, eps)
    return eps, F, F1, F2, lo < eps < hi


def _all_levels(oracle, lam, lo, hi, guess):
    L = len(lo)
    out = [_inner(oracle, l, lam, lo[l], hi[l], guess[l]) for l in range(L)]
    eps = np.array([o[0] for o in out])
    F = np.array([o[1] for o in out])
    F2 = np.array([o[3] for o in out])
    free = np.array([o[4] for o in out])
    return eps, F, F2, free


def _solve(model: HierarchyBudget, tol: float = 1e-14, max_iter: int = 200, deadline: float = math.inf):
    oracle = _Levels(model)
    lo, hi = model.level_bounds()
    d2 = model.sensitivity ** 2
    a = model.weights * model.sizes * d2          # −ε³F_ℓ' ∈ [2a, 4a]  (= 4a without truncation)
    kmin = 4.0 if model.loss == "laplace-variance" else 2.0

    def target(eps, F):
        return math.fsum(eps) if model.program == "budget" else float(np.sum(F))

    goal = model.epsilon_total if model.program == "budget" else model.mse_target
    sign = -1.0 if model.program == "budget" else 1.0    # Σε decreasing in λ; G increasing in λ

    if model.program == "budget" and model.epsilon_total <= float(lo.sum()) * (1 + 1e-15):
        return lo.copy(), oracle.passes, "every level at epsilon_min (epsilon_total = L*epsilon_min)", 0
    if model.program == "target" and model.objective_value(lo) <= model.mse_target:
        return lo.copy(), oracle.passes, "epsilon_min on every level already meets the MSE target", 0

    # bracket on u = log λ
    if model.program == "budget":
        def lam_for(c):
            # λ with Σ clip((c a/λ)^{1/3}) = E, by bisection on log λ (L numbers only)
            def spent(um):
                return np.clip(np.cbrt(c * a * math.exp(-um)), lo, hi).sum() if um > -700 else np.inf
            return bisect(lambda um: spent(um) > goal, -800.0, 800.0, max_iter=200)
        u_a = lam_for(kmin)[0] - 1e-9
        u_b = lam_for(4.0)[1] + 1e-9
        u = 0.5 * (u_a + u_b)
    else:
        # start from the untruncated estimate and expand geometrically
        # untruncated estimate: ε_ℓ = (4a_ℓ/λ)^{1/3}, G = λ^{2/3} Σ 2a_ℓ^{1/3} 4^{-2/3}
        u = 1.5 * (math.log(goal) - math.log(float(np.sum(2 * np.cbrt(a) * 4 ** (-2 / 3)))))
        u_a, u_b = -math.inf, math.inf
    lam = math.exp(u)
    guess = np.clip(np.cbrt(3 * a / lam), lo, hi)
    it = 0
    eps = guess
    for it in range(1, max_iter + 1):
        if it > 1 and time.perf_counter() > deadline:
            return eps, oracle.passes, "time limit", it - 1
        eps, F, F2, free = _all_levels(oracle, lam, lo, hi, guess)
        val = target(eps, F)
        psi = math.log(val) - math.log(goal)       # monotone in u (sign)
        if sign * psi > 0:       # Σε too small (budget) → decrease λ;   G too large (target) → decrease λ
            u_b = u
        elif sign * psi < 0:
            u_a = u
        else:
            break
        if abs(psi) <= tol:
            break
        # derivative of log(val) w.r.t. u = log λ
        if model.program == "budget":
            dval = -lam * float(np.sum(1.0 / F2[free])) if np.any(free) else 0.0
        else:
            dval = lam * lam * float(np.sum(1.0 / F2[free])) if np.any(free) else 0.0
        dpsi = dval / val
        un = u - psi / dpsi if dpsi != 0 else math.nan
        if not math.isfinite(un) or not (u_a < un < u_b):
            if math.isfinite(u_a) and math.isfinite(u_b):
                un = 0.5 * (u_a + u_b)
            else:
                un = u + (4.0 if sign * psi < 0 else -4.0)
        if abs(un - u) <= 1e-16 * max(1.0, abs(u)):
            break
        # warm start: ε_ℓ ∝ λ^{-1/3}
        guess = np.clip(eps * math.exp(-(un - u) / 3.0), lo, hi)
        u, lam = un, math.exp(un)
    return eps, oracle.passes, "", it


def _solve_gaussian(model: HierarchyBudget, tol: float = 1e-14, max_iter: int = 200, deadline: float = math.inf):
    """Program (6) for discrete Gaussian noise: Σ ρ_ℓ(λ) = ρ_total over u = log λ (docs/hierarchy.md).

    The inner solves are the Laplace ones (``_inner`` only needs F_ℓ convex and decreasing). The outer bracket
    comes from the inner solves themselves: Σ ρ_ℓ(λ) decreases in λ, so the bracket is widened by steps of 4 in
    log λ (at most 400 steps) and then closed by safeguarded Newton on log λ (dρ_ℓ/dλ = −1/(w_ℓF_ℓ''))."""
    oracle = _Levels(model)
    lo, hi = model.level_bounds()
    R = model.budget_total
    if R <= float(lo.sum()) * (1 + 1e-15):
        return lo.copy(), oracle.passes, "every level at rho_min (rho_total = L*rho_min)", 0
    # start: the untruncated continuous Gaussian, F_ℓ = w n Δ²/(2ρ): ρ_ℓ ∝ √(w_ℓ n_ℓ)
    a = model.weights * model.sizes * model.sensitivity ** 2 / 2.0
    rho0 = np.clip(R * np.sqrt(a) / np.sum(np.sqrt(a)), lo, hi)
    lam = float(np.mean(a / rho0 ** 2))
    u = math.log(lam)
    u_a, u_b = -math.inf, math.inf         # Σρ(u_a) > R (λ too small), Σρ(u_b) < R
    guess = rho0
    eps = rho0
    it = 0
    for it in range(1, max_iter + 400 + 1):
        if it > 1 and time.perf_counter() > deadline:
            return eps, oracle.passes, "time limit", it - 1
        eps, F, F2, free = _all_levels(oracle, lam, lo, hi, guess)
        val = math.fsum(eps)
        psi = math.log(val) - math.log(R)
        if psi > 0:
            u_a = u
        elif psi < 0:
            u_b = u
        else:
            break
        if abs(psi) <= tol:
            break
        dval = -lam * float(np.sum(1.0 / F2[free])) if np.any(free) else 0.0
        dpsi = dval / val
        un = u - psi / dpsi if dpsi != 0 else math.nan
        if not math.isfinite(un) or not (u_a < un < u_b):
            if math.isfinite(u_a) and math.isfinite(u_b):
                un = 0.5 * (u_a + u_b)
            else:
                un = u + (4.0 if psi > 0 else -4.0)
        if abs(un - u) <= 1e-16 * max(1.0, abs(u)):
            break
        guess = np.clip(eps * math.exp(-(un - u) / 2.0), lo, hi)    # ρ_ℓ ∝ λ^{-1/2} without truncation
        u, lam = un, math.exp(un)
    return eps, oracle.passes, "", it


def _make_feasible(model: HierarchyBudget, eps: np.ndarray) -> np.ndarray:
    """Put the last ulps right: Σε = ε_total exactly (never above) for (6), G ≤ τ for (7)."""
    eps = eps.copy()
    lo, hi = model.level_bounds()
    if model.program == "budget":
        E = model.budget_total
        room = (eps > lo) & (eps < hi)
        m = int(np.argmax(np.where(room, eps, -np.inf))) if np.any(room) else int(np.argmax(eps))
        eps[m] += E - math.fsum(eps)
        for _ in range(64):     # the exact Σε − E (a rounded Σε may hide an excess of a few ulps)
            if math.fsum(list(eps) + [-E]) <= 0:
                break
            eps[m] = np.nextafter(eps[m], 0.0)
        eps = np.clip(eps, lo, hi)
    else:
        for _ in range(200):
            if model.objective_value(eps) <= model.mse_target:
                break
            eps = np.minimum(eps * (1 + 4e-16), hi)
    return eps


@register("exact", HierarchyBudget, "solve", _DESCRIPTION)
def solve_hierarchy(model: HierarchyBudget, tol: float = 1e-14, max_iter: int = 200, time_limit=None) -> Solution:
    """Exact KKT solve of program (6) or (7). Options: ``tol`` (outer relative tolerance, ≤ 1e-6),
    ``max_iter`` (outer iterations), ``time_limit`` (checked before every outer iteration; the point reached
    is made feasible and returned with status ``time_limit``)."""
    tol = V.tolerance("tol", tol, maximum=1e-6)
    max_iter = V.count("max_iter", max_iter, maximum=100_000)
    time_limit = V.time_limit(time_limit)
    t0 = time.perf_counter()
    deadline = math.inf if time_limit is None else t0 + time_limit
    try:
        with np.errstate(over="ignore"):      # λ brackets at the extremes overflow harmlessly (to inf)
            solver = _solve_gaussian if model.noise == "discrete_gaussian" else _solve
            eps, passes, msg, iters = solver(model, tol, max_iter, deadline)
        eps = _make_feasible(model, eps)
    except (FloatingPointError, ValueError, ZeroDivisionError, OverflowError) as exc:
        return Solution(Status.ERROR, backend="exact", message=f"numerical failure: {exc}")
    wall = time.perf_counter() - t0
    cert = model.certificate(eps)
    timed_out = msg == "time limit"
    status = Status.OPTIMAL if cert.optimal else (Status.TIME_LIMIT if timed_out else Status.FEASIBLE)
    if timed_out:
        msg = (f"time limit of {time_limit:g} s reached after {iters} outer iterations; the point reached, made "
               "feasible")
    sol = model.make_solution(x=eps, status=status, backend="exact", solver="kkt-bisection", certificate=cert,
                              message=msg or f"KKT solved: {iters} outer iterations, {passes} level passes",
                              details={"outer_iterations": iters, "level_passes": passes})
    sol.wall_time = wall
    return sol


# the hierarchy program is continuous: relax is the same as solve
register("exact", HierarchyBudget, "relax", _DESCRIPTION)(solve_hierarchy)
