"""Bad inputs to public helpers and the registry are refused with an error naming the field (issue 14,
items 8-10); a point with a non-finite objective or from a broken user mechanism is never an answer."""

import math

import numpy as np
import pytest

import dpopt
from dpopt import _validate as V
from dpopt import registry
from dpopt.models.base import Model
from dpopt.models.hierarchy import Hierarchy, truncated_laplace_moments
from dpopt.models.importance import ImportanceSampling
from dpopt.models.sample_size import noise_ratio
from dpopt.privacy import DiscreteLaplace, Laplace, Mechanism, TuLap
from dpopt.result import Solution, Status
from dpopt.simulate.hierarchy import simulate_hierarchy

TABLE1 = dict(N=[400, 300, 200, 100], sigma2=[1.0, 4.0, 9.0, 16.0], total=80, epsilon=1.0)


def _budget():
    return dpopt.HierarchyBudget(Hierarchy([[10.0], [4.0, 6.0], [1.0, 3.0, 2.0, 4.0]], [None, [0, 0], [0, 0, 1, 1]]),
                                 1.0)


# ------------------------------------------------------------------ registry
@pytest.mark.parametrize("backend, exc", [("", ValueError), ({}, TypeError), ([], TypeError), (0, TypeError)])
def test_empty_or_wrong_backend_raises(backend, exc):
    # was: "" and {} silently meant the default backend
    with pytest.raises(exc, match="backend"):
        dpopt.StratifiedDesign(**TABLE1).solve(backend=backend)


def test_options_checked_even_when_the_backend_cannot_run_the_task():
    m = dpopt.SampleSizeProgram(100, 1.0, 1.0, sensitivity=1.0)
    assert m.relax(backend="scipy").status == "unsupported"        # scipy cannot relax it
    with pytest.raises(V.InvalidOption, match="time_limit"):
        m.relax(backend="scipy", time_limit=-1)
    with pytest.raises(V.InvalidOption, match="rel_gap"):
        m.relax(backend="scipy", rel_gap=5)
    with pytest.raises(V.InvalidOption, match="verbose"):
        m.relax(backend="cvxpy", verbose="yes")
    with pytest.raises(TypeError, match="no option 'foo'"):
        m.relax(backend="scipy", foo=1)


class _Toy(Model):
    default_backend = "test-nonfinite"


@pytest.fixture
def nonfinite_backend():
    def handler(model, value: float = math.inf):
        return Solution(status=Status.OPTIMAL, objective=value, x=np.array([1.0]))

    registry._load()
    registry.register("test-nonfinite", _Toy, "solve", "test only")(handler)
    yield
    registry._HANDLERS.pop(("test-nonfinite", _Toy, "solve"))
    registry._BACKENDS.pop("test-nonfinite")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_objective_is_never_optimal(nonfinite_backend, value):
    sol = _Toy().solve(value=value)
    assert sol.status == "error" and sol.x is None and "not finite" in sol.message
    assert sol.details["rejected_status"] == "optimal"


def test_finite_objective_passes(nonfinite_backend):
    assert _Toy().solve(value=2.0).status == "optimal"


# ------------------------------------------------------------------ user mechanisms
class NaNMechanism(Mechanism):
    name = "nan-var"

    def variance(self, epsilon, sensitivity=1.0):
        return np.full(np.shape(epsilon), np.nan)


class NegativeMechanism(Mechanism):
    name = "negative-var"

    def variance(self, epsilon, sensitivity=1.0):
        return -2.0 / np.asarray(epsilon, dtype=float) ** 2


class NaNAtSensitivityTwo(Mechanism):
    """Finite at sensitivity 1 (what the construction-time probe sees), NaN at 2: caught at evaluation."""
    name = "nan-at-2"

    def variance(self, epsilon, sensitivity=1.0):
        e = np.asarray(epsilon, dtype=float)
        return 2.0 * sensitivity ** 2 / e ** 2 * (np.nan if sensitivity == 2.0 else 1.0)


@pytest.mark.parametrize("mech", [NaNMechanism, NegativeMechanism])
def test_nan_or_negative_user_variance_is_refused(mech):
    # was: optimal with objective NaN on exact, algorithm1 and enumerate
    with pytest.raises(ValueError, match=rf"mechanism '{mech.name}': variance must be finite and >= 0"):
        dpopt.StratifiedDesign(**TABLE1, mechanism=mech())


