"""Pyomo and cvxpy translations of the one solver-independent secant MILP (docs/constrained.md).

Constrained, multi-variable, precision-target and min-cost stratified models are written once by
:func:`dpopt.formulations.separable.secant_milp` over the whole box (k integer columns, one epigraph column
per stratum and nonlinear row, one secant cut per integer segment); this module prepares that same MILP and checks
and packages the answer, and :mod:`.pyomo.secant` and :mod:`.cvxpy.secant` hand it to SCIP or HiGHS, so that solver comparisons run every tool on one formulation. Unlike
``exact`` they get no Lagrangian help: this is the generic MILP solvers' own performance.
"""

from __future__ import annotations


import numpy as np

from .. import _validate as V
from ..options import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT, time_limit_or_default  # noqa: F401
from ..formulations.separable import program_of, ranges, secant_milp
from ..formulations.solution import solution_from
from ..result import Solution, Status

DEFAULT_MAX_SEGMENTS = 300_000
_PYOMO_SOLVERS = ("scip", "highs")        # dpopt names; _pyomo.SOLVERS maps them to Pyomo's factories
_CVXPY_SOLVERS = {"scip": "SCIP", "highs": "HIGHS"}


def _ranges(prog):
    """Sum-tightened bounds (:func:`dpopt.formulations.ranges`, the public home)."""
    return ranges(prog)


def _prepare(model, options, solvers):
    if options.get("formulation") not in (None, "secant"):
        raise V.InvalidOption(f"formulation {options.get('formulation')!r} cannot model "
                              f"{', '.join(model.extended_features())}; use formulation='secant' or omit it")
    solver = str(options.get("solver", "highs")).strip().lower()
    if solver not in solvers:
        return None, Solution(status=Status.UNSUPPORTED, message=f"the secant MILP of a constrained design runs on "
                              f"{', '.join(sorted(solvers))}, not {options.get('solver')!r}")
    # (the names are matched against this fixed list only; nothing the caller wrote reaches a solver factory)
    time_limit = time_limit_or_default(options.get("time_limit"))
    gap = options.get("rel_gap")
    gap = DEFAULT_REL_GAP if gap is None else V.option(V.real, "rel_gap", gap)
    if not 0 <= gap < 1:
        raise V.InvalidOption(f"rel_gap must be in [0, 1), got {gap:g}")
    prog = program_of(model)
    lo, hi = _ranges(prog)
    if np.any(lo > hi):
        return None, Solution(status=Status.INFEASIBLE, message="the bounds and the total leave no design")
    size = int(np.sum(hi - lo))
    if size > DEFAULT_MAX_SEGMENTS:
        return None, Solution(status=Status.UNSUPPORTED, message=f"the secant MILP over the whole box has {size} "
                              f"segments per nonlinear row (limit {DEFAULT_MAX_SEGMENTS}); backend 'exact' "
                              "restricts it by reduced-cost fixing")
    x0 = np.sqrt(lo * hi)
    scale = max(abs(prog.evaluate(x0)[0]), 1e-300) * 1e-6
    # exact right-hand sides (tightened rows cut off zero-slack optima and void the bound); a point the solver
    # accepts within its own tolerance but the one feasibility test refuses is repaired (optimal only when its
    # gap proves it)
    milp = secant_milp(prog, lo, hi, anchor=x0, obj_scale=scale)
    solver_options = options.get("solver_options") or {}
    if not isinstance(solver_options, dict):
        raise V.InvalidOption(f"solver_options must be a mapping of the solver's own options, got "
                              f"{type(solver_options).__name__}")
    from .pyomo._solver import check_solver_options     # the Pyomo routes' check: unknown names are refused
    check_solver_options(solver, solver_options)
    return dict(prog=prog, milp=milp, solver=solver, time_limit=time_limit, gap=gap,
                verbose=bool(options.get("verbose", False)), solver_options=dict(solver_options)), None


def _finish(model, prep, status_word, n, bound, solver_name, t0, message, termination=""):
    """The answer as a Solution: the shared :func:`dpopt.formulations.solution_from` (feasibility test, repair,
    gap certificate, status), marked as the secant MILP's; ``termination`` is the solver's own reason."""
    sol = solution_from(model, n, bound, status_word, rel_gap=prep["gap"], solver=solver_name, message=message,
                        program=prep["prog"], bound_source="secant MILP bound from the solver", t0=t0)
    if sol.ok:
        sol.message = f"secant MILP over the whole box: {sol.message}"
        sol.details["formulation"] = "secant"
    sol.termination = termination
    return sol


def _coo(milp):
    """(R, C, V, row_lo, row_hi): :meth:`SecantMILP.to_coo`, the one unpacking."""
    return milp.to_coo()
