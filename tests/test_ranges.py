"""The README's supported ranges, edge by edge: a model at each edge is solved and checked against an oracle
written here; the value just outside is refused with an error naming the field."""

import math

import numpy as np
import pytest

import dpopt
from dpopt.models.hierarchy import Hierarchy
from test_importance_edges import oracle_q
from test_stratified_exact import oracle_objective


def brute_force_design(N, sigma2, total, eps, mech="laplace"):
    """min over every design of the independent objective (mean weights N_i/ΣN)."""
    alpha = np.asarray(N, dtype=float) / float(np.sum(N))
    best, arg = math.inf, None
    for a in range(1, total):
        n = (a, total - a)
        if n[1] < 1 or a > N[0] or n[1] > N[1]:
            continue
        v = oracle_objective(N, sigma2, alpha, eps, mech, 1.0, n)
        if v < best:
            best, arg = v, n
    return best, arg


# ------------------------------------------------------------------ stratified
@pytest.mark.parametrize("eps", [1e-6, 700.0])
def test_stratified_epsilon_edges_solve(eps):
    N, s2, total = [40, 30], [1.0, 0.0], 20
    sol = dpopt.StratifiedDesign(N=N, sigma2=s2, total=total, epsilon=eps).solve()
    best, arg = brute_force_design(N, s2, total, eps)
    assert sol.status == "optimal" and tuple(sol.n) == arg


@pytest.mark.parametrize("eps", [0.99e-6, 700.1])
def test_stratified_epsilon_outside_refused(eps):
    with pytest.raises(ValueError, match="epsilon"):
        dpopt.StratifiedDesign(N=[40, 30], sigma2=[1.0, 2.0], total=20, epsilon=eps)


def test_stratified_size_edges():
    m = dpopt.StratifiedDesign(N=[10 ** 9, 2 ** 53], sigma2=[1.0, 2.0], total=10, epsilon=1.0)
    sol = m.solve()
    best, arg = brute_force_design([10 ** 9, 2 ** 53], [1.0, 2.0], 10, 1.0)
    assert sol.status == "optimal" and tuple(sol.n) == arg
    with pytest.raises(ValueError, match=r"N must be <= 2\*\*53"):
        dpopt.StratifiedDesign(N=[10, 2 ** 53 + 1], sigma2=[1.0, 2.0], total=10, epsilon=1.0)
    with pytest.raises(ValueError, match="sigma2"):
        dpopt.StratifiedDesign(N=[10, 20], sigma2=[1.0, -1e-300], total=10, epsilon=1.0)


# ------------------------------------------------------------------ hierarchy
TREE = ([[60.0], [25.0, 35.0], [5.0, 20.0, 15.0, 20.0]], [None, [0, 0], [0, 0, 1, 1]])


def _tree_mse(eps, d=1.0):
    counts = TREE[0]
    tot = 0.0
    for e, level in zip(eps, counts):
        x = e * np.asarray(level) / d
        tot += float(np.sum((d / e) ** 2 * (2.0 - (1.0 + x) * np.exp(-x))))
    return tot


@pytest.mark.parametrize("total", [3e-6, 2100.0])
def test_hierarchy_budget_edges(total):
    """epsilon_total = L·epsilon_min and 700·L: the only feasible split is every level at its bound."""
    sol = dpopt.HierarchyBudget(Hierarchy(*TREE), total).solve()
    assert sol.status == "optimal"
    assert np.allclose(sol.x, total / 3, rtol=1e-12)
    assert sol.objective == pytest.approx(_tree_mse(sol.x), rel=1e-12)


@pytest.mark.parametrize("kw, field", [({"epsilon_min": 0.99e-6}, "epsilon_min"), ({"sensitivity": 1.1e100}, "sensitivity"),
                                       ({"sensitivity": 0.9e-100}, "sensitivity"),
                                       ({"weights": [1.0, 1.0, 1e-300]}, "weights")])
def test_hierarchy_outside_refused(kw, field):
    with pytest.raises(ValueError, match=field):
        dpopt.HierarchyBudget(Hierarchy(*TREE), 1.0, **kw)


@pytest.mark.parametrize("d", [1e-100, 1e100])
def test_hierarchy_sensitivity_edges(d):
    """At both sensitivity edges the optimum is the same split (the objective scales by d²; it is not
    truncated here since ε·N/d is huge or tiny), checked against random feasible splits."""
    m = dpopt.HierarchyBudget(Hierarchy(*TREE), 1.0, sensitivity=d)
    sol = m.solve()
    assert sol.status == "optimal" and math.isfinite(sol.objective)
    rng = np.random.default_rng(1)
    for _ in range(200):
        w = rng.dirichlet(np.ones(3))
        assert sol.objective <= _tree_mse(w, d) * (1 + 1e-9)
    with pytest.raises(ValueError, match="epsilon_total"):
        dpopt.HierarchyBudget(Hierarchy(*TREE), 2100.1)


