"""``algorithm1`` backend: Chen, Pasupathy & Awan's Algorithm 1, as corrected (docs/stratified.md, "Algorithm 1").

Steps (plain sum-and-bounds StratifiedDesign only):

(a) x* = continuous optimum (the exact KKT solve); ``n_init`` = best design among the roundings
    ``{⌊x_i*⌋, ⌈x_i*⌉}`` of all coordinates but one (the widest), the last one implied by the sum; the
    infeasible ones are skipped, and if none is feasible a largest-remainder rounding of x* within the
    bounds is used instead.
(b) radii. **Correction**: the paper's λ (the smallest Hessian eigenvalue at x*) does not bound the
    curvature away from x* (f_i'' decreases in x_i). Each stratum gets its own curvature bound m_i (f_i'' at
    the right end of its own range) and radius r_i = (ρ + sqrt(ρ² + 2 m_i dg_i))/m_i, iterated to a fixed
    point (``corrected_radii``), with dg = g(n_init) − g(x*) widened by x*'s measured KKT slack (ρ, c) and a
    bound on the rounding of g; then each range is shrunk to the integers whose exact Bregman divergence
    D_i stays within dg_i (``tighten_box``). Every design better than n_init lies in the resulting box;
    the proof is in docs/algorithm1.md.
(c) exhaustive search of that integer box (within the bounds tightened by the sum) with the implied
    coordinate checked against its bounds, vectorised with numpy.

The number of candidates (the roundings of (a) plus the cube of (c)) is limited by ``max_candidates``;
above it the backend refuses with status ``unsupported`` and says by how much (n_init, its gap, λ and r
are still reported in ``details``). ``lambda_rule="paper"`` reproduces the paper's uncorrected radius for
demonstration: its answer is then *not* proven optimal (status ``feasible``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...models.stratified import StratifiedDesign, largest_remainder
from ... import _validate as V
from ...registry import register
from ...result import Solution, Status
from .enumerate import _check_limit, _check_time, _term, box_count, scan_box

_DESCRIPTION = "Chen-Pasupathy-Awan Algorithm 1 with the corrected radius (exponential in k)"
DEFAULT_MAX_CANDIDATES = 50_000_000


def feasible_bounds(model: StratifiedDesign):
    """Bounds every feasible design obeys: the box tightened by the sum, e.g. n_i ≤ η − Σ_{j≠i} lo_j.

    For small η this keeps the region on which λ must bound the Hessian (and the cube) far smaller than
    the box up to N_i."""
    lo, hi = model.lower.astype(np.int64), model.upper.astype(np.int64)
    eta = int(model.total)
    return np.maximum(lo, eta - (hi.sum() - hi)), np.minimum(hi, eta - (lo.sum() - lo))


def _hess_min(model: StratifiedDesign, xs: np.ndarray, r: float) -> float:
    """min_i f_i'' over [max(x_i*−r, lo_i), min(x_i*+r, hi_i)] (feasible bounds), f_i'' being decreasing."""
    lo, hi = (b.astype(float) for b in feasible_bounds(model))
    right = np.minimum(xs + r, hi)
    left = np.maximum(xs - r, lo)
    # the right end is the minimiser by monotonicity; the left end is a cheap guard
    h = np.minimum(model.terms_derivative(right, 2), model.terms_derivative(left, 2))
    return float(np.min(h))


def _radius(dg: float, lam: float, rho: float = 0.0) -> float:
    """Largest d with λd²/2 − ρd ≤ dg: the paper's sqrt(2 dg/λ) when x* is an exact KKT point (ρ = 0)."""
    if dg <= 0 and rho <= 0:
        return 0.0
    if not lam > 0:
        return math.inf
    return (rho + math.sqrt(rho * rho + 2.0 * lam * max(dg, 0.0))) / lam


def kkt_slack(model: StratifiedDesign, xs: np.ndarray, multiplier: float | None):
    """(ρ, c) with ∇g(x*)·(n − x*) ≥ −ρ‖n − x*‖₂ − c for every n in the box with Σ n = η.

    x* comes from a numerical solve, so its KKT conditions hold only to rounding: with μ the multiplier,
    ∇g·(n − x*) = Σ (f_i' + μ)(n_i − x_i*) − μ(η − Σ x*); a coordinate at its lower (upper) bound can only
    move up (down), so only the wrong-signed part of f_i' + μ counts there."""
    mu = None if multiplier is None else -multiplier       # λ = −μ in the convention f'(x) + λ = 0
    res, mu = model.kkt_residuals(xs, mu, bound_rtol=1e-12)
    return float(np.linalg.norm(res)), abs(mu * (model.total - math.fsum(xs)))


