"""The truncated discrete Gaussian release ``max(0, N + Z)``, Z ~ N_Z(0, σ²), σ² = Δ²/(2ρ), of an integer count:
its bias, variance and MSE as exact sums over the support, with the ρ-derivatives of a level's MSE sum
(docs/hierarchy.md, "Discrete Gaussian counts"). The counterpart of :mod:`truncated_laplace`.

With a = ρ/Δ² the noise has P(Z = z) = e^{−a z²}/C, C = 1 + 2Σ_{k≥1} e^{−a k²}. The error of the truncated count is
Z when Z ≥ −N and −N otherwise, so with K = |Z| and u = K²

    MSE(N) = E[q_N(K)],  q_N(k) = (k² + min(k², N²))/2,      Bias(N) = (1/C) Σ_{k>N} (k − N) e^{−a k²}.

The family P_ρ(K = k) ∝ m_k e^{−ρ k²/Δ²} is exponential in ρ, so dE[g]/dρ = −Cov(g, u)/Δ² and
d²E[g]/dρ² = κ(g, u, u)/Δ⁴ (the joint third cumulant); both are evaluated from sums over the support.
Terms with k beyond 40σ + 2 weigh less than e^{−800} relative to the mode and are dropped."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as V
from .gaussian import sigma_from_rho

#: the support is summed over 1 ≤ k ≤ ceil(TAIL_SIGMAS·σ) + 2 (the rest weighs below e^(−TAIL_SIGMAS²/2))
TAIL_SIGMAS = 40.0
#: the largest support summed (σ = Δ/√(2ρ) ≤ 2.5e6: ρ ≥ 8e-14 for Δ = 1)
MAX_SUPPORT = 100_000_000


def _support(rho: float, sensitivity: float):
    sigma = float(sigma_from_rho(rho, sensitivity))
    kmax = int(math.ceil(TAIL_SIGMAS * sigma)) + 2
    if kmax > MAX_SUPPORT:
        raise ValueError(f"rho = {rho:g} is too small for sensitivity {sensitivity:g}: the discrete Gaussian's "
                         f"support would need {kmax} terms (at most {MAX_SUPPORT}); raise rho")
    k = np.arange(1, kmax + 1, dtype=float)
    w = np.exp(-(rho / sensitivity ** 2) * k * k)
    return k, w


def _check_counts(N):
    arr = V._as_float_array("N", N)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr != np.floor(arr)):
        raise ValueError(f"N (counts) must be finite integers >= 0 for discrete Gaussian noise, got {N!r}")
    return arr


def truncated_discrete_gaussian_moments(rho, N, sensitivity: float = 1.0) -> dict:
    """Bias, variance and MSE of ``max(0, N + Z)``, Z ~ N_Z(0, Δ²/(2ρ)), elementwise over the integer counts N
    (scalar ρ > 0, Δ > 0). Exact sums over the support (docs/hierarchy.md)."""
    r = V.positive("rho", rho)
    d = V.positive("sensitivity", sensitivity)
    Narr = _check_counts(N)
    k, w = _support(r, d)
    C = 1.0 + 2.0 * math.fsum(w)
    k2w = k * k * w
    # prefix sums P2[n] = Σ_{k≤n} k² w_k, suffix sums T0[n] = Σ_{k>n} w_k, T1[n] = Σ_{k>n} k w_k (small first)
    P2 = np.concatenate(([0.0], np.cumsum(k2w)))
    T0 = np.concatenate((np.cumsum(w[::-1])[::-1], [0.0]))
    T1 = np.concatenate((np.cumsum((k * w)[::-1])[::-1], [0.0]))
    S2 = P2[-1]
    idx = np.minimum(Narr, k.size).astype(np.int64)
    Nc = Narr.astype(float)
    mse = (S2 + P2[idx] + Nc * Nc * T0[idx]) / C
    bias = (T1[idx] - Nc * T0[idx]) / C
    return {"bias": bias, "bias2": bias * bias, "variance": mse - bias * bias, "mse": mse}


def truncated_discrete_gaussian_mse_sum(rho: float, z, sensitivity: float = 1.0, order: int = 0,
                                        counts=None) -> tuple:
    """Σ_j MSE(ρ, N_j) of the truncated discrete Gaussian release at scalar ρ, and for ``order`` ≥ 1 its first and
    second ρ-derivatives: (F,) or (F, F', F''). ``z`` are the integer counts N_j (not divided by Δ: the noise is
    on the integers), ``counts`` how many nodes share each value (a compressed level). Not validated: the
    solvers' inner loop.

    With q_N(k) = (k² + min(k², N²))/2 and u = k²: F = Σ m_j E[q_{N_j}], F' = −Σ m_j Cov(q, u)/Δ²,
    F'' = Σ m_j κ(q, u, u)/Δ⁴, the moments built from prefix sums of k^{2r} w_k and suffix sums of
    k^{2r} w_k over the support."""
    r = float(rho)
    d2 = float(sensitivity) ** 2
    N = np.asarray(z, dtype=float)
    m = np.ones_like(N) if counts is None else np.asarray(counts, dtype=float)
    n = float(m.sum())
    k, w = _support(r, float(sensitivity))
    C = 1.0 + 2.0 * float(np.sum(w))
    u = k * k
    idx = np.minimum(N, k.size).astype(np.int64)
    NN = N * N
    # E over K (P(K = k) = 2 w_k / C for k ≥ 1, 1/C at 0) of u^r:  Mr = 2 Σ u^r w / C
    # E[min(u, N²) u^r] = (2/C)(Σ_{k≤N} u^{r+1} w + N² Σ_{k>N} u^r w)
    reps = (0, 1, 2) if order else (0,)
    Eu = [2.0 * float(np.sum(u ** (r_ + 1) * w)) / C for r_ in range(4 if order else 1)]   # E[u^{r+1}]

    def mins(r_):      # E[min(u, N²) u^r] per distinct count
        pre = np.concatenate(([0.0], np.cumsum(u ** (r_ + 1) * w)))
        suf = np.concatenate((np.cumsum((u ** r_ * w)[::-1])[::-1], [0.0]))
        return 2.0 * (pre[idx] + NN * suf[idx]) / C

    Emin = [mins(r_) for r_ in reps]
    Eq = 0.5 * (Eu[0] + Emin[0])                       # E[q]
    F = float(m @ Eq)
    if not order:
        return (F,)
    Eqv = 0.5 * (Eu[1] + Emin[1])                      # E[q u]
    Equ2 = 0.5 * (Eu[2] + Emin[2])                     # E[q u²]
    ub, u2 = Eu[0], Eu[1]
    cov = Eqv - Eq * ub
    kappa = Equ2 - 2.0 * ub * Eqv - Eq * u2 + 2.0 * Eq * ub * ub
    F1 = -float(m @ cov) / d2
    F2 = float(m @ kappa) / (d2 * d2)
    return F, F1, F2


__all__ = ["truncated_discrete_gaussian_moments", "truncated_discrete_gaussian_mse_sum", "TAIL_SIGMAS"]
