"""One status map per tool (issue 19 item 4; not a backend: ``_`` modules are not registered).

Each map takes the tool's own termination word to dpopt's :class:`~dpopt.result.Status`; every route of that
tool reads it through :func:`status_of`. The tool's word itself is kept beside the status as
``Solution.termination`` ("why it stopped"), as Pyomo's ``contrib.solver`` results and MathOptInterface keep
the termination status apart from the result status: ``status`` says what the returned point is worth, and
the answer's own certificate may still raise it to ``optimal`` or lower it to ``feasible``.

Rules shared by the maps: a claim of a point (optimal, feasible) without a point is ``error``; an
"inaccurate" optimum is ``feasible`` (its certificate decides whether it is optimal); every limit (time,
iterations, nodes, solutions) is ``time_limit``; anything unknown is ``error``. A user interrupt that the
solver caught raises KeyboardInterrupt.
"""

from __future__ import annotations

from contextvars import ContextVar

from ..result import Status

_O, _F, _I, _T, _E = Status.OPTIMAL, Status.FEASIBLE, Status.INFEASIBLE, Status.TIME_LIMIT, Status.ERROR
_INTERRUPT = object()

#: Pyomo's ``TerminationCondition`` (its value) → Status
PYOMO = {
    "optimal": _O, "globallyOptimal": _O, "locallyOptimal": _O, "feasible": _F,
    "maxTimeLimit": _T, "maxIterations": _T, "maxEvaluations": _T,
    "infeasible": _I, "infeasibleOrUnbounded": _I, "unbounded": _E,
    "userInterrupt": _INTERRUPT, "resourceInterrupt": _INTERRUPT,
}
#: cvxpy's ``Problem.status`` → Status
CVXPY = {
    "optimal": _O, "optimal_inaccurate": _F, "user_limit": _T,
    "infeasible": _I, "infeasible_inaccurate": _I, "unbounded": _E, "unbounded_inaccurate": _E,
    "infeasible_or_unbounded": _I, "solver_error": _E,
}
#: HiGHS's ``HighsModelStatus`` (``modelStatusToString`` words and enum names) → Status
HIGHS = {
    "kOptimal": _O, "Optimal": _O,
    "kInfeasible": _I, "Infeasible": _I, "kUnboundedOrInfeasible": _I, "Primal infeasible or unbounded": _I,
    "kTimeLimit": _T, "Time limit reached": _T, "kIterationLimit": _T, "Iteration limit reached": _T,
    "kSolutionLimit": _T, "Solution limit reached": _T, "kObjectiveBound": _T, "kObjectiveTarget": _T,
    "kUnbounded": _E, "Unbounded": _E, "kInterrupt": _INTERRUPT, "Interrupted by user": _INTERRUPT,
}
#: SCIP's ``Model.getStatus()`` → Status
SCIP = {
    "optimal": _O, "infeasible": _I, "inforunbd": _I, "unbounded": _E,
    "timelimit": _T, "nodelimit": _T, "totalnodelimit": _T, "stallnodelimit": _T, "gaplimit": _F,
    "sollimit": _T, "bestsollimit": _T, "restartlimit": _T, "memlimit": _E,
    "userinterrupt": _INTERRUPT, "terminate": _INTERRUPT,
}
MAPS = {"pyomo": PYOMO, "cvxpy": CVXPY, "highs": HIGHS, "scip": SCIP}


def word(termination) -> str:
    """The tool's termination as a plain string (an enum's value or name)."""
    if termination is None:
        return ""
    value = getattr(termination, "value", None)
    if isinstance(value, str):
        return value
    name = getattr(termination, "name", None)
    return name if isinstance(name, str) else str(termination)


def status_of(tool: str, termination, has_point: bool = True) -> Status:
    """dpopt's status for ``tool``'s termination word (see the module's rules)."""
    key = word(termination)
    st = MAPS[tool].get(key, _E)
    if st is _INTERRUPT:
        raise KeyboardInterrupt(f"solver interrupted ({key})")
    if st in (_O, _F) and not has_point:
        return _E
    return st


def cvxpy_status(prob, has_point: bool = True) -> Status:
    """dpopt's status for a solved cvxpy problem: the :data:`CVXPY` map, except that cvxpy reports SCIP's limits
    (``timelimit``, ``nodelimit``, ...) as ``optimal_inaccurate``; SCIP's own word, which cvxpy keeps in
    ``solver_stats.extra_stats["scip_status"]``, is read first through :data:`SCIP`."""
    stats = getattr(getattr(prob, "solver_stats", None), "extra_stats", None)
    scip = stats.get("scip_status") if isinstance(stats, dict) else None
    if isinstance(scip, str) and scip in SCIP and SCIP[scip] is _T:
        return _T
    return status_of("cvxpy", prob.status, has_point)


# the termination of the last external solver call of the current backend call, for routes that build their
# Solution in many branches: the registry copies it into Solution.termination when the route left it empty
_LAST: ContextVar[str | None] = ContextVar("dpopt_last_termination", default=None)


def record(termination) -> str:
    """Note ``termination`` as the current call's solver termination; returns it as a string."""
    text = word(termination)
    if _LAST.get() is not None:
        _LAST.set(text)
    return text


def begin():
    """Start recording for one backend call (returns the token for :func:`end`)."""
    return _LAST.set("")


def end(token) -> str:
    """The termination recorded since :func:`begin` (``""`` if none), and stop recording."""
    text = _LAST.get() or ""
    _LAST.reset(token)
    return text
