"""Exact backend for StratifiedDesign: KKT bisection (continuous) and certified marginal allocation.

Continuous relaxation (docs/stratified.md, "The continuous relaxation (KKT)"): f_i' is increasing, so ``x_i(μ)`` solving ``f_i'(x) = μ``
(clipped to the box) is increasing in μ, and Σ x_i(μ) = η is solved by a safeguarded Newton
iteration on μ (bisection fallback) around vectorised, bracketed Newton solves per stratum.

Integer problem (docs/stratified.md, "Discrete convexity" and "Marginal allocation"): increments are non-decreasing, so marginal allocation is exact. Rather
than adding η units one at a time we use the Lagrangian start: ``d_i(m) ≤ f_i'(m+1)`` and
``d_i(m) ≥ f_i'(m)``, so the continuous multiplier decides every increment except at most one per
stratum. From ``floor(x*)`` the remaining (< k) units are added in vectorised rounds, then improving
one-unit exchanges are applied in vectorised rounds until the exchange certificate holds. The
certificate is necessary and sufficient, so the answer is exact whatever the start; the start only
makes it fast (typically one round of each).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ... import _validate as V
from ...options import DEFAULT_REL_GAP
from ...models.stratified import MinCostDesign, StratifiedDesign
from ...registry import register
from ...result import Certificate, Solution, Status
from .constrained import relax_constrained, solve_constrained

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


# ---------------------------------------------------------------------------------- continuous
def _x_of_mu(model: StratifiedDesign, mu: float, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray,
             d_lo: np.ndarray, d_hi: np.ndarray, tol: float = 1e-14, max_iter: int = 200):
    """Solve f_i'(x_i) = mu on [lo_i, hi_i] for all i (bracketed Newton; bisection in log x)."""
    x = np.clip(x0, lo, hi).astype(float)
    at_lo = d_lo >= mu
    at_hi = d_hi <= mu
    free = ~(at_lo | at_hi)
    x[at_lo] = lo[at_lo]
    x[at_hi] = hi[at_hi]
    idx = np.flatnonzero(free)
    if idx.size == 0:
        return x, free
    a, b = lo[idx].astype(float), hi[idx].astype(float)
    xi = x[idx]
    a, b = a.copy(), b.copy()
    act = np.arange(idx.size)          # positions still iterating
    for _ in range(max_iter):
        xa = xi[act]
        d1, h = model.terms_derivatives(xa, idx[act])
        g = d1 - mu
        # keep the bracket: g < 0 means the root is to the right
        a[act] = np.where(g < 0, xa, a[act])
        b[act] = np.where(g > 0, xa, b[act])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            xn = xa - g / h
        aa, bb = a[act], b[act]
        bad = ~np.isfinite(xn) | (xn < aa) | (xn > bb)
        xn = np.where(bad, np.sqrt(aa * bb), xn)
        done = (np.abs(xn - xa) <= tol * xa) | (g == 0)
        xi[act] = xn
        act = act[~done]
        if act.size == 0:
            break
    x[idx] = xi
    return x, free


def _joint_newton(model: StratifiedDesign, x: np.ndarray, lo, hi, tol: float, max_iter: int = 40):
    """Newton on the whole KKT system (x and μ together), one derivative evaluation per step.

    Each step linearises f_i' around x and picks the μ for which the clipped linearised
    minimisers sum to η (a piecewise-linear, increasing equation in μ, solved exactly by Newton on
    its pieces). Fast when it converges; returns None otherwise so the caller falls back to the
    bracketed method.
    """
    eta = float(model.total)
    mu = None
    for it in range(1, max_iter + 1):
        d1, h = model.terms_derivatives(x)
        if not np.all(np.isfinite(d1)) or not np.all(h > 0):
            return None
        inv_h = 1.0 / h
        base = x - d1 * inv_h            # linearised minimiser is base + μ/h
        # the first step starts from the median derivative, later ones from the last step's μ (near the root:
        # fewer passes, and no median, which was 5 % of a solve at k = 100 000)
        mu = float(np.median(d1)) if mu is None or not math.isfinite(mu) else mu
        for _ in range(100):             # exact solve of Σ clip(base + μ/h) = η
            t = np.clip(base + mu * inv_h, lo, hi)
            free = (t > lo) & (t < hi)
            S = t.sum() - eta
            slope = inv_h[free].sum()
            if abs(S) <= 1e-15 * eta or slope == 0:
                break
            mu -= S / slope
        xn = t
        step = np.max(np.abs(xn - x) / x)
        x = xn
        if step <= tol:
            return x, mu, it
    return None


