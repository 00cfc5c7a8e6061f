"""ImportanceSampling (Fay, Mair & Sjölund): closed form vs bisection vs cvxpy vs an independent root finder."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dpopt.models.importance import (ImportanceSampling, amplified_loss, bisect_optimal_weights, calibrate_epsilon,
                                     calibrate_noise_scale, coreset_probabilities, linear_optimal_weights,
                                     uniform_probabilities)


def oracle_weight(c, eps):
    """Largest w >= 1 with log(1 + (e^{cw} - 1)/w) <= eps, by brentq on the plain formula (moderate c w)."""
    a = math.expm1(eps)
    f = lambda w: math.expm1(c * w) - a * w  # noqa: E731  convex, f(0)=0, f(1)<=0
    if c == eps:
        return 1.0
    hi = 2.0
    while f(hi) <= 0:
        hi *= 2
    return brentq(f, max(1.0, hi / 2), hi, xtol=1e-14, rtol=1e-15)


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 3.0, 10.0])
def test_closed_form_matches_independent_root(eps):
    rng = np.random.default_rng(int(eps * 100))
    c = eps * rng.uniform(0.01, 1.0, 40)
    w = linear_optimal_weights(c, eps)
    ref = np.array([oracle_weight(ci, eps) for ci in c])
    assert np.allclose(w, ref, rtol=1e-10)


def test_lambert_equals_bisection_wide_range():
    rng = np.random.default_rng(7)
    for eps in (1e-6, 1e-3, 0.1, 1.0, 5.0, 40.0, 700.0):
        c = eps * 10 ** rng.uniform(-6, 0, 60)
        c[0] = eps
        w_l = linear_optimal_weights(c, eps)
        w_b = bisect_optimal_weights(lambda w, x: np.asarray(x) * w, c, eps)
        tol = 1e-8 if eps < 1e-3 else 1e-12   # ill-conditioned near eps* -> 0 (both sides)
        assert np.allclose(w_l, w_b, rtol=tol)
        assert w_l[0] == pytest.approx(1.0, abs=1e-12)          # c = eps*: "sampling for free" is w = 1
        psi = amplified_loss(1 / w_l, slopes=c)
        assert np.all(psi <= eps * (1 + 1e-12))
        # optimality: a slightly larger weight (smaller q) violates the target
        psi_up = amplified_loss(1 / (w_l * (1 + 1e-6)), slopes=c)
        assert np.all(psi_up[1:] > eps)


def test_lambert_formula_as_printed():
    # w* = -W_{-1}(-(c/a) e^{-c/a})/c - 1/a (docs/importance.md), compared with the implementation
    from scipy.special import lambertw
    eps, c = 1.0, 0.3
    a = math.expm1(eps)
    w = -lambertw(-(c / a) * math.exp(-c / a), -1).real / c - 1 / a
    assert linear_optimal_weights([c], eps)[0] == pytest.approx(w, rel=1e-12)


def test_general_profile_bisection_vs_grid():
    # a non-linear profile with exp(eps(w)) convex: eps(w, x) = x * w**1.5
    eps = 2.0
    x = np.array([0.05, 0.3, 1.0, 2.0])
    prof = lambda w, xx: np.asarray(xx) * np.asarray(w) ** 1.5  # noqa: E731
    w = bisect_optimal_weights(prof, x, eps)
    a = math.expm1(eps)
    for wi, xi in zip(w, x):
        g = lambda v: math.expm1(xi * v ** 1.5) - a * v  # noqa: E731
        hi = 2.0
        while g(hi) <= 0:
            hi *= 2
        ref = 1.0 if xi == eps else brentq(g, max(1.0, hi / 2), hi, xtol=1e-14, rtol=1e-15)
        assert wi == pytest.approx(ref, rel=1e-10)
    m = ImportanceSampling(eps, profile=prof, points=x)
    sol = m.solve()
    assert sol.status == "optimal" and sol.method == "bisection"
    assert np.allclose(sol.x, 1 / w) and sol.max_psi <= eps * (1 + 1e-12)
    # a non-vectorised profile works too (element-wise fallback)
    m2 = ImportanceSampling(eps, profile=lambda w, xx: float(xx) * float(w) ** 1.5, points=list(x))
    assert np.allclose(m2.solve().x, sol.x, rtol=1e-12)


def test_exact_bisection_and_cvxpy_agree_on_laplace_sum():
    rng = np.random.default_rng(0)
    X = rng.normal(0, math.sqrt(0.1), (300, 10))
    for b, eps in ((30.0, 1.0), (300.0, 1.0), (4.0, 3.0)):
        m = ImportanceSampling.laplace_sum(X, b, eps)
        lam = m.solve()
        bis = m.solve(method="bisection")
        cvx = m.solve("cvxpy")
        assert lam.status == "optimal" and lam.certificate.optimal
        assert np.allclose(lam.x, bis.x, rtol=1e-12)
        assert cvx.status == "optimal" and cvx.solver in ("CLARABEL", "SCS")
        assert np.allclose(cvx.x, lam.x, rtol=1e-5)
        assert cvx.objective == pytest.approx(lam.objective, rel=1e-6)


def test_cvxpy_refuses_general_profiles():
    m = ImportanceSampling(1.0, profile=lambda w, x: x * w, points=np.array([0.2, 0.5]))
    assert m.solve("cvxpy").status == "unsupported"


def test_psi_uniform_matches_formula_and_privacy_constrained_beats_uniform():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.01, 0.5, 200)
    q = np.full(200, 0.05)
    psi = amplified_loss(q, slopes=c)
    assert np.allclose(psi, np.log(1 + 0.05 * (np.exp(c / 0.05) - 1)), rtol=1e-13)
    # at the same expected size, uniform sampling has a larger worst-case loss
    m = ImportanceSampling(0.5, slopes=c)
    sol = m.solve()
    uni = uniform_probabilities(200, sol.objective)
    assert np.max(m.amplified_loss(uni)) > 0.5 * 1.01
    # large eps / tiny q: no overflow
    assert np.all(np.isfinite(amplified_loss(np.full(3, 1e-9), slopes=np.array([1.0, 2.0, 5.0]))))


def test_coreset_probabilities():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 3))
    q = coreset_probabilities(X, 20, lam=0.5)
    sq = np.sum(X ** 2, axis=1)
    assert q.sum() == pytest.approx(20)
    assert np.allclose(q, 0.5 * 20 / 500 + 0.5 * 20 * sq / (500 * sq.mean()))
    assert np.allclose(coreset_probabilities(X, 20, lam=1.0), 20 / 500)
    with pytest.raises(ValueError, match="exceed 1"):
        coreset_probabilities(X, 480, lam=0.0)


def test_calibrate_epsilon_and_noise_scale():
    rng = np.random.default_rng(5)
    X = rng.normal(0, math.sqrt(0.1), (400, 10))
    s = np.abs(X).sum(axis=1)
    b = 50.0
    # eps* for a target size: the solved size equals m
    e = calibrate_epsilon(19.0, slopes=s / b)
    assert ImportanceSampling(e, slopes=s / b).solve().objective == pytest.approx(19.0, rel=1e-9)
    # noise scale for (eps*, m)
    bb = calibrate_noise_scale(1.0, 19.0, s)
    assert ImportanceSampling.laplace_sum(X, bb, 1.0).solve().objective == pytest.approx(19.0, rel=1e-9)
    # consistency: calibrating b at the eps* found above recovers b
    assert calibrate_noise_scale(e, 19.0, s) == pytest.approx(b, rel=1e-8)
    # general profile route agrees with the linear one
    e2 = calibrate_epsilon(19.0, profile=lambda w, x: np.asarray(x) * w, points=s / b)
    assert e2 == pytest.approx(e, rel=1e-9)
    with pytest.raises(ValueError, match="unreachable"):
        calibrate_epsilon(399.0, slopes=s / b)
    with pytest.raises(ValueError):
        calibrate_noise_scale(1.0, 0.0, s)


def test_bad_input():
    with pytest.raises(ValueError, match="infeasible"):
        ImportanceSampling(0.5, slopes=[0.1, 0.6])
    with pytest.raises(ValueError, match="infeasible"):
        ImportanceSampling(0.5, profile=lambda w, x: x * w, points=np.array([0.1, 0.7]))
    with pytest.raises(ValueError, match="slopes"):
        ImportanceSampling(0.5, slopes=[0.1, 0.0])
    with pytest.raises(ValueError, match="epsilon"):
        ImportanceSampling(0.0, slopes=[0.1])
    with pytest.raises(ValueError, match="exactly one"):
        ImportanceSampling(1.0)
    with pytest.raises(ValueError, match="finite"):
        ImportanceSampling(1.0, slopes=[np.nan])
    # a profile that never grows: Problem 7 is unbounded
    with pytest.raises(ValueError, match="unbounded"):
        bisect_optimal_weights(lambda w, x: np.full_like(np.asarray(w, dtype=float), 0.1), [0], 1.0)
    with pytest.raises(ValueError, match="profile"):
        bisect_optimal_weights(lambda w, x: -np.ones_like(np.asarray(w, dtype=float)), [0], 1.0)


def test_model_file(tmp_path):
    from dpopt.io import modelfile
    p = tmp_path / "f.toml"
    p.write_text('family = "importance_sampling"\nepsilon = 1.0\nslopes = [0.1, 0.5, 1.0]\n')
    model, _ = modelfile.load(p)
    sol = model.solve()
    assert np.allclose(sol.x, [1 / oracle_weight(c, 1.0) for c in (0.1, 0.5, 1.0)], rtol=1e-10)
    assert "privacy-constrained" in model.report(sol)
    p.write_text('family = "importance_sampling"\nepsilon = 1.0\npoints = [[0.1, 0.2], [0.3, -0.1]]\nnoise_scale = 2.0\n')
    model, _ = modelfile.load(p)
    assert np.allclose(model.slopes, [0.15, 0.2])
