"""HierarchyBudget (docs/hierarchy.md): paper numbers, cross-backend agreement, theory checks, Monte Carlo, errors.

Oracles: the paper's toy numbers; independent solvers (SLSQP, SCIP, cutting planes); closed forms
(Props 1, 2, 4; ε ∝ (w|R|)^{1/3} without truncation); brute-force grid over the simplex; Monte Carlo.
"""

import math

import numpy as np
import pytest

from dpopt.datasets import load_gapminder, toy_hierarchy
from dpopt.models.hierarchy import Hierarchy, HierarchyBudget, truncated_laplace_moments
from dpopt.io.modelfile import ModelFileError, from_dict
from dpopt.simulate.hierarchy import _project_groups, release, simulate_hierarchy

PAPER = np.array([0.2519, 0.3174, 0.4307])


def random_tree(seed, sizes=(2, 5, 12), hi=4):
    """Small-count tree (truncation matters): leaves uniform on 0..hi-1, sums upward."""
    rng = np.random.default_rng(seed)
    parents = [None]
    for l in range(1, len(sizes)):
        p = rng.integers(0, sizes[l - 1], size=sizes[l])
        p[: sizes[l - 1]] = np.arange(sizes[l - 1])          # every node has a child
        parents.append(p)
    counts = [None] * len(sizes)
    counts[-1] = rng.integers(0, hi, size=sizes[-1]).astype(float)
    for l in range(len(sizes) - 1, 0, -1):
        counts[l - 1] = np.bincount(parents[l], weights=counts[l], minlength=sizes[l - 1])
    return Hierarchy.from_levels(counts, parents)


# ------------------------------------------------------------------ paper numbers, all backends
@pytest.mark.parametrize("backend", ["exact", "scipy", "pyomo", "cvxpy"])
def test_toy_tree_paper_allocation(backend):
    sol = HierarchyBudget(toy_hierarchy(), 1.0).solve(backend=backend)
    assert sol.status.value == "optimal", sol.message
    assert np.allclose(sol.epsilon, PAPER, atol=5e-5)
    assert math.fsum(sol.epsilon) <= 1.0


def test_model_file_and_cli_report():
    model, opts = from_dict({"family": "hierarchy", "dataset": "toy", "epsilon_total": 1.0})
    sol = model.solve(**opts)
    assert np.allclose(sol.epsilon, PAPER, atol=5e-5)
    rep = model.report(sol)
    assert "0.251896" in rep and "uniform" in rep
    with pytest.raises(ModelFileError, match="unknown key"):
        from_dict({"family": "hierarchy", "dataset": "toy", "epsilon_total": 1.0, "bogus": 1})


# ------------------------------------------------------------------ cross-backend agreement
@pytest.mark.parametrize("seed,E", [(0, 0.1), (1, 1.0), (2, 5.0)])
def test_backends_agree_on_small_count_trees(seed, E):
    model = HierarchyBudget(random_tree(seed), E)
    ref = model.solve()
    assert ref.status.value == "optimal" and ref.certificate.gap < 1e-12
    for be, tol in (("scipy", 1e-6), ("pyomo", 1e-6), ("cvxpy", 2e-6)):
        s = model.solve(backend=be)
        assert s.ok, (be, s.message)
        assert np.max(np.abs(s.epsilon / ref.epsilon - 1)) < tol, (be, s.epsilon, ref.epsilon)
        assert abs(s.objective / ref.objective - 1) < 1e-9
        assert s.objective >= ref.certificate.lower_bound * (1 - 1e-12)


def test_cvxpy_certificate_is_a_valid_lower_bound():
    model = HierarchyBudget(random_tree(5), 0.7)
    s = model.solve(backend="cvxpy")
    assert s.certificate.kind == "gap" and s.certificate.gap <= 1e-12
    ref = model.solve()
    assert s.certificate.lower_bound <= ref.objective * (1 + 1e-13)


