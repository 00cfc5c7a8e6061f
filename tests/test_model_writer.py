"""dpopt.io.save / to_toml: a model built in Python, written as a model file, loads back to the same model
(every attribute the mathematics reads) and to the same optimum; what a file cannot express is refused."""

import numpy as np
import pytest

import dpopt
from dpopt.io import load, save, to_toml
from dpopt.models.stratified import MinCostDesign
from dpopt.privacy import Laplace


def _same_design(a, b):
    assert a.labels == b.labels and a.domains == b.domains and a.variables == b.variables
    np.testing.assert_array_equal(a.N, b.N)
    np.testing.assert_array_equal(a.sigma2_matrix, b.sigma2_matrix)
    np.testing.assert_array_equal(a.lower, b.lower)
    np.testing.assert_array_equal(a.upper, b.upper)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.shares, b.shares)
    np.testing.assert_array_equal(a.variable_weights, b.variable_weights)
    assert (a.total, a.epsilon, a.mechanism.name, a.sensitivity, a.value_range, a.fpc, a.min_per_stratum,
            a.objective_kind) == (b.total, b.epsilon, b.mechanism.name, b.sensitivity, b.value_range, b.fpc,
                                  b.min_per_stratum, b.objective_kind)
    # the rows, whatever their grouping (a file has one row per [[constraint]]; the cost budget is a key)
    assert sorted(_rows(a)) == sorted(_rows(b))
    assert (a.cost is None) == (b.cost is None)
    if a.cost is not None:
        np.testing.assert_array_equal(a.cost, b.cost)
    _same_targets(a.precision_targets, b.precision_targets)


def _rows(design):
    return [(tuple(c.A[r]), float(c.b[r]), c.sense) for c in design.constraints for r in range(c.A.shape[0])]


def _same_targets(ta, tb):
    assert len(ta) == len(tb)
    for x, y in zip(ta, tb):
        assert (x.name, x.variable, x.kind, x.target, x.mean, x.estimate) == \
               (y.name, y.variable, y.kind, y.target, y.mean, y.estimate)
        np.testing.assert_array_equal(x.strata, y.strata)
        np.testing.assert_array_equal(x.weights, y.weights)
        assert x.bound == y.bound and x.fpc_const == y.fpc_const


def _random_design(rng, i):
    k = int(rng.integers(2, 6))
    J = 1 if i % 3 else 2
    N = rng.integers(20, 200, size=k)
    S2 = rng.uniform(0.1, 5.0, size=(k, J))
    mech = ["laplace", "dlap", "tulap"][i % 3]
    kw = dict(labels=[f"s{j}" for j in range(k)] if i % 2 else None,
              domains=[["east", "west"][j % 2] for j in range(k)] if i % 4 else None,
              variables=["income", "age"] if J == 2 else None, min_per_stratum=2 if i % 5 == 0 else None,
              fpc=bool(i % 2), objective=["mean", "a-optimal", "mean"][i % 3])
    if mech == "laplace" and i % 2:
        kw["value_range"] = (0.0, float(rng.uniform(1, 20)))
    d = dpopt.StratifiedDesign(N, S2 if J == 2 else S2[:, 0], int(N.sum() // 5), float(rng.uniform(0.2, 3)),
                               mechanism=mech, **kw)
    if i % 2:
        d.add_cost_budget(rng.uniform(1, 3, size=k), float(rng.uniform(0.5, 1.0) * 3 * d.total))
    if i % 3 == 1:
        d.add_constraint(rng.uniform(-1, 1, size=(2, k)), [50.0, 60.0], "<=", "pair")
    if i % 4 == 1:
        d.add_precision_target(float(rng.uniform(1, 100)), strata=list(range(1, k)),
                               variable=d.variables[-1], kind=["variance", "se", "cv"][i % 3],
                               mean=5.0 if i % 3 == 2 else None)
    return d


@pytest.mark.parametrize("i", range(24))
def test_stratified_round_trip(tmp_path, i):
    d = _random_design(np.random.default_rng(i), i)
    path = save(d, tmp_path / "m.toml")
    back, _ = load(path)
    _same_design(d, back)
    a, b = d.solve(), back.solve()
    assert a.status == b.status
    if a.n is not None:
        np.testing.assert_array_equal(a.n, b.n)


def test_min_cost_round_trip(tmp_path):
    d = dpopt.StratifiedDesign([120, 80, 300], [2.0, 1.0, 4.0], 60, 1.0, labels=["a", "b", "c"],
                               domains=["n", "n", "s"])
    d.add_precision_target(0.3, strata="n", kind="se")
    m = MinCostDesign(d, [1.0, 2.0, 1.5], se=0.2)
    back, _ = load(save(m, tmp_path / "mc.toml"))
    assert isinstance(back, MinCostDesign)
    np.testing.assert_array_equal(back.cost, m.cost)
    _same_targets(m.precision_targets, back.precision_targets)
    assert back.variance_target == m.variance_target
    s1, s2 = m.solve(), back.solve()
    assert s1.status == s2.status and np.array_equal(s1.n, s2.n)


def test_what_a_file_cannot_say_is_refused(tmp_path):
    class Mine(Laplace):
        name = "laplace"

        def variance(self, epsilon, sensitivity=1.0):
            return 3.0 * (sensitivity / np.asarray(epsilon, dtype=float)) ** 2

    d = dpopt.StratifiedDesign([100, 200], [1.0, 2.0], 20, 1.0, mechanism=Mine())
    with pytest.raises(TypeError, match="user-defined"):
        to_toml(d)
    with pytest.raises(TypeError, match="HierarchyBudget"):
        to_toml(dpopt.HierarchyBudget(dpopt.datasets.toy_hierarchy(), 1.0))
    ok = dpopt.StratifiedDesign([100, 200], [1.0, 2.0], 20, 1.0)
    save(ok, tmp_path / "x.toml")
    with pytest.raises(FileExistsError):
        save(ok, tmp_path / "x.toml")
