"""The discrete Laplace mechanism (integer data, integer Δ): P(K=k) ∝ p^|k|, p = exp(−ε/Δ), variance 2p/(1−p)²
(docs/privacy.md).

Its variance is split as ``2Δ²/ε² + h(ε/Δ)`` with ``h(t) = 1/(2 sinh²(t/2)) − 2/t² ∈ [−1/6, 0)``: the Laplace
part has the models' cancellation-free treatment and ``h`` is smooth and bounded.
"""

from __future__ import annotations

import numpy as np

from ... import _validate as V
from .base import Mechanism, Unsupported, _budget, _finite_variance, _scale, opendp_l1_space

# Taylor coefficients of h(t) in powers t^0, t^2, t^4, ... (from the Laurent series of 1/sinh²).
_H_COEF = np.array([-1 / 6, 1 / 120, -1 / 3024, 1 / 86400, -1 / 2661120, 691 / 59439744000,
                    -1 / 2874009600, 3617 / 355687428096000])
_H_SERIES_MAX = 0.5


def _h(t: np.ndarray, deriv: int = 0) -> np.ndarray:
    """h(t) = 1/(2 sinh²(t/2)) − 2/t² and its first two derivatives, stable for all t > 0."""
    t = np.asarray(t, dtype=float)
    small = t < _H_SERIES_MAX
    ts = np.where(small, t, 0.0)
    tl = np.where(small, 1.0, t)
    powers = np.arange(0, 2 * _H_COEF.size, 2)
    if deriv == 0:
        ser = np.polynomial.polynomial.polyval(ts ** 2, _H_COEF)
    elif deriv == 1:
        ser = ts * np.polynomial.polynomial.polyval(ts ** 2, (_H_COEF * powers)[1:])
    else:
        ser = np.polynomial.polynomial.polyval(ts ** 2, (_H_COEF * powers * (powers - 1))[1:])
    # closed forms via e^{-t} (no overflow for large t); csch²(u) = 4e^{-2u}/(1−e^{-2u})², u = t/2
    em = np.exp(-tl)
    den = -np.expm1(-tl)
    csch2 = 4.0 * em / den ** 2
    coth = (1.0 + em) / den
    if deriv == 0:
        big = csch2 / 2.0 - 2.0 / tl ** 2
    elif deriv == 1:
        big = -coth * csch2 / 2.0 + 4.0 / tl ** 3
    else:
        big = csch2 ** 2 / 4.0 + coth ** 2 * csch2 / 2.0 - 12.0 / tl ** 4
    return np.where(small, ser, big)


class DiscreteLaplace(Mechanism, _builtin=True):
    """Discrete Laplace (integer data, integer Δ): P(K=k) ∝ p^|k|, p = exp(−ε/Δ), variance 2p/(1−p)²."""

    name = "dlap"
    laplace_part = True
    integer_data = True

    def check_sensitivity(self, sensitivity) -> float:
        d = V.positive("sensitivity", sensitivity)
        if d != round(d):
            raise ValueError(f"sensitivity must be an integer for the discrete Laplace mechanism, got {d:g}")
        return d

    def variance(self, epsilon, sensitivity=1.0):
        d = _scale(sensitivity)
        t = _budget(epsilon) / d
        # 2p/(1-p)^2 with p = e^{-t}, written with expm1 to stay exact for small t
        with np.errstate(over="ignore", divide="ignore"):
            return _finite_variance(2.0 * np.exp(-t) / np.expm1(-t) ** 2, epsilon, d)

    def remainder(self, epsilon, sensitivity=1.0):
        return _h(np.asarray(epsilon, dtype=float) / sensitivity)

    def remainder_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        t = np.asarray(epsilon, dtype=float) / sensitivity
        return _h(t, order) / sensitivity ** order

    def split_below(self, sensitivity=1.0) -> float:
        # for t = ε/Δ ≥ 1 the variance decays like e^{-t} and the split would cancel instead
        return float(sensitivity)

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        t = np.asarray(epsilon, dtype=float) / sensitivity
        em = np.exp(-t)
        den = -np.expm1(-t)
        csch2 = 4.0 * em / den ** 2          # csch²(t/2)
        coth = (1.0 + em) / den              # coth(t/2)
        if order == 1:
            out = -coth * csch2 / 2.0
        else:
            out = csch2 ** 2 / 4.0 + coth ** 2 * csch2 / 2.0
        return out / sensitivity ** order

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        # Var = 2e^{-t}/(1−e^{-t})²; its log changes by dt − 2 log1p(e^{-t1}·expm1(−dt)/(1−e^{-t0}))
        t0 = np.asarray(eps0, dtype=float) / sensitivity
        t1 = np.asarray(eps1, dtype=float) / sensitivity
        dt = np.asarray(gap, dtype=float) / sensitivity
        dlog = dt - 2.0 * np.log1p(np.exp(-t1) * np.expm1(-dt) / -np.expm1(-t0))
        var0 = 2.0 * np.exp(-t0) / np.expm1(-t0) ** 2
        return var0 * np.expm1(dlog)

    def convex_terms_proven(self, shares) -> bool:
        # at any share in (0, 1] and any integer Δ ≥ 1 (docs/stratified.md, "A budget share below 1")
        s = np.asarray(shares, dtype=float)
        return bool(np.all((s > 0.0) & (s <= 1.0)))

    def growth_coefficients(self, sensitivity=1.0):
        # p = 1/(1 + y): 2p/(1−p)² = 2(1 + y)/y² = 2/y + 2/y²; at Δ ≠ 1 p = (1 + y)^{−1/Δ}, no polynomial
        if float(sensitivity) != 1.0:
            return Unsupported("growth_coefficients", f"the {self.name} variance is a polynomial in "
                               f"1/expm1(ε) only at sensitivity 1, not {float(sensitivity):g}")
        return (0.0, 2.0, 2.0)

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        d = float(sensitivity)
        if growth is not None and growth_max <= 1 and d == int(d) and d <= 64:
            # 1 − p cancels for small y = expm1(ε): with r = (1 + y)^{1/Δ} = 1/p and S = Σ_{j<Δ} r^j,
            # r − 1 = y/S exactly, so 2p/(1 − p)² = 2r/(r − 1)² = 2rS²/y²
            r = (1 + growth) ** (1.0 / d)
            S = sum(r ** j for j in range(1, int(d))) + 1
            return 2 * r * S ** 2 / growth ** 2
        p = (1 / (1 + growth)) ** (1.0 / d) if growth is not None else pyo.exp(-eps * (eps_scale / d))
        return 2 * p / (1 - p) ** 2

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        t = eps / sensitivity
        if large:   # exact, where the sinh form would overflow (ε up to 700)
            return 2.0 * cp.multiply(cp.exp(-t), cp.power(1.0 - cp.exp(-t), -2))
        # 2p/(1−p)² with p = e^{−t} equals 1/(2 sinh²(t/2)), free of the cancellation in 1 − p (sinh is a
        # DNLP atom cvxpy does not export)
        return 0.5 * cp.power(cp.atoms.elementwise.hyperbolic.sinh(t / 2.0), -2)

    def opendp_measurement(self, dp, scale):
        return dp.m.make_geometric(*opendp_l1_space(dp, True), scale=scale)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        t = _budget(epsilon) / self.check_sensitivity(sensitivity)
        success = -np.expm1(-t)  # 1 - p
        # difference of two iid geometrics on {0,1,...} is discrete Laplace
        return rng.geometric(success, size=size) - rng.geometric(success, size=size)