def test_brute_force_grid_on_two_levels():
    h = Hierarchy.from_levels([[3], [1, 2, 0]], [None, [0, 0, 0]])
    model = HierarchyBudget(h, 0.8)
    e1 = np.linspace(1e-3, 0.8 - 1e-3, 20001)
    vals = [model.objective_value([a, 0.8 - a]) for a in e1]
    i = int(np.argmin(vals))
    sol = model.solve()
    assert abs(sol.epsilon[0] - e1[i]) <= 2 * (e1[1] - e1[0])
    assert sol.objective <= min(vals) * (1 + 1e-12)


# ------------------------------------------------------------------ theory
@pytest.mark.parametrize("seed", range(6))
def test_thm3_monotone_budgets_equal_weights(seed):
    for E in (0.05, 0.5, 3.0):
        eps = HierarchyBudget(random_tree(seed, sizes=(1, 3, 7, 15)), E).solve().epsilon
        assert np.all(np.diff(eps) >= -1e-12 * eps[1:])


def test_prop4_bounds_and_closed_forms():
    eps = np.array([1e-6, 1e-3, 0.3, 1.0, 50.0, 700.0])
    for N in (0.0, 1.0, 7.0, 1e4, 1e9):
        mse = truncated_laplace_moments(eps, N)["mse"]
        assert np.all(mse >= 1 / eps ** 2 * (1 - 1e-15)) and np.all(mse <= 2 / eps ** 2 * (1 + 1e-15))
        x = eps * N
        # strict upper bound wherever (1+x)e^{-x} is above double rounding of 2
        assert np.all((mse < 2 / eps ** 2)[x < 30])
    sol = HierarchyBudget(random_tree(3), 1.0).solve()
    m = HierarchyBudget(random_tree(3), 1.0)
    for l in range(3):
        node = m.node_mse(sol.epsilon[l], l)
        e = sol.epsilon[l]
        assert np.all(node >= 1 / e ** 2 * (1 - 1e-15)) and np.all(node < 2 / e ** 2)
        assert math.isclose(node.sum(), sol.mse_per_level[l], rel_tol=1e-12)


def test_laplace_variance_closed_form():
    h = random_tree(4)
    w = np.array([1.0, 2.0, 0.5])
    sol = HierarchyBudget(h, 2.0, weights=w, loss="laplace-variance").solve()
    a = np.cbrt(w * np.array(h.sizes))
    assert np.allclose(sol.epsilon, 2.0 * a / a.sum(), rtol=1e-12)


def test_program7_at_program6_tau_returns_same_split():
    for seed, E in ((0, 0.3), (1, 2.0)):
        h = random_tree(seed)
        s6 = HierarchyBudget(h, E).solve()
        s7 = HierarchyBudget(h, mse_target=s6.weighted_mse).solve()
        assert s7.status.value == "optimal"
        assert np.allclose(s7.epsilon, s6.epsilon, rtol=1e-8)
        assert s7.weighted_mse <= s6.weighted_mse
        s7s = HierarchyBudget(h, mse_target=s6.weighted_mse).solve(backend="scipy")
        assert np.allclose(s7s.epsilon, s6.epsilon, rtol=1e-6)


def test_uniform_baseline_never_better():
    for seed in range(4):
        sol = HierarchyBudget(random_tree(seed), 1.0).solve()
        assert sol.ratio_uniform >= 1.0 - 1e-12


def test_extreme_budgets_stay_finite():
    h = random_tree(1)
    for E in (3e-6, 1e-3, 100.0, 2000.0):
        sol = HierarchyBudget(h, E).solve()
        assert sol.status.value == "optimal" and np.all(np.isfinite(sol.epsilon))
        assert math.fsum(sol.epsilon) <= E


# ------------------------------------------------------------------ simulation
def test_projection_matches_definition():
    rng = np.random.default_rng(0)
    vals = rng.normal(2, 3, size=40).clip(0)
    group = rng.integers(0, 6, size=40)
    target = rng.uniform(0, 10, size=6)
    v = _project_groups(vals, group, target)
    assert np.all(v >= 0)
    assert np.allclose(np.bincount(group, weights=v, minlength=6), target)
    for g in range(6):   # v_i = max(0, x_i − θ) with one θ per group: KKT of the projection
        idx = group == g
        pos = v[idx] > 0
        th = vals[idx][pos] - v[idx][pos]
        assert np.allclose(th, th[0])
        assert np.all(vals[idx][~pos] <= th[0] + 1e-12)


