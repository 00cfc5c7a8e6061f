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
    return solve_outer(model, prep, lambda milp, deadline: _solve_once(milp, prep, opt, deadline, t0), t0)


def _solve_once(milp, prep, opt, deadline, t0):
    """One MILP of the outer loop through Pyomo: (status word, n, bound, termination, message) or a Solution."""
    import pyomo.environ as pe

    R, C, Vv, rlo, rhi = milp.to_coo()
    ncol = milp.c.size
    m = pe.ConcreteModel()
    m.v = pe.Var(range(ncol))
    for j in range(ncol):
        m.v[j].setlb(float(milp.col_lo[j]))
        m.v[j].setub(None if not math.isfinite(milp.col_hi[j]) else float(milp.col_hi[j]))
        if j < milp.k:
            m.v[j].domain = pe.Integers
    m.obj = pe.Objective(expr=sum(float(milp.c[j]) * m.v[j] for j in np.flatnonzero(milp.c)) + float(milp.offset))
    order = np.argsort(R, kind="stable")
    R, C, Vv = R[order], C[order], Vv[order]
    starts = np.searchsorted(R, np.arange(rlo.size + 1))
    m.rows = pe.ConstraintList()
    for r in range(rlo.size):
        if starts[r] == starts[r + 1]:
            # a row over strata all fixed by their bounds is a constant (0 in the MILP's row units): Pyomo
            # refuses it as a trivial Boolean, so it is decided here (violated: the model is infeasible)
            # (rows are scaled to magnitude 1: the one feasibility tolerance applies as it is)
            if rlo[r] > FEASIBILITY_TOL or rhi[r] < -FEASIBILITY_TOL:
                return Solution(status=Status.INFEASIBLE, solver=prep["solver"], wall_time=time.perf_counter() - t0,
                                message=f"secant MILP row {r} covers only strata fixed by their bounds and its "
                                        f"constant value violates it (range [{rlo[r]:.6g}, {rhi[r]:.6g}] in the "
                                        "row's units, value 0)")
            continue
        expr = sum(float(Vv[p]) * m.v[int(C[p])] for p in range(starts[r], starts[r + 1]))
        lo_r = None if not math.isfinite(rlo[r]) else float(rlo[r])
        hi_r = None if not math.isfinite(rhi[r]) else float(rhi[r])
        m.rows.add(pe.inequality(lo_r, expr, hi_r) if lo_r is not None and hi_r is not None and lo_r != hi_r
                   else (expr == lo_r if lo_r is not None and lo_r == hi_r else
                         (expr >= lo_r if lo_r is not None else expr <= hi_r)))
    key = prep["solver"]
    left = max(deadline - time.perf_counter(), 1e-3)      # what the build left
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
