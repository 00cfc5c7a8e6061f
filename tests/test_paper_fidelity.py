"""Fidelity to the papers (issue 14, item 13): Algorithm 1 in the paper's own setting, Chen's eq. (11), and
Hu et al.'s Table 1 at eps = 0.5 — each against an oracle written here, independent of dpopt's solvers."""

import math

import mpmath as mp
import numpy as np
import pytest

import dpopt
from dpopt.models.stratified import StratifiedDesign
from dpopt.simulate.sample_size import lognormal_population, simulate_sample_size


# ------------------------------------------------------------------ Algorithm 1 (Chen et al. §5.4, Fig. 7)
def laplace_mean_term(N, Ntot, s2, eps, n):
    """f_i(n) = (N_i/N)² (σ_i² + 2/ε_n²)/n, ε_n = log1p((N_i/n)·expm1(ε)) (the fpc constant is dropped)."""
    eps_n = np.log1p(N / n * math.expm1(eps))
    return (N / Ntot) ** 2 * (s2 + 2.0 / eps_n ** 2) / n


def dp_oracle(N, s2, eps, eta):
    """Exact integer optimum of Σ f_i(n_i), Σ n_i = eta, 1 ≤ n_i ≤ N_i, by dynamic programming over strata."""
    Ntot = float(np.sum(N))
    best = np.full(eta + 1, np.inf)
    best[0] = 0.0
    choice = []
    for Ni, si in zip(N, s2):
        n = np.arange(1, min(int(Ni), eta) + 1)
        f = laplace_mean_term(float(Ni), Ntot, si, eps, n.astype(float))
        new = np.full(eta + 1, np.inf)
        arg = np.zeros(eta + 1, dtype=int)
        for s in range(eta + 1):
            k = n[n <= s]
            if k.size:
                v = best[s - k] + f[:k.size]
                j = int(np.argmin(v))
                new[s], arg[s] = v[j], k[j]
        best = new
        choice.append(arg)
    n_opt, s = [], eta
    for arg in reversed(choice):
        n_opt.append(int(arg[s]))
        s -= arg[s]
    return np.array(n_opt[::-1]), float(best[eta])


@pytest.mark.parametrize("eta", [30, 40, 48])
def test_algorithm1_solves_the_papers_fig7_setting(eta):
    # was: refused (one lambda over the whole region: r = 30, 7.9e11 candidates at eta = 30)
    model = dpopt.datasets.chen_section54(10, eta)
    sol = model.solve(backend="algorithm1")
    assert sol.status == "optimal", sol.message
    assert sol.details["candidates"] < 100_000
    n_ref, g_ref = dp_oracle(model.N, model.sigma2, 1.0, eta)
    assert sol.objective == pytest.approx(model.objective_value(n_ref), rel=1e-12)
    assert np.array_equal(sol.n, n_ref)


def _small_models(seed, count):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        k = int(rng.integers(2, 5))
        N = rng.integers(4, 40, size=k)
        total = int(rng.integers(k, min(N.sum(), 60)))
        out.append(StratifiedDesign(N=N, sigma2=rng.uniform(0.0, 3.0, size=k) * rng.choice([0.0, 1.0], size=k),
                                    total=total, epsilon=float(10 ** rng.uniform(-2, 1.3)),
                                    mechanism=str(rng.choice(["laplace", "dlap", "tulap"])),
                                    objective=str(rng.choice(["mean", "a-optimal"]))))
    return out


def _all_designs(model):
    k, eta = model.k, int(model.total)
    ranges = [range(int(model.lower[i]), int(model.upper[i]) + 1) for i in range(k - 1)]
    grids = np.array(np.meshgrid(*ranges, indexing="ij")).reshape(k - 1, -1).T
    last = eta - grids.sum(axis=1)
    ok = (last >= model.lower[-1]) & (last <= model.upper[-1])
    return np.column_stack([grids[ok], last[ok]])


@pytest.mark.parametrize("model", _small_models(7, 30))
def test_every_design_better_than_n_init_is_inside_the_searched_box(model):
    """The validity claim of docs/algorithm1.md, checked by brute force over every feasible design."""
    sol = model.solve(backend="algorithm1")
    if sol.status == "feasible" and "not proven" in sol.message:
        # only an unverified convexity may withhold the proof (checked on the model itself, not the solver's word)
        assert model.convexity_verified()[0] is not True, sol.message
        # unproven, yet still judged by brute force: a feasible design no better than the true optimum
        designs = _all_designs(model)
        best = min(model.objective_value(n) for n in designs)
        assert any(np.array_equal(sol.n, n) for n in designs)
        assert model.objective_value(sol.n) >= best * (1 - 1e-12)
        return
    assert sol.status == "optimal", sol.message
    designs = _all_designs(model)
    g = np.array([model.objective_value(n) for n in designs])
    g_init = model.objective_value(sol.n_init)
    better = designs[g < g_init]
    assert np.all(better >= sol.cube_lower) and np.all(better <= sol.cube_upper)
    assert sol.objective == pytest.approx(float(g.min()), rel=1e-12)
    # the per-stratum curvature bounds hold on each radius (D_i(t) >= m_i t^2 / 2)
    xs, r, m = sol.x_star, sol.radii, sol.curvatures
    lo = np.maximum(model.lower, model.total - (model.upper.sum() - model.upper))     # every feasible n_i
    hi = np.minimum(model.upper, model.total - (model.lower.sum() - model.lower))     # lies in [lo, hi]
    for i in range(model.k):
        for t in np.linspace(-r[i], r[i], 9):
            x = np.array(xs, dtype=float)
            x[i] = min(max(xs[i] + t, float(lo[i])), float(hi[i]))
            t_eff = x[i] - xs[i]
            f1, f0, lin = model.terms(x)[i], model.terms(xs)[i], model.terms_derivative(xs, 1)[i] * t_eff
            rounding = 64 * np.finfo(float).eps * (abs(f1) + abs(f0) + abs(lin))
            assert f1 - f0 - lin >= m[i] * t_eff ** 2 / 2 * (1 - 1e-9) - rounding, (i, t_eff)