@pytest.mark.parametrize("backend", ["exact", "algorithm1", "enumerate"])
def test_user_variance_nan_later_is_refused_or_an_error_status(backend):
    """The model may evaluate the variance when it is built (then it refuses) or only when solving (then the
    checked variance raises inside the backend and the Solution is an error): never an answer."""
    try:
        m = dpopt.StratifiedDesign(N=[40, 30], sigma2=[1.0, 4.0], total=20, epsilon=1.0,
                                   mechanism=NaNAtSensitivityTwo(), sensitivity=2.0)
    except ValueError as exc:
        assert "nan-at-2" in str(exc) and "finite and >= 0" in str(exc)
        return
    sol = m.solve(backend=backend)
    assert sol.status == "error" and sol.n is None
    assert "nan-at-2" in sol.message and "finite and >= 0" in sol.message


# ------------------------------------------------------------------ public helpers (item 10)
@pytest.mark.parametrize("call, exc, field", [
    (lambda: truncated_laplace_moments(-1.0, [1.0]), ValueError, "epsilon"),
    (lambda: truncated_laplace_moments(1.0, [-1.0]), ValueError, "N"),
    (lambda: truncated_laplace_moments(1.0, [1.0], sensitivity=0), ValueError, "sensitivity"),
    (lambda: DiscreteLaplace().variance(-1.0), ValueError, "epsilon"),
    (lambda: Laplace().variance(0), ValueError, "epsilon"),
    (lambda: Laplace().variance(math.nan), ValueError, "epsilon"),
    (lambda: Laplace().variance("1.0"), TypeError, "epsilon"),
    (lambda: Laplace().variance(1.0, -1.0), ValueError, "sensitivity"),
    (lambda: Laplace().sample(0.0, size=2), ValueError, "epsilon"),
    (lambda: DiscreteLaplace().sample(-1.0, size=2), ValueError, "epsilon"),
    (lambda: TuLap().sample(1.0, sensitivity=2.0, size=2), ValueError, "sensitivity"),
    (lambda: _budget().node_mse(1.0, 7), ValueError, "level"),
    (lambda: _budget().node_mse(1.0, -1), ValueError, "level"),
    (lambda: _budget().node_mse(1.0, 1.5), ValueError, "level"),
    (lambda: simulate_hierarchy("x", [1.0]), TypeError, "hierarchy"),
    (lambda: simulate_hierarchy(_budget().hierarchy, [1.0]), ValueError, "epsilon_per_level"),
    (lambda: simulate_hierarchy(_budget().hierarchy, [1.0] * 3, consistency="no"), TypeError, "consistency"),
    (lambda: Hierarchy.from_table("/missing.csv"), ValueError, "tree table /missing.csv: cannot read"),
    (lambda: Hierarchy.from_table(5), TypeError, "rows"),
    (lambda: noise_ratio("x", 0.5), TypeError, "epsilon"),
    (lambda: noise_ratio(1.0, "0.5"), TypeError, "rate"),
    (lambda: dpopt.privacy.central_epsilon(1.0, 2.0), ValueError, "q"),
    (lambda: dpopt.privacy.nominal_epsilon("1", 0.5), TypeError, "epsilon"),
    (lambda: ImportanceSampling.laplace_sum([[1.0, 2.0]], 1.0, 5.0, norm=-1), ValueError, "norm"),
    (lambda: ImportanceSampling.laplace_sum([[1.0, 2.0]], 1.0, 5.0, norm=0), ValueError, "norm"),
    (lambda: ImportanceSampling.laplace_sum([[1.0, 2.0]], 1.0, 5.0, norm=None), TypeError, "norm"),
    (lambda: ImportanceSampling.laplace_sum([[1.0, 2.0]], 1.0, 5.0, norm=True), TypeError, "norm"),
    (lambda: ImportanceSampling.laplace_sum([["1", "2"]], 1.0, 5.0), TypeError, "points"),
    (lambda: ImportanceSampling.laplace_sum([[0.0, 0.0], [1.0, 1.0]], 1.0, 5.0), ValueError, r"points\[0\]"),
])
def test_public_helpers_name_the_field(call, exc, field):
    with pytest.raises(exc, match=field):
        call()


def test_header_only_and_binary_tree_tables(tmp_path):
    head = tmp_path / "head.csv"
    head.write_text("id,parent,count\n")
    with pytest.raises(ValueError, match="no rows"):            # was: "max() arg is an empty sequence"
        Hierarchy.from_table(head)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x01id,parent")
    with pytest.raises(ValueError, match="not a UTF-8 text"):
        Hierarchy.from_table(binary)
    with pytest.raises(ValueError, match="cannot read"):
        Hierarchy.from_table(tmp_path)


def test_laplace_sum_norms_against_numpy():
    X = np.array([[3.0, -4.0], [1.0, 1.0]])
    for p, ref in [(1, [7.0, 2.0]), (2, [5.0, math.sqrt(2)]), (math.inf, [4.0, 1.0])]:
        m = ImportanceSampling.laplace_sum(X, 2.0, 10.0, norm=p)
        assert np.allclose(m.slopes, np.array(ref) / 2.0)
