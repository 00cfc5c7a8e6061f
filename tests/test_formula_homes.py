"""Each formula has one home (issue 12): the Laplace variance and the truncated-Laplace moments live in
dpopt.privacy, the hierarchy's tree in dpopt.models.tree; the models that use them read them from there."""

import numpy as np
import pytest

import dpopt
from dpopt import privacy
from dpopt.models.hierarchy import HierarchyBudget
from dpopt.models.tree import Hierarchy


def test_homes():
    assert privacy.truncated_laplace_moments.__module__ == "dpopt.privacy.truncated_laplace"
    assert dpopt.truncated_laplace_moments is privacy.truncated_laplace_moments
    assert Hierarchy.__module__ == "dpopt.models.tree" and dpopt.Hierarchy is Hierarchy
    assert privacy.laplace_variance.__module__ == "dpopt.privacy.mechanisms.laplace"


@pytest.mark.parametrize("eps,delta", [(1e-6, 1.0), (0.3, 2.0), (1.0, 1.0), (700.0, 0.5)])
def test_laplace_variance_and_derivatives(eps, delta):
    v, d1, d2 = privacy.laplace_variance(eps, delta, order=2)
    assert v == pytest.approx(2 * delta ** 2 / eps ** 2, rel=1e-15)
    assert d1 == pytest.approx(-4 * delta ** 2 / eps ** 3, rel=1e-14)
    assert d2 == pytest.approx(12 * delta ** 2 / eps ** 4, rel=1e-14)
    h = eps * 1e-5                                   # central differences of the closed form
    f = lambda e: 2 * delta ** 2 / e ** 2            # noqa: E731
    assert d1 == pytest.approx((f(eps + h) - f(eps - h)) / (2 * h), rel=1e-6)
    assert privacy.noise_variance("laplace", eps, delta) == pytest.approx(v, rel=1e-15)


def test_models_use_the_shared_formulas():
    h = dpopt.toy_hierarchy()
    m = HierarchyBudget(h, 2.0, loss="laplace-variance")
    eps = m.uniform_split()
    F, F1, F2 = m.level_terms(eps[1], 1)
    n = h.sizes[1]
    v = privacy.laplace_variance(eps[1], 1.0, order=2)
    assert (F, F1, F2) == pytest.approx(tuple(n * t for t in v), rel=1e-15)
    s = dpopt.SampleSizeProgram(1000, 2.0, 1.0, sensitivity=1.5)
    x = np.array([10.0, 500.0])
    assert s.noise_variance_at(x) == pytest.approx(2 * 1.5 ** 2 / s.epsilon_n(x) ** 2, rel=1e-15)
    tm = m.node_mse(eps[0], 0)
    assert tm == pytest.approx(privacy.laplace_variance(eps[0], 1.0)[0], rel=1e-15)


@pytest.mark.parametrize("mech", ["laplace", "dlap", "tulap"])
def test_backends_evaluate_terms_through_the_model(mech):
    """enumerate/algorithm1/cvxpy read f_i(v) from StratifiedDesign.terms (per-stratum values via idx), and
    that agrees with the plain formula α_i²(σ_i² + γ²(log1p(expm1(ε)N_i/v)))/v."""
    from dpopt.backends.exact.enumerate import _term
    d = dpopt.StratifiedDesign([50, 300, 2000], [1.0, 4.0, 0.25], 100, 0.7, mechanism=mech)
    v = np.arange(1.0, 41.0)
    for i in range(3):
        L = np.log1p(np.expm1(0.7) * d.N[i] / v)
        gam = privacy.noise_variance(mech, L)
        want = d.alpha2[i] * (d.sigma2[i] + gam) / v
        assert _term(d, i, v) == pytest.approx(want, rel=1e-13)
        full = np.tile(v[:, None], (1, 3))
        assert d.terms(v, np.full(v.size, i)) == pytest.approx([d.terms(row)[i] for row in full], rel=1e-15)


