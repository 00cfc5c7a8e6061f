"""SampleSizeProgram (Hu, Drechsler & Kim): paper numbers, exactness against brute force, bad input."""

import math

import numpy as np
import pytest

from dpopt.privacy import nominal_epsilon
from dpopt.models.sample_size import (SampleSizeProgram, epsilon_for_noise_ratio,
                                      no_gain_bound, noise_ratio, q_bound, rate_for_q_bound)


# ---------------------------------------------------------------- independent oracle (plain formulas)
def oracle_V(N, S2, eps, delta_of_n, n):
    n = np.asarray(n, dtype=float)
    eps_n = np.log(1.0 + (N / n) * math.expm1(eps))
    return (1.0 - n / N) * S2 / n + 2.0 * (delta_of_n(n) / eps_n) ** 2


def oracle_scan(N, S2, eps, delta_of_n):
    n = np.arange(1, N + 1, dtype=float)
    v = oracle_V(N, S2, eps, delta_of_n, n)
    i = int(np.argmin(v))
    return int(n[i]), float(v[i]), v


def assert_same_optimum(sol, N, S2, eps, delta_of_n):
    n_or, v_or, v = oracle_scan(N, S2, eps, delta_of_n)
    n_star = sol.n
    # the same integer, unless the two values tie to rounding (then the values must agree)
    if n_star != n_or:
        assert abs(v[n_star - 1] - v_or) <= 1e-12 * v_or, (n_star, n_or)
    assert sol.objective == pytest.approx(v_or, rel=1e-11)


# ---------------------------------------------------------------- paper numbers
def test_paper_nominal_epsilon_of_a_one_percent_sample():
    # "to achieve eps = 1 based on a 1% simple random sample it would be sufficient to use eps_n = 5.15"
    assert round(float(nominal_epsilon(1.0, 0.01)), 2) == 5.15


def test_paper_q_bound_rates():
    # sampling variance 0.6 V_N: rate must be below 16.77% for eps = 3 and 61.4% for eps = 0.1
    assert round(100 * rate_for_q_bound(3.0, 0.6), 2) == 16.77
    assert round(100 * rate_for_q_bound(0.1, 0.6), 1) == 61.4
    assert float(q_bound(3.0, rate_for_q_bound(3.0, 0.6))) == pytest.approx(0.6, rel=1e-12)


def test_paper_q_small_eps_limit():
    # paper: for eps -> 0, q -> 1 - (n/N)^2
    for r in (0.05, 0.3, 0.8):
        assert float(q_bound(1e-7, r)) == pytest.approx(1 - r * r, rel=1e-5)


@pytest.mark.parametrize("N,eps,R,S2", [(1000, 0.5, 1.0, 0.01), (10001, 0.1, 1.0, 1e-6), (10**9, 1.0, 10.0, 4.0),
                                        (5000, 1e-6, 1.0, 0.0), (777, 700.0, 3.0, 1.0)])
def test_mean_never_gains(N, eps, R, S2):
    sol = SampleSizeProgram(N, S2, eps, sensitivity="mean", value_range=R).solve()
    assert sol.status == "optimal"
    assert sol.n == N and not sol.helps and sol.gain == pytest.approx(1.0)
    assert sol.V_N == pytest.approx(2 * (R / (N * eps)) ** 2, rel=1e-12)


def test_noise_ratio_below_one_and_small_eps_expansion():
    q = np.array([1e-4, 0.01, 0.3, 0.9])
    for eps in (1e-6, 1e-3, 0.1, 1.0, 5.0, 700.0):
        r = noise_ratio(eps, q)
        assert np.all(r < 1) and np.all(r > q * q * (1 - 1e-12))
    # 1 - r ~ eps (1 - q)/q for small eps
    eps = 1e-8
    deficit = 1 - noise_ratio(eps, 0.25)
    assert deficit == pytest.approx(eps * 0.75 / 0.25, rel=1e-4)
    assert noise_ratio(1.0, 1.0) == pytest.approx(1.0, rel=1e-15)