def test_release_consistency_and_seed():
    h = toy_hierarchy()
    a = release(h, [0.2, 0.3, 0.5], 7, consistency=True)
    b = release(h, [0.2, 0.3, 0.5], 7, consistency=True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    for l in (1, 2):
        assert np.allclose(np.bincount(h.parents[l], weights=a[l]), a[l - 1])
        assert np.all(a[l] >= 0)


def test_monte_carlo_matches_closed_form_within_confidence():
    """Truncated release (no consistency): per node, |mean bias − closed form| ≤ 5 SE and
    |sample variance − closed form| ≤ 5 SE (SE from the sample 4th moment); with ≤ 9 nodes × 2 tests
    the chance of a false failure is < 1e-5."""
    h = Hierarchy.from_levels([[6], [4, 2], [1, 3, 0, 2]], [None, [0, 0], [0, 0, 1, 1]])
    eps = np.array([0.4, 0.6, 0.9])
    mc = simulate_hierarchy(h, eps, trials=60000, seed=11, batch=20000)
    for l in range(3):
        cf = truncated_laplace_moments(eps[l], h.counts[l])
        assert np.all(np.abs(mc["bias"][l] - cf["bias"]) <= 5 * mc["bias_se"][l])
        assert np.all(np.abs(mc["var_node"][l] - cf["variance"]) <= 5 * mc["var_node_se"][l])
    model = HierarchyBudget(h, float(eps.sum()))
    br = model.level_breakdown(eps)
    assert np.all(np.abs(mc["variance"] - br["variance"]) <= 5 * mc["variance_se"])


def test_monte_carlo_consistency_keeps_top_level_and_sums():
    """Consistency only post-processes levels ≥ 2: with the same seed the top level's statistics are
    identical; below, every released child set sums to its parent (so mean totals agree per trial)."""
    h = Hierarchy.from_levels([[6], [4, 2], [1, 3, 0, 2]], [None, [0, 0], [0, 0, 1, 1]])
    eps = np.array([0.4, 0.6, 0.9])
    plain = simulate_hierarchy(h, eps, trials=4000, seed=3)
    cons = simulate_hierarchy(h, eps, trials=4000, seed=3, consistency=True)
    assert cons["bias2"][0] == plain["bias2"][0] and cons["variance"][0] == plain["variance"][0]
    # mean bias of the children of the root sums to the root's mean bias
    assert math.isclose(float(np.sum(cons["bias"][1])), float(cons["bias"][0][0]), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(float(np.sum(cons["bias"][2])), float(np.sum(cons["bias"][1])), rel_tol=1e-9, abs_tol=1e-9)


# ------------------------------------------------------------------ real data
def test_gapminder_loader():
    h = load_gapminder(2007)
    assert h.sizes == [1, 5, 142]
    assert math.isclose(h.total, 6251013179.0, rel_tol=1e-12)
    sol = HierarchyBudget(h, 0.01, sensitivity=1.0).solve()
    assert sol.status.value == "optimal"
    with pytest.raises(ValueError, match="year must be one of"):
        load_gapminder(2008)


# ------------------------------------------------------------------ errors
def test_tree_validation_errors():
    with pytest.raises(ValueError, match=">= 0"):
        Hierarchy.from_levels([[1], [-1, 2]], [None, [0, 0]])
    with pytest.raises(ValueError, match="finite"):
        Hierarchy.from_levels([[1], [np.nan, 2]], [None, [0, 0]])
    with pytest.raises(ValueError, match="unknown parent"):
        Hierarchy.from_levels([[3], [1, 2]], [None, [0, 1]])
    with pytest.raises(ValueError, match="empty"):
        Hierarchy.from_levels([[3], []], [None, []])
    with pytest.raises(ValueError, match="do not sum"):
        Hierarchy.from_levels([[4], [1, 2]], [None, [0, 0]])
    with pytest.raises(ValueError, match="skipped level"):
        Hierarchy.from_levels([[3], [1, 2], [1]], [None, [0, 0], [0]])
    with pytest.warns(UserWarning, match="allow_inconsistent"):
        h = Hierarchy.from_levels([[4], [1, 2]], [None, [0, 0]], allow_inconsistent=True)
    assert not h.consistent
    with pytest.raises(ValueError, match="cycle"):
        Hierarchy.from_table([("a", "b", 1), ("b", "a", 1)])
    with pytest.raises(ValueError, match="unknown parent"):
        Hierarchy.from_table([("a", None, 1), ("b", "zz", 1)])
    with pytest.raises(ValueError, match="skipped level"):
        Hierarchy.from_table([("a", None, 3, 1), ("b", "a", 3, 3)], level_col="level")


def test_constructors_agree(tmp_path):
    nested = {"VA": {"count": 450, "children": {
        "T100": {"count": 300, "children": {"b1": {"count": 120}, "b2": {"count": 80}, "b3": {"count": 100}}},
        "T200": {"count": 150, "children": {"b4": {"count": 90}, "b5": {"count": 60}}}}}}
    h1 = Hierarchy.from_nested(nested)
    csv = tmp_path / "t.csv"
    csv.write_text("id,parent,count\nVA,,450\nT100,VA,300\nT200,VA,150\nb1,T100,120\nb2,T100,80\n"
                   "b3,T100,100\nb4,T200,90\nb5,T200,60\n")
    h2 = Hierarchy.from_table(csv)
    for h in (h1, h2):
        assert np.allclose(HierarchyBudget(h, 1.0).solve().epsilon, PAPER, atol=5e-5)


def test_model_validation_errors():
    h = toy_hierarchy()
    with pytest.raises(ValueError, match="epsilon_total must be > 0"):
        HierarchyBudget(h, 0.0)
    with pytest.raises(ValueError, match="epsilon_total must be > 0"):
        HierarchyBudget(h, -1.0)
    with pytest.raises(ValueError, match="weights must be > 0"):
        HierarchyBudget(h, 1.0, weights=[1, 0, 1])
    with pytest.raises(ValueError, match="weights must be > 0"):
        HierarchyBudget(h, 1.0, weights=[1, -2, 1])
    with pytest.raises(ValueError, match="exactly one"):
        HierarchyBudget(h, 1.0, mse_target=3.0)
    with pytest.raises(ValueError, match="unattainable"):
        HierarchyBudget(h, mse_target=1e-6)
    with pytest.raises(ValueError, match="loss"):
        HierarchyBudget(h, 1.0, loss="gauss")
    with pytest.raises(ValueError, match="L\\*epsilon_min"):
        HierarchyBudget(h, 1e-3, epsilon_min=0.01)
    with pytest.raises(TypeError, match="bogus"):
        HierarchyBudget(h, 1.0).solve(bogus=1)


def _simplex_projection_by_sorting(x, t):
    """The sorted-simplex rule (Held, Wolfe & Crowder), one group at a time: the oracle for _project_groups."""
    if t <= 0:
        return np.zeros_like(x)
    u = np.sort(x)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, x.size + 1)
    rho = k[u - (css - t) / k > 0][-1]
    return np.maximum(0.0, x - (css[rho - 1] - t) / rho)


def test_projection_matches_sorted_simplex_rule_on_random_groups():
    rng = np.random.default_rng(5)
    for trial in range(200):
        G = int(rng.integers(1, 12))
        n = int(rng.integers(1, 80))
        group = rng.integers(0, G, size=n)                   # some groups may have no member
        vals = np.maximum(0.0, rng.laplace(rng.uniform(0, 5), rng.uniform(0.1, 10), size=n))
        if trial % 7 == 0:
            vals = np.round(vals)                            # ties
        target = np.maximum(0.0, rng.normal(5, 8, size=G))   # zero targets included
        v = _project_groups(vals, group, target)
        for g in range(G):
            idx = group == g
            if idx.any():
                np.testing.assert_allclose(v[idx], _simplex_projection_by_sorting(vals[idx], target[g]),
                                           rtol=1e-10, atol=1e-10)


def test_simulation_batch_default_bounds_memory():
    """The default batch keeps a batch within BATCH_ELEMENTS values over all levels (10^6 leaves: 7 trials,
    not 2 000 = 16 GB per array)."""
    from dpopt.simulate import hierarchy as sim

    n = 20_000
    h = Hierarchy.from_levels([[float(n)], np.ones(n)], [None, np.zeros(n, dtype=np.int64)])
    calls = []
    real = sim._draw

    def spy(hierarchy, scales, rngs, consistency, T, layouts):
        calls.append(T)
        return real(hierarchy, scales, rngs, consistency, T, layouts)

    sim._draw = spy
    try:
        out = simulate_hierarchy(h, [0.5, 0.5], trials=450, seed=1, consistency=True)
    finally:
        sim._draw = real
    assert max(calls) * (n + 1) <= sim.BATCH_ELEMENTS and sum(calls) == 450 and len(calls) > 1
    assert np.all(np.isfinite(out["mse"]))


def _unordered_tree(rng, G, n, top):
    """A three-level tree whose leaves are not in parent order: G middle nodes, n leaves counting 0 .. top − 1."""
    par = np.concatenate([np.arange(G), rng.integers(0, G, n - G)])
    rng.shuffle(par)
    leaves = rng.integers(0, top, size=n).astype(float)
    mid = np.bincount(par, weights=leaves, minlength=G)
    return Hierarchy.from_levels([[mid.sum()], mid, leaves], [None, np.zeros(G, dtype=np.int64), par])


@pytest.mark.parametrize("consistency", [False, True])
def test_chunked_simulation_equals_one_batch(consistency):
    """One generator per level: the estimates do not depend on the batch. Chunks of 7, 64 and 1 000 trials
    give the numbers of one batch of all trials with the same seed, up to the order of floating-point sums
    (relative 1e-9), on a tree whose leaves are not in parent order."""
    h = _unordered_tree(np.random.default_rng(4), 9, 120, 4)
    eps = [0.3, 0.5, 0.8]
    one = simulate_hierarchy(h, eps, trials=1000, seed=21, consistency=consistency, batch=1000)
    for b in (7, 64, None):
        ch = simulate_hierarchy(h, eps, trials=1000, seed=21, consistency=consistency, batch=b)
        for key in ("bias2", "variance", "mse", "variance_se"):
            np.testing.assert_allclose(ch[key], one[key], rtol=1e-9, atol=1e-9)
        for key in ("bias", "var_node"):
            for x, y in zip(ch[key], one[key]):
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)
    other = simulate_hierarchy(h, eps, trials=1000, seed=22, consistency=consistency, batch=64)
    assert not np.allclose(other["variance"], one["variance"], rtol=1e-9)   # the seed matters


