"""Gaussian noise: the analytic (ε, δ) calibration, zCDP and its conversion, the discrete Gaussian's variance
(docs/gaussian.md). The one home of these formulas; mechanisms, designs, the hierarchy and the ledger call them.

Notation: Δ is the L2 sensitivity, σ the noise's standard deviation (the discrete Gaussian's scale parameter),
μ = Δ/σ the *noise multiplier's inverse* (Dong, Roth & Su's μ-GDP; a Gaussian mechanism is μ-GDP exactly).

* **Analytic Gaussian** (Balle & Wang 2018, Theorem 8): the Gaussian mechanism at μ is (ε, δ)-DP exactly for
  δ(ε, μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ), for every ε ≥ 0 (the curve is the mechanism's whole privacy
  profile). δ decreases in ε and increases in μ; :func:`gaussian_sigma` inverts it for the smallest σ.
* **zCDP** (Bun & Steinke 2016): the Gaussian mechanism is ρ-zCDP with ρ = μ²/2, so σ² = Δ²/(2ρ); ρ adds
  up under composition. For a Gaussian mechanism (or a composition of Gaussians, μ² = Σ μ_i²) the exact
  (ε, δ) is the analytic curve at μ = √(2ρ) (:func:`gaussian_epsilon`); for a general ρ-zCDP guarantee the
  conversion is Canonne, Kamath & Steinke's (2020, Prop. 12), :func:`zcdp_delta` / :func:`zcdp_epsilon`.
* **Discrete Gaussian** N_Z(0, σ²) (Canonne, Kamath & Steinke 2020): P(x) ∝ exp(−x²/(2σ²)) on the integers.
  It is ρ-zCDP with ρ = Δ²/(2σ²) like the continuous one; its variance is below σ² and, by Poisson summation,
  σ²(1 − 8π²σ² e^(−2π²σ²) + …), equal to σ² in double precision once σ ≥ 2 (:func:`discrete_gaussian_variance`).

All functions are vectorised over their first arguments, work in log-space (``log_ndtr``), and are bounded
loops (bisection steps are fixed in number)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

from .. import _validate as V

#: bisection steps of the inversions: 200 halvings of a bracket in log μ (or log ε) reach double precision
_STEPS = 200
#: from this σ on, the discrete Gaussian's variance is σ² to double precision (the Poisson-summation
#: correction 8π²σ² e^(−2π²σ²) is below 1e-30 relative)
DISCRETE_EXACT_FROM = 2.0
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _positive_array(name, x):
    arr = V._as_float_array(name, x)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return arr


def _delta_array(name, d, *, allow_zero=False):
    arr = V._as_float_array(name, d)
    lo_ok = (arr >= 0) if allow_zero else (arr > 0)
    if not np.all(np.isfinite(arr)) or not np.all(lo_ok) or np.any(arr >= 1):
        raise ValueError(f"{name} must be in {'[0' if allow_zero else '(0'}, 1), got {d!r}")
    return arr


def _out(x):
    return x[()] if np.ndim(x) == 0 else x


# ---------------------------------------------------------------------------------- the analytic curve
def log_gaussian_delta(epsilon, mu):
    """log δ(ε, μ) of the Gaussian mechanism with Δ/σ = μ (Balle & Wang 2018), without cancellation:
    δ = Φ(a)·(1 − exp(ε + log Φ(b) − log Φ(a))), a = μ/2 − ε/μ, b = −μ/2 − ε/μ. ε ≥ 0, μ > 0."""
    eps = np.asarray(epsilon, dtype=float)
    mu = np.asarray(mu, dtype=float)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    la = log_ndtr(a)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        r = eps + log_ndtr(b) - la          # < 0 for μ > 0
        out = la + np.log(-np.expm1(np.minimum(r, 0.0)))
    return _out(out)


def gaussian_delta(epsilon, mu):
    """δ(ε, μ): the smallest δ for which the Gaussian mechanism at Δ/σ = μ is (ε, δ)-DP (exact)."""
    eps = V._as_float_array("epsilon", epsilon)
    if not np.all(np.isfinite(eps)) or np.any(eps < 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    m = _positive_array("mu (sensitivity/sigma)", mu)
    return _out(np.exp(log_gaussian_delta(eps, m)))


def _bisect_log(f_increasing, target, lo, hi):
    """Vectorised bisection in log space for x with f(x) = target, f increasing, on brackets [lo, hi]
    (arrays). Returns hi (the side with f ≥ target) after a fixed number of halvings."""
    llo, lhi = np.log(lo), np.log(hi)
    for _ in range(_STEPS):
        mid = 0.5 * (llo + lhi)
        up = f_increasing(np.exp(mid)) >= target
        lhi = np.where(up, mid, lhi)
        llo = np.where(up, llo, mid)
        if np.all(lhi - llo <= 4e-16 * np.maximum(1.0, np.abs(lhi))):
            break
    return np.exp(lhi), np.exp(llo)


def gaussian_mu(epsilon, delta):
    """The largest μ = Δ/σ at which the Gaussian mechanism is (ε, δ)-DP: the exact (analytic) calibration,
    vectorised over ε and δ. Rounded towards privacy: δ(ε, μ) ≤ δ holds for the returned μ."""
    eps = _positive_array("epsilon", epsilon)
    d = _delta_array("delta", delta)
    eps, d = np.broadcast_arrays(eps, d)
    ld = np.log(d)
    # bracket: δ(ε, μ) ≥ Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) grows to 1 with μ, so 2√(2ε) + 2·√(2 log(1/δ)) + 2 is
    # beyond; below, two private μ (no evaluation needed), the larger of which starts Newton:
    # * the μ whose zCDP conversion ρ + 2√(ρ log 1/δ) gives ε (ρ = μ²/2; the conversion is a valid bound and the
    #   analytic curve the exact profile), μ = √2·ε/(√(L + ε) + √L), L = log 1/δ;
    # * the μ with Φ(μ/2 − ε/μ) = δ, μ = z + √(z² + 2ε), z = Φ⁻¹(δ) (δ(ε, μ) < Φ(a) there).
    hi = 2.0 * np.sqrt(2.0 * eps) + 2.0 * np.sqrt(2.0 * np.log(1.0 / d)) + 2.0
    L = -ld
    z = ndtri(np.exp(ld))
    with np.errstate(invalid="ignore"):
        mu_phi = np.where(np.isfinite(z), z + np.sqrt(z * z + 2.0 * eps), 0.0)
    mu_z = np.sqrt(2.0) * eps / (np.sqrt(L + eps) + np.sqrt(L))
    mu0 = np.minimum(np.maximum(mu_z, mu_phi), hi / 2.0)
    start = np.log(mu0)
    lo = mu0 * (1.0 - 1e-9)         # private with room for the round-off of the two formulas
    return _out(_newton_log_mu(eps, ld, np.log(lo), np.log(hi), start))


#: safeguarded Newton steps of the calibration (each halves the bracket at least when Newton would leave it)
_NEWTON_STEPS = 100


def _newton_log_mu(eps, ld, llo, lhi, start=None):
    """The largest μ with log δ(ε, μ) ≤ ld on the brackets [e^llo, e^lhi] (log δ(llo) < ld ≤ log δ(lhi)):
    Newton's method in l = log μ on h(l) = log δ(ε, e^l) − ld, whose slope is d log δ/d log μ = μ φ(a)/δ
    (docs/gaussian.md), safeguarded by the bracket (a step leaving it bisects instead), then moved to the
    private side by a few ulps. Each step works on the entries not yet converged only. A fixed, bounded number
    of steps; vectorised."""
    eps, ld, llo, lhi = (np.array(v, dtype=float) for v in np.broadcast_arrays(eps, ld, llo, lhi))
    shape = eps.shape
    eps, ld, llo, lhi = eps.ravel(), ld.ravel(), llo.ravel(), lhi.ravel()
    l = 0.5 * (llo + lhi)
    if start is not None:
        st = np.broadcast_to(np.asarray(start, dtype=float), shape).ravel()
        l = np.where((st > llo) & (st < lhi), st, l)
    act = np.arange(l.size)
    for _ in range(_NEWTON_STEPS):
        e, t, la, lb, x = eps[act], ld[act], llo[act], lhi[act], l[act]
        m = np.exp(x)
        lg = log_gaussian_delta(e, m)
        h = lg - t
        up = h >= 0.0
        lb = np.where(up, x, lb)
        la = np.where(up, la, x)
        a = m / 2.0 - e / m
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            slope = np.exp(x - 0.5 * a * a - _LOG_SQRT_2PI - lg)
            nxt = x - h / slope
        # converged: the Newton step is below round-off, or log δ is within its round-off of the target
        # (more where ε is large: log δ = log Φ(a) + log(1 − e^{ε + log Φ(b) − log Φ(a)}) cancels ε)
        done = ((np.abs(nxt - x) <= 1e-14 * np.maximum(1.0, np.abs(x)))
                | (np.abs(h) <= 1e-14 * (1.0 + np.abs(t) + e))
                | (lb - la <= 4e-16 * np.maximum(1.0, np.abs(lb))))
        bad = ~np.isfinite(nxt) | (nxt <= la) | (nxt >= lb)
        l[act] = np.where(bad, np.where(done, x, 0.5 * (la + lb)), nxt)
        llo[act], lhi[act] = la, lb
        act = act[~done]
        if act.size == 0:
            break
    mu = np.exp(l)
    step = 4e-15
    for _ in range(40):         # the private side: δ(ε, μ) ≤ target, down by doubling steps from a few ulps
        over = log_gaussian_delta(eps, mu) > ld
        if not np.any(over):
            return mu.reshape(shape)
        mu = np.where(over, mu * (1.0 - step), mu)
        step = min(2.0 * step, 0.5)
    over = log_gaussian_delta(eps, mu) > ld
    mu = np.where(over, np.exp(llo), mu)       # never seen; the bracket's private end is always safe
    return mu.reshape(shape)


def gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """The smallest σ for which Gaussian noise N(0, σ²) on an L2-sensitivity-Δ query is (ε, δ)-DP (analytic
    Gaussian calibration), vectorised over ε and δ."""
    s = V.positive("sensitivity", sensitivity)
    return _out(s / np.asarray(gaussian_mu(epsilon, delta)))


def gaussian_epsilon(mu, delta):
    """The smallest ε ≥ 0 for which the Gaussian mechanism at μ (ρ-zCDP Gaussian: μ = √(2ρ)) is (ε, δ)-DP."""
    m = _positive_array("mu (sensitivity/sigma)", mu)
    d = _delta_array("delta", delta)
    m, d = np.broadcast_arrays(m, d)
    ld = np.log(d)
    zero = log_gaussian_delta(0.0, m) <= ld                 # already (0, δ)-DP
    g = lambda e: -log_gaussian_delta(e, m)               # noqa: E731 - increasing in ε
    lo = np.full(m.shape, 1e-300)
    hi = m * m / 2.0 + m * np.sqrt(2.0 * np.log(1.0 / d)) + 1.0     # zCDP's ρ + 2√(ρ log 1/δ) bound, padded
    e_hi, _ = _bisect_log(g, -ld, lo, hi)
    return _out(np.where(zero, 0.0, e_hi))


def gaussian_mu_partials(epsilon, mu):
    """(∂δ/∂ε, ∂δ/∂μ) of the analytic curve: −e^ε Φ(b) and φ(a) (the φ(b) terms cancel since e^ε φ(b) = φ(a));
    with them dμ/dε = e^ε Φ(b)/φ(a) along δ = const, the derivative the designs differentiate σ²(ε) with."""
    eps = np.asarray(epsilon, dtype=float)
    mu = np.asarray(mu, dtype=float)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    log_phi_a = -0.5 * a * a - _LOG_SQRT_2PI
    with np.errstate(over="ignore"):
        d_eps = -np.exp(eps + log_ndtr(b))
    return _out(d_eps), _out(np.exp(log_phi_a))


# ---------------------------------------------------------------------------------- zCDP
def sigma_from_rho(rho, sensitivity=1.0):
    """σ of Gaussian noise that is ρ-zCDP for an L2-sensitivity-Δ query: Δ/√(2ρ)."""
    r = _positive_array("rho", rho)
    return _out(V.positive("sensitivity", sensitivity) / np.sqrt(2.0 * r))


def rho_from_sigma(sigma, sensitivity=1.0):
    """ρ = Δ²/(2σ²) of Gaussian (or discrete Gaussian) noise of scale σ."""
    s = _positive_array("sigma", sigma)
    return _out(V.positive("sensitivity", sensitivity) ** 2 / (2.0 * s * s))


def zcdp_log_delta(rho, epsilon):
    """log δ of Canonne, Kamath & Steinke's conversion (2020, Prop. 12) of a ρ-zCDP guarantee to (ε, δ)-DP:
    δ = inf_{α>1} exp((α−1)(αρ − ε)) · (1 − 1/α)^α / (α − 1), minimised over α on a log grid refined by
    golden-section steps (bounded); valid for any ρ-zCDP mechanism (tight for none in particular)."""
    r = float(_positive_array("rho", rho))
    e = V.real("epsilon", epsilon)
    if not math.isfinite(e) or e < 0:
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")

    def h(la):      # the log of the objective at α = 1 + exp(la)
        am1 = math.exp(la)
        a = 1.0 + am1
        return am1 * (a * r - e) + a * math.log1p(-1.0 / a) - la

    grid = np.linspace(-30.0, 30.0, 241)
    vals = [h(x) for x in grid]
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(100):          # golden section on the bracket around the grid's minimum
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if h(x1) <= h(x2):
            hi = x2
        else:
            lo = x1
    return min(0.0, min(vals[i], h(0.5 * (lo + hi))))


def zcdp_delta(rho, epsilon):
    """δ of the (ε, δ)-DP guarantee implied by ρ-zCDP (Canonne, Kamath & Steinke 2020, Prop. 12)."""
    return math.exp(zcdp_log_delta(rho, epsilon))


def zcdp_epsilon(rho, delta):
    """The smallest ε with :func:`zcdp_delta`(ρ, ε) ≤ δ (bisection; the conversion the ledger reports when a
    ρ-zCDP total must be stated as (ε, δ)-DP)."""
    r = float(_positive_array("rho", rho))
    ld = math.log(float(_delta_array("delta", delta)))
    if zcdp_log_delta(r, 0.0) <= ld:
        return 0.0
    lo, hi = 0.0, r + 2.0 * math.sqrt(r * -ld) + 1.0        # ρ + 2√(ρ log 1/δ) is always enough
    for _ in range(_STEPS):
        mid = 0.5 * (lo + hi)
        if zcdp_log_delta(r, mid) <= ld:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 4e-16 * max(1.0, hi):
            break
    return hi


# ---------------------------------------------------------------------------------- discrete Gaussian
def discrete_gaussian_variance(sigma):
    """Var of the discrete Gaussian N_Z(0, σ²) (P(x) ∝ exp(−x²/(2σ²)), x ∈ ℤ), vectorised over σ > 0.

    Below :data:`DISCRETE_EXACT_FROM` it is the direct sum over |x| ≤ 40σ + 2 (the tail beyond is below
    e^(−800)); from there on σ² (the Poisson-summation correction is below 1e-30 relative)."""
    s = _positive_array("sigma", sigma)
    out = s * s
    small = s < DISCRETE_EXACT_FROM
    if np.any(small):
        ss = s[small] if s.ndim else s
        kmax = int(math.ceil(40.0 * float(np.max(ss)))) + 2
        k = np.arange(1, kmax + 1, dtype=float)
        w = np.exp(-(k[None, :] ** 2) / (2.0 * np.atleast_1d(ss)[:, None] ** 2))
        var = 2.0 * (w * k[None, :] ** 2).sum(axis=1) / (1.0 + 2.0 * w.sum(axis=1))
        if s.ndim:
            out = out.copy()
            out[small] = var
        else:
            out = var[0]
    return _out(np.asarray(out, dtype=float))


__all__ = ["log_gaussian_delta", "gaussian_delta", "gaussian_mu", "gaussian_sigma", "gaussian_epsilon",
           "gaussian_mu_partials", "sigma_from_rho", "rho_from_sigma", "zcdp_log_delta", "zcdp_delta",
           "zcdp_epsilon", "discrete_gaussian_variance", "DISCRETE_EXACT_FROM"]
