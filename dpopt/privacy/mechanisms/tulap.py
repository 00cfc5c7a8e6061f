"""The TuLap mechanism (Awan & Slavković): discrete Laplace plus an independent U(−½, ½); Δ = 1 only; variance
DLap + 1/12 (docs/privacy.md)."""

from __future__ import annotations

import math

import numpy as np

from ... import _validate as V
from .base import Unsupported
from .dlap import DiscreteLaplace

_UNIFORM_VARIANCE = 1.0 / 12.0     # Var U(−½, ½)


class TuLap(DiscreteLaplace, _builtin=True):
    """Truncated-uniform-Laplace (Awan & Slavković): DLap + U(−½, ½); Δ = 1 only; variance DLap + 1/12."""

    name = "tulap"

    def check_sensitivity(self, sensitivity) -> float:
        d = V.positive("sensitivity", sensitivity)
        if d != 1.0:
            raise ValueError(f"sensitivity must be 1 for the TuLap mechanism (not analysed for other values), got {d:g}")
        return d

    def variance(self, epsilon, sensitivity=1.0):
        return super().variance(epsilon, sensitivity) + _UNIFORM_VARIANCE

    def remainder(self, epsilon, sensitivity=1.0):
        return super().remainder(epsilon, sensitivity) + _UNIFORM_VARIANCE

    def growth_coefficients(self, sensitivity=1.0):
        got = super().growth_coefficients(sensitivity)
        if isinstance(got, Unsupported):
            return got
        return (got[0] + _UNIFORM_VARIANCE,) + tuple(got[1:])

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        return super().pyomo_variance(pyo, eps, sensitivity, eps_scale, growth, growth_max) + _UNIFORM_VARIANCE

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return super().cvxpy_variance(cp, eps, sensitivity, large) + _UNIFORM_VARIANCE

    # opendp_measurement: DLap's geometric measurement; the uniform is post-processing of its release
    def release_values(self, dp, scale: float, values) -> list[float]:
        noisy = super().release_values(dp, scale, values)
        # the uniform drawn by OpenDP too (no numpy sampler on the release path)
        uniform = dp.t.make_impute_uniform_float(dp.vector_domain(dp.atom_domain(T=float, nan=True)),
                                                 dp.symmetric_distance(), bounds=(-0.5, 0.5))
        u = uniform([math.nan] * len(noisy))
        return [float(k) + float(x) for k, x in zip(noisy, u)]

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        k = super().sample(epsilon, sensitivity, size=size, rng=rng)
        return k + rng.uniform(-0.5, 0.5, size=np.shape(k))
