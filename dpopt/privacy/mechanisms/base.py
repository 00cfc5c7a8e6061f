"""The mechanism interface (docs/privacy.md#the-mechanism-interface): one definition of the noise, derived parts,
explicit optional capabilities, a declared guarantee.

A mechanism's one required definition is :meth:`Mechanism.variance` (ε, Δ). Everything the solvers read
besides it — increments (``variance_difference``), ε-derivatives, the Laplace split (``laplace_part``,
``remainder``, ``split_below``) — has a generic form here derived from ``variance``; a mechanism may give
exact forms instead, which :meth:`Mechanism.probe` checks against ``variance``. The optional capabilities
(:data:`CAPABILITIES`: the Pyomo and cvxpy algebraic forms, the DCP growth form, the OpenDP measurement)
are None when absent, and :meth:`Mechanism.support` answers for each, uniformly, either
:data:`SUPPORTED` or an :class:`Unsupported` that says why. Code outside this package asks the mechanism;
it never branches on its name or class.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ... import _validate as V


# ---------------------------------------------------------------------------------- guarantees
@dataclass(frozen=True)
class PureDP:
    """The budget ε of the mechanism is a pure ε-DP guarantee (what the ledger and amplification account)."""

    kind = "pure"

    def __str__(self) -> str:
        return "pure ε-DP"


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-DP at budget ε, with a fixed δ. Designs accept it (ε amplifies as for pure DP, δ scales by the
    sampling rate: :meth:`Mechanism.for_design`)."""

    delta: float
    kind = "approx"

    def __post_init__(self):
        d = V.probability("delta", self.delta)
        if not 0.0 < d < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", d)

    def __str__(self) -> str:
        return f"(ε, δ = {self.delta:g})-DP"


@dataclass(frozen=True)
class ZCDP:
    """ρ-zCDP (the budget read as ρ). Sampling does not amplify it: in a design the noise is a constant."""

    kind = "zcdp"

    def __str__(self) -> str:
        return "ρ-zCDP"


#: the guarantee kinds the release ledger accounts (dpopt/release/ledger.py: pure ε, (ε, δ) and ρ-zCDP)
ACCOUNTED_GUARANTEES = ("pure", "approx", "zcdp")


# ---------------------------------------------------------------------------------- capabilities
#: every optional capability, and what it is (the reason text of a refusal names it)
CAPABILITIES = {
    "pyomo_variance": "its variance as a Pyomo expression, which the Pyomo MINLP writes the objective with",
    "cvxpy_variance": "its variance as a smooth cvxpy expression of the budget, which the cvxpy DNLP needs",
    "growth_coefficients": "its variance as c0 + c1/y + c2/y² in y = expm1(ε), the DCP form of cvxpy and the "
                           "linear form of Pyomo",
    "opendp_measurement": "an OpenDP measurement of its noise, which every release draws its noise from",
}


class Unsupported:
    """A capability's answer when the mechanism lacks it: falsy, ``str()`` is "unsupported, because …"."""

    __slots__ = ("capability", "reason")

    def __init__(self, capability: str, reason: str):
        self.capability, self.reason = capability, reason

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"{self.capability} unsupported, because {self.reason}"

    def __repr__(self) -> str:
        return f"Unsupported({self.capability!r}, {self.reason!r})"


class _Supported:
    __slots__ = ()

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "SUPPORTED"


SUPPORTED = _Supported()


class MechanismUnsupported(ValueError):
    """A route needs a capability the mechanism does not have (the message says which and why)."""


# ---------------------------------------------------------------------------------- helpers
def _budget(epsilon) -> np.ndarray:
    """A nominal budget (scalar or array) as floats, finite and > 0 (raises ValueError naming epsilon)."""
    eps = V._as_float_array("epsilon", epsilon)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


@functools.lru_cache(maxsize=8)
def opendp_l1_space(dp, integer: bool) -> tuple:
    """(vector domain, L1 distance) of OpenDP's noise measurements on floats (no NaN) or integers, built once per
    OpenDP module: building them costs more than the measurement itself, and a plan builds one per scale."""
    if integer:
        return dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
    return dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)


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


# Everything read from a mechanism besides ``variance`` that describes its noise: increments, the Laplace
# split, derivatives, the capabilities and what goes with them (the OpenDP release of the values, integer
# data).
_DERIVED = ("variance_difference", "variance_derivative", "remainder", "remainder_derivative", "split_below",
            "laplace_part", "has_remainder", "integer_data", "sensitivity_argument",
            "release_values", "for_design", "subtracts") + tuple(CAPABILITIES)


