"""Gaussian noise (docs/gaussian.md): the continuous Gaussian under (ε, δ)-DP (analytic calibration) or ρ-zCDP,
and the discrete Gaussian under ρ-zCDP. Every formula comes from :mod:`dpopt.privacy.gaussian`, the one home of
the calibration; this module only says which one a mechanism uses.

* ``Gaussian(delta=δ)``: budget ε, guarantee (ε, δ)-DP; σ = Δ/μ(ε, δ), μ the analytic Gaussian calibration.
* ``Gaussian()`` (``"gaussian-zcdp"``): budget read as ρ, guarantee ρ-zCDP; σ² = Δ²/(2ρ).
* ``DiscreteGaussian()``: integer data, budget ρ, ρ-zCDP; variance the discrete Gaussian's at σ = Δ/√(2ρ)
  (below σ² for small σ). Its (ε, δ) privacy profile is not the continuous analytic curve, so it is not
  offered under (ε, δ) (convert its ρ for reporting instead: :func:`dpopt.privacy.gaussian.zcdp_epsilon`).

In a stratified design the mechanism is bound to the design's central target and the variable's budget share
(:meth:`Gaussian.for_design`): under (ε, δ) the nominal δ of a sampled person follows the nominal ε
(amplification by sampling: δ_i = δ·N_i/n_i = δ·expm1(ε_i)/expm1(ε)), so the noise variance stays a function of
the nominal ε alone, the interface every route of the design reads; under zCDP sampling does not amplify and the
noise is a constant (docs/gaussian.md, "Gaussian noise in designs").
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

from ... import _validate as V
from .. import gaussian as G
from ..amplification import log_expm1
from .base import ZCDP, ApproxDP, Mechanism, _budget, _finite_variance, _scale

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _log_phi(a):
    return -0.5 * a * a - _LOG_SQRT_2PI


def _mu_derivatives(eps, mu, log_d1=None, log_d2=None):
    """(μ', μ'') along the calibration δ(ε, μ) = δ_nom(ε) (see :func:`_variance_derivative`)."""
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    lpa = _log_phi(a)
    with np.errstate(over="ignore"):
        r = np.exp(eps + log_ndtr(b) - lpa)                    # e^ε Φ(b)/φ(a)
        p1 = 0.0 if log_d1 is None else np.exp(log_d1 - lpa)
        p2 = 0.0 if log_d2 is None else np.exp(log_d2 - lpa)
    m1 = r + p1
    m2 = -(-r + 1.0 / mu - p2 + 2.0 * (a / mu) * m1 - a * (0.5 + eps / mu ** 2) * m1 * m1)
    return m1, m2


#: relative budget gap below which a variance difference is the Taylor series of μ (its error ~ (gap/ε)³, the
#: subtraction's ~ 1e-14·ε/gap: they cross near 1e-4)
_TAYLOR_GAP = 1e-4


def _variance_derivative(eps, mu, sens, order, log_d1=None, log_d2=None):
    """d^order/dε^order of Δ²/μ(ε)², μ(ε) defined by the calibration δ(ε, μ) = δ_nom(ε) (docs/gaussian.md).

    With G = δ(ε, μ) − δ_nom(ε): G_μ = φ(a), G_ε = −e^ε Φ(b) − δ_nom', G_μμ = −a φ(a)(1/2 + ε/μ²), G_εμ = a φ(a)/μ,
    G_εε = −e^ε Φ(b) + φ(a)/μ − δ_nom'' (using e^ε φ(b) = φ(a)); μ' = −G_ε/G_μ and
    μ'' = −(G_εε + 2 G_εμ μ' + G_μμ μ'²)/G_μ. Everything is divided by φ(a) in log space. ``log_d1``, ``log_d2``:
    log δ_nom' and log δ_nom'' (None at a fixed δ)."""
    m1, m2 = _mu_derivatives(eps, mu, log_d1, log_d2)
    d = sens * sens
    if order == 1:
        return -2.0 * d * m1 / mu ** 3
    return d * (6.0 * m1 * m1 / mu ** 4 - 2.0 * m2 / mu ** 3)


class Gaussian(Mechanism, _builtin=True):
    """Gaussian noise N(0, σ²). ``delta`` given: (ε, δ)-DP at budget ε, σ from the analytic calibration (Balle &
    Wang 2018). ``delta=None``: ρ-zCDP, the budget read as ρ, σ² = Δ²/(2ρ)."""

    name = "gaussian"

    def __init__(self, delta=None):
        if delta is None:
            self.guarantee = ZCDP()
            self.name = "gaussian-zcdp"
        else:
            self.guarantee = ApproxDP(delta)

    @property
    def delta(self):
        """The δ of an (ε, δ) guarantee, None under zCDP."""
        return getattr(self.guarantee, "delta", None)

    @property
    def zcdp(self) -> bool:
        return isinstance(self.guarantee, ZCDP)

    def __eq__(self, other):
        return type(other) is type(self) and other.guarantee == self.guarantee

    def __hash__(self):
        return hash((type(self).__name__, self.guarantee))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()" if self.zcdp else f"{type(self).__name__}(delta={self.delta!r})"

    # ------------------------------------------------------------------ the one definition
    def sigma(self, epsilon, sensitivity=1.0):
        """The noise scale σ at budget ``epsilon`` (ρ under zCDP)."""
        eps, d = _budget(epsilon), _scale(sensitivity)
        if self.zcdp:
            return G.sigma_from_rho(eps, d)
        return G.gaussian_sigma(eps, self.delta, d)

    def variance(self, epsilon, sensitivity=1.0):
        eps, d = _budget(epsilon), _scale(sensitivity)
        with np.errstate(over="ignore", divide="ignore"):
            if self.zcdp:
                out = d * d / (2.0 * eps)
            else:
                out = (d / np.asarray(G.gaussian_mu(eps, self.delta))) ** 2
        return _finite_variance(out, eps, d)

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        eps = np.asarray(epsilon, dtype=float)
        d = float(sensitivity)
        if self.zcdp:
            return -d * d / (2.0 * eps ** 2) if order == 1 else d * d / eps ** 3
        mu = np.asarray(G.gaussian_mu(eps, self.delta))
        return _variance_derivative(eps, mu, d, order)

    def convex_terms_proven(self, shares) -> bool:
        # under zCDP the design's noise term is constant, (S² + c)/n is convex; under (ε, δ) it is checked
        # increment by increment (docs/gaussian.md)
        return self.zcdp

    def for_design(self, epsilon, share=1.0):
        """The noise of a design at central budget ``epsilon`` (ρ under zCDP) for a variable with budget share
        ``share``, as a mechanism of the nominal budget (docs/gaussian.md, "Gaussian noise in designs")."""
        if self.zcdp:
            return ConstantNoise(self, float(share) * V.positive("epsilon", epsilon))
        return AmplifiedGaussian(self.delta, epsilon, share)

    def opendp_measurement(self, dp, scale):
        # OpenDP's Gaussian on a float vector under the L2 distance at σ = scale: sampled exactly on a fine
        # grid, its map (ρ-zCDP) accounts the rounding; the release certifies (ε, δ) from that ρ (docs/release.md)
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
        return dp.m.make_gaussian(*space, scale=float(scale))

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        return rng.normal(0.0, self.sigma(epsilon, sensitivity), size=size)


class DiscreteGaussian(Gaussian, _builtin=True):
    """Discrete Gaussian N_Z(0, σ²) on integer data (Canonne, Kamath & Steinke 2020): ρ-zCDP at σ = Δ/√(2ρ), the
    budget read as ρ; variance below σ² for small σ (:func:`dpopt.privacy.gaussian.discrete_gaussian_variance`)."""

    name = "discrete-gaussian"
    integer_data = True

    def __init__(self, delta=None):
        if delta is not None:
            raise ValueError("delta must be None for the discrete Gaussian: dpopt offers it under rho-zCDP only (its "
                             "(epsilon, delta) profile is not the continuous analytic curve); use Gaussian(delta=...) "
                             "for (epsilon, delta)-DP, or convert the rho for reporting")
        self.guarantee = ZCDP()

    def check_sensitivity(self, sensitivity) -> float:
        d = V.positive("sensitivity", sensitivity)
        if d != round(d):
            raise ValueError(f"sensitivity must be an integer for the discrete Gaussian mechanism, got {d:g}")
        return d

    def variance(self, epsilon, sensitivity=1.0):
        eps, d = _budget(epsilon), _scale(sensitivity)
        return _finite_variance(np.asarray(G.discrete_gaussian_variance(G.sigma_from_rho(eps, d))), eps, d)

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        return Mechanism.variance_derivative(self, epsilon, sensitivity, order)

    def opendp_measurement(self, dp, scale):
        # OpenDP's discrete Gaussian on an integer vector under the L2 distance at σ = scale (exact sampler, ρ map)
        space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
        return dp.m.make_gaussian(*space, scale=float(scale))

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        raise NotImplementedError("the discrete Gaussian has no numpy sampler; releases draw it through OpenDP")


# ---------------------------------------------------------------------------------- bound to a design
class AmplifiedGaussian(Mechanism, _builtin=True):
    """The analytic Gaussian inside a design at central (ε, δ) for a variable with budget share s: at the nominal
    budget E = s·L (L = log1p(expm1(ε)·N/n) the person's amplified ε) the variable's nominal δ is
    s·δ·expm1(L)/expm1(ε) = s·δ·N/n, and the variance is Δ²/μ(E, δ_E)² (docs/gaussian.md). Feasible while the
    nominal δ is < 1; beyond, :meth:`variance` raises."""

    laplace_part = False

    def __init__(self, delta, epsilon, share=1.0):
        self.guarantee = ApproxDP(delta)
        self.delta = self.guarantee.delta
        self.epsilon = V.positive("epsilon", epsilon)
        self.share = V.positive("share", share)
        self.name = "gaussian"
        self._log_base = float(np.log(self.share) + np.log(self.delta) - log_expm1(self.epsilon))
        self._last = None

    def __repr__(self) -> str:
        return f"AmplifiedGaussian(delta={self.delta!r}, epsilon={self.epsilon!r}, share={self.share!r})"

    def log_nominal_delta(self, E):
        """log of the variable's nominal δ at nominal budget E (its share of the person's δ·N/n)."""
        return self._log_base + log_expm1(np.asarray(E, dtype=float) / self.share)

    def _mu(self, E):
        E = np.asarray(E, dtype=float)
        last = self._last
        if last is not None and last[0].shape == E.shape and np.array_equal(last[0], E):
            return last[1], last[2]      # the design asks variance and both derivatives at the same budgets
        mu, ld = self._mu_fresh(E)
        self._last = (E.copy(), mu, ld)
        return mu, ld

    def _mu_fresh(self, E):
        ld = np.asarray(self.log_nominal_delta(E))
        if np.any(ld >= 0.0):
            e = float(np.broadcast_to(np.asarray(E, dtype=float), ld.shape).ravel()[int(np.argmax(ld.ravel()))])
            raise ValueError(f"the nominal delta (delta·N/n, share {self.share:g}) reaches 1 at nominal epsilon {e:g}: "
                             f"the (epsilon, delta) = ({self.epsilon:g}, {self.delta:g}) target needs n > delta·N "
                             "in every stratum")
        return np.asarray(G.gaussian_mu(E, np.exp(ld))), ld

    def variance(self, epsilon, sensitivity=1.0):
        E, d = _budget(epsilon), _scale(sensitivity)
        mu, _ = self._mu(E)
        with np.errstate(over="ignore"):
            return _finite_variance((d / mu) ** 2, E, d)

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        E = np.asarray(epsilon, dtype=float)
        mu, ld = self._mu(E)
        # δ_E = c·expm1(E/s): log δ_E' = log δ_E − log s − log(1 − e^{−E/s}), log δ_E'' = log δ_E' − log s
        l1 = ld - np.log(self.share) - np.log(-np.expm1(-E / self.share))
        return _variance_derivative(E, mu, float(sensitivity), order, l1, l1 - np.log(self.share))

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        """Var(eps1) − Var(eps0) (eps1 = eps0 − gap < eps0) without subtracting two nearly equal variances where the
        gap is small: μ(eps1) − μ(eps0) = −μ' g + μ'' g²/2 (closed-form μ', μ''), and
        1/μ1² − 1/μ0² = −dμ (2μ0 + dμ)/(μ0² μ1²); a larger gap subtracts (docs/gaussian.md)."""
        E0, E1, g = (np.array(v, dtype=float) for v in np.broadcast_arrays(eps0, eps1, gap))
        d2 = float(_scale(sensitivity)) ** 2
        mu0, ld = self._mu(E0)
        kept = self._last
        small = g <= _TAYLOR_GAP * E0
        out = np.empty(E0.shape)
        if np.any(~small):
            out[~small] = np.asarray(self.variance(E1[~small], sensitivity)) - (np.sqrt(d2) / mu0[~small]) ** 2
            self._last = kept             # the callers ask Var(eps0) next
        if np.any(small):
            e0, m0, g0 = E0[small], mu0[small], g[small]
            l1 = ld[small] - np.log(self.share) - np.log(-np.expm1(-e0 / self.share))
            m1, m2 = _mu_derivatives(e0, m0, l1, l1 - np.log(self.share))
            dmu = -m1 * g0 + 0.5 * m2 * g0 * g0
            mu1 = m0 + dmu
            out[small] = -d2 * dmu * (2.0 * m0 + dmu) / (m0 * m0 * mu1 * mu1)
        return out[()] if out.ndim == 0 else out

    def remainder_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        return self.variance_derivative(epsilon, sensitivity, order)

    def subtracts(self, eps0, gap):
        """Where :meth:`variance_difference` is the plain subtraction of two variances (gap above 1e-4·ε)."""
        return np.asarray(gap, dtype=float) > _TAYLOR_GAP * np.asarray(eps0, dtype=float)

    def convex_terms_proven(self, shares) -> bool:
        return False      # verified increment by increment per design (StratifiedDesign.convexity_verified)


class ConstantNoise(Mechanism, _builtin=True):
    """A zCDP mechanism inside a design: sampling does not amplify zCDP, so a sampled person's variable gets the
    central ρ_j = s·ρ whatever n, and the noise variance is a constant c = Var(ρ_j) (docs/gaussian.md); the unit
    term (S² + c)/n is convex and has the growth form (c, 0, 0)."""

    laplace_part = False

    def __init__(self, base: Mechanism, rho: float):
        self.base, self.rho = base, float(rho)
        self.guarantee = base.guarantee
        self.name = base.name
        self.integer_data = base.integer_data

    def __repr__(self) -> str:
        return f"ConstantNoise({self.base!r}, rho={self.rho!r})"

    def check_sensitivity(self, sensitivity) -> float:
        return self.base.check_sensitivity(sensitivity)

    def _c(self, sensitivity):
        return float(self.base.variance(self.rho, sensitivity))

    def variance(self, epsilon, sensitivity=1.0):
        E = _budget(epsilon)
        return np.full(E.shape, self._c(sensitivity))[()] if E.ndim == 0 else np.full(E.shape, self._c(sensitivity))

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        return np.zeros_like(np.asarray(epsilon, dtype=float))

    def remainder_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        return np.zeros_like(np.asarray(epsilon, dtype=float))

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        return np.zeros_like(np.asarray(eps0, dtype=float))

    def convex_terms_proven(self, shares) -> bool:
        return True

    def growth_coefficients(self, sensitivity=1.0):
        return (self._c(sensitivity), 0.0, 0.0)

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        return self._c(sensitivity)

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return self._c(sensitivity) + 0.0 * eps


__all__ = ["Gaussian", "DiscreteGaussian", "AmplifiedGaussian", "ConstantNoise"]
