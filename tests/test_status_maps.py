"""Issue 19 item 4: one status map per tool (dpopt/backends/_status.py), read by every route, and the
solver's own termination reason kept beside dpopt's status (``Solution.termination``)."""

import pytest

import dpopt
from dpopt import datasets
from dpopt.backends import _status as S
from dpopt.result import Status


def test_every_map_follows_the_shared_rules():
    for tool, table in S.MAPS.items():
        for word in table:
            if table[word] is S._INTERRUPT:
                with pytest.raises(KeyboardInterrupt):
                    S.status_of(tool, word)
                continue
            st = S.status_of(tool, word, has_point=False)
            assert st not in (Status.OPTIMAL, Status.FEASIBLE), (tool, word)    # no claim without a point
        assert S.status_of(tool, "no such word") == Status.ERROR


def test_inaccurate_optimum_is_feasible_on_every_cvxpy_route():
    # it was feasible on one cvxpy route and time_limit on another
    assert S.status_of("cvxpy", "optimal_inaccurate") == Status.FEASIBLE
    assert S.status_of("cvxpy", "user_limit") == Status.TIME_LIMIT


def test_the_pyomo_map_reads_pyomos_enum():
    from pyomo.opt import TerminationCondition as TC
    assert S.status_of("pyomo", TC.maxTimeLimit) == Status.TIME_LIMIT
    assert S.status_of("pyomo", TC.optimal, has_point=False) == Status.ERROR
    assert S.word(TC.maxTimeLimit) == "maxTimeLimit"


def test_the_highs_map_reads_highspys_enum():
    import highspy
    M = highspy.HighsModelStatus
    assert S.status_of("highs", M.kOptimal) == Status.OPTIMAL
    assert S.status_of("highs", M.kTimeLimit) == Status.TIME_LIMIT
    assert S.status_of("highs", M.kInfeasible) == Status.INFEASIBLE


def test_no_route_keeps_its_own_map():
    import re
    from pathlib import Path
    root = Path(dpopt.__file__).parent / "backends"
    for f in root.rglob("*.py"):
        if f.name == "_status.py":
            continue
        text = f.read_text()
        assert not re.search(r"^_STATUS\s*=", text, re.M), f
        assert "TerminationCondition as TC" not in text, f


@pytest.mark.parametrize("backend", ["pyomo", "cvxpy"])
def test_termination_is_the_solvers_word_beside_the_status(backend):
    m = datasets.chen_table1(1.0)
    m.add_cost_budget([1.0, 2.0, 3.0, 4.0], 450.0)
    sol = m.solve(backend=backend)
    assert sol.status == Status.OPTIMAL
    assert sol.termination == "optimal"
    assert sol.to_dict()["termination"] == "optimal"


def test_no_external_solver_no_termination():
    sol = datasets.chen_table1(1.0).solve(backend="exact")
    assert sol.termination == "" and sol.status == Status.OPTIMAL


def test_time_limit_status_keeps_the_solvers_reason():
    m = dpopt.StratifiedDesign(N=[5000, 3000, 2000, 1000], sigma2=[1.0, 4.0, 9.0, 16.0], total=400, epsilon=1.0,
                               mechanism="dlap")
    sol = m.relax(backend="cvxpy", time_limit=1e-9)
    assert sol.status == Status.TIME_LIMIT
    assert sol.termination in ("user_limit", "optimal_inaccurate", ""), sol.termination
