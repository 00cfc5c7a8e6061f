"""The truncated Laplace release ``max(0, N + Lap(Δ/ε))`` of a count: its bias, variance and MSE in closed
form (Ko, Ziani & Fioretto, Props 1–2; docs/hierarchy.md). With x = εN/Δ:
Bias = (Δ/2ε)e^{−x}, MSE = (Δ/ε)²(2 − (1+x)e^{−x})."""

from __future__ import annotations

import numpy as np

from .. import _validate as V


def truncated_laplace_moments(epsilon, N, sensitivity: float = 1.0) -> dict:
    """Bias, variance and MSE of ``max(0, N + Lap(Δ/ε))`` (paper Props 1–2, eq. (3)), elementwise.

    ε finite and > 0, counts N finite and ≥ 0, sensitivity Δ > 0 (raises ValueError/TypeError naming them)."""
    eps = V._as_float_array("epsilon", epsilon)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    N = V._as_float_array("N", N)
    if not np.all(np.isfinite(N)) or np.any(N < 0):
        raise ValueError(f"N (counts) must be finite and >= 0, got {N!r}")
    d = V.positive("sensitivity", sensitivity)
    try:
        np.broadcast_shapes(eps.shape, N.shape)
    except ValueError:
        raise ValueError(f"epsilon (shape {eps.shape}) and N (shape {N.shape}) must broadcast together") from None
    with np.errstate(over="ignore", under="ignore"):
        x = eps * N / d
        e = np.exp(-x)
        xe = np.where(x > 800.0, 0.0, (1.0 + np.minimum(x, 800.0)) * e)     # (1 + x)e^{-x} → 0 (no inf·0)
        s2 = (d / eps) ** 2
    if not np.all(np.isfinite(s2)):
        raise ValueError("epsilon is too small for this sensitivity: (sensitivity/epsilon)² overflows")
    mse = s2 * (2.0 - xe)
    bias = 0.5 * (d / eps) * e
    var = s2 * (2.0 - xe - 0.25 * e * e)
    return {"bias": bias, "bias2": bias ** 2, "variance": var, "mse": mse}


def truncated_laplace_mse_sum(epsilon: float, z, sensitivity: float = 1.0, order: int = 0, counts=None) -> tuple:
    """Σ_j MSE(ε, N_j) of the truncated release at a scalar ε, with z_j = N_j/Δ, and for ``order`` ≥ 1 its first
    and second ε-derivatives: (F,) or (F, F', F''). ``counts`` (optional) says how many nodes share each z (a
    compressed level). With x = εz: F = (Δ/ε)²Σ(2 − (1+x)e^{−x}). Not validated: the solvers' inner loop."""
    e = float(epsilon)
    d2 = float(sensitivity) ** 2
    z = np.asarray(z, dtype=float)
    dot = (lambda a: float(np.sum(a))) if counts is None else (lambda a: float(counts @ a))
    n = float(z.size if counts is None else np.sum(counts))
    x = e * z
    ex = np.exp(-x)
    xe = x * ex
    A, B = dot(ex), dot(xe)
    F = d2 / e ** 2 * (2 * n - A - B)
    if not order:
        return (F,)
    x2e = x * xe
    C = dot(x2e)
    D = dot(x * x2e)
    F1 = -d2 / e ** 3 * (4 * n - 2 * A - 2 * B - C)
    F2 = d2 / e ** 4 * (12 * n - 6 * A - 6 * B - 3 * C - D)
    return F, F1, F2