def test_epsilon_for_noise_ratio():
    # below 1 it is solvable and matches the expansion; at 1 there is no finite solution
    e = epsilon_for_noise_ratio(0.2, 1 - 1e-6)
    assert e == pytest.approx(1e-6 * 0.2 / 0.8, rel=1e-4)
    assert float(noise_ratio(e, 0.2)) == pytest.approx(1 - 1e-6, abs=1e-15)
    e2 = epsilon_for_noise_ratio(0.01, 0.5)
    assert float(noise_ratio(e2, 0.01)) == pytest.approx(0.5, rel=1e-10)
    with pytest.raises(ValueError, match="no epsilon"):
        epsilon_for_noise_ratio(1e-4, 1.0)
    with pytest.raises(ValueError):
        epsilon_for_noise_ratio(0.1, 0.001)   # below rate^2


def test_no_gain_bound_matches_definition():
    eps, rate, d = 0.7, 0.05, 0.3
    en = math.log1p(math.expm1(eps) / rate)
    assert float(no_gain_bound(eps, rate, d)) == pytest.approx(2 * d * d * (eps ** -2 - en ** -2), rel=1e-12)
    m = SampleSizeProgram(1000, 5.0, eps, sensitivity=d)
    n = np.array([10.0, 50.0, 400.0])
    samp = (1 - n / 1000) * 5.0 / n
    bound = 2 * d * d * (eps ** -2 - np.log1p(1000 / n * math.expm1(eps)) ** -2)
    assert np.array_equal(m.no_gain(n), samp >= bound)
    # wherever the bound says "no gain", V_n >= V_N indeed
    v = m.variance(np.arange(1, 1001))
    assert np.all(v[m.no_gain(np.arange(1, 1001))] >= m.V_N * (1 - 1e-12))


# ---------------------------------------------------------------- exactness against a full scan
@pytest.mark.parametrize("seed", range(8))
def test_constant_sensitivity_matches_scan(seed):
    rng = np.random.default_rng(seed)
    N = int(rng.integers(50, 3000))
    eps = float(10 ** rng.uniform(-2, 1))
    d = float(10 ** rng.uniform(-3, 0))
    S2 = float(10 ** rng.uniform(-6, 0))
    m = SampleSizeProgram(N, S2, eps, sensitivity=d)
    for method in ("scan", "bnb"):
        sol = m.solve(method=method)
        assert sol.status == "optimal"
        assert_same_optimum(sol, N, S2, eps, lambda n: np.full_like(n, d))


@pytest.mark.parametrize("seed", range(4))
def test_mean_sensitivity_matches_scan(seed):
    rng = np.random.default_rng(100 + seed)
    N = int(rng.integers(50, 3000))
    eps, R, S2 = float(10 ** rng.uniform(-3, 1)), float(rng.uniform(0.1, 10)), float(10 ** rng.uniform(-6, 1))
    sol = SampleSizeProgram(N, S2, eps, sensitivity="mean", value_range=R).solve(method="bnb")
    assert_same_optimum(sol, N, S2, eps, lambda n: R / n)
    assert sol.n == N


@pytest.mark.parametrize("seed", range(6))
def test_callable_sensitivity_matches_scan(seed):
    rng = np.random.default_rng(200 + seed)
    N = int(rng.integers(50, 3000))
    eps, S2 = float(10 ** rng.uniform(-2, 1)), float(10 ** rng.uniform(-5, 0))
    k, p = float(10 ** rng.uniform(-2, 1)), float(rng.uniform(0.05, 1.2))
    fn = lambda n: k / np.asarray(n, dtype=float) ** p  # noqa: E731  nonincreasing
    for trend in (None, "nonincreasing"):
        m = SampleSizeProgram(N, S2, eps, sensitivity=fn, sensitivity_trend=trend)
        sol = m.solve(method="scan" if trend is None else "bnb")
        assert sol.status == "optimal"
        assert_same_optimum(sol, N, S2, eps, fn)
    # a nondecreasing sensitivity (e.g. growing with n) and a non-vectorised callable
    g = lambda n: k * (1 + math.log(n)) ** p  # noqa: E731
    m = SampleSizeProgram(N, S2, eps, sensitivity=g, sensitivity_trend="nondecreasing")
    sol = m.solve(method="bnb")
    assert_same_optimum(sol, N, S2, eps, np.vectorize(g))


