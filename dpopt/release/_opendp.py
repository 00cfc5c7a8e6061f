"""OpenDP access for releases (the optional extra ``dpopt[release]``): import, measurements, scale search.

Everything that touches data with noise goes through OpenDP's measurements, whose samplers are exact
(no floating-point Laplace, Mironov 2012) and whose privacy maps round conservatively:

each mechanism's ``opendp_measurement`` capability (a vector measurement under the L1 distance) and its
``release_values`` (docs/privacy.md#the-mechanism-interface): Laplace ``make_laplace`` on floats, DLap
``make_geometric`` on integers, TuLap that plus an OpenDP uniform on (−½, ½) (post-processing, docs/release.md).
A mechanism without the capability is refused here with its reason. Functions take a mechanism or its name.

The noise scale starts at the closed form Δ/ε and is checked with the measurement's own map (stepped up by
an ulp while it fails; OpenDP's ``binary_search_param`` as the fallback), so OpenDP certifies
``map(Δ) ≤ target``: float rounding can never push the spent budget above the target.
"""

from __future__ import annotations

import contextlib
import functools
import math

INSTALL_HINT = 'the release path needs OpenDP: pip install "dpopt[release]" (or pip install opendp)'


def require_opendp():
    """``opendp.prelude`` with the ``contrib`` feature on, or ImportError with the install hint."""
    try:
        import opendp.prelude as dp
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    dp.enable_features("contrib")
    return dp


@contextlib.contextmanager
def honest_but_curious(dp):
    """Turn OpenDP's ``honest-but-curious`` feature on for a block, then restore the caller's setting.

    OpenDP gates population amplification behind it because it cannot see that its input really is a
    simple random sample of the population; dpopt draws that sample itself (dpopt.sampling).
    """
    from opendp.mod import GLOBAL_FEATURES

    was_on = "honest-but-curious" in GLOBAL_FEATURES
    dp.enable_features("honest-but-curious")
    try:
        yield
    finally:
        if not was_on:
            dp.disable_features("honest-but-curious")


# ---------------------------------------------------------------------------------- measurements
def _mechanism(mechanism):
    """A Mechanism as is (a model's, already probed), else the built-in one of that name."""
    from ..privacy.mechanisms import Mechanism, get_mechanism
    return mechanism if isinstance(mechanism, Mechanism) else get_mechanism(mechanism)


def releasable(mechanism):
    """The mechanism (name or object) if it can be released, else ValueError with the reason."""
    from ..privacy.mechanisms import MechanismUnsupported
    from ..privacy.mechanisms import Gaussian
    mech = _mechanism(mechanism)
    try:
        mech.require("opendp_measurement")
    except MechanismUnsupported as exc:
        raise MechanismUnsupported(f"mechanism {mech.name!r} cannot be released: {exc}") from None
    if mech.guarantee.kind != "pure" and not isinstance(mech, Gaussian):
        raise MechanismUnsupported(f"mechanism {mech.name!r} cannot be released: it gives {mech.guarantee}, and the "
                                   "release certifies a non-pure guarantee only for dpopt's Gaussian mechanisms (the "
                                   "exact Gaussian curve at the rho OpenDP's map certifies)")
    return mech


def noise_measurement(dp, mechanism, scale: float):
    """The vector noise measurement (L1 distance) of a mechanism at ``scale`` (TuLap: its DLap part)."""
    return releasable(mechanism).opendp_measurement(dp, scale)


def sensitivity_argument(mechanism, sensitivity: float):
    """Δ in the type the measurement's map takes (int for the integer mechanisms)."""
    return releasable(mechanism).sensitivity_argument(sensitivity)


