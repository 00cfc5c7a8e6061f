"""SCIP (PySCIPOpt, in this process) on a :class:`~dpopt.formulations.separable.SecantMILP`: the second solver of
the cells' core MILP (:meth:`.search.CoreSearch.milp`), with :func:`.highs_milp.highs_solve`'s arguments and answer.

Why a second solver: on the cells' MILP (40 integer totals and their unit segments, case (g)) HiGHS and SCIP each
win where the other crawls. Measured on the last core of case (g) (one run each, the same MILP): at k = 500 SCIP
proved it in 0.3-8.3 s where HiGHS took 5 s or had not finished at 30-60 s (three of four instances); at
k = 1 000 HiGHS proved it in 0.9-1.1 s where SCIP took 1.4-7.3 s. The search runs HiGHS first for a short slice
and then SCIP with the time left (:data:`.search.CELL_HIGHS_SLICE`).

SCIP keeps its time limit itself (it checks the clock at every node and inside its LP and presolve loops); a
SCIP run cannot be killed from outside as HiGHS's worker process is, and on these MILPs (tens of rows) no step
is long. Its points are candidates like HiGHS's (the one feasibility test judges them) and its bound holds for
rows loosened by its feasibility tolerance (1e-6 of a row's scale by default, ``tight``: TIGHT_TOL), a
relaxation, so it stays a lower bound."""

from __future__ import annotations

import math
import time

import numpy as np

from ..._status import status_of
from .highs_milp import TIGHT_TOL, MilpResult



def scip_solve(milp, rel_gap, abs_gap, time_limit, verbose=False, start=None, report=None,
               tight: bool = False) -> MilpResult:
    """Solve a SecantMILP with SCIP: :func:`.highs_milp.highs_solve`'s arguments and result (``start``: an
    integer point for the first ``milp.k`` columns, which SCIP completes; ``report(incumbent, bound)`` in the
    model's units as it runs). A failure inside PySCIPOpt or SCIP is the status "error" with its message, as a
    HiGHS failure is, never an exception out of the search."""
    try:
        return _scip_solve(milp, rel_gap, abs_gap, time_limit, verbose, start, report, tight)
    except (KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:        # a fault of the solver, reported as a status (the search goes on without it)
        return MilpResult("error", None, math.inf, -math.inf, f"SCIP failed: {type(exc).__name__}: {exc}")


def _scip_solve(milp, rel_gap, abs_gap, time_limit, verbose, start, report, tight) -> MilpResult:
    called = time.monotonic()
    from pyscipopt import Eventhdlr, Model, SCIP_EVENTTYPE, quicksum

    m = Model()
    m.hideOutput(not verbose)
    ncol = milp.c.size
    x = [m.addVar(vtype="I" if j < milp.k else "C", lb=float(milp.col_lo[j]),
                  ub=None if math.isinf(milp.col_hi[j]) else float(milp.col_hi[j])) for j in range(ncol)]
    R, C, V, rlo, rhi = milp.to_coo()
    order = np.argsort(R, kind="stable")
    R, C, V = R[order], C[order], V[order]
    bounds = np.searchsorted(R, np.arange(rlo.size + 1))
    for i in range(rlo.size):
        expr = quicksum(float(V[p]) * x[int(C[p])] for p in range(bounds[i], bounds[i + 1]))
        lo, hi = float(rlo[i]), float(rhi[i])
        if lo == hi:
            m.addCons(expr == lo)
        elif math.isfinite(lo) and math.isfinite(hi):
            m.addCons(lo <= (expr <= hi))
        elif math.isfinite(hi):
            m.addCons(expr <= hi)
        elif math.isfinite(lo):
            m.addCons(expr >= lo)
    m.setObjective(quicksum(float(milp.c[j]) * x[j] for j in np.flatnonzero(milp.c)), "minimize")
    m.setParam("limits/gap", float(rel_gap))
    m.setParam("limits/absgap", float(abs_gap))
    if tight:
        m.setParam("numerics/feastol", TIGHT_TOL)
    if start is not None:
        sol = m.createPartialSol()
        for j, v in enumerate(np.asarray(start, dtype=float)[:milp.k]):
            m.setSolVal(sol, x[j], float(v))
        m.addSol(sol)
    infinity = m.infinity()

    def to_model(v):
        """A SCIP objective value in the model's units (SCIP's infinity, e.g. no incumbent yet, as ±inf)."""
        return math.copysign(math.inf, v) if abs(v) >= infinity else (v + milp.offset) * milp.obj_scale

    if report is not None:
        class _Progress(Eventhdlr):
            # every node: the one throttle of progress lines is BoundProgress's (dpopt/progress.py)
            def eventinit(self):
                self.model.catchEvent(SCIP_EVENTTYPE.NODESOLVED, self)

            def eventexec(self, event):
                report(to_model(self.model.getPrimalbound()), to_model(self.model.getDualbound()))

        m.includeEventhdlr(_Progress(), "dpopt_progress", "incumbent and bound lines")
    if time_limit is not None:
        # SCIP's clock starts in optimize(): building the model (0.1-0.3 s on 4 000 segments) counts against the
        # limit too
        m.setParam("limits/time", max(float(time_limit) - (time.monotonic() - called), 1e-3))
    m.optimize()
    word = m.getStatus()
    has = m.getNSols() > 0
    name = status_of("scip", word, has).value
    n = None
    if has:
        best = m.getBestSol()
        n = np.round([m.getSolVal(best, x[j]) for j in range(milp.k)]).astype(np.int64)
    objective = to_model(m.getObjVal()) if has else math.inf
    bound = to_model(m.getDualbound()) if name in ("optimal", "feasible", "time_limit") else -math.inf
    if not math.isfinite(bound):        # no bound (never +inf: an infeasible MILP has the status infeasible)
        bound = -math.inf
    if name == "feasible":          # SCIP's gap limit: its gap is the one asked for, an optimum for the search
        name = "optimal"
    return MilpResult(name, n, objective, bound, f"SCIP: {word}")