def _kkt(model: StratifiedDesign, tol: float, max_iter: int = 400):
    """Solve Σ x_i(μ) = η on the multiplier μ; return (x, μ, x(μ), iterations).

    The bracket [μ_a, μ_b] with Σx(μ_a) < η ≤ Σx(μ_b) shrinks by safeguarded Newton steps. If it
    collapses before the sum is met (a stratum whose f_i is linear, e.g. DLap with σ² = 0, makes
    Σx(μ) jump), the two bracket points are blended: every coordinate that differs between them has
    f_i' equal to μ to rounding, so the blend is the KKT point. ``x(μ)`` (the per-stratum minimisers
    of f_i(x) − μx at the last μ) gives the Lagrangian dual bound.
    """
    lo = model.lower.astype(float)
    hi = model.upper.astype(float)
    eta = float(model.total)
    d_lo = model.terms_derivative(lo, 1)
    d_hi = model.terms_derivative(hi, 1)
    mu_a, mu_b = float(np.min(d_lo)), float(np.max(d_hi))   # Σx(mu_a) = Σlo, Σx(mu_b) = Σhi
    x_a, x_b = lo.copy(), hi.copy()
    S_a, S_b = lo.sum() - eta, hi.sum() - eta
    if S_a == 0 or S_b == 0:
        x = x_a if S_a == 0 else x_b
        return x, (mu_a if S_a == 0 else mu_b), x, 0
    # start: Neyman-like allocation with the noise variance taken at proportional rates
    x = lo + (hi - lo) * (eta - lo.sum()) / max(hi.sum() - lo.sum(), 1.0)
    w = model.alpha * np.sqrt(model.sigma2 + model.noise_variance_at(x))
    if np.all(np.isfinite(w)) and np.any(w > 0):
        x = np.clip(w * (eta / w.sum()), lo, hi)
    fast = _joint_newton(model, x, lo, hi, tol=max(tol, 1e-12))
    if fast is not None:
        x, mu, it = fast
        if abs(x.sum() - eta) <= max(tol, 1e-12) * eta:
            # x(μ): minimisers of f_i − μx at this μ for the dual bound (its error is second order)
            x_mu, _ = _x_of_mu(model, mu, x, lo, hi, d_lo, d_hi, tol=1e-10, max_iter=8)
            return x, mu, x_mu, it
    mu = float(np.clip(np.median(model.terms_derivative(x, 1)), mu_a, mu_b))
    it, converged, inner_res = 0, False, 1.0
    x_mu, mu_last = x, mu
    while it < max_iter:
        it += 1
        # inexact Newton: the inner solves need full precision only as the sum converges
        inner_tol = min(max(1e-3 * inner_res, 1e-13), 1e-6)
        x, free = _x_of_mu(model, mu, x, lo, hi, d_lo, d_hi, tol=inner_tol)
        x_mu, mu_last = x, mu
        S = x.sum() - eta
        inner_res = abs(S) / eta
        if abs(S) <= tol * eta and inner_tol <= max(1e-3 * tol, 1e-13):
            converged = True
            break
        if S < 0:
            mu_a, x_a, S_a = mu, x.copy(), S
        else:
            mu_b, x_b, S_b = mu, x.copy(), S
        with np.errstate(divide="ignore", invalid="ignore"):
            dS = float(np.sum(1.0 / model.terms_derivative(x[free], 2, np.flatnonzero(free)))) if free.any() else 0.0
            mu_new = mu - S / dS if 0 < dS < np.inf else np.nan
        if not (mu_a < mu_new < mu_b):
            mu_new = 0.5 * (mu_a + mu_b)
        if not (mu_a < mu_new < mu_b) or abs(mu_new - mu) <= 4e-16 * abs(mu):
            break   # multiplier converged to rounding: blend the bracket ends below
        mu = mu_new
    if not converged:
        theta = -S_a / (S_b - S_a)
        x = np.clip(x_a + theta * (x_b - x_a), lo, hi)
    return x, mu_last, x_mu, it


def dual_bound(model: StratifiedDesign, mu: float, x_mu: np.ndarray) -> float:
    """Lagrangian lower bound q(μ) = Σ_i min_{lo≤x≤hi} (f_i(x) − μx) + μη ≤ optimum (weak duality)."""
    return float(np.sum(model.terms(x_mu) - mu * x_mu) + mu * model.total - model._fpc_const)


