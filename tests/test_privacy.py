"""Privacy layer: closed forms (mpmath at 50 digits), round trips, and Monte Carlo of the samplers."""

import math

import mpmath as mp
import numpy as np
import pytest

from dpopt import privacy

mp.mp.dps = 50
EPS = [1e-6, 1e-4, 0.01, 0.3, 1.0, 3.0, 20.0, 100.0, 700.0]
RATES = [1e-9, 1e-4, 0.01, 0.37, 1.0]


def _amp_exact(e, q):
    return mp.log(1 + mp.mpf(q) * mp.expm1(mp.mpf(e)))


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("q", RATES)
def test_amplification_matches_high_precision(eps, q):
    got = privacy.central_epsilon(eps, q)
    assert got == pytest.approx(float(_amp_exact(eps, q)), rel=1e-13)
    nom = privacy.nominal_epsilon(eps, q)
    assert nom == pytest.approx(float(mp.log(1 + mp.expm1(mp.mpf(eps)) / q)), rel=1e-13)
    # round trip both ways
    assert privacy.central_epsilon(nom, q) == pytest.approx(eps, rel=1e-12)
    assert privacy.nominal_epsilon(got, q) == pytest.approx(eps, rel=1e-9 if got > 1e-12 else 1e-6)


def test_amplification_basic_facts():
    assert privacy.central_epsilon(2.0, 1.0) == pytest.approx(2.0, rel=1e-15)
    e = np.array([0.5, 1.0, 2.0])
    assert np.all(privacy.central_epsilon(e, 0.1) < e)
    # Hu et al.: a 1% sample at eps = 1 may spend eps_n = 5.15
    assert round(float(privacy.nominal_epsilon(1.0, 0.01)), 2) == 5.15


def test_delta_forms():
    assert privacy.central_delta(1e-3, 0.1) == pytest.approx(1e-4)
    assert privacy.nominal_delta(1e-5, 0.01) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="exceeds 1"):
        privacy.nominal_delta(0.5, 0.1)
    e, d = privacy.nominal_epsilon_delta(1.0, 1e-6, 0.01)
    assert privacy.central_epsilon_delta(e, d, 0.01) == pytest.approx((1.0, 1e-6))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon(bad):
    with pytest.raises(ValueError, match="epsilon"):
        privacy.central_epsilon(bad, 0.5)
    with pytest.raises(ValueError, match="epsilon"):
        privacy.nominal_epsilon(bad, 0.5)


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_bad_rate(bad):
    with pytest.raises(ValueError, match="q"):
        privacy.central_epsilon(1.0, bad)


def test_bad_scheme_and_mechanism():
    with pytest.raises(TypeError, match="scheme"):           # SRSWOR and Poisson amplify alike: no argument
        privacy.central_epsilon(1.0, 0.5, scheme="poisson")
    with pytest.raises(ValueError, match="mechanism"):
        privacy.get_mechanism("gaussian")
    with pytest.raises(ValueError, match="sensitivity"):
        privacy.noise_variance("tulap", 1.0, sensitivity=2)
    with pytest.raises(ValueError, match="sensitivity"):
        privacy.noise_variance("dlap", 1.0, sensitivity=1.5)
    with pytest.raises(ValueError, match="sensitivity"):
        privacy.noise_variance("laplace", 1.0, sensitivity=0)


def _dlap_var_exact(eps, sens):
    p = mp.exp(-mp.mpf(eps) / sens)
    return 2 * p / (1 - p) ** 2


@pytest.mark.parametrize("eps", EPS)
def test_variance_closed_forms(eps):
    assert privacy.noise_variance("laplace", eps, 2.0) == pytest.approx(8.0 / eps ** 2, rel=1e-14)
    for sens in (1, 3):
        exact = float(_dlap_var_exact(eps, sens))
        assert privacy.noise_variance("dlap", eps, sens) == pytest.approx(exact, rel=1e-12, abs=1e-300)
    assert privacy.noise_variance("tulap", eps) == pytest.approx(float(_dlap_var_exact(eps, 1)) + 1 / 12, rel=1e-12)


@pytest.mark.parametrize("eps", [1e-5, 0.2, 0.49, 0.51, 2.0, 30.0, 600.0])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_dlap_remainder_and_derivatives(eps, order):
    """The smooth remainder h(ε/Δ) = Var_DLap − 2Δ²/ε² and its derivatives, against mpmath."""
    sens = 2
    mech = privacy.DiscreteLaplace()
    f = lambda e: _dlap_var_exact(e, sens) - 2 * mp.mpf(sens) ** 2 / e ** 2  # noqa: E731
    exact = float(mp.diff(f, mp.mpf(eps), order))
    got = mech.remainder(eps, sens) if order == 0 else mech.remainder_derivative(eps, sens, order)
    assert float(got) == pytest.approx(exact, rel=1e-10, abs=1e-14 * max(1.0, abs(exact)))


def _sample_var_check(draws, var, mu4):
    """Sample variance within 5 standard errors: sd(s²) ≈ sqrt((μ4 − σ⁴)/n)."""
    n = draws.size
    se = math.sqrt((mu4 - var ** 2) / n)
    assert abs(draws.var() - var) < 5 * se, (draws.var(), var, se)


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_samplers_monte_carlo(eps):
    n = 200_000
    b = 1.5 / eps
    x = privacy.Laplace().sample(eps, 1.5, size=n, rng=1)
    _sample_var_check(x, 2 * b * b, 24 * b ** 4)
    for mech, extra in ((privacy.DiscreteLaplace(), 0.0), (privacy.TuLap(), 1 / 12)):
        k = mech.sample(eps, 1, size=n, rng=2)
        p = math.exp(-eps)
        ks = np.arange(-400, 401)
        pmf = (1 - p) / (1 + p) * p ** np.abs(ks)
        var_k = float(np.sum(pmf * ks ** 2))
        mu4_k = float(np.sum(pmf * ks ** 4))
        if extra:
            # K + U: fourth central moment E(K+U)^4 = μ4_K + 6 var_K var_U + E U^4
            mu4 = mu4_k + 6 * var_k * extra + 1 / 80
        else:
            mu4 = mu4_k
            assert np.all(k == np.round(k))
        assert mech.variance(eps) == pytest.approx(var_k + extra, rel=1e-9)
        _sample_var_check(k, var_k + extra, mu4)


def test_sampler_is_seeded():
    a = privacy.TuLap().sample(1.0, size=10, rng=7)
    b = privacy.TuLap().sample(1.0, size=10, rng=7)
    assert np.array_equal(a, b)
