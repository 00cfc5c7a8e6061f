"""Pyomo and cvxpy translations of the one solver-independent secant MILP (docs/constrained.md).

Constrained, multi-variable, precision-target and min-cost stratified models are written once by
:func:`dpopt.formulations.separable.secant_milp` over the whole box (k integer columns, one epigraph column
per stratum and nonlinear row, one secant cut per integer segment); this module prepares that same MILP and checks
and packages the answer, and :mod:`.pyomo.secant` and :mod:`.cvxpy.secant` hand it to SCIP or HiGHS, so that solver comparisons run every tool on one formulation. Unlike
``exact`` they get no Lagrangian help: this is the generic MILP solvers' own performance.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as V
from ..options import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT
from ..formulations.separable import program_of, secant_milp
from ..result import Certificate, Solution, Status, gap_proves

DEFAULT_MAX_SEGMENTS = 300_000
_PYOMO_SOLVERS = ("scip", "highs")        # dpopt names; _pyomo.SOLVERS maps them to Pyomo's factories
_CVXPY_SOLVERS = {"scip": "SCIP", "highs": "HIGHS"}


def _ranges(prog):
    """Sum-tightened bounds: with Σ n = η, n_i ≤ η − Σ_{j≠i} lo_j and n_i ≥ η − Σ_{j≠i} hi_j."""
    lo, hi = prog.lower.copy(), prog.upper.copy()
    for r in prog.rows:
        if r.kind == "total":
            eta = int(round(r.rhs))
            hi = np.minimum(hi, eta - (lo.sum() - lo))
            lo = np.maximum(lo, eta - (hi.sum() - hi))
    return lo, hi


def _prepare(model, options, solvers):
    if options.get("formulation") not in (None, "secant"):
        raise V.InvalidOption(f"formulation {options.get('formulation')!r} cannot model "
                              f"{', '.join(model.extended_features())}; use formulation='secant' or omit it")
    solver = str(options.get("solver", "highs")).strip().lower()
    if solver not in solvers:
        return None, Solution(status=Status.UNSUPPORTED, message=f"the secant MILP of a constrained design runs on "
                              f"{', '.join(sorted(solvers))}, not {options.get('solver')!r}")
    # (the names are matched against this fixed list only; nothing the caller wrote reaches a solver factory)
    time_limit = options.get("time_limit")
    time_limit = DEFAULT_TIME_LIMIT if time_limit is None else V.time_limit(time_limit)
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
    prog = prep["prog"]
    repaired = False
    if n is not None and not (np.all(n >= prog.lower) and np.all(n <= prog.upper)
                              and prog.feasible(n)):
        from .pyomo.feasibility import repair_integer_point
        worst = float(np.max(prog.violation(np.clip(n, prog.lower, prog.upper).astype(float))))
        n = repair_integer_point(model, np.clip(n, prog.lower, prog.upper))
        repaired = n is not None
        message += (f"; the solver's point violated a row by {worst:.2e} (relative), within its own tolerance"
                    + ("; repaired by unit moves (optimal only if its gap to the bound proves it)" if repaired
                       else "; no repair found"))
    if n is None:
        st = {"infeasible": Status.INFEASIBLE, "time_limit": Status.TIME_LIMIT}.get(status_word, Status.ERROR)
        return Solution(status=st, solver=solver_name, message=message, wall_time=time.perf_counter() - t0,
                        termination=termination)
    obj = prog.evaluate(n.astype(float))[0]
    lb = bound if math.isfinite(bound) else -math.inf
    gap = max((obj - lb) / abs(obj), 0.0) if obj and math.isfinite(lb) else math.inf
    # the answer's own gap certificate decides (result.gap_proves: within rel_gap + PROVEN_GAP, the noise between
    # dpopt's objective and the solver's scaled one), whatever the solver's termination or internal gap
    optimal = gap_proves(gap, prep["gap"])
    cert = Certificate("gap", bool(optimal), lower_bound=lb, gap=gap, tolerance=prep["gap"],
                       message="secant MILP bound from the solver")
    st = Status.OPTIMAL if optimal else (Status.TIME_LIMIT if status_word == "time_limit" else Status.FEASIBLE)
    sol = model.make_solution(n=n, status=st, certificate=cert, solver=solver_name,
                              message=f"secant MILP over the whole box: {message}")
    sol.details["formulation"] = "secant"
    sol.termination = termination
    sol.wall_time = time.perf_counter() - t0
    return sol


def _coo(milp):
    R = np.concatenate(milp.rows).astype(np.int64)
    C = np.concatenate(milp.cols).astype(np.int64)
    Vv = np.concatenate(milp.vals).astype(float)
    return R, C, Vv, np.concatenate(milp.row_lo), np.concatenate(milp.row_hi)
