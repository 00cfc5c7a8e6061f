"""Additive noise mechanisms (docs/privacy.md): variance at a nominal budget, and seeded samplers.

The samplers (``Mechanism.sample``) are numpy floating-point draws for Monte Carlo only; a real release
must use :mod:`dpopt.release`, whose noise comes from OpenDP (docs/release.md).

Every mechanism's variance is written as ``laplace_part * 2Δ²/ε² + remainder(ε)``. The design models
use the split: the Laplace part has a hand-derived, cancellation-free treatment (series near the
singular regime), and the remainder is smooth and bounded so plain calculus on it is well
conditioned. Discrete Laplace has ``remainder = h(ε/Δ)`` with ``h(t) = 1/(2 sinh²(t/2)) − 2/t² ∈
[−1/6, 0)``, TuLap adds 1/12. A user-defined mechanism subclasses :class:`Mechanism` and implements
``variance`` (``laplace_part`` stays False, so its remainder is its whole variance).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _validate as V


def _budget(epsilon) -> np.ndarray:
    """A nominal budget (scalar or array) as floats, finite and > 0 (raises ValueError naming epsilon)."""
    eps = V._as_float_array("epsilon", epsilon)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def _scale(sensitivity) -> float:
    return V.positive("sensitivity", sensitivity)


def _finite_variance(out, epsilon, sensitivity):
    """The built-in variances overflow only when Δ/ε > ~1e154 (2Δ²/ε² > 1e308): say so instead of inf."""
    if not np.all(np.isfinite(out)):
        raise ValueError(f"epsilon = {np.min(np.asarray(epsilon, dtype=float)):g} is too small for sensitivity "
                         f"{sensitivity:g}: the noise variance (about 2·(sensitivity/epsilon)²) overflows double "
                         "precision")
    return out


def _checked_variance(fn):
    """Wrap a user mechanism's ``variance``: a NaN, infinite or negative variance is refused (it would make
    every objective meaningless), naming the mechanism and the budget."""
    @functools.wraps(fn)
    def variance(self, epsilon, sensitivity=1.0):
        out = fn(self, epsilon, sensitivity)
        try:
            arr = np.asarray(out, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"mechanism {self.name!r}: variance() must return numbers, got "
                             f"{type(out).__name__}") from None
        bad = ~np.isfinite(arr) | (arr < 0)
        if np.any(bad):
            eps = np.broadcast_to(np.asarray(epsilon, dtype=float), arr.shape)
            j = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(f"mechanism {self.name!r}: variance must be finite and >= 0, got "
                             f"{float(arr.ravel()[j])!r} at epsilon = {eps.ravel()[j]:g} (sensitivity {sensitivity!r})")
        return out
    variance._dpopt_checked = True
    return variance

# Everything the solvers read from a mechanism besides ``variance``: increments (variance_difference), the
# Laplace split (laplace_part, has_remainder, split_below, remainder), derivatives, and the modelling hooks.
_DERIVED = ("variance_difference", "variance_derivative", "remainder", "remainder_derivative", "split_below",
            "laplace_part", "has_remainder", "pyomo_variance", "cvxpy_variance")


def _derive_from_variance(cls) -> None:
    """One definition per mechanism: a user class whose ``variance`` is defined below a built-in mechanism
    (e.g. a subclass of :class:`Laplace` that overrides only ``variance``) must not inherit that built-in's
    specialised increments, derivatives, Laplace split or modelling hooks, which describe the built-in's
    variance, not the user's (the exact backend then proved a worse design optimal from the inherited
    ``variance_difference``). Each such attribute, when defined only above the class that defines
    ``variance``, is reset to the generic form derived from ``variance`` (the hooks to None: the modelling
    routes then refuse the mechanism, naming the hook). Attributes the user defines with or below the
    ``variance`` are kept and checked against it by :meth:`Mechanism.probe`."""
    owner = next(c for c in cls.__mro__ if "variance" in c.__dict__)
    below = cls.__mro__[:cls.__mro__.index(owner) + 1]      # owner and its subclasses on the way to cls
    for attr in _DERIVED:
        where = next(c for c in cls.__mro__ if attr in c.__dict__)
        if where is Mechanism or where in below:
            continue
        setattr(cls, attr, Mechanism.__dict__[attr])


def _check_derived(mech) -> None:
    """Raise ValueError when a derived quantity the mechanism's class supplies itself (not the generic form
    of :class:`Mechanism`) disagrees with its ``variance`` at budgets spread in log space (sensitivity 1): the
    solvers use the increments and derivatives, the reports use the variance, and a mismatch would let a
    certificate prove the optimum of another model."""
    own = {a for a in ("variance_difference", "variance_derivative", "remainder", "remainder_derivative")
           if next(c for c in type(mech).__mro__ if a in c.__dict__) is not Mechanism}
    if not own:
        return
    eps = np.geomspace(1e-2, 30.0, 9)
    var = lambda e: np.asarray(mech.variance(e, 1.0), dtype=float)   # noqa: E731
    v = var(eps)
    tiny = np.finfo(float).tiny

    def fail(what, j, got, want):
        raise ValueError(f"mechanism {mech.name!r}: {what} disagrees with variance() at epsilon = {eps[j]:g} "
                         f"(got {float(got[j])!r}, variance gives {float(want[j])!r}); define it from the same "
                         f"formula, or leave it out (dpopt then derives it from variance)")

    def compare(what, got, want, scale):
        got = np.broadcast_to(np.asarray(got, dtype=float), want.shape)
        bad = ~np.isfinite(got) | (np.abs(got - want) > 1e-6 * scale + tiny)
        if np.any(bad):
            fail(what, int(np.flatnonzero(bad)[0]), got, want)

    lap = 2.0 / eps ** 2 if mech.laplace_part else 0.0
    if "variance_difference" in own:
        gap = 0.05 * eps
        want = var(eps - gap) - v
        compare("variance_difference", mech.variance_difference(eps, eps - gap, gap, 1.0), want,
                np.maximum(v, var(eps - gap)))
    if "remainder" in own:
        compare("remainder", mech.remainder(eps, 1.0), v - lap, v)
    h = 1e-3 * eps
    fd = [var(eps + t * h) for t in (-2, -1, 1, 2)]
    d1 = (fd[0] - 8 * fd[1] + 8 * fd[2] - fd[3]) / (12 * h)
    d2 = (-fd[0] + 16 * fd[1] - 30 * v + 16 * fd[2] - fd[3]) / (12 * h * h)
    lap1 = -4.0 / eps ** 3 if mech.laplace_part else 0.0
    lap2 = 12.0 / eps ** 4 if mech.laplace_part else 0.0
    for order, want, lp in ((1, d1, lap1), (2, d2, lap2)):
        scale = np.maximum(v, np.abs(want) * eps ** order) / eps ** order
        if "variance_derivative" in own:
            compare(f"variance_derivative (order {order})", mech.variance_derivative(eps, 1.0, order), want, scale)
        if "remainder_derivative" in own:
            compare(f"remainder_derivative (order {order})", mech.remainder_derivative(eps, 1.0, order),
                    want - lp, scale)


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


class Mechanism:
    """Base class of additive noise mechanisms.

    Subclasses implement :meth:`variance` (noise variance at nominal budget ``epsilon`` and
    sensitivity) and :meth:`sample`. ``laplace_part`` tells the models whether the variance contains
    the Laplace term ``2Δ²/ε²`` (handled with a stable closed form); everything else is the smooth
    :meth:`remainder`, differentiated by :meth:`remainder_derivative` (finite differences by default;
    override for exactness).
    """

    name = "custom"
    laplace_part = False
    has_remainder = True   # False only when the variance is exactly the Laplace part

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fn = cls.__dict__.get("variance")
        # a user's variance is checked on every evaluation (the built-in ones are proven finite and > 0)
        if fn is not None and cls.__module__ != __name__ and not getattr(fn, "_dpopt_checked", False):
            cls.variance = _checked_variance(fn)
        if cls.__module__ != __name__:
            _derive_from_variance(cls)

    def probe(self) -> None:
        """Evaluate :meth:`variance` on budgets across the supported range (sensitivity 1); raises ValueError
        when it fails or is NaN, infinite or negative there, or when a quantity the class supplies itself
        (remainder, derivatives, variance difference) disagrees with its variance (:func:`_check_derived`).
        Models call it for user mechanisms."""
        grid = np.geomspace(V.EPS_MIN, V.EPS_MAX, 41)
        try:
            out = np.asarray(self.variance(grid, 1.0), dtype=float)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 - a user's code: report what failed
            raise ValueError(f"mechanism {self.name!r}: variance(epsilon array, sensitivity) failed: "
                             f"{type(exc).__name__}: {exc}") from None
        if out.shape != grid.shape:
            raise ValueError(f"mechanism {self.name!r}: variance must be vectorised over epsilon (one value per "
                             f"budget), got shape {out.shape} for {grid.size} budgets")
        bad = ~np.isfinite(out) | (out < 0)
        if np.any(bad):
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(f"mechanism {self.name!r}: variance must be finite and >= 0, got {float(out[j])!r} "
                             f"at epsilon = {grid[j]:g}")
        _check_derived(self)

    def check_sensitivity(self, sensitivity) -> float:
        return V.positive("sensitivity", sensitivity)

    # Optional expression hooks for the modelling backends (None: the Pyomo MINLP and the cvxpy DNLP routes
    # refuse the mechanism, naming the missing hook). They receive the modelling library, so this module
    # never imports it:
    #   pyomo_variance(pyo, eps, sensitivity, eps_scale=1.0, growth=None, growth_max=inf): the variance at the
    #     nominal budget eps_scale·eps (eps a Pyomo expression of order 1); ``growth``, when given, is an
    #     expression equal to expm1(eps_scale·eps) written without exp/log, at most ``growth_max``.
    #   cvxpy_variance(cp, eps, sensitivity, large=False): the variance as a smooth cvxpy expression of the
    #     budget; ``large`` promises eps/sensitivity ≥ 1 on the domain.
    pyomo_variance = None
    cvxpy_variance = None

    def variance(self, epsilon, sensitivity=1.0):  # pragma: no cover - abstract
        raise NotImplementedError

    def remainder(self, epsilon, sensitivity=1.0):
        """Variance minus the Laplace part (``2Δ²/ε²`` if ``laplace_part``)."""
        eps = np.asarray(epsilon, dtype=float)
        var = np.asarray(self.variance(eps, sensitivity), dtype=float)
        if self.laplace_part:
            var = var - 2.0 * sensitivity ** 2 / eps ** 2
        return var

    def remainder_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        """d^order/dε^order of :meth:`remainder`; central differences with a relative step."""
        eps = np.asarray(epsilon, dtype=float)
        h = 1e-4 * eps
        f = lambda e: self.remainder(e, sensitivity)  # noqa: E731
        if order == 1:
            return (f(eps - 2 * h) - 8 * f(eps - h) + 8 * f(eps + h) - f(eps + 2 * h)) / (12 * h)
        if order == 2:
            return (-f(eps - 2 * h) + 16 * f(eps - h) - 30 * f(eps) + 16 * f(eps + h) - f(eps + 2 * h)) / (12 * h * h)
        raise ValueError("order must be 1 or 2")

    def split_below(self, sensitivity=1.0) -> float:
        """Budgets below which the models use the Laplace split (where it avoids cancellation)."""
        return np.inf if self.laplace_part else 0.0

    def variance_derivative(self, epsilon, sensitivity=1.0, order: int = 1):
        """d^order/dε^order of :meth:`variance` (used where the Laplace split is not)."""
        eps = np.asarray(epsilon, dtype=float)
        lap = 0.0
        if self.laplace_part:
            lap = (-4.0 if order == 1 else 12.0) * sensitivity ** 2 / eps ** (2 + order)
        return lap + self.remainder_derivative(eps, sensitivity, order)

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        """Var(eps1) − Var(eps0) for eps1 < eps0 with ``gap = eps0 − eps1`` known accurately.

        The default subtracts; subclasses override with cancellation-free forms.
        """
        return np.asarray(self.variance(eps1, sensitivity)) - np.asarray(self.variance(eps0, sensitivity))

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):  # pragma: no cover - abstract
        """Seeded numpy draws of the noise, for Monte Carlo only (floating-point noise is open to Mironov's
        attack): releases use :mod:`dpopt.release`."""
        raise NotImplementedError(f"mechanism {self.name!r} has no sampler")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def laplace_variance(epsilon, sensitivity=1.0, order: int = 0) -> tuple:
    """(2Δ²/ε², and for ``order`` ≥ 1 its ε-derivatives −4Δ²/ε³, 12Δ²/ε⁴): the Laplace noise variance, the one
    home of the formula. Plain arithmetic, so ε may be a float, a numpy array or a Pyomo expression; not
    validated (callers check their inputs)."""
    v = 2.0 * (sensitivity / epsilon) ** 2
    if order <= 0:
        return (v,)
    d1 = -2.0 * v / epsilon
    return (v, d1) if order == 1 else (v, d1, -3.0 * d1 / epsilon)


class Laplace(Mechanism):
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

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        # 2Δ²/(s·e)² = 2(Δ/s)²/e²: with e = L/s of order 1 the solver sees L vary visibly
        return laplace_variance(eps, sensitivity / eps_scale)[0]

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return 2.0 * sensitivity ** 2 * cp.power(eps, -2)

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        # 2Δ²(1/e1² − 1/e0²) = 2Δ²·gap·(e0 + e1)/(e0² e1²)
        return 2.0 * sensitivity ** 2 * gap * (eps0 + eps1) / (eps0 ** 2 * eps1 ** 2)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        return rng.laplace(0.0, _scale(sensitivity) / _budget(epsilon), size=size)


class DiscreteLaplace(Mechanism):
    """Discrete Laplace (integer data, integer Δ): P(K=k) ∝ p^|k|, p = exp(−ε/Δ), variance 2p/(1−p)²."""

    name = "dlap"
    laplace_part = True

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

    def variance_difference(self, eps0, eps1, gap, sensitivity=1.0):
        # Var = 2e^{-t}/(1−e^{-t})²; its log changes by dt − 2 log1p(e^{-t1}·expm1(−dt)/(1−e^{-t0}))
        t0 = np.asarray(eps0, dtype=float) / sensitivity
        t1 = np.asarray(eps1, dtype=float) / sensitivity
        dt = np.asarray(gap, dtype=float) / sensitivity
        dlog = dt - 2.0 * np.log1p(np.exp(-t1) * np.expm1(-dt) / -np.expm1(-t0))
        var0 = 2.0 * np.exp(-t0) / np.expm1(-t0) ** 2
        return var0 * np.expm1(dlog)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        t = _budget(epsilon) / self.check_sensitivity(sensitivity)
        success = -np.expm1(-t)  # 1 - p
        # difference of two iid geometrics on {0,1,...} is discrete Laplace
        return rng.geometric(success, size=size) - rng.geometric(success, size=size)


class TuLap(DiscreteLaplace):
    """Truncated-uniform-Laplace (Awan & Slavković): DLap + U(−½, ½); Δ = 1 only; variance DLap + 1/12."""

    name = "tulap"

    def check_sensitivity(self, sensitivity) -> float:
        d = V.positive("sensitivity", sensitivity)
        if d != 1.0:
            raise ValueError(f"sensitivity must be 1 for the TuLap mechanism (not analysed for other values), got {d:g}")
        return d

    def variance(self, epsilon, sensitivity=1.0):
        return super().variance(epsilon, sensitivity) + 1.0 / 12.0

    def remainder(self, epsilon, sensitivity=1.0):
        return super().remainder(epsilon, sensitivity) + 1.0 / 12.0

    def pyomo_variance(self, pyo, eps, sensitivity=1.0, eps_scale=1.0, growth=None, growth_max=np.inf):
        return super().pyomo_variance(pyo, eps, sensitivity, eps_scale, growth, growth_max) + 1.0 / 12.0

    def cvxpy_variance(self, cp, eps, sensitivity=1.0, large=False):
        return super().cvxpy_variance(cp, eps, sensitivity, large) + 1.0 / 12.0

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        k = super().sample(epsilon, sensitivity, size=size, rng=rng)
        return k + rng.uniform(-0.5, 0.5, size=np.shape(k))


MECHANISMS: dict[str, type[Mechanism]] = {"laplace": Laplace, "dlap": DiscreteLaplace, "tulap": TuLap}


def get_mechanism(mechanism) -> Mechanism:
    """A mechanism instance from a name (``"laplace" | "dlap" | "tulap"``) or a :class:`Mechanism`."""
    if isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        mechanism = mechanism()
    if isinstance(mechanism, Mechanism):
        if type(mechanism) not in MECHANISMS.values():
            mechanism.probe()
        return mechanism
    key = V.choice("mechanism", mechanism, tuple(MECHANISMS))
    return MECHANISMS[key]()


def noise_variance(mechanism, epsilon, sensitivity=1.0):
    """Noise variance of ``mechanism`` at nominal budget ``epsilon`` (validated)."""
    mech = get_mechanism(mechanism)
    d = mech.check_sensitivity(sensitivity)
    out = mech.variance(_budget(epsilon), d)
    return out[()] if np.ndim(out) == 0 else out