def _projection_by_cvxpy(x, t):
    """Independent oracle: the Euclidean projection onto {v >= 0, sum v = t} as a generic QP (cvxpy), without
    the max(0, x - theta) closed form."""
    import cvxpy as cp

    v = cp.Variable(x.size)
    cp.Problem(cp.Minimize(cp.sum_squares(v - x)), [v >= 0, cp.sum(v) == t]).solve()
    return v.value


def test_consistent_release_is_the_projection_by_a_generic_solver():
    """The batched consistency step of release (several trials, children not in parent order) against a
    generic QP solver, group by group and trial by trial, and the constraint that children sum to parents.
    The projection draws nothing, so the plain release with the same seed is the noise before projection."""
    rng = np.random.default_rng(12)
    for seed in range(4):
        G, n = int(rng.integers(2, 5)), int(rng.integers(8, 20))
        h = _unordered_tree(rng, G, n, 5)
        eps = [0.5, 0.4, 0.3]
        cons = release(h, eps, seed, consistency=True, trials=2)
        plain = release(h, eps, seed, consistency=False, trials=2)
        np.testing.assert_array_equal(cons[0], plain[0])
        for t in range(2):
            for l in (1, 2):
                p = h.parents[l]
                np.testing.assert_allclose(np.bincount(p, weights=cons[l][t], minlength=cons[l - 1][t].size),
                                           cons[l - 1][t], rtol=1e-12, atol=1e-9)
                for g in range(cons[l - 1][t].size):
                    idx = p == g
                    np.testing.assert_allclose(cons[l][t][idx],
                                               _projection_by_cvxpy(plain[l][t][idx], cons[l - 1][t][g]),
                                               atol=1e-5 * max(1.0, cons[l - 1][t][g]))