def _derive_from_variance(cls) -> None:
    """One definition per mechanism: a user class whose ``variance`` is defined below a built-in mechanism
    (e.g. a subclass of :class:`Laplace` that overrides only ``variance``) must not inherit that built-in's
    specialised increments, derivatives, Laplace split, capabilities or OpenDP measurement, which describe
    the built-in's noise, not the user's (the exact backend then proved a worse design optimal from the
    inherited ``variance_difference``). Each such attribute, when defined only above the class that defines
    ``variance``, is reset to the generic form of :class:`Mechanism` (the capabilities to None: the routes
    needing them refuse the mechanism with the reason). Attributes the user defines with or below the
    ``variance`` are kept and checked against it by :meth:`Mechanism.probe`."""
    owner = next(c for c in cls.__mro__ if "variance" in c.__dict__)
    below = cls.__mro__[:cls.__mro__.index(owner) + 1]      # owner and its subclasses on the way to cls
    for attr in _DERIVED:
        where = next(c for c in cls.__mro__ if attr in c.__dict__)
        if where is Mechanism or where in below:
            continue
        setattr(cls, attr, Mechanism.__dict__[attr])


def _own(mech, attr: str) -> bool:
    """Does the mechanism's class supply ``attr`` itself (not the generic form of :class:`Mechanism`)?"""
    return getattr(type(mech), attr) is not Mechanism.__dict__[attr]


def _check_derived(mech) -> None:
    """Raise ValueError when a derived quantity the mechanism's class supplies itself (not the generic form
    of :class:`Mechanism`) disagrees with its ``variance`` at budgets spread in log space (sensitivity 1): the
    solvers use the increments and derivatives, the reports use the variance, and a mismatch would let a
    certificate prove the optimum of another model."""
    own = {a for a in ("variance_difference", "variance_derivative", "remainder", "remainder_derivative",
                       "growth_coefficients") if _own(mech, a)}
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
    if "growth_coefficients" in own and mech.support("growth_coefficients", 1.0):
        c0, c1, c2 = mech.growth_coefficients(1.0)
        y = np.expm1(eps)
        compare("growth_coefficients", c0 + c1 / y + c2 / y ** 2, v, v)
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