def _curvatures(model: StratifiedDesign, xs: np.ndarray, r: np.ndarray) -> np.ndarray:
    """m_i = min f_i'' over coordinate i's own range [max(x_i*−r_i, lo_i), min(x_i*+r_i, hi_i)] (feasible
    bounds); f_i'' is decreasing, so the right end is the minimiser (the left end is a cheap guard)."""
    lo, hi = (b.astype(float) for b in feasible_bounds(model))
    right = np.minimum(xs + r, hi)
    left = np.maximum(xs - r, lo)
    return np.minimum(model.terms_derivative(right, 2), model.terms_derivative(left, 2))


def _radii(dg: float, m: np.ndarray, rho: float, span: np.ndarray) -> np.ndarray:
    """Per-stratum radii r_i: the largest |d| with m_i d²/2 − ρ|d| ≤ dg_i, capped at the stratum's feasible
    span, where dg_i = dg + Σ_{j≠i} min(ρ²/(2 m_j), ρ·span_j) bounds what the other strata can give back
    through x*'s KKT slack ρ (docs/algorithm1.md)."""
    give = np.zeros_like(m)
    if rho > 0:
        with np.errstate(divide="ignore"):
            give = np.minimum(np.where(m > 0, rho * rho / (2.0 * np.where(m > 0, m, 1.0)), np.inf), rho * span)
    dgi = dg + (math.fsum(give) - give)
    r = np.array([_radius(float(dgi[i]), float(m[i]), rho) for i in range(m.size)])
    return np.minimum(r, span), dgi


def corrected_radii(model: StratifiedDesign, xs: np.ndarray, dg: float, rho: float = 0.0, max_iter: int = 200):
    """(r, m, iterations): per-stratum radii and curvature bounds, the fixed point of r ← R(m(r)).

    Starting from the curvatures at x*, each round takes m_i over stratum i's current range and recomputes the
    radii; r only grows, and the loop stops at a point where R(m(r)) ≤ r, at which every m_i is valid on the
    range its own radius needs (the proof is in docs/algorithm1.md). Bounded: after ``max_iter`` rounds the
    whole feasible range of every stratum is used (always valid)."""
    lo, hi = (b.astype(float) for b in feasible_bounds(model))
    span = np.maximum(xs - lo, hi - xs)
    r = np.zeros_like(xs)
    m = _curvatures(model, xs, r)
    r, dgi = _radii(dg, m, rho, span)
    for it in range(1, max_iter + 1):
        grown = np.minimum(r * (1 + 1e-9) + 1e-12, span)   # a margin so the fixed point is met exactly
        m_new = _curvatures(model, xs, grown)
        r_new, dgi = _radii(dg, m_new, rho, span)
        if np.all(r_new <= grown):      # each m_i holds on a range containing the radius it gives
            return r_new, m_new, dgi, it
        r = np.maximum(r, r_new)
    m = _curvatures(model, xs, span)
    return span.copy(), m, _radii(dg, m, rho, span)[1], max_iter


#: widest per-stratum range tabulated by :func:`tighten_box` (beyond it the curvature box is kept)
_TABULATE_MAX = 2_000_000


