"""What the user-facing examples rely on, checked independently of the scripts' own assertions."""

import runpy
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import dpopt

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def user_mech():
    return runpy.run_path(str(EXAMPLES / "user_mechanism.py"))


@pytest.fixture(scope="module")
def custom_con():
    pytest.importorskip("pyomo.environ")
    return runpy.run_path(str(EXAMPLES / "custom_pyomo_constraint.py"))


def _staircase_second_moment(eps, gamma, delta, kmax=400):
    """E[X^2] by integrating the staircase density step by step (Geng & Viswanath's definition)."""
    b = np.exp(-eps)
    a = (1 - b) / (2 * delta * (gamma + (1 - gamma) * b))     # density height on [0, gamma*delta)
    mass = m2 = 0.0
    for k in range(kmax):
        for lo, hi, h in ((k, k + gamma, a * b ** k), (k + gamma, k + 1, a * b ** (k + 1))):
            mass += 2 * h * (hi - lo) * delta
            m2 += 2 * h * delta ** 3 * (hi ** 3 - lo ** 3) / 3
    return mass, m2


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5, 6.0, 15.0])
@pytest.mark.parametrize("delta", [1.0, 2.5])
def test_staircase_variance_matches_density(user_mech, eps, delta):
    stair = user_mech["Staircase"]()
    g = float(stair.gamma(eps))
    kmax = int(60 / eps) + 50
    mass, m2 = _staircase_second_moment(eps, g, delta, kmax)
    assert mass == pytest.approx(1.0, rel=1e-12)
    assert float(stair.variance(eps, delta)) == pytest.approx(m2, rel=1e-10)
    # gamma* minimises the variance over gamma in [0, 1]
    best = minimize_scalar(lambda t: _staircase_second_moment(eps, t, delta, kmax)[1], bounds=(0, 1),
                           method="bounded", options={"xatol": 1e-10})
    assert m2 <= best.fun * (1 + 1e-9)


def test_staircase_limits(user_mech):
    stair = user_mech["Staircase"]()
    # Laplace limit for small epsilon, e^(-2 eps / 3) decay for large epsilon, never above Laplace
    assert float(stair.variance(1e-4)) / 2e8 == pytest.approx(1.0, rel=1e-6)
    eps = np.logspace(-3, 2.5, 200)
    v = stair.variance(eps)
    assert np.all(np.isfinite(v)) and np.all(v > 0) and np.all(v <= 2 / eps ** 2 * (1 + 1e-12))
    assert np.all(np.diff(v) < 0)
    r = v[eps > 40] * np.exp(2 * eps[eps > 40] / 3)
    assert np.ptp(r) / r.mean() < 1e-2


@pytest.mark.parametrize("objective", ["mean", "a-optimal"])
@pytest.mark.parametrize("eps", [0.3, 3.0])
def test_user_mechanism_exact_equals_enumerate(user_mech, objective, eps):
    model = dpopt.StratifiedDesign(**user_mech["TABLE1"], epsilon=eps, mechanism=user_mech["Staircase"](),
                                   objective=objective)
    assert user_mech["check_discrete_convexity"](model)
    ex, en = model.solve(backend="exact"), model.solve(backend="enumerate")
    assert ex.status == en.status == dpopt.Status.OPTIMAL
    assert ex.objective == pytest.approx(en.objective, rel=1e-12)


def test_custom_constraint_scip_equals_brute_force(custom_con):
    model = custom_con["design_model"]()
    target = 0.0268
    n, status, _ = custom_con["solve_with_scip"](model, target)
    (g_free, n_free), (g_con, n_con) = custom_con["brute_force"](model, [target])
    assert status == dpopt.Status.OPTIMAL
    assert model.objective_value(n) == pytest.approx(g_con, rel=1e-12)
    assert custom_con["domain_variance"](model, n) <= target ** 2 * (1 + 1e-9)
    assert g_free == pytest.approx(model.solve().objective, rel=1e-12) and g_con > g_free
