"""time_limit is a hard deadline inside HiGHS (issue 20): a MIP that HiGHS has not stopped by time_limit plus
a grace is stopped from outside by a MIP callback, and that stop reads as status time_limit (not a user
interrupt, not an error), with whatever point and bound HiGHS had."""

import numpy as np

import dpopt
from dpopt.backends.exact.constrained import highs_milp as HM
from dpopt.formulations.separable import program_of, ranges, secant_milp


def _milp(seed=0, k=40):
    rng = np.random.default_rng(seed)
    d = dpopt.StratifiedDesign(rng.integers(50, 500, k), rng.uniform(0.5, 5, k), 400, 1.0,
                               domains=[f"d{i % 4}" for i in range(k)])
    d.add_cost_budget(rng.uniform(1, 3, k), 2000.0)
    for g in range(4):
        d.add_precision_target(0.5, strata=f"d{g}", kind="se")
    prog = program_of(d)
    lo, hi = ranges(d)
    return d, secant_milp(prog, lo, hi, anchor=np.sqrt(lo * hi), obj_scale=1.0)


def test_a_mip_past_its_deadline_is_stopped_from_outside(monkeypatch):
    d, milp = _milp()
    free = HM.highs_solve(milp, 0.0, 0.0, 100.0)
    assert free.status == "optimal"                     # the instance itself solves
    monkeypatch.setattr(HM, "HARD_DEADLINE_GRACE", -1000.0)   # the deadline has passed at the first callback
    stopped = HM.highs_solve(milp, 0.0, 0.0, 100.0)
    assert stopped.status == "time_limit" and "nterrupt" in stopped.text
    if stopped.n is not None:                            # a point HiGHS had found is kept, with its bound
        assert stopped.bound <= free.objective * (1 + 1e-9)


def test_without_a_time_limit_nothing_is_subscribed():
    d, milp = _milp(1)
    assert HM.highs_solve(milp, 0.0, 0.0, None).status == "optimal"