@pytest.mark.parametrize("total", [0.01, 1.0, 5.0, 60.0])
def test_laplace_variance_split_is_the_exact_optimum(total):
    """The closed form ε ∝ (w|R|)^{1/3} clipped by water-filling equals the exact KKT solve of program (6) under
    the Laplace-variance loss, and never spends more than ε_total."""
    m = HierarchyBudget(dpopt.toy_hierarchy(), total, loss="laplace-variance")
    e = m.laplace_variance_split()
    assert e.sum() <= total and e.sum() == pytest.approx(total, rel=1e-14)
    np.testing.assert_allclose(e, m.solve(backend="exact").epsilon, rtol=1e-12)
    lo, hi = m.level_bounds()
    if np.all(e > lo) and np.all(e < hi):           # nothing clipped: the plain cube-root proportions
        a = np.cbrt(m.weights * m.sizes)
        np.testing.assert_allclose(e, total * a / a.sum(), rtol=1e-14)


@pytest.mark.parametrize("tau", [0.1, 10.0, 1000.0])
def test_uniform_split_meets_the_target_at_the_smallest_level(tau):
    m = HierarchyBudget(dpopt.toy_hierarchy(), mse_target=tau, loss="laplace-variance")
    u = m.uniform_split()
    assert np.all(u == u[0]) and m.objective_value(u) <= tau
    # G(u·1) = Σ w_ℓ |R_ℓ| 2/u²: the closed-form uniform budget
    closed = np.sqrt(2.0 * float(np.sum(m.weights * m.sizes)) / tau)
    assert u[0] == pytest.approx(max(closed, m.epsilon_min), rel=1e-14)


@pytest.mark.parametrize("scale", [1e-3, 0.37, 1.0, 25.0, 1e5])
def test_variance_at_scale_reads_the_mechanisms(scale):
    """The release side's variance at an OpenDP scale s is the mechanism's variance at ε = 1, Δ = s:
    2s² (Laplace), 2p/(1−p)² with p = e^{−1/s} (DLap), that + 1/12 (TuLap)."""
    from dpopt.release._opendp import variance_at_scale
    p = np.exp(-1.0 / scale)
    dlap = 2 * p / (1 - p) ** 2
    assert variance_at_scale("laplace", scale) == pytest.approx(2 * scale ** 2, rel=1e-15)
    assert variance_at_scale("dlap", scale) == pytest.approx(dlap, rel=1e-9, abs=1e-300)
    assert variance_at_scale("tulap", scale) == pytest.approx(dlap + 1 / 12, rel=1e-9)


@pytest.mark.parametrize("eps", [1e-4, 0.05, 1.0, 30.0])
def test_truncated_laplace_mse_sum_and_its_derivatives(eps):
    """The level sum the hierarchy's solvers use: the sum of truncated_laplace_moments' MSE, and ε-derivatives
    that match central differences; compressed counts give the same sums."""
    counts = np.array([0.0, 1.0, 3.0, 3.0, 40.0, 1e4])
    delta = 2.0
    F, F1, F2 = privacy.truncated_laplace_mse_sum(eps, counts / delta, delta, order=2)
    assert F == pytest.approx(float(privacy.truncated_laplace_moments(eps, counts, delta)["mse"].sum()), rel=1e-13)
    h = eps * 1e-4
    f = lambda e: privacy.truncated_laplace_mse_sum(e, counts / delta, delta)[0]  # noqa: E731
    f1 = lambda e: privacy.truncated_laplace_mse_sum(e, counts / delta, delta, order=1)[1]  # noqa: E731
    assert F1 == pytest.approx((f(eps + h) - f(eps - h)) / (2 * h), rel=1e-6)
    assert F2 == pytest.approx((f1(eps + h) - f1(eps - h)) / (2 * h), rel=1e-6)
    z, m = np.unique(counts / delta, return_counts=True)
    assert privacy.truncated_laplace_mse_sum(eps, z, delta, 2, m.astype(float)) == pytest.approx((F, F1, F2),
                                                                                               rel=1e-13)
