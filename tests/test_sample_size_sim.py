"""Simulation of released statistics over SRS draws (Hu et al. §4), at reduced sizes.

Monte Carlo tolerances: conclusions are asserted with a margin of at least 3 Monte Carlo standard
errors (``se_rb``) of the Rao–Blackwellised MSE; the population MSE is exact.
"""

import math

import numpy as np
import pytest

from dpopt.models.sample_size import SampleSizeProgram
from dpopt.simulate.sample_size import (beta_mixture_population, lognormal_population, simulate_sample_size,
                                        smooth_beta, smooth_sensitivity_median)


def brute_smooth_sensitivity(y, beta, lo, hi):
    """Paper eq. (4) literally: max_k e^{-k beta} max_{t=0..k+1} (y_{m+t} - y_{m+t-k-1}), padded."""
    n = len(y)
    m = (n + 1) // 2
    Y = lambda i: lo if i < 1 else (hi if i > n else y[i - 1])  # noqa: E731
    return max(math.exp(-k * beta) * max(Y(m + t) - Y(m + t - k - 1) for t in range(k + 2)) for k in range(n + 1))


@pytest.mark.parametrize("n", [1, 2, 3, 8, 21, 60])
def test_smooth_sensitivity_matches_eq4(n):
    rng = np.random.default_rng(n)
    Y = np.sort(rng.lognormal(0, 1, (4, n)), axis=1)
    lo, hi = 0.0, float(Y.max()) * 1.5
    for beta in (0.005, 0.2, 2.0):
        fast = smooth_sensitivity_median(Y, beta, lo, hi)
        ref = [brute_smooth_sensitivity(list(y), beta, lo, hi) for y in Y]
        assert np.allclose(fast, ref, rtol=1e-12)
    # ties in the data are handled (log of zero gaps)
    Z = np.sort(rng.integers(0, 3, (3, n)).astype(float), axis=1)
    assert np.allclose(smooth_sensitivity_median(Z, 0.3, 0.0, 3.0),
                       [brute_smooth_sensitivity(list(z), 0.3, 0.0, 3.0) for z in Z], rtol=1e-12)


def test_smooth_sensitivity_speed_population():
    pop = np.sort(lognormal_population(10001, seed=0))
    Y = np.sort(np.random.default_rng(0).choice(pop, (100, 5001)), axis=1)
    import time
    t = time.perf_counter()
    smooth_sensitivity_median(Y, smooth_beta(0.5, 1e-4), pop[0], pop[-1])
    assert time.perf_counter() - t < 5.0   # ~0.5 s expected; O(n log n) per draw


def test_mean_simulation_matches_closed_form_and_never_gains():
    pop = lognormal_population(2001, seed=4)
    R = float(pop.max() - pop.min())
    S2 = float(np.var(pop, ddof=1))
    rates = [0.05, 0.3, 0.8]
    res = simulate_sample_size(pop, [0.1, 1.0], rates, statistic="mean", draws=400, seed=1, progress=False)
    for i, e in enumerate([0.1, 1.0]):
        m = SampleSizeProgram(2001, S2, e, sensitivity="mean", value_range=R)
        v = m.variance(res.n)
        # Rao-Blackwellised MSE vs the closed form V_n, 4 standard errors
        assert np.all(np.abs(res.mse_rb[i] - v) <= 4 * res.se_rb[i])
        assert res.mse_population[i] == pytest.approx(m.V_N, rel=1e-12)
        assert np.all(res.gain[i] < 1)
    assert not any(b["helps"] for b in res.best())


def test_lognormal_median_gains_only_at_small_epsilon():
    pop = lognormal_population(2001, seed=1)
    eps = [0.1, 3.0, 5.0]
    rates = [0.05, 0.1, 0.3, 0.6]
    res = simulate_sample_size(pop, eps, rates, draws=150, seed=11, progress=False)
    pop_mse = res.mse_population[:, None]
    # eps = 0.1: sampling helps at every rate (by > 3 standard errors)
    assert np.all(res.mse_rb[0] + 3 * res.se_rb[0] < pop_mse[0])
    # eps = 3, 5: no rate helps
    assert np.all(res.mse_rb[1:] - 3 * res.se_rb[1:] > pop_mse[1:])
    # the sample's smooth sensitivity exceeds the population's and grows as n shrinks (paper Fig. 6)
    assert np.all(res.sensitivity_ratio[:, :2] > 1) and np.all(np.diff(res.sensitivity_ratio, axis=1) < 0)


def test_mixture_median_gains_up_to_epsilon_3():
    pop = beta_mixture_population(2001, seed=1)
    eps = [1.0, 3.0, 5.0]
    rates = [0.05, 0.1, 0.3]
    res = simulate_sample_size(pop, eps, rates, draws=150, seed=12, progress=False)
    pop_mse = res.mse_population[:, None]
    assert np.all(res.mse_rb[:2] + 3 * res.se_rb[:2] < pop_mse[:2])      # gains at eps = 1 and 3
    assert np.all(res.mse_rb[2] - 3 * res.se_rb[2] > pop_mse[2])          # none at eps = 5
    assert np.all(res.sensitivity_ratio < 1)                               # paper Fig. 10


def test_reproducible_and_progress_bar(capsys):
    pop = beta_mixture_population(201, seed=0)
    a = simulate_sample_size(pop, [1.0], [0.1, 0.5], draws=30, seed=5, progress=True)
    out, err = capsys.readouterr()
    assert "simulate:" in err and "/3" in err and out == ""      # the bar is on stderr only
    b = simulate_sample_size(pop, [1.0], [0.1, 0.5], draws=30, seed=5, progress=False)
    assert np.array_equal(a.mse, b.mse) and np.array_equal(a.mse_rb, b.mse_rb)
    # the drawn-noise MSE and the Rao-Blackwellised one estimate the same quantity
    assert np.all(np.abs(np.log(a.mse / a.mse_rb)) < 1.5)


def test_simulation_bad_input():
    pop = lognormal_population(101, seed=0)
    with pytest.raises(ValueError, match="rates"):
        simulate_sample_size(pop, [1.0], [1.5], draws=5, progress=False)
    with pytest.raises(ValueError, match="statistic"):
        simulate_sample_size(pop, [1.0], [0.5], statistic="mode", draws=5, progress=False)
    with pytest.raises(ValueError, match="delta"):
        simulate_sample_size(pop, [1.0], [0.5], delta=0.0, draws=5, progress=False)
    with pytest.raises(ValueError, match="sorted"):
        smooth_sensitivity_median([3.0, 1.0, 2.0], 0.1, 0.0, 5.0)
    with pytest.raises(ValueError, match="odd"):
        beta_mixture_population(100)
