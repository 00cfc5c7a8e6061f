"""The one function that turns a solver's answer on a compiled program into a :class:`~dpopt.result.Solution`.

A writer (HiGHS direct, Pyomo, cvxpy, scipy, or a backend written outside the package) hands
:func:`solution_from` what its solver returned: an integer point (or None), a proven lower bound on the
model's objective (or -inf), and the solver's own status. The function applies the one feasibility test
(:meth:`SeparableProgram.feasible`, ``FEASIBILITY_TOL``), repairs a point that a solver accepted within its
own tolerance by unit moves, builds the gap certificate (:func:`dpopt.result.gap_proves`) and decides the
status from it: ``optimal`` only when the answer's own gap to the bound proves it, whatever the solver said.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..result import Certificate, Solution, Status
from .repair import SOLVER_TOL, repair_integer_point   # model-level unit moves
from .separable import SeparableProgram, program_of

#: the solver statuses :func:`solution_from` reads (a :class:`Status` or one of these words); anything else
#: is "other" (no claim)
SOLVER_WORDS = ("optimal", "infeasible", "time_limit", "unsupported", "error", "other")


def _word(status) -> str:
    if isinstance(status, Status):
        return {Status.OPTIMAL: "optimal", Status.INFEASIBLE: "infeasible", Status.TIME_LIMIT: "time_limit",
                Status.UNSUPPORTED: "unsupported", Status.ERROR: "error"}.get(status, "other")
    word = str(status).strip().lower()
    return word if word in SOLVER_WORDS else "other"


def solution_from(model, point, bound: float, solver_status, *, rel_gap: float | None = 0.0, solver: str = "",
                  message: str = "", program: SeparableProgram | None = None, repair: bool = True,
                  bound_source: str = "solver bound", solver_proof: bool = False,
                  t0: float | None = None, deadline: float | None = None) -> Solution:
    """The :class:`Solution` (with its gap certificate) of an integer answer to ``model``'s program.

    ``point``: the solver's integer design (rounded here), or None when it returned none. ``bound``: a proven
    lower bound on the model's objective (in the model's units: undo any scaling first), ``-inf`` when the
    solver proved none. ``solver_status``: a :class:`Status` or a word of :data:`SOLVER_WORDS`; it decides
    only what happens without a usable point (infeasible, time limit, error). ``rel_gap``: the gap the caller
    allowed (the certificate holds within ``rel_gap + PROVEN_GAP``). ``repair``: move a point that fails the
    feasibility test by unit moves to a feasible one (switch off when the solver's model holds rows dpopt
    does not know, e.g. a user's own rows), giving up at ``deadline`` (a ``time.perf_counter`` instant). ``solver_proof``: the solver's ``optimal`` counts as a proof when
    it was asked for gap 0 (``rel_gap`` 0) on the exact model and its point is kept unrepaired (a spatial branch
    and bound such as SCIP's closes its gap only to its own tolerances, ~1e-6 relative). ``t0``: a ``time.perf_counter()`` start for ``wall_time``.

    The status is ``optimal`` only when the relative gap between the point's objective (evaluated by dpopt)
    and ``bound`` proves it; else ``feasible`` (``time_limit`` when the solver stopped at a limit).
    """
    prog = program if program is not None else program_of(model)
    word = _word(solver_status)
    wall = (time.perf_counter() - t0) if t0 is not None else 0.0
    n = None
    if point is not None:
        n = np.round(np.asarray(point, dtype=float)).astype(np.int64)
        if n.shape != (prog.k,) or not np.all(np.isfinite(np.asarray(point, dtype=float))):
            return Solution(status=Status.ERROR, solver=solver, wall_time=wall,
                            message=f"{message}; the solver's point has shape {np.shape(point)}, not ({prog.k},)"
                            .lstrip("; "))
    if n is not None and not prog.feasible(n):
        clipped = np.clip(n, prog.lower, prog.upper)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            worst = float(np.max(prog.violation(clipped.astype(float)))) if prog.m else 0.0
        fixed = None
        if repair:
            fixed = repair_integer_point(model, clipped, deadline=deadline)
        # (a larger violation is no tolerance: the solver's model was a relaxation, e.g. secants not yet cut)
        message += (f"; the solver's point violated a row by {worst:.2e} (relative)"
                    + (", within its own tolerance" if worst <= SOLVER_TOL else "")
                    + (("; repaired by unit moves (optimal only if its gap to the bound proves it)" if fixed is not None
                        else "; no repair found") if repair else "; not repaired"))
        n = fixed
        solver_proof = False
    message = message.lstrip("; ")
    if n is None:
        st = {"infeasible": Status.INFEASIBLE, "time_limit": Status.TIME_LIMIT,
              "unsupported": Status.UNSUPPORTED}.get(word, Status.ERROR)
        return Solution(status=st, solver=solver, message=message, wall_time=wall)
    obj = prog.evaluate(n.astype(float))[0]
    try:
        lb = float(bound)
    except (TypeError, ValueError):
        lb = -math.inf
    lb = lb if math.isfinite(lb) else -math.inf
    gap = max((obj - lb) / abs(obj), 0.0) if obj and math.isfinite(lb) else (0.0 if obj == lb else math.inf)
    tol = float(rel_gap or 0.0)
    from ..result import gap_proves
    optimal = gap_proves(gap, tol)
    if not optimal and solver_proof and word == "optimal" and not tol:
        optimal = True
        bound_source = f"{bound_source}; the solver's own proof of optimality (asked for gap 0)"
    cert = Certificate("gap", bool(optimal), lower_bound=lb, gap=gap, tolerance=tol, message=bound_source)
    st = Status.OPTIMAL if optimal else (Status.TIME_LIMIT if word == "time_limit" else Status.FEASIBLE)
    sol = model.make_solution(n=n, status=st, certificate=cert, solver=solver, message=message)
    sol.wall_time = wall
    return sol
