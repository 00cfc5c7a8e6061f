"""Chen, Pasupathy & Awan, Table 1: ratio of the DP objective at the Neyman design to the optimum."""

import numpy as np
import pytest

import dpopt

EPS = [0.1, 10 ** -0.5, 1.0, 10 ** 0.5, 10.0]
PAPER = {"laplace": [1.828, 2.095, 2.269, 2.311, 1.973], "tulap": [2.405, 3.324, 3.877, 4.060, 4.076]}


@pytest.mark.parametrize("mechanism", sorted(PAPER))
@pytest.mark.parametrize("j", range(5))
def test_table1_cell(mechanism, j):
    model = dpopt.datasets.chen_table1(epsilon=EPS[j], mechanism=mechanism, objective="mean")
    sol = model.solve()
    assert sol.status == dpopt.Status.OPTIMAL and sol.certificate.optimal
    ratio = model.objective_value(model.baseline("neyman")) / sol.objective
    assert round(ratio, 3) == pytest.approx(PAPER[mechanism][j], abs=1e-12)
    assert sol.n.sum() == 200
    assert np.isclose(sol.variance, sol.objective / 34000 ** 2)
