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