def _largest_remainder_by_loops(t, par, target):
    """Oracle for round_consistent's sharing step: per parent, floors, then one unit each to the children
    with the largest fractional part (ties: lower index first), in plain Python."""
    out = np.floor(t)
    for g in range(target.size):
        kids = [i for i in range(t.size) if par[i] == g]
        short = int(round(target[g] - sum(out[i] for i in kids)))
        for i in sorted(kids, key=lambda i: (-(t[i] - np.floor(t[i])), i))[:max(short, 0)]:
            out[i] += 1
    return out


def test_round_consistent_is_largest_remainder_by_brute_force():
    """round_consistent's selection (bins, then a sort near each parent's cut) against a per-parent Python
    loop, on trees with exact ties (integer and half-integer values, all-zero children, children not in parent
    order)."""
    from dpopt.simulate.hierarchy import round_consistent

    rng = np.random.default_rng(3)
    for it in range(165):
        # the last 15: larger trees, so that parents' parts spread over many bins (and one parent over
        # thousands: the bins' cap), not only the few bins of a small parent
        G = int(rng.integers(1, 8)) if it < 150 else int(rng.choice([1, 3, 60]))
        n = int(rng.integers(G, 40)) if it < 150 else int(rng.integers(1000, 3000))
        par = np.concatenate([np.arange(G), rng.integers(0, G, n - G)])
        rng.shuffle(par)
        v = rng.exponential(3, n) * rng.integers(0, 2, n)
        if it % 3 == 0:
            v = np.round(v * 2) / 2                              # ties in the fractional parts
        if it % 11 == 0:
            v[par == 0] = 0.0                                    # a parent whose children are all 0
        mid = np.bincount(par, weights=v, minlength=G)
        if it % 11 == 0:
            mid[0] = float(rng.integers(1, 4))                  # ... but which has units to share
        levels = [np.array([mid.sum()]), mid, v]
        out = round_consistent(levels, [None, np.zeros(G, dtype=np.int64), par])
        target = out[1]
        real = np.bincount(par, weights=v, minlength=G)
        factor = np.divide(target, real, out=np.zeros(G), where=real > 0)
        t = v * factor[par]
        sizes = np.bincount(par, minlength=G)
        empty = (real <= 0) & (target > 0)
        t = np.where(empty[par], target[par] / sizes[par], t)
        np.testing.assert_array_equal(out[2], _largest_remainder_by_loops(t, par, target))
        np.testing.assert_array_equal(np.bincount(par, weights=out[2], minlength=G), target)


