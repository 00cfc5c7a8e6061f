"""One make_solution signature for every family (issue 12), and the shared honest-status rule: an answer
whose certificate shows a gap above the caller's rel_gap is never labelled optimal."""

import inspect

import numpy as np
import pytest

from dpopt import (Certificate, HierarchyBudget, ImportanceSampling, MinCostDesign, SampleSizeProgram, Status,
                   StratifiedDesign, toy_hierarchy)
from dpopt.models.base import Model

FAMILIES = [StratifiedDesign, MinCostDesign, HierarchyBudget, SampleSizeProgram, ImportanceSampling]


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_every_family_has_the_base_signature(cls):
    def shape(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    assert cls.make_solution is not Model.make_solution
    assert shape(cls.make_solution) == shape(Model.make_solution)


def _design():
    return StratifiedDesign(N=[400, 300, 200], sigma2=[4.0, 1.0, 9.0], total=60, epsilon=1.0)


def _cases():
    d = _design()
    n = d.solve().n
    yield "stratified", d, dict(n=n)
    mc = MinCostDesign(d, cost=[1.0, 2.0, 3.0], variance_target=float(d.objective_value(n)) * 1.1)
    yield "min-cost", mc, dict(n=n)
    h = HierarchyBudget(toy_hierarchy(), 1.0)
    yield "hierarchy", h, dict(x=h.uniform_split())
    s = SampleSizeProgram(10_000, 4.0, 1.0, value_range=10.0)
    yield "sample size", s, dict(n=5000)
    yield "sample size (real)", s, dict(x=5000.5)


@pytest.mark.parametrize("name,model,point", list(_cases()), ids=[c[0] for c in _cases()])
def test_a_certificate_gap_above_rel_gap_is_not_optimal(name, model, point):
    loose = Certificate(kind="gap", optimal=True, lower_bound=0.0, gap=1e-3)
    sol = model.make_solution(**point, status=Status.OPTIMAL, certificate=loose, rel_gap=1e-6, backend="test")
    assert sol.status == Status.FEASIBLE and not sol.certificate.optimal and "rel_gap" in sol.message
    tight = Certificate(kind="gap", optimal=True, lower_bound=0.0, gap=1e-12)
    sol = model.make_solution(**point, status=Status.OPTIMAL, certificate=tight, rel_gap=1e-6, backend="test")
    assert sol.status == Status.OPTIMAL
    # without rel_gap the backend's own status stands
    assert model.make_solution(**point, status=Status.OPTIMAL, certificate=loose).status == Status.OPTIMAL


def test_a_real_sample_size_is_a_relaxation_point():
    s = SampleSizeProgram(10_000, 4.0, 1.0, value_range=10.0)
    sol = s.make_solution(x=2500.25)
    assert sol.n is None and sol.x == 2500.25 and sol.objective == pytest.approx(float(s.variance(2500.25)))
    with pytest.raises(TypeError, match="n .*or x"):
        s.make_solution(n=10, x=10.0)


def test_importance_refuses_a_backend_certificate():
    m = ImportanceSampling(slopes=np.array([0.5, 1.0]), epsilon=1.0)
    with pytest.raises(TypeError, match="certifies"):
        m.make_solution(x=[1.0, 1.0], certificate=Certificate(kind="gap", optimal=True))