# ------------------------------------------------------------------ sample size
def _v(N, S2, eps, d, n):
    return (1 - n / N) * S2 / n + 2 * (d / math.log1p(N / n * math.expm1(eps))) ** 2


@pytest.mark.parametrize("eps", [1e-6, 700.0])
def test_sample_size_epsilon_edges(eps):
    m = dpopt.SampleSizeProgram(2000, 5.0, eps, sensitivity=1.0)
    vals = [_v(2000, 5.0, eps, 1.0, n) for n in range(1, 2001)]
    assert m.solve().n == 1 + int(np.argmin(vals))
    with pytest.raises(ValueError, match="epsilon"):
        dpopt.SampleSizeProgram(2000, 5.0, eps * (0.99 if eps < 1 else 1.01), sensitivity=1.0)


def test_sample_size_population_edges():
    # N = 1: the only design; N = 2**53: the constant-sensitivity optimum is interior, checked by the
    # first-order condition of the continuous V_n around it
    assert dpopt.SampleSizeProgram(1, 1.0, 1.0, sensitivity=1.0).solve().n == 1
    N = 2 ** 53
    sol = dpopt.SampleSizeProgram(N, 1.0, 1.0, sensitivity=1.0).solve()
    n = sol.n
    assert sol.status == "optimal"
    assert _v(N, 1.0, 1.0, 1.0, n) <= min(_v(N, 1.0, 1.0, 1.0, n - 1), _v(N, 1.0, 1.0, 1.0, n + 1))
    with pytest.raises(ValueError, match="N"):
        dpopt.SampleSizeProgram(N + 1, 1.0, 1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="S2"):
        dpopt.SampleSizeProgram(10, -1e-300, 1.0, sensitivity=1.0)


# ------------------------------------------------------------------ sample-size study
def test_study_value_edges():
    pop = np.linspace(-1e100, 1e100, 51)
    sol = dpopt.SampleSizeStudy(pop, 1.0, statistic="mean", rates=[0.5], draws=20).solve()
    assert sol.status == "feasible" and math.isfinite(sol.objective) and np.all(np.isfinite(sol.se))
    assert sol.mse_population == pytest.approx(2 * (2e100 / 51 / 1.0) ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="population"):
        dpopt.SampleSizeStudy(pop * 1.01, 1.0, statistic="mean", draws=20)
    tiny = np.linspace(0.0, 1e-100, 51)
    sol = dpopt.SampleSizeStudy(tiny, 1.0, statistic="mean", rates=[0.5], draws=20).solve()
    assert sol.mse_population == pytest.approx(2 * (1e-100 / 51) ** 2, rel=1e-12)
    with pytest.raises(ValueError, match="population"):
        dpopt.SampleSizeStudy(tiny * 0.9, 1.0, statistic="mean", draws=20)
    for R, ok in ((1e-100, True), (2e100, True), (0.9e-100, False), (2.1e100, False)):
        if ok:
            assert dpopt.SampleSizeStudy(np.linspace(0, 1, 51), 1.0, statistic="mean", value_range=R, draws=2).N == 51
        else:
            with pytest.raises(ValueError, match="value_range"):
                dpopt.SampleSizeStudy(np.linspace(0, 1, 51), 1.0, statistic="mean", value_range=R, draws=2)


# ------------------------------------------------------------------ importance sampling
@pytest.mark.parametrize("eps", [1e-6, 700.0])
def test_importance_edges(eps):
    c = [1e-300, eps / 2, eps]
    sol = dpopt.ImportanceSampling(eps, slopes=c).solve()
    assert sol.status == "optimal" and np.allclose(sol.x, oracle_q(eps, c), rtol=1e-12)
    assert sol.x.min() >= 3e-304
    with pytest.raises(ValueError, match="slopes"):
        dpopt.ImportanceSampling(eps, slopes=[0.99e-300, eps])
    with pytest.raises(ValueError, match="epsilon"):
        dpopt.ImportanceSampling(eps * (0.99 if eps < 1 else 1.01), slopes=[1e-7])


# ------------------------------------------------------------------ privacy layer
def test_privacy_layer_edges():
    from dpopt import privacy
    # the largest finite Laplace variance: 2(Δ/ε)² ≤ 1.8e308, i.e. Δ/ε just below 9.5e153
    assert privacy.noise_variance("laplace", 1.1e-154, 1.0) == pytest.approx(2 / 1.1e-154 ** 2, rel=1e-15)
    with pytest.raises(ValueError, match="epsilon"):
        privacy.noise_variance("laplace", 1e-154, 1.0)
    # amplification at the smallest rates stays exact (log1p(q·expm1(ε)) ≈ q·expm1(ε))
    assert privacy.central_epsilon(1.0, 1e-300) == pytest.approx(1e-300 * math.expm1(1.0), rel=1e-14)
    with pytest.raises(ValueError, match="q"):
        privacy.central_epsilon(1.0, 0.0)
