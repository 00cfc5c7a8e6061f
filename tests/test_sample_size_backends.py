"""SampleSizeProgram: the pyomo (SCIP) and scipy backends cross-checked against the exact backend."""

import numpy as np
import pytest

from dpopt.models.sample_size import SampleSizeProgram

INSTANCES = [
    dict(N=2000, S2=1.0, epsilon=1.0, sensitivity=0.02),
    dict(N=1500, S2=0.3, epsilon=0.2, sensitivity=0.05),
    dict(N=800, S2=4.0, epsilon=0.5, sensitivity="mean", value_range=10.0),
    dict(N=1000, S2=1.0, epsilon=700.0, sensitivity=1.0),
    dict(N=1000, S2=1e-3, epsilon=1e-6, sensitivity=1.0),
]


def _scan_values(m):
    return m.variance(np.arange(1, m.N + 1))


@pytest.mark.parametrize("kw", INSTANCES)
def test_pyomo_scip_matches_exact(kw):
    m = SampleSizeProgram(**kw)
    ex = m.solve()
    sol = m.solve("pyomo", time_limit=30)
    assert sol.status == "optimal" and sol.solver == "scip"
    v = _scan_values(m)
    # SCIP is exact up to its 1e-10 tolerances: on these instances the optimum is sharp
    assert sol.n == ex.n == int(np.argmin(v)) + 1


def test_pyomo_callable_sensitivity():
    m = SampleSizeProgram(1200, 2.0, 0.3, sensitivity=lambda n: 3.0 / n ** 0.5, sensitivity_trend="nonincreasing")
    sol = m.solve("pyomo", time_limit=30)
    assert sol.status == "optimal"
    assert sol.n == int(np.argmin(_scan_values(m))) + 1
    # a callable that cannot take a Pyomo variable is reported, not raised
    m2 = SampleSizeProgram(1200, 2.0, 0.3, sensitivity=lambda n: float(np.sqrt(1.0 / n)))
    assert m2.solve("pyomo").status == "unsupported"


@pytest.mark.parametrize("kw", INSTANCES)
def test_scipy_is_feasible_and_close(kw):
    m = SampleSizeProgram(**kw)
    ex = m.solve()
    sol = m.solve("scipy")
    assert sol.status == "feasible"          # never claims optimality
    assert sol.objective >= ex.objective * (1 - 1e-12)
    # on these (unimodal) instances the rounded local minimiser is the optimum
    assert sol.n == ex.n


def test_unknown_options_raise():
    m = SampleSizeProgram(**INSTANCES[0])
    with pytest.raises(TypeError):
        m.solve("exact", bogus=1)
    with pytest.raises(ValueError, match="method"):
        m.solve(method="newton")