# ---------------------------------------------------------------------------------- the interface
class Mechanism:
    """Base class of additive noise mechanisms.

    Required: :meth:`variance` (noise variance at nominal budget ``epsilon`` and sensitivity), vectorised over
    epsilon. Everything else derives from it or is an optional capability (:data:`CAPABILITIES`), None when
    absent; :meth:`support` says for each whether the mechanism has it and, if not, why. ``guarantee``
    declares what the budget means (:class:`PureDP` unless the mechanism says otherwise). :meth:`sample`
    (numpy, Monte Carlo only) is optional too.

    ``laplace_part`` tells the models whether the variance contains the Laplace term ``2Δ²/ε²`` (handled
    with a stable closed form); everything else is the smooth :meth:`remainder`, differentiated by
    :meth:`remainder_derivative` (finite differences by default; override for exactness).
    """

    name = "custom"
    guarantee = PureDP()
    laplace_part = False
    has_remainder = True   # False only when the variance is exactly the Laplace part
    # the release privatises integers in the data's own unit (integer noise, integer sensitivity)
    integer_data = False

    def __init_subclass__(cls, _builtin: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if _builtin:     # dpopt's own mechanisms: proven finite and > 0, with exact derived forms
            return
        fn = cls.__dict__.get("variance")
        # a user's variance is checked on every evaluation
        if fn is not None and not getattr(fn, "_dpopt_checked", False):
            cls.variance = _checked_variance(fn)
        _derive_from_variance(cls)
        # a proof is dpopt's claim about its own mechanisms: a user class (even one inheriting a built-in's
        # variance) has its terms checked increment by increment instead
        cls.convex_terms_proven = Mechanism.__dict__["convex_terms_proven"]

    # ------------------------------------------------------------------ the one definition
    def variance(self, epsilon, sensitivity=1.0):  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ optional capabilities
    # They receive the modelling library (or OpenDP), so this package never imports it:
    #   pyomo_variance(pyo, eps, sensitivity, eps_scale=1.0, growth=None, growth_max=inf): the variance at the
    #     nominal budget eps_scale·eps (eps a Pyomo expression of order 1); ``growth``, when given, is an
    #     expression equal to expm1(eps_scale·eps) written without exp/log, at most ``growth_max``.
    #   cvxpy_variance(cp, eps, sensitivity, large=False): the variance as a smooth cvxpy expression of the
    #     budget; ``large`` promises eps/sensitivity ≥ 1 on the domain.
    #   growth_coefficients(sensitivity): (c0, c1, c2) with variance = c0 + c1/y + c2/y², y = expm1(ε), or an
    #     Unsupported for a sensitivity where the variance has no such form. With y = expm1(ε)·N/n after
    #     amplification the noise term is linear in n and 1/n (DCP).
    #   opendp_measurement(dp, scale): OpenDP's measurement adding the noise to a vector under the L1
    #     distance at noise scale Δ/ε (its map gives the ε spent for a sensitivity_argument(Δ)); the Gaussian
    #     ones under the L2 distance at noise scale σ (the map gives the ρ-zCDP OpenDP certifies).
    pyomo_variance = None
    cvxpy_variance = None
    growth_coefficients = None
    opendp_measurement = None

    def support(self, capability: str, sensitivity=None):
        """:data:`SUPPORTED`, or an :class:`Unsupported` saying why the mechanism lacks ``capability`` (at
        ``sensitivity`` when given: some forms hold only for some Δ)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"capability must be one of {', '.join(CAPABILITIES)}, got {capability!r}")
        if getattr(self, capability) is None:
            return Unsupported(capability, f"mechanism {self.name!r} does not define {capability}: "
                                           f"{CAPABILITIES[capability]}")
        if capability == "growth_coefficients" and sensitivity is not None:
            got = self.growth_coefficients(float(sensitivity))
            if isinstance(got, Unsupported):
                return got
        if capability == "opendp_measurement" and getattr(self.guarantee, "kind", None) not in ACCOUNTED_GUARANTEES:
            return Unsupported(capability, f"mechanism {self.name!r} gives {self.guarantee}, which the release "
                                           f"ledger does not account (it accounts {', '.join(ACCOUNTED_GUARANTEES)})")
        return SUPPORTED

    def require(self, capability: str, sensitivity=None):
        """The capability (a bound method), or raise :class:`MechanismUnsupported` with the reason."""
        why = self.support(capability, sensitivity)
        if not why:
            raise MechanismUnsupported(str(why))
        return getattr(self, capability)

    # ------------------------------------------------------------------ the release (from opendp_measurement)
    def sensitivity_argument(self, sensitivity):
        """Δ in the type the OpenDP measurement's map takes (an int for integer-data mechanisms)."""
        if self.integer_data:
            if sensitivity != round(sensitivity):
                raise ValueError(f"mechanism {self.name!r} needs an integer sensitivity, got {sensitivity:g}")
            return int(round(sensitivity))
        return float(sensitivity)

    def release_values(self, dp, scale: float, values) -> list[float]:
        """Noisy copies of ``values`` from the OpenDP measurement at ``scale`` (integers when ``integer_data``)."""
        meas = self.require("opendp_measurement")(dp, scale)
        cast = int if self.integer_data else float
        return [float(v) for v in meas([cast(v) for v in values])]

    # ------------------------------------------------------------------ checks
    def probe(self) -> None:
        """Evaluate :meth:`variance` on budgets across the supported range (sensitivity 1); raises ValueError
        when it fails or is NaN, infinite or negative there, or when a quantity the class supplies itself
        (remainder, derivatives, variance difference, growth coefficients) disagrees with its variance
        (:func:`_check_derived`). Models call it for user mechanisms."""
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

    def for_design(self, epsilon, share=1.0) -> "Mechanism":
        """The noise of a stratified design at central budget ``epsilon`` for a variable with budget ``share``, as a
        mechanism of the nominal budget the design computes. For a pure ε-DP mechanism that is the mechanism
        itself; an (ε, δ) or zCDP mechanism binds what else the nominal noise depends on (docs/gaussian.md)."""
        return self

    def convex_terms_proven(self, shares) -> bool:
        """Is the design's unit term (S² + Var(nominal ε))/n proven discretely convex in n for these budget
        shares (docs/stratified.md)? False (always, for a user's class): the models check it increment by
        increment."""
        return False

    # ------------------------------------------------------------------ derived from variance
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

    def subtracts(self, eps0, gap):
        """Where :meth:`variance_difference` is the plain subtraction Var(eps0 − gap) − Var(eps0) (a boolean per
        entry): there a caller holding both variances may subtract them itself. The generic form subtracts
        everywhere; a mechanism with its own form subtracts nowhere unless it says so."""
        own = type(self).variance_difference is not Mechanism.variance_difference
        return np.full(np.shape(np.asarray(gap, dtype=float)), not own)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):  # pragma: no cover - abstract
        """Seeded numpy draws of the noise, for Monte Carlo only (floating-point noise is open to Mironov's
        attack): releases use :mod:`dpopt.release`."""
        raise NotImplementedError(f"mechanism {self.name!r} has no sampler")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