def search_scale(dp, mechanism, sensitivity: float, epsilon: float, *, cache: dict | None = None
                 ) -> tuple[float, float]:
    """(scale, spent ε): the smallest scale near the closed form Δ/ε that OpenDP certifies ``map(Δ) ≤ epsilon``
    for, and that map.

    Both measurements' maps are Δ/scale rounded up, so Δ/ε itself passes or fails by an ulp: the scale is
    stepped up one float at a time from Δ/ε until OpenDP's own map passes (one or two measurements per
    stratum; a bisection built ~55). A map that does not behave so (another OpenDP version) falls back to
    OpenDP's ``binary_search_param``. Either way the returned scale is certified by the measurement's map.
    ``cache`` (a dict the caller keeps for one plan) holds the map's value per (mechanism, scale, Δ), so each
    distinct scale is certified by OpenDP once however many strata share it."""
    mechanism = releasable(mechanism)
    d_in = mechanism.sensitivity_argument(sensitivity)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"nominal epsilon must be finite and > 0, got {epsilon!r}")
    certify = functools.partial(certified_spend, dp, mechanism, d_in=d_in, cache=cache)
    guess = float(sensitivity) / epsilon
    scale = closed_form_scale(sensitivity, epsilon)
    for _ in range(_ULP_STEPS):
        spent = certify(scale)
        if spent <= epsilon:
            break
        scale = math.nextafter(scale, math.inf)
    else:
        scale = dp.binary_search_param(lambda s: noise_measurement(dp, mechanism, s), d_in=d_in,
                                       d_out=float(epsilon), bounds=(guess * 0.5, guess * 2.0), T=float)
        spent = certify(scale)
    if spent > epsilon:   # binary_search_param promises a passing value; keep the promise checked
        raise RuntimeError(f"OpenDP scale search returned scale {scale!r} spending {spent!r} > {epsilon!r}")
    return float(scale), spent


def closed_form_scale(sensitivity: float, epsilon: float) -> float:
    """The smallest float s with Δ/s ≤ ε in exact arithmetic: Δ/ε rounded to nearest, or the next float up when
    that rounding fell below the exact quotient. A map that is Δ/s rounded up passes at it and at no smaller
    float, so one OpenDP map per distinct scale certifies it (the search steps on when a map is stricter)."""
    from fractions import Fraction
    s = float(sensitivity) / float(epsilon)
    if Fraction(float(sensitivity)) > Fraction(float(epsilon)) * Fraction(s):
        s = math.nextafter(s, math.inf)
    return s


def certified_spend(dp, mechanism, scale: float, d_in, cache: dict | None = None) -> float:
    """The ε OpenDP's map certifies for the mechanism's measurement at ``scale`` and sensitivity ``d_in``
    (remembered in ``cache`` per (mechanism, scale, d_in) when one is given: the map is deterministic)."""
    key = (id(mechanism), float(scale), d_in)
    if cache is not None and key in cache:
        return cache[key][1]
    spent = float(noise_measurement(dp, mechanism, scale).map(d_in))
    if cache is not None:
        cache[key] = (mechanism, spent)       # the mechanism kept alive, so its id is not reused meanwhile
    return spent


#: floats above Δ/ε tried before the bisection fallback (the maps round up by at most an ulp or two)
_ULP_STEPS = 8


def variance_at_scale(mechanism, scale: float) -> float:
    """Variance of the noise OpenDP adds at ``scale``: 2s² (Laplace), 2p/(1−p)² with p = e^{−1/s}
    (DLap), that plus 1/12 (TuLap). Scale s is Δ/ε, so this is the mechanism's variance at ε = 1, Δ = s."""
    return float(_mechanism(mechanism).variance(1.0, scale))


def privatise(dp, mechanism, scale: float, values):
    """Noisy copies of ``values`` (list of float, or of int for integer-data mechanisms), all noise from
    OpenDP (the mechanism's ``release_values``)."""
    return releasable(mechanism).release_values(dp, scale, values)