def tighten_box(model: StratifiedDesign, xs: np.ndarray, dgi: np.ndarray, rho: float, clo: np.ndarray,
                chi: np.ndarray):
    """Shrink each stratum's range to the hull of the integers n_i with D_i(n_i − x_i*) − ρ|n_i − x_i*| ≤ dg_i,
    D_i(d) = f_i(x_i* + d) − f_i(x_i*) − f_i'(x_i*)·d the exact Bregman divergence of f_i (each side of x_i*
    it grows with |d|); a margin of 64 ulps of the three terms covers the rounding of D_i."""
    f1 = model.terms_derivative(xs, 1)
    tiny = 64 * np.finfo(float).eps
    lo2, hi2 = clo.copy(), chi.copy()
    for i in range(model.k):
        if chi[i] - clo[i] > _TABULATE_MAX:
            continue
        v = np.arange(clo[i], chi[i] + 1)
        d = v - xs[i]
        fv = _term(model, i, v)
        f0 = float(_term(model, i, np.array([xs[i]]))[0])
        lin = f1[i] * d
        D = (fv - f0) - lin
        slack = tiny * (np.abs(fv) + abs(f0) + np.abs(lin))
        keep = np.flatnonzero(D - slack - rho * np.abs(d) <= dgi[i])
        if keep.size:
            lo2[i], hi2[i] = v[keep[0]], v[keep[-1]]
    return lo2, hi2


def _rounding_candidates(model: StratifiedDesign, xs: np.ndarray):
    """The box of floor/ceil roundings with one implied coordinate (widest box range)."""
    lo, hi = model.lower.astype(np.int64), model.upper.astype(np.int64)
    j = int(np.argmax(hi - lo))
    free = np.array([i for i in range(model.k) if i != j], dtype=np.int64)
    flo = np.clip(np.floor(xs[free]).astype(np.int64), lo[free], hi[free])
    fhi = np.clip(np.ceil(xs[free]).astype(np.int64), lo[free], hi[free])
    return free, flo, fhi, j


def _scan(model: StratifiedDesign, free, flo, fhi, j, deadline=None):
    lo, hi = model.lower.astype(np.int64), model.upper.astype(np.int64)
    jlo = max(int(lo[j]), model.total - int(fhi.sum()))
    jhi = min(int(hi[j]), model.total - int(flo.sum()))
    if jhi < jlo:
        return None
    tables = [_term(model, int(i), np.arange(a, b + 1)) for i, a, b in zip(free, flo, fhi)]
    tj = _term(model, j, np.arange(jlo, jhi + 1))
    return scan_box(model.k, free, flo, fhi, tables, implied=(j, model.total, jlo, jhi, tj), deadline=deadline)