def test_bnb_matches_scan_at_large_N():
    # N = 2e7 still scannable by the (independent) oracle in chunks
    N, S2, eps, d = 20_000_000, 1.0, 1.0, 3e-4
    sol = SampleSizeProgram(N, S2, eps, sensitivity=d).solve(method="bnb")
    best_n, best_v = 0, np.inf
    for start in range(1, N + 1, 4_000_000):
        n = np.arange(start, min(N, start + 4_000_000 - 1) + 1, dtype=float)
        v = oracle_V(N, S2, eps, lambda x: np.full_like(x, d), n)
        i = int(np.argmin(v))
        if v[i] < best_v:
            best_n, best_v = int(n[i]), float(v[i])
    assert sol.objective == pytest.approx(best_v, rel=1e-12)
    assert abs(sol.n - best_n) <= 2000   # flat optimum: values agree to 1e-12


def test_population_1e9():
    N, S2, eps, d = 10**9, 1.0, 1.0, 3e-5
    m = SampleSizeProgram(N, S2, eps, sensitivity=d)
    sol = m.solve()
    assert sol.status == "optimal" and sol.method == "bnb" and sol.wall_time < 10
    n_star = sol.n
    # no better point in a dense window nor on a coarse global grid (independent formula)
    win = np.arange(max(1, n_star - 200_000), min(N, n_star + 200_000) + 1, dtype=float)
    grid = np.unique(np.round(np.geomspace(1, N, 200_000)))
    for pts in (win, grid):
        assert np.min(oracle_V(N, S2, eps, lambda x: np.full_like(x, d), pts)) >= sol.objective * (1 - 1e-12)
    assert sol.helps and sol.gain > 1
    assert sol.epsilon_n == pytest.approx(math.log1p(N / n_star * math.expm1(eps)), rel=1e-13)


def test_solution_fields():
    m = SampleSizeProgram(10000, 1.0, 1.0, delta=1e-5, sensitivity=0.01)
    sol = m.solve()
    n = sol.n
    assert sol.delta_n == pytest.approx(10000 * 1e-5 / n)
    assert sol.V_N == pytest.approx(2 * 0.01 ** 2, rel=1e-13)
    assert sol.gain == pytest.approx(sol.V_N / sol.V_n)
    assert sol.sampling_variance == pytest.approx((1 - n / 10000) / n, rel=1e-12)
    text = m.report(sol)
    assert "gain" in text and str(n) in text
    c = m.curve(points=50)
    assert np.all(np.diff(c["rate"]) > 0) and np.min(c["variance"]) >= sol.objective * (1 - 1e-12)


def test_callable_without_trend_large_N_is_unsupported():
    m = SampleSizeProgram(10**8, 1.0, 1.0, sensitivity=lambda n: 1 / np.sqrt(n))
    sol = m.solve(scan_limit=10**6)
    assert sol.status == "unsupported" and "sensitivity_trend" in sol.message