def amplified_by_opendp(dp, epsilon_nominal: float, n: int, N: int) -> float:
    """OpenDP's population amplification of an ``epsilon_nominal`` mechanism on an SRS of n out of N.

    The inner measurement is a stand-in with that privacy map under the symmetric distance of a sized
    sample (two records differ after one substitution); only its map is used, to cross-check dpopt's
    accountant with OpenDP's (conservatively rounded) arithmetic."""
    if n == N:
        return float(epsilon_nominal)
    _, symmetric, divergence = _stand_in_pieces(dp)
    with honest_but_curious(dp):
        inner = dp.m.make_user_measurement(
            _sized_domain(dp, int(n)), symmetric, divergence,
            function=lambda _x: 0.0, privacy_map=lambda d_in: float(epsilon_nominal) * ((int(d_in) + 1) // 2))
        amp = dp.c.make_population_amplification(inner, population_size=int(N))
        return float(amp.map(2))


@functools.lru_cache(maxsize=8)
def _stand_in_pieces(dp) -> tuple:
    """(float atom domain, symmetric distance, max divergence) of the amplification stand-ins, built once."""
    return dp.atom_domain(T=float), dp.symmetric_distance(), dp.max_divergence()


@functools.lru_cache(maxsize=4096)
def _sized_domain(dp, n: int):
    """The stand-in's domain: float vectors of size n (one per sample size, reused across strata)."""
    return dp.vector_domain(_stand_in_pieces(dp)[0], size=n)


def composed_by_opendp(dp, epsilons) -> float:
    """OpenDP's basic composition of pure-DP budgets (stand-in measurements with those maps)."""
    eps = [float(e) for e in epsilons]
    if len(eps) == 1:
        return eps[0]
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    with honest_but_curious(dp):
        parts = [dp.m.make_user_measurement(*space, dp.max_divergence(), function=lambda _x: 0.0,
                                            privacy_map=(lambda e: (lambda d_in: e))(e)) for e in eps]
        return float(dp.c.make_composition(parts).map(1.0))


# ---------------------------------------------------------------------------------- Gaussian noise
#: the Gaussian mechanisms' names (dpopt.privacy.mechanisms.gaussian): continuous under (ε, δ) or ρ-zCDP, and the
#: discrete Gaussian on integers under ρ-zCDP
GAUSSIAN_NAMES = ("gaussian", "gaussian-zcdp", "discrete-gaussian")
#: the name of the conversion a Gaussian (ε, δ) measurement records (docs/release.md §6)
ANALYTIC = "analytic-gaussian"
#: the relative margin added to the analytic ε before dp-accounting is asked to confirm it (its float arithmetic
#: and ours differ in the last digits; 2^-30 lowers δ(ε) by about 1e-9·ε·|d log δ/dε|, far above either's error)
_CONFIRM_MARGIN = 2.0 ** -30
ACCOUNTING_HINT = ('(epsilon, delta) releases are confirmed by a vetted accountant, Google\'s dp-accounting: '
                   'pip install "dpopt[accounting]" (or pip install dp-accounting)')


def gaussian_measurement(dp, integer: bool, scale: float):
    """OpenDP's vector Gaussian measurement under the L2 distance at noise scale σ = ``scale``: on floats
    (OpenDP samples exactly on a fine grid and accounts the rounding in its map) or, ``integer``, the discrete
    Gaussian on integers. Its map gives the ρ-zCDP it certifies."""
    from ..privacy.mechanisms import get_mechanism
    return get_mechanism("discrete-gaussian" if integer else "gaussian-zcdp").opendp_measurement(dp, scale)


def gaussian_rho(dp, integer: bool, scale: float, sensitivity: float) -> float:
    """The ρ OpenDP's map certifies for the Gaussian measurement at ``scale`` and L2 sensitivity Δ."""
    d_in = int(round(sensitivity)) if integer else float(sensitivity)
    return float(gaussian_measurement(dp, integer, scale).map(d_in))


def gaussian_variance(integer: bool, scale: float) -> float:
    """Variance of the Gaussian noise at scale σ: σ² (continuous), the discrete Gaussian's (below σ²)."""
    from ..privacy.gaussian import discrete_gaussian_variance
    return float(discrete_gaussian_variance(scale)) if integer else float(scale) ** 2


@functools.lru_cache(maxsize=4096)
def gaussian_certified_epsilon(rho: float, delta: float) -> float:
    """The ε recorded for a Gaussian measurement that OpenDP certifies ρ-zCDP, at δ: the analytic curve at the
    effective μ = √(2ρ) (exact for a Gaussian: its privacy profile; OpenDP's ρ includes its own rounding of
    floats), moved up by a relative 2⁻³⁰ so that the vetted accountant's evaluation confirms it strictly."""
    from ..privacy.gaussian import gaussian_epsilon
    return float(gaussian_epsilon(math.sqrt(2.0 * rho), delta)) * (1.0 + _CONFIRM_MARGIN)


def confirm_gaussian(rho: float, epsilon: float, delta: float) -> float:
    """dp-accounting's δ(ε) for the Gaussian mechanism of μ = √(2ρ) (``GaussianPrivacyLoss``, a vetted
    accountant); raises when it exceeds ``delta`` (the (ε, δ) would not be confirmed) and ImportError with the
    install hint when dp-accounting is missing."""
    try:
        from dp_accounting.pld import privacy_loss_mechanism as plm
    except ImportError as exc:
        raise ImportError(ACCOUNTING_HINT) from exc
    loss = plm.GaussianPrivacyLoss(1.0 / math.sqrt(2.0 * rho), sensitivity=1.0)
    theirs = float(loss.get_delta_for_epsilon(float(epsilon)))
    if not theirs <= delta:
        raise RuntimeError(f"dp-accounting does not confirm (epsilon, delta) = ({epsilon!r}, {delta!r}) for a Gaussian "
                           f"of rho = {rho!r}: its delta is {theirs!r}")
    return theirs


def search_gaussian_scale(dp, integer: bool, sensitivity: float, sigma: float, fits,
                          rho_of=None) -> tuple[float, float]:
    """(scale, ρ): the smallest float scale ≥ the calibrated ``sigma`` (the design's σ, docs/gaussian.md) whose
    OpenDP-certified ρ passes ``fits(ρ)``; OpenDP's rounding may need a scale an ulp or two above σ. ``rho_of``
    (scale → ρ) is the certifying map when it is not the plain vector measurement's (a mean's chain). Bounded:
    ulp steps first, then relative steps of 2^-40 doubling (60 at most)."""
    if rho_of is None:
        def rho_of(s):
            return gaussian_rho(dp, integer, s, sensitivity)
    gaussian_rho_of = rho_of
    scale = float(sigma)
    for _ in range(_ULP_STEPS):
        rho = gaussian_rho_of(scale)
        if fits(rho):
            return scale, rho
        scale = math.nextafter(scale, math.inf)
    step = 2.0 ** -40
    for _ in range(60):
        scale = float(sigma) * (1.0 + step)
        rho = gaussian_rho_of(scale)
        if fits(rho):
            return scale, rho
        step *= 2.0
    raise RuntimeError(f"no Gaussian scale near sigma = {sigma!r} fits the budget")   # pragma: no cover


def zcdp_to_approx_by_opendp(dp, integer: bool, scale: float, sensitivity: float, delta: float) -> float:
    """OpenDP's own conversion of the Gaussian measurement's ρ to ε at ``delta`` (``make_zCDP_to_approxDP`` then
    ``make_fix_delta``: Canonne, Kamath & Steinke's bound), recorded beside the analytic ε (the price of
    converting through zCDP). Deterministic: cached."""
    return _zcdp_to_approx(dp, bool(integer), float(scale), float(sensitivity), float(delta))


@functools.lru_cache(maxsize=4096)
def _zcdp_to_approx(dp, integer: bool, scale: float, sensitivity: float, delta: float) -> float:
    meas = gaussian_measurement(dp, integer, scale)
    fixed = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), float(delta))
    d_in = int(round(sensitivity)) if integer else float(sensitivity)
    return float(fixed.map(d_in)[0])


def amplified_approx_by_opendp(dp, epsilon_nominal: float, delta_nominal: float, n: int, N: int) -> tuple[float, float]:
    """OpenDP's population amplification of an (ε, δ)-DP mechanism (fixed δ) on an SRS of n out of N
    (``make_population_amplification`` accepts ``Approximate(MaxDivergence)`` in OpenDP 0.16): the cross-check
    of the ledger's log1p(q·expm1(ε)), q·δ. The inner measurement is a stand-in carrying that map."""
    if n == N:
        return float(epsilon_nominal), float(delta_nominal)
    with honest_but_curious(dp):
        inner = dp.m.make_user_measurement(
            dp.vector_domain(dp.atom_domain(T=float), size=int(n)), dp.symmetric_distance(),
            dp.approximate(dp.max_divergence()), function=lambda _x: 0.0,
            privacy_map=lambda d_in: (float(epsilon_nominal) * ((int(d_in) + 1) // 2),
                                      float(delta_nominal) * ((int(d_in) + 1) // 2)))
        amp = dp.c.make_population_amplification(inner, population_size=int(N))
        e, d = amp.map(2)
        return float(e), float(d)