def test_round_consistent_gives_integers_that_add_up_and_stay_close():
    """Largest-remainder rounding top-down, checked against its definition: integers ≥ 0, every parent equals
    the sum of its children, each node within 1 of its value rescaled to the rounded parent, and the
    root within ½ of its value; over random consistent releases of random trees."""
    from dpopt.simulate.hierarchy import round_consistent

    rng = np.random.default_rng(8)
    for seed in range(40):
        h = random_tree(seed)
        rel = release(h, rng.uniform(0.05, 2.0, size=h.n_levels), seed, consistency=True)
        ri = round_consistent(rel, h.parents)
        assert abs(ri[0][0] - rel[0][0]) <= 0.5
        for l in range(h.n_levels):
            assert np.all(ri[l] >= 0) and np.all(ri[l] == np.round(ri[l]))
            if l:
                G = ri[l - 1].size
                assert np.array_equal(np.bincount(h.parents[l], weights=ri[l], minlength=G), ri[l - 1])
                real = np.bincount(h.parents[l], weights=rel[l], minlength=G)
                scaled = rel[l] * np.divide(ri[l - 1], real, out=np.zeros(G), where=real > 0)[h.parents[l]]
                ok = real[h.parents[l]] > 0
                assert np.all(np.abs(ri[l] - scaled)[ok] < 1.0)
