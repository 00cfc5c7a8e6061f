"""The mechanism interface (docs/privacy.md#the-mechanism-interface): the built-ins' capabilities agree with
closed forms, user classes do not inherit another noise's capabilities, a user's own capability is checked
against its variance, and every refusal reads "unsupported, because …"."""

import math

import numpy as np
import pytest

import dpopt
from dpopt.privacy import DiscreteLaplace, Laplace, Mechanism, PureDP, TuLap, Unsupported, get_mechanism
from dpopt.privacy.mechanisms import CAPABILITIES, SUPPORTED, MechanismUnsupported


@pytest.mark.parametrize("eps", [1e-6, 1e-3, 0.3, 1.0, 7.0, 40.0])
def test_growth_coefficients_are_the_closed_form(eps):
    """DLap at Δ = 1: 2p/(1−p)² with p = e^{−ε} equals 0 + 2/y + 2/y², y = expm1(ε); TuLap adds 1/12."""
    y = math.expm1(eps)
    p = math.exp(-eps)
    dlap = 2 * p / (-math.expm1(-eps)) ** 2            # closed form, expm1 to keep 1 − p exact
    for mech, extra in ((DiscreteLaplace(), 0.0), (TuLap(), 1 / 12)):
        c0, c1, c2 = mech.growth_coefficients(1.0)
        assert c0 + c1 / y + c2 / y ** 2 == pytest.approx(dlap + extra, rel=1e-12)
        assert float(mech.variance(eps, 1.0)) == pytest.approx(dlap + extra, rel=1e-12)


def test_support_is_uniform():
    for name in ("laplace", "dlap", "tulap"):
        m = get_mechanism(name)
        assert isinstance(m.guarantee, PureDP)
        assert m.support("opendp_measurement") is SUPPORTED and m.support("pyomo_variance") is SUPPORTED
    assert m.integer_data and not Laplace().integer_data
    why = Laplace().support("growth_coefficients")
    assert isinstance(why, Unsupported) and str(why).startswith("growth_coefficients unsupported, because")
    why = DiscreteLaplace().support("growth_coefficients", 2.0)
    assert not why and "only at sensitivity 1" in str(why)
    with pytest.raises(MechanismUnsupported, match="growth_coefficients unsupported, because"):
        Laplace().require("growth_coefficients")
    with pytest.raises(ValueError, match="capability must be one of"):
        Laplace().support("sampler")
    assert set(CAPABILITIES) == {"pyomo_variance", "cvxpy_variance", "growth_coefficients", "opendp_measurement"}


def test_user_subclass_of_dlap_loses_the_release_and_integer_data():
    class Scaled(DiscreteLaplace):
        def variance(self, epsilon, sensitivity=1.0):
            return 3.0 * DiscreteLaplace.variance(self, epsilon, sensitivity)

    m = Scaled()
    for cap in CAPABILITIES:
        assert not m.support(cap), cap
    assert m.integer_data is False and m.convex_terms_proven([1.0]) is False
    from dpopt.release._opendp import releasable
    with pytest.raises(MechanismUnsupported, match="'dlap' cannot be released: opendp_measurement unsupported"):
        releasable(m)
    # a built-in keeps its specialised parts; a subclass that only renames it keeps them too
    class Renamed(DiscreteLaplace):
        name = "renamed"
    assert Renamed().support("opendp_measurement") and Renamed().integer_data


def test_user_growth_coefficients_checked_against_variance():
    class Wrong(Mechanism):
        name = "wrong-growth"

        def variance(self, epsilon, sensitivity=1.0):
            y = np.expm1(np.asarray(epsilon, dtype=float))
            return 3.0 / y + 3.0 / y / y      # no overflow of y² at ε = 700

        def growth_coefficients(self, sensitivity=1.0):
            return (0.0, 2.0, 2.0)          # DLap's, not this variance's

    with pytest.raises(ValueError, match="growth_coefficients disagrees with variance"):
        dpopt.StratifiedDesign([20, 30], [1.0, 2.0], 20, 1.0, mechanism=Wrong())


def test_user_growth_coefficients_give_the_linear_form():
    """A user mechanism with variance 3/y + 3/y² + 0.5 and those coefficients gets the exact linear form:
    f_i(n) = N²(S² + 0.5)/n + 3N²/(cN) + 3N²n/(cN)² (y = cN/n after amplification), checked in closed form."""
    class Growth(Mechanism):
        name = "growth"

        def variance(self, epsilon, sensitivity=1.0):
            y = np.expm1(np.asarray(epsilon, dtype=float))
            return 0.5 + 3.0 / y + 3.0 / y / y

        def growth_coefficients(self, sensitivity=1.0):
            return (0.5, 3.0, 3.0)

    N, S2, eps = np.array([20.0, 30.0]), np.array([1.0, 2.0]), 0.7
    d = dpopt.StratifiedDesign(N, S2, 20, eps, mechanism=Growth())
    a, b, const = d.linear_noise_form()
    cN = math.expm1(eps) * N
    assert a == pytest.approx(N ** 2 * (S2 + 0.5), rel=1e-13)
    assert b == pytest.approx(3 * N ** 2 / cN ** 2, rel=1e-13)
    assert const == pytest.approx(3 * N ** 2 / cN, rel=1e-13)
    x = np.array([7.0, 13.0])
    assert d.terms(x) == pytest.approx(a / x + b * x + const, rel=1e-12)
