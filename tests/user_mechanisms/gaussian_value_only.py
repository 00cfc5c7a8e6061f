"""A user's mechanism written outside dpopt: the Gaussian mechanism, value only.

Noise N(0, σ²) with the classical calibration σ² = 2·ln(1.25/δ)·Δ²/ε², an (ε, δ) guarantee. It implements
nothing but ``variance``: no Pyomo or cvxpy form, no OpenDP measurement.
"""

import math

import numpy as np

from dpopt.privacy import ApproxDP, Mechanism

DELTA = 1e-5


class GaussianValueOnly(Mechanism):
    name = "gaussian"
    guarantee = ApproxDP(DELTA)

    def variance(self, epsilon, sensitivity=1.0):
        eps = np.asarray(epsilon, dtype=float)
        return 2.0 * math.log(1.25 / DELTA) * sensitivity ** 2 / eps ** 2


class GaussianWithPyomo(GaussianValueOnly):
    """The same noise plus its Pyomo form (the variance at the nominal budget eps_scale·eps)."""

    name = "gaussian+pyomo"

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=math.inf):
        return 2.0 * math.log(1.25 / DELTA) * (sensitivity / eps_scale) ** 2 / eps ** 2
