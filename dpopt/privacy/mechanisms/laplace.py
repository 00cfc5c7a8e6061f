"""The Laplace mechanism: noise Lap(0, Δ/ε), variance 2Δ²/ε² (docs/privacy.md)."""

from __future__ import annotations

import numpy as np

from .base import Mechanism, _budget, _finite_variance, _scale, opendp_l1_space


def laplace_variance(epsilon, sensitivity=1.0, order: int = 0) -> tuple:
    """(2Δ²/ε², and for ``order`` ≥ 1 its ε-derivatives −4Δ²/ε³, 12Δ²/ε⁴): the Laplace noise variance, the one
    home of the formula. Plain arithmetic, so ε may be a float, a numpy array or a Pyomo expression; not
    validated (callers check their inputs)."""
    v = 2.0 * (sensitivity / epsilon) ** 2
    if order <= 0:
        return (v,)
    d1 = -2.0 * v / epsilon
    return (v, d1) if order == 1 else (v, d1, -3.0 * d1 / epsilon)


class Laplace(Mechanism, _builtin=True):
    """Laplace mechanism: noise Lap(0, Δ/ε), variance 2Δ²/ε²."""

    name = "laplace"
    laplace_part = True
    has_remainder = False

    def variance(self, epsilon, sensitivity=1.0):
        eps, d = _budget(epsilon), _scale(sensitivity)
        with np.errstate(over="ignore"):
            return _finite_variance(laplace_variance(eps, d)[0], eps, d)

    def remainder(self, epsilon, sensitivity=1.0):
        return np.zeros_like(np.asarray(epsilon, dtype=float))

    def remainder_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        return np.zeros_like(np.asarray(epsilon, dtype=float))

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        # 2Δ²(1/e1² − 1/e0²) = 2Δ²·gap·(e0 + e1)/(e0² e1²)
        return 2.0 * sensitivity ** 2 * gap * (eps0 + eps1) / (eps0 ** 2 * eps1 ** 2)

    def convex_terms_proven(self, shares) -> bool:
        return True      # a share only rescales Δ/ε (docs/stratified.md)

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        # 2Δ²/(s·e)² = 2(Δ/s)²/e²: with e = L/s of order 1 the solver sees L vary visibly
        return laplace_variance(eps, sensitivity / eps_scale)[0]

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return 2.0 * sensitivity ** 2 * cp.power(eps, -2)

    def opendp_measurement(self, dp, scale):
        # OpenDP samples on a fine grid with discrete Laplace noise and accounts for it (no float Laplace)
        return dp.m.make_laplace(*opendp_l1_space(dp, False), scale=scale)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        return rng.laplace(0.0, _scale(sensitivity) / _budget(epsilon), size=size)
