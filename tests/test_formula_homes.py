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
    assert privacy.laplace_variance.__module__ == "dpopt.privacy.mechanisms"


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
