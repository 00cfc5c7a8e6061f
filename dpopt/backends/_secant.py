"""Pyomo and cvxpy translations of the one solver-independent secant MILP (docs/constrained.md).

Constrained, multi-variable, precision-target and min-cost stratified models are written once by
:func:`dpopt.formulations.separable.secant_milp` over the whole box (k integer columns, one epigraph column
per stratum and nonlinear row, one secant cut per integer segment); these functions hand that same MILP to
SCIP or HiGHS through Pyomo or cvxpy, so that solver comparisons run every tool on one formulation. Unlike
``exact`` they get no Lagrangian help: this is the generic MILP solvers' own performance.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import _validate as V
from ..formulations.separable import program_of, secant_milp
from ..result import Certificate, Solution, Status

DEFAULT_TIME_LIMIT = 300.0          # seconds, when the caller gives none: a solver call always ends
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
    gap = 1e-9 if gap is None else V.option(V.real, "rel_gap", gap)
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
    # accepts within its own tolerance but dpopt's 1e-9 refuses is repaired, and then only feasible
    milp = secant_milp(prog, lo, hi, anchor=x0, obj_scale=scale)
    solver_options = options.get("solver_options") or {}
    if not isinstance(solver_options, dict):
        raise V.InvalidOption(f"solver_options must be a mapping of the solver's own options, got "
                              f"{type(solver_options).__name__}")
    return dict(prog=prog, milp=milp, solver=solver, time_limit=time_limit, gap=gap,
                verbose=bool(options.get("verbose", False)), solver_options=dict(solver_options)), None


def _finish(model, prep, status_word, n, bound, solver_name, t0, message):
    prog = prep["prog"]
    repaired = False
    if n is not None and not (np.all(n >= prog.lower) and np.all(n <= prog.upper)
                              and np.all(prog.violation(n.astype(float)) <= 1e-9)):
        from .pyomo.stratified import repair_integer_point
        worst = float(np.max(prog.violation(np.clip(n, prog.lower, prog.upper).astype(float))))
        n = repair_integer_point(model, np.clip(n, prog.lower, prog.upper))
        repaired = n is not None
        message += (f"; the solver's point violated a row by {worst:.2e} (relative), within its own tolerance"
                    + ("; repaired by unit moves, so not proven optimal" if repaired else "; no repair found"))
    if n is None:
        st = {"infeasible": Status.INFEASIBLE, "time_limit": Status.TIME_LIMIT}.get(status_word, Status.ERROR)
        return Solution(status=st, solver=solver_name, message=message, wall_time=time.perf_counter() - t0)
    obj = prog.evaluate(n.astype(float))[0]
    lb = bound if math.isfinite(bound) else -math.inf
    gap = max((obj - lb) / abs(obj), 0.0) if obj and math.isfinite(lb) else math.inf
    optimal = status_word == "optimal" and not repaired and gap <= max(prep["gap"], 1e-9) * 1.0001
    cert = Certificate("gap", bool(optimal), lower_bound=lb, gap=gap, tolerance=prep["gap"],
                       message="secant MILP bound from the solver")
    st = Status.OPTIMAL if optimal else (Status.TIME_LIMIT if status_word == "time_limit" else Status.FEASIBLE)
    sol = model.make_solution(n=n, status=st, certificate=cert, solver=solver_name,
                              message=f"secant MILP over the whole box: {message}")
    sol.details["formulation"] = "secant"
    sol.wall_time = time.perf_counter() - t0
    return sol


def _coo(milp):
    R = np.concatenate(milp.rows).astype(np.int64)
    C = np.concatenate(milp.cols).astype(np.int64)
    Vv = np.concatenate(milp.vals).astype(float)
    return R, C, Vv, np.concatenate(milp.row_lo), np.concatenate(milp.row_hi)


def solve_pyomo(model, **options) -> Solution:
    """The secant MILP through Pyomo (SCIP via scip_direct or HiGHS via appsi_highs)."""
    t0 = time.perf_counter()
    prep, early = _prepare(model, options, _PYOMO_SOLVERS)
    if early is not None:
        return early
    import pyomo.environ as pe

    milp = prep["milp"]
    R, C, Vv, rlo, rhi = _coo(milp)
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
        expr = sum(float(Vv[p]) * m.v[int(C[p])] for p in range(starts[r], starts[r + 1]))
        lo_r = None if not math.isfinite(rlo[r]) else float(rlo[r])
        hi_r = None if not math.isfinite(rhi[r]) else float(rhi[r])
        m.rows.add(pe.inequality(lo_r, expr, hi_r) if lo_r is not None and hi_r is not None and lo_r != hi_r
                   else (expr == lo_r if lo_r is not None and lo_r == hi_r else
                         (expr >= lo_r if lo_r is not None else expr <= hi_r)))
    key = prep["solver"]
    from .pyomo import _solver as _pyomo
    opt, why = _pyomo.open_solver(key)          # the one allow-list: never a caller's string
    if opt is None:
        return Solution(status=Status.UNSUPPORTED, solver=key, message=why)
    left = max(prep["time_limit"] - (time.perf_counter() - t0), 1e-3)
    opts = ({"limits/time": left, "timing/clocktype": 2, "limits/gap": prep["gap"]} if key == "scip"
            else {"time_limit": left, "mip_rel_gap": prep["gap"]})
    opts.update(prep["solver_options"])          # passed straight through, as on every Pyomo route
    # solver output straight to the descriptors (no pipe to dead-lock); an interrupt raises KeyboardInterrupt
    status, tc, res, has_point = _pyomo.run(opt, key, m, opts, prep["verbose"])
    n = np.array([round(pe.value(m.v[j])) for j in range(milp.k)], dtype=np.int64) if has_point else None
    word = {Status.OPTIMAL: "optimal", Status.INFEASIBLE: "infeasible", Status.TIME_LIMIT: "time_limit"}.get(
        status, "other")
    lb = _pyomo.lower_bound(res)
    bound = lb * milp.obj_scale if math.isfinite(lb) else -math.inf
    return _finish(model, prep, word, n, bound, key, t0, f"termination {tc}")


def solve_cvxpy(model, **options) -> Solution:
    """The secant MILP through cvxpy (SCIP or HiGHS)."""
    t0 = time.perf_counter()
    prep, early = _prepare(model, options, _CVXPY_SOLVERS)
    if early is not None:
        return early
    import cvxpy as cp
    import scipy.sparse as sp

    milp = prep["milp"]
    R, C, Vv, rlo, rhi = _coo(milp)
    ncol = milp.c.size
    A = sp.csr_matrix((Vv, (R, C)), shape=(rlo.size, ncol))
    n = cp.Variable(milp.k, integer=True)
    z = cp.Variable(ncol - milp.k)
    v = cp.hstack([n, z]) if ncol > milp.k else n
    cons = [n >= milp.col_lo[:milp.k], n <= milp.col_hi[:milp.k]]
    if ncol > milp.k:
        cons.append(z >= milp.col_lo[milp.k:])
    Av = A @ v
    lo_f, hi_f = np.isfinite(rlo), np.isfinite(rhi)
    eq = lo_f & hi_f & (rlo == rhi)
    if np.any(eq):
        cons.append(Av[np.flatnonzero(eq)] == rlo[eq])
    if np.any(lo_f & ~eq):
        cons.append(Av[np.flatnonzero(lo_f & ~eq)] >= rlo[lo_f & ~eq])
    if np.any(hi_f & ~eq):
        cons.append(Av[np.flatnonzero(hi_f & ~eq)] <= rhi[hi_f & ~eq])
    prob = cp.Problem(cp.Minimize(milp.c @ v + milp.offset), cons)
    key = prep["solver"]
    left = max(prep["time_limit"] - (time.perf_counter() - t0), 1e-3)
    kw = ({"scip_params": {"limits/time": left, "limits/gap": prep["gap"], **prep["solver_options"]}}
          if key == "scip" else {"time_limit": left, "mip_rel_gap": prep["gap"], **prep["solver_options"]})
    try:
        prob.solve(solver=_CVXPY_SOLVERS[key], verbose=prep["verbose"], **kw)
    except cp.error.SolverError as exc:
        return Solution(status=Status.ERROR, solver=key, message=f"cvxpy/{key}: {exc}")
    st = prob.status
    word = {"optimal": "optimal", "infeasible": "infeasible"}.get(st, "time_limit" if "inaccurate" in st or
                                                                   st == "user_limit" else "other")
    pt = None if n.value is None else np.round(n.value).astype(np.int64)
    # cvxpy reports no dual bound for MILPs: without one the answer cannot be certified optimal
    bound = prob.value * milp.obj_scale if word == "optimal" and prob.value is not None else -math.inf
    if word == "optimal":
        bound -= prep["gap"] * abs(bound)       # the solver's own stopping gap
    return _finish(model, prep, word, pt, bound, key, t0, f"cvxpy status {st}")
