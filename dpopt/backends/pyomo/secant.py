"""The shared secant MILP (:mod:`dpopt.backends._secant`) through Pyomo: SCIP via scip_direct or HiGHS via
appsi_highs, with the Pyomo plumbing of :mod:`._solver` (allow-listed solvers, status map, time limits)."""

from __future__ import annotations

import math
import time

import numpy as np

from ...feasibility import FEASIBILITY_TOL
from ...result import Solution, Status
from .. import _status
from .._secant import _PYOMO_SOLVERS, _prepare, solve_outer
from . import _solver as PY


def solve_pyomo(model, **options) -> Solution:
    """The secant MILP through Pyomo (SCIP via scip_direct or HiGHS via appsi_highs)."""
    t0 = time.perf_counter()
    prep, early = _prepare(model, options, _PYOMO_SOLVERS)
    if early is not None:
        return early
    key = prep["solver"]
    opt, why = PY.open_solver(key)          # the one allow-list: never a caller's string
    if opt is None:
        return Solution(status=Status.UNSUPPORTED, solver=key, message=why)
    return solve_outer(model, prep, lambda milp, deadline: _solve_once(milp, prep, opt, t0), t0)


def _solve_once(milp, prep, opt, t0):
    """One MILP of the outer loop through Pyomo: (status word, n, bound, termination, message) or a Solution."""
    import pyomo.environ as pe

    key = prep["solver"]
    R, C, Vv, rlo, rhi = milp.to_coo()
    ncol = milp.c.size
    order = np.argsort(R, kind="stable")
    R, C, Vv = R[order], C[order], Vv[order]
    starts = np.searchsorted(R, np.arange(rlo.size + 1)).tolist()
    # the limit covers the whole call: the build and Pyomo's hand-over to the solver (before the solver's own
    # clock starts) are timed as they go, and stopped once they would end past the limit (status time_limit)
    clock = PY.BuildClock(t0, prep["time_limit"], R.size, f"the secant MILP ({rlo.size} rows, {R.size} nonzeros)",
                          key)
    try:
        with PY.paused_gc():    # (see PY.paused_gc: the build runs 2-3x faster)
            m = pe.ConcreteModel()
            m.v = pe.Var(range(ncol))
            for j in range(ncol):
                m.v[j].setlb(float(milp.col_lo[j]))
                m.v[j].setub(None if not math.isfinite(milp.col_hi[j]) else float(milp.col_hi[j]))
                if j < milp.k:
                    m.v[j].domain = pe.Integers
            var = [m.v[j] for j in range(ncol)]
            m.obj = pe.Objective(expr=sum(float(milp.c[j]) * var[j] for j in np.flatnonzero(milp.c))
                                 + float(milp.offset))
            cols, vals = C.tolist(), Vv.tolist()
            lows, highs = rlo.tolist(), rhi.tolist()
            m.rows = pe.ConstraintList()
            for r in range(rlo.size):
                a, b = starts[r], starts[r + 1]
                clock.tick(a)
                lo_r, hi_r = lows[r], highs[r]
                if a == b:
                    # a row over strata all fixed by their bounds is a constant (0 in the MILP's row units): Pyomo
                    # refuses it as a trivial Boolean, so it is decided here (violated: the model is infeasible)
                    # (rows are scaled to magnitude 1: the one feasibility tolerance applies as it is)
                    if lo_r > FEASIBILITY_TOL or hi_r < -FEASIBILITY_TOL:
                        return Solution(status=Status.INFEASIBLE, solver=key, wall_time=time.perf_counter() - t0,
                                        message=f"secant MILP row {r} covers only strata fixed by their bounds and "
                                                f"its constant value violates it (range [{lo_r:.6g}, {hi_r:.6g}] in "
                                                "the row's units, value 0)")
                    continue
                expr = sum(vals[p] * var[cols[p]] for p in range(a, b))
                lo_r = lo_r if math.isfinite(lo_r) else None
                hi_r = hi_r if math.isfinite(hi_r) else None
                m.rows.add(pe.inequality(lo_r, expr, hi_r) if lo_r is not None and hi_r is not None and lo_r != hi_r
                           else (expr == lo_r if lo_r is not None and lo_r == hi_r else
                                 (expr >= lo_r if lo_r is not None else expr <= hi_r)))
            left = clock.solver_time()
    except PY.OutOfTime as exc:
        # no point from this round (the outer loop keeps an earlier round's)
        return "time_limit", None, -math.inf, "time_limit", f"{exc} (use backend 'exact', or raise time_limit)"
    opts = ({"limits/time": left, "timing/clocktype": 2, "limits/gap": prep["gap"]} if key == "scip"
            else {"time_limit": left, "mip_rel_gap": prep["gap"]})
    opts.update(prep["solver_options"])          # passed straight through, as on every Pyomo route
    # solver output straight to the descriptors (no pipe to dead-lock); an interrupt raises KeyboardInterrupt
    status, tc, res, has_point = PY.run(opt, key, m, opts, prep["verbose"])
    n = np.array([round(pe.value(m.v[j])) for j in range(milp.k)], dtype=np.int64) if has_point else None
    lb = PY.lower_bound(res)
    bound = lb * milp.obj_scale if math.isfinite(lb) else -math.inf
    # status.value: PY.run read the one Pyomo map (backends/_status.py)
    return status.value, n, bound, _status.word(tc), f"termination {tc}"