# ------------------------------------------------------------------ Chen et al. eq. (11)
def test_chen_eq11_noise_term_is_half_the_true_second_derivative():
    """The printed Hessian's noise part, evaluated in 60-digit arithmetic, is exactly half of the second
    derivative of 2α²/(x·L²), L = log(1 + c/x) (docs/paper_errors.md)."""
    with mp.workdps(60):
        alpha = mp.mpf(1)
        for N, eps, x in ((7000, 1.0, 50), (20000, 0.3, 300), (500, 5.0, 12)):
            c = N * mp.expm1(mp.mpf(eps))
            L = lambda t: mp.log(1 + c / t)  # noqa: E731
            noise = lambda t: 2 * alpha ** 2 / (t * L(t) ** 2)  # noqa: E731
            x = mp.mpf(x)
            Lx = L(x)
            printed = 2 * alpha ** 2 * (((x + c) ** 2 * Lx ** 2 - c * (4 * x + 3 * c) * Lx + 3 * c ** 2)
                                       / (x ** 3 * (x + c) ** 2 * Lx ** 4))
            true = mp.diff(noise, x, 2)
            assert abs(true / printed - 2) < mp.mpf(10) ** -40
            # and dpopt's own second derivative is the true one
            model = dpopt.StratifiedDesign(N=[N], sigma2=[0.0], total=1, epsilon=eps, objective=[1.0])
            assert float(model.terms_derivative(np.array([float(x)]), 2)[0]) == pytest.approx(float(true), rel=1e-9)


# ------------------------------------------------------------------ Hu et al. Table 1 at eps = 0.5
def _ss_median_direct(y, beta, lower, upper):
    """Smooth sensitivity of the median by eq. (4) directly: max over k of e^{-kβ}·max_t (y_{m+t} − y_{m+t−k−1}),
    y padded with lower/upper; stops when e^{-kβ}(upper − lower) can no longer beat the maximum found."""
    n = y.size
    m = (n + 1) // 2
    z = np.concatenate([[lower], y, [upper]])           # z[i] = y_i for 1 <= i <= n
    best = 0.0
    for k in range(0, 4 * n + 4):
        w = math.exp(-k * beta)
        if w * (upper - lower) <= best:
            break
        t = np.arange(0, k + 2)
        hi = np.clip(m + t, 0, n + 1)
        lo = np.clip(m + t - k - 1, 0, n + 1)
        best = max(best, w * float(np.max(z[hi] - z[lo])))
    return best


def _independent_median_mse(pop, eps, rate, draws, seed):
    """Rao-Blackwellised MSE of the smooth-sensitivity median released from an SRS (independent code)."""
    N = pop.size
    delta = 1.0 / (2 * N)
    n = int(round(rate * N))
    eps_n = math.log1p(N / n * math.expm1(eps))
    delta_n = N * delta / n
    beta = eps_n / (2 * math.log(2 / delta_n))
    theta = float(np.sort(pop)[(N + 1) // 2 - 1])
    lower, upper = float(pop.min()), float(pop.max())
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(draws):
        y = np.sort(rng.choice(pop, n, replace=False))
        med = float(y[(n + 1) // 2 - 1])
        ss = _ss_median_direct(y, beta, lower, upper)
        vals.append((med - theta) ** 2 + 2 * (2 * ss / eps_n) ** 2)
    vals = np.array(vals)
    return float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(draws))


def test_hu_lognormal_median_gains_at_eps_half():
    """Hu et al.'s Table 1 reports no gain for the log-normal(5, 0.5) median at eps >= 0.5; on log-normal
    populations of N = 10 001 drawn here the rate-0.5 sample beats the population release at eps = 0.5,
    by dpopt's simulator and by an independent Monte Carlo (docs/paper_errors.md)."""
    eps = 0.5
    for seed in (0, 2):
        pop = lognormal_population(10001, seed=seed)
        N = pop.size
        res = simulate_sample_size(pop, [eps], [0.5], draws=120, seed=seed + 100, progress=False)
        # population release: noise only, 2 (2 SS_pop / eps)^2, SS_pop by the direct formula
        beta = eps / (2 * math.log(2 / (1.0 / (2 * N))))
        ss_pop = _ss_median_direct(np.sort(pop), beta, float(pop.min()), float(pop.max()))
        mse_pop = 2 * (2 * ss_pop / eps) ** 2
        assert res.mse_population[0] == pytest.approx(mse_pop, rel=1e-12)
        assert res.mse_rb[0, 0] + 3 * res.se_rb[0, 0] < mse_pop            # dpopt: a gain
        mse, se = _independent_median_mse(pop, eps, 0.5, draws=60, seed=seed + 200)
        assert mse + 3 * se < mse_pop                                        # independent code: a gain
        assert abs(mse - res.mse_rb[0, 0]) < 4 * math.hypot(se, res.se_rb[0, 0])
        assert 1.1 < mse_pop / mse < 1.6
