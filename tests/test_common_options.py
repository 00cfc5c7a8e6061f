"""Issue 12: every (backend, family, task) pair with the common options time_limit, rel_gap and verbose —
each is a named parameter of the handler and the call runs, or the call is refused at once with an error
naming the option. Nothing is accepted and dropped (no ``**kwargs`` swallows them)."""

from __future__ import annotations

import inspect

import pytest

import dpopt
from dpopt import datasets, registry

COMMON = {"time_limit": 30.0, "rel_gap": 1e-6, "verbose": False}


def _models():
    plain = datasets.chen_table1(1.0)
    constrained = datasets.chen_table1(1.0)
    constrained.add_cost_budget([1.0, 2.0, 3.0, 4.0], 450.0)
    two = dpopt.StratifiedDesign([700, 800, 900], [[1.0, 2.0], [2.0, 1.0], [0.5, 0.5]], 60, 1.0,
                                 upper=[40, 40, 40])
    two.add_precision_target(0.3, variable=1, kind="se")
    mc = datasets.chen_table1(1.0, mechanism="tulap")
    mc.upper[:] = 150
    min_cost = mc.min_cost([1.0, 2.0, 3.0, 4.0], se=0.01)
    return {
        "stratified": plain, "stratified+cost": constrained, "two variables": two, "min-cost": min_cost,
        "hierarchy": dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0),
        "sample size": dpopt.SampleSizeProgram(N=10 ** 4, S2=1.0, epsilon=1.0, sensitivity=1e-3),
        "importance": dpopt.ImportanceSampling(1.0, slopes=[0.2, 0.5, 0.9]),
    }


CASES = [(name, task, backend) for name, model in _models().items() for task in ("solve", "relax")
         for backend in registry.capable(model, task)]


@pytest.mark.parametrize("name, task, backend", CASES, ids=[f"{n}-{t}-{b}" for n, t, b in CASES])
def test_common_options_are_honoured_or_refused(name, task, backend):
    model = _models()[name]
    fn = registry._find(backend, model, task)
    params = inspect.signature(fn).parameters
    accepted = {k: v for k, v in COMMON.items() if k in params}
    for option in set(COMMON) - set(accepted):
        with pytest.raises((TypeError, ValueError), match=option):
            getattr(model, task)(backend=backend, **{option: COMMON[option]})
    sol = getattr(model, task)(backend=backend, **accepted)
    assert isinstance(sol, dpopt.Solution)
    assert sol.status != dpopt.Status.ERROR or sol.message, (name, task, backend)
    if "time_limit" in accepted:
        assert sol.wall_time <= COMMON["time_limit"] * 1.5 + 5.0, (name, task, backend, sol.wall_time)


# ------------------------------------------------------------------ issue 19 item 4: options declared once
def test_every_handler_option_is_declared_with_the_one_default():
    from dpopt import options as O
    registry.available_backends()
    for (backend, cls, task), fn in registry._HANDLERS.items():
        for q in list(inspect.signature(fn).parameters.values())[1:]:
            if q.kind not in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY):
                continue
            assert O.declaration(backend, q.name) is not None, (backend, cls.__name__, task, q.name)
            if q.name == "time_limit":
                assert q.default is None, (backend, cls.__name__, task)     # None: DEFAULT_TIME_LIMIT
            if q.name == "rel_gap" and q.default is not None:
                assert q.default == O.default_rel_gap(backend, cls.__name__), (backend, cls.__name__, task)


def test_one_time_limit_default():
    from dpopt import options as O
    from dpopt.backends import _secant
    from dpopt.backends.exact import constrained
    from dpopt.backends.pyomo import _solver
    assert _solver.DEFAULT_TIME_LIMIT is _secant.DEFAULT_TIME_LIMIT is constrained.DEFAULT_TIME_LIMIT \
        is O.DEFAULT_TIME_LIMIT
    assert constrained.DEFAULT_REL_GAP is O.DEFAULT_REL_GAP


def test_declared_options_are_checked_before_the_handler_runs():
    from dpopt import _validate as V
    model = datasets.chen_table1(1.0)
    for backend in ("exact", "algorithm1", "pyomo", "cvxpy", "scipy"):
        for bad in ({"time_limit": -1}, {"rel_gap": 2.0}, {"verbose": "yes"}):
            task = "relax" if backend == "scipy" else "solve"
            if registry.option_parameter(model, backend, task, next(iter(bad))) is None:
                continue
            with pytest.raises(V.InvalidOption, match=next(iter(bad))):
                getattr(model, task)(backend=backend, **bad)