def relax_stratified(model: StratifiedDesign, tol: float = 1e-12, max_iter: int = 400,
                     time_limit: float | None = None, rel_gap: float = DEFAULT_REL_GAP, verbose: bool = False) -> Solution:
    """Continuous optimum x* of the relaxation by KKT bisection/Newton on the multiplier.

    A design with constraints, precision targets or several variables goes to the constrained solver
    (dual Newton over all rows, :mod:`.constrained`), which honours ``time_limit``; the plain
    problem's method is polynomial and fast, and not interrupted (:func:`_plain_time_note`).
    """
    t0 = time.perf_counter()
    tol = V.tolerance("tol", tol, maximum=1e-6)
    max_iter = V.count("max_iter", max_iter, minimum=1, maximum=100_000)
    if not model.is_plain:
        return relax_constrained(model, rel_gap=rel_gap, time_limit=time_limit, verbose=verbose)
    limit = V.time_limit(time_limit)
    eta = float(model.total)
    x, mu, x_mu, it = _kkt(model, tol, max_iter)
    grad = model.terms_derivative(x, 1)
    scale = max(float(np.max(np.abs(grad))), np.finfo(float).tiny)
    # KKT residual: the spread of f' over interior coordinates, and sign conditions at the bounds
    res, mu_hat = model.kkt_residuals(x, fallback_mu=mu)
    kkt = float(np.max(np.abs(res))) / scale
    ok = kkt < 1e-7 and abs(x.sum() - eta) <= 1e-9 * eta
    sol = model.make_solution(x=x, status=Status.OPTIMAL if ok else Status.FEASIBLE,
                              message=f"KKT solve in {it} multiplier iterations")
    sol.certificate = Certificate("kkt", ok, slack=kkt, tolerance=1e-7, lower_bound=dual_bound(model, mu, x_mu),
                                  message="relative KKT residual (stationarity and bound signs)")
    # the multiplier λ of Σx = η in the convention f'(x) + λ = 0
    sol.details.update(multiplier=-mu_hat, iterations=it)
    sol.wall_time = time.perf_counter() - t0
    return _plain_time_note(sol, limit)


def _plain_time_note(sol: Solution, limit: float | None) -> Solution:
    """The sum-and-bounds route (relax and solve) is a fixed handful of vectorised passes over the k strata
    (O(k log k): about 0.6 s at k = 200 000), bounded by its own size rather than by ``time_limit``, so it is
    not interrupted (stopping it would throw away a proof that is moments away). When it ran past the limit
    the message says so, with the elapsed time, and ``details["time_limit_exceeded"]`` is True."""
    if limit is not None:
        sol.details["time_limit"] = limit
        sol.details["time_limit_exceeded"] = sol.wall_time > limit
        if sol.wall_time > limit:
            sol.message = (f"{sol.message}; ran {sol.wall_time:.3g} s, past time_limit={limit:g} s: the "
                           f"sum-and-bounds route is O(k log k), bounded by its own size, and is not interrupted")
    return sol


# ---------------------------------------------------------------------------------- integer
def _fill(model: StratifiedDesign, n: np.ndarray) -> tuple[np.ndarray, int]:
    """Add units to reach Σ n = η, each round giving one unit to the strata with the smallest increments."""
    return fill_to_total(n, model.total, model.lower, model.upper, model.increments)


def fill_to_total(n: np.ndarray, total: int, lower, upper, increments, max_rounds: int | None = None):
    """Marginal allocation onto Σ n = ``total`` from ``n`` (in place): each round moves one unit in each of the
    strata whose next unit costs least, ``increments(m, idx)`` being f_i(m + 1) − f_i(m) (exact for separable
    convex terms). Returns ``(n, rounds)``, or None when ``max_rounds`` pass (or the bounds leave no move) first.
    Bounded: each round moves at least one unit, so |total − Σ n| rounds at most."""
    limit = abs(int(total) - int(n.sum())) + 1 if max_rounds is None else max_rounds
    for rounds in range(limit + 1):
        short = int(total) - int(n.sum())
        if short == 0:
            return n, rounds
        if rounds == limit:
            return None
        if short > 0:
            cand = np.flatnonzero(n < upper)
            val = increments(n[cand], cand)
        else:
            cand = np.flatnonzero(n > lower)
            val = -increments(n[cand] - 1, cand)
        if cand.size == 0:
            return None
        n[cand[_smallest(val, abs(short))]] += 1 if short > 0 else -1
    return None


def _smallest(val: np.ndarray, r: int) -> np.ndarray:
    r = min(r, val.size)
    if r >= val.size:
        return np.arange(val.size)
    return np.argpartition(val, r - 1)[:r]


