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
    mech = _mechanism(mechanism)
    try:
        mech.require("opendp_measurement")
    except MechanismUnsupported as exc:
        raise MechanismUnsupported(f"mechanism {mech.name!r} cannot be released: {exc}") from None
    return mech


def noise_measurement(dp, mechanism, scale: float):
    """The vector noise measurement (L1 distance) of a mechanism at ``scale`` (TuLap: its DLap part)."""
    return releasable(mechanism).opendp_measurement(dp, scale)


def sensitivity_argument(mechanism, sensitivity: float):
    """Δ in the type the measurement's map takes (int for the integer mechanisms)."""
    return releasable(mechanism).sensitivity_argument(sensitivity)


def search_scale(dp, mechanism, sensitivity: float, epsilon: float) -> tuple[float, float]:
    """(scale, spent ε): the smallest scale near the closed form Δ/ε that OpenDP certifies ``map(Δ) ≤ epsilon``
    for, and that map.

    Both measurements' maps are Δ/scale rounded up, so Δ/ε itself passes or fails by an ulp: the scale is
    stepped up one float at a time from Δ/ε until OpenDP's own map passes (one or two measurements per
    stratum; a bisection built ~55). A map that does not behave so (another OpenDP version) falls back to
    OpenDP's ``binary_search_param``. Either way the returned scale is certified by the measurement's map."""
    mechanism = releasable(mechanism)
    d_in = mechanism.sensitivity_argument(sensitivity)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"nominal epsilon must be finite and > 0, got {epsilon!r}")
    guess = float(sensitivity) / epsilon
    scale = guess
    for _ in range(_ULP_STEPS):
        spent = float(noise_measurement(dp, mechanism, scale).map(d_in))
        if spent <= epsilon:
            break
        scale = math.nextafter(scale, math.inf)
    else:
        scale = dp.binary_search_param(lambda s: noise_measurement(dp, mechanism, s), d_in=d_in,
                                       d_out=float(epsilon), bounds=(guess * 0.5, guess * 2.0), T=float)
        spent = float(noise_measurement(dp, mechanism, scale).map(d_in))
    if spent > epsilon:   # binary_search_param promises a passing value; keep the promise checked
        raise RuntimeError(f"OpenDP scale search returned scale {scale!r} spending {spent!r} > {epsilon!r}")
    return float(scale), spent


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
    with honest_but_curious(dp):
        inner = dp.m.make_user_measurement(
            dp.vector_domain(dp.atom_domain(T=float), size=int(n)), dp.symmetric_distance(), dp.max_divergence(),
            function=lambda _x: 0.0, privacy_map=lambda d_in: float(epsilon_nominal) * ((int(d_in) + 1) // 2))
        amp = dp.c.make_population_amplification(inner, population_size=int(N))
        return float(amp.map(2))


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
