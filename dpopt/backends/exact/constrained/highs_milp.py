"""HiGHS on a :class:`~dpopt.formulations.separable.SecantMILP`: the model writer, the MILP solve of a core (or
of a window, without convexity) and the secant LP whose row duals are the best multipliers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....formulations.separable import secant_milp
from ..._highs import fit_presolve, new_highs
from ..._highs_run import lp_of, run_highs
from ..._status import status_of


@dataclass(frozen=True)
class MilpResult:
    """HiGHS's answer: ``status`` "optimal", "infeasible", "time_limit" or "error"; the integer point ``n``
    (None without a feasible one), its objective, HiGHS's dual bound (−inf unless optimal or at the time
    limit) and HiGHS's own status text."""
    status: str
    n: np.ndarray | None
    objective: float
    bound: float
    text: str


def milp_arrays(milp, integer: bool = True) -> dict:
    """A SecantMILP (its LP relaxation when ``integer`` is False) as HiGHS's model arrays
    (:func:`dpopt.backends._highs_run.lp_arrays`' form)."""
    # HiGHS's own feasibility tolerances (1e-7 primal, 1e-6 MIP; rows scaled to magnitude 1) are kept. It refuses
    # values below 1e-10 and keeps these defaults; that is what asking for FEASIBILITY_TOL (1e-11) did until now,
    # silently, so its MILP points miss the rows by up to ~1e-6 relative. Setting 1e-10 instead made HiGHS spin
    # inside one core far past its hard deadline (case (d), k = 20 000: 20 min on 84 strata). So its points are
    # only candidates: the one feasibility test judges them and .incumbent.repair moves them onto the rows by unit
    # moves (case (d) at k = 20 000 had found no design in 60 s because every HiGHS point was rejected). Its bound
    # holds for rows loosened by its tolerance, a relaxation, so it stays a lower bound.
    ncol = milp.c.size
    R, C, Vv, rlo, rhi = milp.to_coo()
    order = np.lexsort((R, C))
    R, C, Vv = R[order], C[order], Vv[order]
    # HiGHS's infinity (kHighsInf) is IEEE infinity, so open bounds pass as they are; sense 1 is kMinimize and
    # format 1 kColwise (highspy's enum values)
    return dict(num_col=ncol, num_row=int(rlo.size), offset=float(milp.offset), sense=1,
                col_cost_=np.asarray(milp.c, dtype=float), col_lower_=np.asarray(milp.col_lo, dtype=float),
                col_upper_=np.asarray(milp.col_hi, dtype=float), row_lower_=np.asarray(rlo, dtype=float),
                row_upper_=np.asarray(rhi, dtype=float),
                a_format=1, a_start=np.searchsorted(C, np.arange(ncol + 1)).astype(np.int32),
                a_index=np.asarray(R, dtype=np.int32), a_value=np.asarray(Vv, dtype=float),
                integrality=([1] * milp.k + [0] * (ncol - milp.k)) if integer else [])


def highs_model(milp, integer: bool = True, verbose: bool = False):
    """A HiGHS instance holding a SecantMILP (its LP relaxation when ``integer`` is False), in this process."""
    h = new_highs(verbose)
    h.passModel(lp_of(milp_arrays(milp, integer)))
    return h


TIGHT_TOL = 1e-9   # HiGHS's primal and MIP feasibility tolerances on a core whose bound its defaults left useless


def highs_solve(milp, rel_gap, abs_gap, time_limit, verbose=False, start=None, report=None,
                tight: bool = False) -> MilpResult:
    """Solve a SecantMILP with HiGHS, from the integer point ``start`` when given (HiGHS completes the
    epigraph columns); ``report(incumbent, bound)`` receives HiGHS's values in the model's units as it runs.
    ``tight``: HiGHS's feasibility tolerances at TIGHT_TOL instead of its defaults (highs_model: slower, and
    never the default, but its bound then loosens the rows by 1e-9 of their scale, not 1e-6)."""
    options = {"mip_rel_gap": float(rel_gap), "mip_abs_gap": float(abs_gap)}
    if tight:
        options.update(mip_feasibility_tolerance=TIGHT_TOL, primal_feasibility_tolerance=TIGHT_TOL)
    start_point = None if start is None else (np.arange(milp.k), np.asarray(start, dtype=float))
    # HiGHS's own limit can be overrun (seen: 40 minutes in its node queue): run_highs runs it in a worker
    # process killed past the limit, and that stop reads as the time limit
    rep = None if report is None else (lambda p, d: report(p * milp.obj_scale, d * milp.obj_scale))
    run = run_highs(milp_arrays(milp, True), options, time_limit, rep, columns=milp.k, start=start_point,
                    verbose=verbose)
    name = status_of("highs", run.status).value     # the one HiGHS map (backends/_status.py)
    info = run.info
    n = None
    if (info.primal_solution_status == 2 or name == "optimal") and run.solution.col_value.size >= milp.k:
        n = np.round(run.solution.col_value[:milp.k]).astype(np.int64)   # 2 = feasible
    bound = info.mip_dual_bound * milp.obj_scale if name in ("optimal", "time_limit") else -math.inf
    if not math.isfinite(bound):
        bound = -math.inf
    return MilpResult(name, n, info.objective_function_value * milp.obj_scale, bound, run.text)


def lp_multipliers(prog, lo, hi, anchor, scale, deadline, presolve: bool = True):
    """Row multipliers of the secant LP on ``lo..hi``: the LP is the convex hull of the integer problem there,
    so its duals maximise the integer Lagrangian dual whenever the range holds its minimisers (any λ gives a
    valid bound, so a smaller range only weakens it). None when the LP fails or ``deadline`` (a
    :class:`.deadline.Deadline`) passes before HiGHS starts: building the LP is itself work (0.3 s with HiGHS's
    model at k = 1 000 and 51 dense rows), so HiGHS gets only the time left after it. ``presolve``: HiGHS's
    presolve on (unless the time left is too short for it, as on every MILP)."""
    import highspy

    if deadline.passed():
        return None
    milp = secant_milp(prog, lo, hi, anchor=anchor, obj_scale=scale * 1e-6)
    h = highs_model(milp, False)
    if not presolve:
        h.setOptionValue("presolve", "off")
    time_limit = deadline.left()
    if time_limit is not None:
        if time_limit <= 0:
            return None
        h.setOptionValue("time_limit", max(float(time_limit), 1e-3))
        fit_presolve(h, time_limit)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal or not prog.m:
        return None
    y = np.asarray(h.getSolution().row_dual)[milp.con_rows]
    lam = -y * milp.obj_scale / milp.con_units
    lam = np.where(prog.inequality(), np.maximum(lam, 0.0), lam)
    return lam if np.all(np.isfinite(lam)) else None