def _exchange(model: StratifiedDesign, n: np.ndarray, rtol: float, max_rounds: int = 100000):
    """Apply improving one-unit exchanges (vectorised, on disjoint strata) until none is left."""
    rounds = 0
    moves = 0
    while rounds < max_rounds:
        rem = np.flatnonzero(n > model.lower)
        add = np.flatnonzero(n < model.upper)
        if rem.size == 0 or add.size == 0:
            break
        left = model.increments(n[rem] - 1, rem)     # saving when one unit leaves stratum i
        right = model.increments(n[add], add)        # cost when one unit joins stratum j
        top, bottom = left.max(), right.min()
        if top - bottom <= rtol * max(abs(top), abs(bottom)):
            break                                     # no improving exchange: certificate holds
        lo_ord = np.argsort(-left, kind="stable")
        ro_ord = np.argsort(right, kind="stable")
        m = min(lo_ord.size, ro_ord.size)
        lv, rv = left[lo_ord[:m]], right[ro_ord[:m]]
        scale = np.maximum(np.abs(lv), np.abs(rv))
        good = lv - rv > rtol * scale
        cnt = int(np.argmin(good)) if not np.all(good) else m
        if cnt == 0:
            break
        donors, takers = rem[lo_ord[:cnt]], add[ro_ord[:cnt]]
        # a stratum may not both give and take in one round: stop at the first conflict
        pos_taker = {int(j): p for p, j in enumerate(takers)}
        cut = cnt
        for p, i in enumerate(donors):
            q = pos_taker.get(int(i))
            if q is not None:
                cut = min(cut, max(p, q))
        if cut == 0:
            break
        n[donors[:cut]] -= 1
        n[takers[:cut]] += 1
        moves += cut
        rounds += 1
    return n, rounds, moves


def solve_stratified(model: StratifiedDesign, rtol: float = 1e-10, time_limit: float | None = None,
                     rel_gap: float = DEFAULT_REL_GAP, verbose: bool = False) -> Solution:
    """Certified integer optimum of the stratified design.

    Sum-and-bounds problem: the continuous multiplier is only a start (a loose solve suffices: the
    exchange phase and the certificate make the answer exact), and it yields the Lagrangian lower bound
    reported as ``details["lower_bound"]``. Anything more (linear constraints, precision targets, several
    variables) goes to the constrained solver (:mod:`.constrained`), certified by a gap ≤ ``rel_gap``,
    within ``time_limit``; the sum-and-bounds route is bounded by its own size (:func:`_plain_time_note`).
    """
    # a looser certificate tolerance would make "optimal" mean less than it says
    rtol = V.tolerance("rtol", rtol, maximum=1e-6)
    t0 = time.perf_counter()
    if not model.is_plain:
        return solve_constrained(model, rel_gap=rel_gap, time_limit=time_limit, verbose=verbose)
    limit = V.time_limit(time_limit)
    x, mu, x_mu, it = _kkt(model, tol=1e-8)
    n = np.clip(np.floor(x), model.lower, model.upper).astype(np.int64)
    n, fill_rounds = _fill(model, n)
    n, ex_rounds, moves = _exchange(model, n, rtol)
    cert = model.certificate(n, rtol=max(rtol, 1e-10) * 10)
    lb = dual_bound(model, mu, x_mu)
    cert.lower_bound = lb
    msg = "marginal allocation with Lagrangian start; exchange certificate " + ("holds" if cert.optimal else "FAILS")
    # the check (increment by increment for Gaussian or user mechanisms: seconds at k = 100 000) stops at the
    # limit: the design is then reported exchange-stable, not proven
    convex, why = model.convexity_verified(until=None if limit is None else t0 + limit)
    if cert.optimal and not convex:
        # without discrete convexity the exchange test proves a local optimum only
        cert.optimal = False
        cert.message = f"{cert.message}; local only: {why}"
        msg = f"exchange-stable design, not proven optimal: {why} (use enumerate or pyomo highs)"
    sol = model.make_solution(n=n, status=Status.OPTIMAL if cert.optimal else Status.FEASIBLE,
                              certificate=cert, message=msg)
    sol.details.update(lower_bound=lb, integrality_gap=(sol.objective - lb) / abs(sol.objective) if sol.objective else 0.0,
                       multiplier=-mu, kkt_iterations=it, fill_rounds=fill_rounds,
                       exchange_rounds=ex_rounds, exchange_moves=moves)
    sol.wall_time = time.perf_counter() - t0
    return _plain_time_note(sol, limit)


register("exact", StratifiedDesign, "relax", _DESCRIPTION)(relax_stratified)
register("exact", StratifiedDesign, "solve", _DESCRIPTION)(solve_stratified)
register("exact", MinCostDesign, "relax", _DESCRIPTION)(relax_constrained)
register("exact", MinCostDesign, "solve", _DESCRIPTION)(solve_constrained)