def test_declared_trend_violated_is_an_error():
    m = SampleSizeProgram(10**6, 1.0, 1.0, sensitivity=lambda n: np.sqrt(n), sensitivity_trend="nonincreasing")
    sol = m.solve(method="bnb")
    assert sol.status == "error" and "not nonincreasing" in sol.message


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    (dict(N=0, S2=1, epsilon=1, sensitivity=1.0), "N"),
    (dict(N=10, S2=-1, epsilon=1, sensitivity=1.0), "S2"),
    (dict(N=10, S2=1, epsilon=0, sensitivity=1.0), "epsilon"),
    (dict(N=10, S2=1, epsilon=-1, sensitivity=1.0), "epsilon"),
    (dict(N=10, S2=1, epsilon=1, delta=1.0, sensitivity=1.0), "delta"),
    (dict(N=10, S2=1, epsilon=1, delta=-0.1, sensitivity=1.0), "delta"),
    (dict(N=10, S2=1, epsilon=1, sensitivity="mean"), "value_range"),
    (dict(N=10, S2=1, epsilon=1, sensitivity=0.0), "sensitivity"),
    (dict(N=10, S2=1, epsilon=1, sensitivity=-2.0), "sensitivity"),
    (dict(N=10, S2=1, epsilon=1, sensitivity=float("inf")), "sensitivity"),
    (dict(N=10, S2=1, epsilon=1, sensitivity=float("nan")), "sensitivity"),
    (dict(N=10, S2=1, epsilon=1, sensitivity="median"), "sensitivity"),
    (dict(N=10, S2=1, epsilon=1, sensitivity="mean", value_range=0), "value_range"),
    (dict(N=10.5, S2=1, epsilon=1, sensitivity=1.0), "N"),
])
def test_bad_input(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        SampleSizeProgram(**kwargs)


def test_bad_callable_values_and_delta_at_optimum():
    # faults found while solving are reported on the Solution (the registry never raises for them)
    m = SampleSizeProgram(100, 1.0, 1.0, sensitivity=lambda n: -1.0)
    with pytest.raises(ValueError, match="finite and > 0"):
        m.sensitivity_at([1.0, 2.0])
    sol = m.solve()
    assert sol.status == "error" and "finite and > 0" in sol.message and sol.n is None
    m = SampleSizeProgram(100, 1.0, 1.0, sensitivity=lambda n: np.where(n > 50, np.nan, 1.0))
    sol = m.solve()
    assert sol.status == "error" and "finite and > 0" in sol.message
    # constant sensitivity, unconstrained optimum far below N: delta = 0.1 makes delta_n = N*delta/n > 1 there,
    # so the delta-constrained program (n >= N*delta = 1000) is solved instead (brute force over n_min..N)
    m = SampleSizeProgram(10000, 1e-4, 1.0, delta=0.1, sensitivity=1.0)
    n = np.arange(1, 10001, dtype=float)
    assert int(n[np.argmin(m.variance(n))]) < 1000
    feasible = n[n >= 1000]
    best = int(feasible[np.argmin(m.variance(feasible))])
    assert m.n_min == 1000
    for backend in ("exact", "scipy"):
        sol = m.solve(backend)
        assert sol.status in ("optimal", "feasible") and sol.n == best and sol.delta_n <= 1
    with pytest.raises(ValueError, match="delta_n"):
        m.make_solution(n=10)
    with pytest.raises(ValueError, match="rate"):
        q_bound(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        noise_ratio(-1.0, 0.5)


def test_model_file(tmp_path):
    from dpopt.io import modelfile
    p = tmp_path / "m.toml"
    p.write_text('family = "sample_size"\nN = 10000\nS2 = 1.0\nepsilon = 1.0\nsensitivity = 0.01\n')
    model, _ = modelfile.load(p)
    assert model.solve().n == oracle_scan(10000, 1.0, 1.0, lambda n: np.full_like(n, 0.01))[0]
    p.write_text('family = "sample_size"\nN = 100\nS2 = 1.0\nepsilon = 1.0\nsensitivity = "mean"\n')
    with pytest.raises(ValueError, match="value_range"):
        modelfile.load(p)
    p.write_text('family = "sample_size"\nN = 100\nS2 = 1.0\nepsilon = 1.0\nbogus = 1\n')
    with pytest.raises(ValueError, match="unknown key"):
        modelfile.load(p)


def test_repository_model_files():
    from pathlib import Path

    from dpopt.io import modelfile
    root = Path(__file__).resolve().parents[1] / "models"
    m, _ = modelfile.load(root / "hu_mean_no_gain.toml")
    assert m.solve().n == 10001
    m, _ = modelfile.load(root / "hu_constant_sensitivity.toml")
    sol = m.solve()
    _, v_or, _ = oracle_scan(10**6, 1.0, 1.0, lambda n: np.full_like(n, 0.001))
    assert sol.objective == pytest.approx(v_or, rel=1e-12) and sol.helps
    m, _ = modelfile.load(root / "fay_laplace_sum.toml")
    sol = m.solve()
    assert sol.status == "optimal" and sol.max_psi <= 1.0 + 1e-12 and sol.x.max() == 1.0


def test_plot_data_consistency():
    from dpopt.plots.sample_size import importance_data, q_bound_data
    d = q_bound_data(eps=(3.0,), rates=[0.1676, 0.1678])
    assert d[3.0][0] > 0.6 > d[3.0][1]
    imp = importance_data(n=200, noise_scales=[3.0, 30.0, 300.0])
    assert np.allclose(imp["psi_privacy"], imp["epsilon"], rtol=1e-12)
    assert np.all(imp["psi_uniform"] > imp["psi_privacy"])
