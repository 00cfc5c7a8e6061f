"""The Gaussian core (dpopt/privacy/gaussian.py) against independent oracles: Google's dp-accounting (its exact
Gaussian privacy loss), OpenDP's zCDP → (ε, δ) conversion, and mpmath sums over the discrete Gaussian's support."""

import math

import numpy as np
import pytest

from dpopt.privacy import gaussian as G

EPS_GRID = [0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 5.0, 10.0, 20.0]
DELTA_GRID = [1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2]


def test_analytic_calibration_agrees_with_dp_accounting():
    """δ of dp-accounting's Gaussian privacy loss at dpopt's σ(ε, δ) is δ to 1e-6 relative, and never above it."""
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    for eps in EPS_GRID:
        for delta in DELTA_GRID:
            sigma = G.gaussian_sigma(eps, delta)
            got = plm.GaussianPrivacyLoss(sigma, sensitivity=1.0).get_delta_for_epsilon(eps)
            assert got <= delta * (1 + 1e-9) and got == pytest.approx(delta, rel=1e-6), (eps, delta, got)


def test_calibration_with_pld_accountant_and_sensitivity():
    """The PLD (discretised) accountant of dp-accounting gives the same δ to 1e-6 absolute; σ scales with Δ."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    for eps, delta in [(0.1, 1e-6), (1.0, 1e-6), (3.0, 1e-10)]:
        sigma = G.gaussian_sigma(eps, delta, sensitivity=2.5)
        d = pld.from_gaussian_mechanism(sigma, sensitivity=2.5, value_discretization_interval=1e-4)
        assert abs(d.get_delta_for_epsilon(eps) - delta) < 1e-6
        assert sigma == pytest.approx(2.5 * G.gaussian_sigma(eps, delta), rel=1e-12)


def test_analytic_beats_the_classical_bound():
    """The classical σ = Δ√(2 ln(1.25/δ))/ε (valid for ε < 1) is larger than the exact one."""
    for eps in [0.1, 0.5, 0.9]:
        for delta in [1e-10, 1e-6]:
            assert G.gaussian_sigma(eps, delta) < math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_extremes_are_finite_and_private():
    e = np.geomspace(1e-6, 700, 200)
    for delta in (1e-12, 0.5):
        mu = G.gaussian_mu(e, delta)
        assert np.all(np.isfinite(mu)) and np.all(mu > 0) and np.all(np.diff(mu) > 0)
        assert np.all(G.log_gaussian_delta(e, mu) <= math.log(delta) + 1e-12)


def test_epsilon_inverts_delta_and_matches_dp_accounting():
    plm = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    for mu in [0.05, 0.5, 1.0, 3.0]:
        for delta in [1e-10, 1e-5]:
            eps = G.gaussian_epsilon(mu, delta)
            loss = plm.GaussianPrivacyLoss(1.0 / mu, sensitivity=1.0)
            assert loss.get_delta_for_epsilon(eps) == pytest.approx(delta, rel=1e-6)       # dp-accounting's δ at ε
            if eps > 1e-3:
                assert loss.get_delta_for_epsilon(eps * (1 - 1e-6)) > delta                # and ε is the smallest
            assert G.gaussian_mu(eps, delta) == pytest.approx(mu, rel=1e-9)


def test_mu_partials_by_finite_differences():
    for eps, mu in [(0.5, 0.3), (1.0, 1.2), (5.0, 4.0)]:
        de, dm = G.gaussian_mu_partials(eps, mu)
        h = 1e-6
        fd_e = (G.gaussian_delta(eps + h, mu) - G.gaussian_delta(eps - h, mu)) / (2 * h)
        fd_m = (G.gaussian_delta(eps, mu + h) - G.gaussian_delta(eps, mu - h)) / (2 * h)
        assert de == pytest.approx(fd_e, rel=1e-6) and dm == pytest.approx(fd_m, rel=1e-6)


def test_zcdp_conversion_agrees_with_opendp():
    """ρ-zCDP → (ε, δ): dpopt's conversion equals OpenDP's make_zCDP_to_approxDP curve to 1e-9; for a Gaussian
    mechanism the exact analytic ε at μ = √(2ρ) is smaller (the price of converting through zCDP)."""
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    for scale in [0.5, 1.0, 4.0]:
        meas = dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(dp.atom_domain(T=float, nan=False),
                                                            dp.absolute_distance(T=float), scale=scale))
        rho = G.rho_from_sigma(scale)
        for delta in [1e-10, 1e-6, 1e-3]:
            want = meas.map(1.0).epsilon(delta)
            assert G.zcdp_epsilon(rho, delta) == pytest.approx(want, rel=1e-9)
            assert G.gaussian_epsilon(math.sqrt(2 * rho), delta) < want
    assert G.sigma_from_rho(G.rho_from_sigma(1.7, 2.0), 2.0) == pytest.approx(1.7, rel=1e-15)


def test_discrete_gaussian_variance_is_the_sum_over_its_support():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    for sigma in [0.05, 0.3, 0.7, 1.0, 1.5, 1.99, 2.0, 2.5, 7.0, 40.0]:
        s2 = mp.mpf(sigma) ** 2
        K = int(60 * sigma) + 5
        w = [mp.e ** (-mp.mpf(k) ** 2 / (2 * s2)) for k in range(-K, K + 1)]
        want = sum(mp.mpf(k) ** 2 * wk for k, wk in zip(range(-K, K + 1), w)) / sum(w)
        got = G.discrete_gaussian_variance(sigma)
        assert abs(got - float(want)) <= 1e-12 * float(want) + 1e-300, (sigma, got, want)
    vec = G.discrete_gaussian_variance(np.array([0.5, 3.0]))
    assert vec[1] == 9.0 and vec[0] == pytest.approx(G.discrete_gaussian_variance(0.5), rel=1e-15)


@pytest.mark.parametrize("bad", [0.0, -1.0, 1.0, float("nan")])
def test_bad_delta_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="delta"):
        G.gaussian_sigma(1.0, bad)
    with pytest.raises(ValueError, match="epsilon"):
        G.gaussian_sigma(-1.0, 1e-6)