def solve_stratified(model: StratifiedDesign, max_candidates: int = DEFAULT_MAX_CANDIDATES,
                     time_limit: float | None = None, lambda_rule: str = "corrected") -> Solution:
    """Algorithm 1 (corrected). Options: max_candidates, time_limit (s), lambda_rule ("corrected"|"paper")."""
    t0 = time.perf_counter()
    limit = _check_limit(max_candidates)
    time_limit = _check_time(time_limit)
    if lambda_rule not in ("corrected", "paper"):
        raise V.InvalidOption(f"lambda_rule must be 'corrected' or 'paper', got {lambda_rule!r}")
    if not model.is_plain:
        return Solution(Status.UNSUPPORTED, backend="algorithm1",
                        message="Algorithm 1 covers the sum-and-bounds problem only (its ball is centred at the "
                                "relaxation of that problem); use enumerate, pyomo or cvxpy for custom constraints")
    deadline = None if time_limit is None else t0 + time_limit
    relax = model.relax(backend="exact")
    if relax.x is None:
        return Solution(Status.ERROR, backend="algorithm1", message=f"relaxation failed: {relax.message}")
    xs = relax.x
    g_star = float(np.sum(model.terms(xs)))
    details = {"x_star": xs, "relaxation_objective": relax.objective}

    # (a) n_init among the roundings
    free, flo, fhi, j = _rounding_candidates(model, xs)
    n_round = box_count(flo, fhi) if free.size else 1
    if n_round > limit:
        details.update(candidates=n_round, max_candidates=limit)
        return Solution(Status.UNSUPPORTED, backend="algorithm1", details=details,
                        wall_time=time.perf_counter() - t0,
                        message=f"Algorithm 1 refused: {n_round} rounding candidates for n_init > max_candidates="
                                f"{limit} (pass max_candidates=... to raise the limit)")
    res = _scan(model, free, flo, fhi, j) if free.size else None
    fallback = res is None or res.n is None
    if fallback:
        n_init = largest_remainder(xs, model.total, model.lower, model.upper)
    else:
        n_init = res.n
    t_init, t_star = model.terms(n_init), model.terms(xs)
    g_init = float(np.sum(t_init))
    # g(n_init) − g(x*) stratum by stratum (no cancellation of the two large sums), plus a bound on the
    # rounding of the terms; the inexactness of x* enters through the KKT slack (ρ, c) below
    rounding = 64 * np.finfo(float).eps * float(np.sum(np.abs(t_init) + np.abs(t_star)))
    rho, c_sum = kkt_slack(model, xs, relax.details.get("multiplier"))
    dg = max(0.0, math.fsum(t_init - t_star)) + rounding + c_sum
    gap = (g_init - g_star) / abs(g_star) if g_star else 0.0
    details.update(n_init=n_init, n_init_gap=gap, n_init_fallback=fallback, rounding_candidates=n_round,
                   kkt_slack=rho)

    # (b) radius: one per stratum (corrected), or the paper's single λ at x*
    lam_paper = _hess_min(model, xs, 0.0)
    r_paper = _radius(dg, lam_paper, rho)
    if lambda_rule == "paper":
        radii, curv, it = np.full(model.k, r_paper), np.full(model.k, lam_paper), 0
    else:
        radii, curv, dgi, it = corrected_radii(model, xs, dg, rho)
    r, lam = float(np.max(radii)), float(np.min(curv))
    details.update(lam=lam, r=r, radii=radii, curvatures=curv, radius_iterations=it, lam_paper=lam_paper,
                   r_paper=r_paper, lambda_rule=lambda_rule)

    # (c) the cube Π [x_i* − r_i, x_i* + r_i] within the feasible bounds
    lo, hi = feasible_bounds(model)
    reach = np.where(np.isfinite(radii), radii, np.inf)
    with np.errstate(invalid="ignore"):
        clo = np.maximum(np.ceil(xs - reach - 1e-9 * np.maximum(1, xs)), lo).astype(np.int64)
        chi = np.minimum(np.floor(xs + reach + 1e-9 * np.maximum(1, xs)), hi).astype(np.int64)
    if lambda_rule != "paper":
        clo, chi = tighten_box(model, xs, dgi, rho, clo, chi)
    # the implied coordinate: the widest cube range
    jj = int(np.argmax(chi - clo))
    free2 = np.array([i for i in range(model.k) if i != jj], dtype=np.int64)
    count = box_count(clo[free2], chi[free2]) if free2.size else 1
    details.update(candidates=count + n_round, cube_candidates=count, cube_lower=clo, cube_upper=chi)
    if count > limit:
        details["max_candidates"] = limit
        return Solution(Status.UNSUPPORTED, backend="algorithm1", details=details,
                        wall_time=time.perf_counter() - t0,
                        message=f"Algorithm 1 refused: the search cube (radii up to {r:.4g}) holds {count} candidates > "
                                f"max_candidates={limit}; n_init (gap {gap:.3e}) is in details; pass "
                                f"max_candidates=... to raise the limit")
    n_best = n_init
    timed_out = False
    if free2.size:
        # implied coordinate: its full bound range; the cube only restricts the free ones
        res2 = _scan(model, free2, clo[free2], chi[free2], jj, deadline=deadline)
        if res2 is not None and res2.n is not None:
            timed_out = res2.timed_out
            if float(np.sum(model.terms(res2.n))) < g_init:
                n_best = res2.n
    if timed_out:
        status, msg = Status.TIME_LIMIT, "time limit during the exhaustive search; best design so far"
    elif lambda_rule == "paper":
        status, msg = Status.FEASIBLE, ("paper's λ (Hessian at x*) is not a valid bound on the search region; "
                                        "optimality not proven")
    else:
        status, msg = Status.OPTIMAL, (f"exhaustive search of {count} candidates within the per-stratum radii "
                                       f"(largest {r:.4g}; docs/algorithm1.md)")
    convex, why = model.convexity_verified()
    if status == Status.OPTIMAL and not convex:
        status, msg = Status.FEASIBLE, f"{msg}; not proven optimal: {why}"
    cert = model.certificate(n_best)
    sol = model.make_solution(n=n_best, status=status, certificate=cert, message=msg)
    sol.details.update(details)
    sol.wall_time = time.perf_counter() - t0
    return sol


register("algorithm1", StratifiedDesign, "solve", _DESCRIPTION)(solve_stratified)
