"""``pyomo`` backend for StratifiedDesign and MinCostDesign (docs/stratified.md, docs/constrained.md).

:func:`build_pyomo_model` returns a Pyomo ``ConcreteModel`` that analysts may extend (``m.n[i]`` are the
sample sizes, ``m.extra`` is an empty ``ConstraintList`` for their own constraints) before solving it
themselves or through :func:`solve_pyomo_model`.

Formulations
------------
``"minlp"``: the objective Σ f_i(n_i) written in closed form (Laplace: ``2Δ²/log(1 + cN/n)²``; DLap with
Δ = 1 and TuLap: ``a/n + b·n + const``, exact; DLap with Δ > 1: ``2p/(1−p)²`` with ``p = (n/(n+cN))^{1/Δ}``),
solved by SCIP through PySCIPOpt (Pyomo's ``scip_direct``). No coefficient exceeds ~1e15 in magnitude
(SCIP's infinity is 1e20) for ε from 1e-6 to 700: when cN > e^34 the amplified budget is written in log
space, ``log1p(cN/n) = u + log(1 + e^{−u})`` with ``u = log(cN) − log(n)`` (the second term dropped when it
is below double precision); for DLap with Δ > 1 and cN ≤ 1 the variance is written without the
cancellation in ``1 − p``. The objective is divided by a positive
constant ``m.objective_scale`` (reported, folded into the weights) to keep SCIP's tolerances meaningful; ``m.g`` is the unscaled
expression. Integer or continuous (``integer=False``: the relaxation, solved by SCIP's spatial branch and
bound, or IPOPT when it is installed and asked for).

``"milp"``: the incremental form ``n_i = lo_i + Σ_m δ_im``, cost ``Σ d_i(m) δ_im`` with the model's exact
unit increments ``model.increments`` (plus Σ f_i(lo_i)); δ binary. With non-decreasing increments the
chosen units form a prefix (ordering constraints are added automatically if the increments are not
monotone, e.g. a user mechanism), so the MILP optimum is the integer optimum. Solved by HiGHS
(``appsi_highs``); for the plain sum problem the δ are continuous, because that LP is integral. Its LP relaxation (``integer=False``) is the piecewise-linear interpolation, *not* the
continuous relaxation of the model. For the sum problem the ranges are first tightened with the sum
(``n_i ≤ η − Σ_{j≠i} lo_j``); the number of δ variables is limited by ``max_milp_vars``.

Solve options: the common ones of :mod:`dpopt.backends.pyomo._solver` (``solver`` "scip" | "highs" | "ipopt",
``time_limit`` (None: 300 s), ``rel_gap`` (default 0 = proven optimum), ``verbose``, ``solver_options``), plus
``formulation`` (default: "minlp" for SCIP/IPOPT, "milp" for HiGHS) and ``max_milp_vars``. Solver statuses
map onto ``Solution.status`` through the shared map; an unknown or missing solver gives ``unsupported``.
An integer point is returned only when ``model.is_feasible`` accepts it (the one feasibility test,
``FEASIBILITY_TOL`` = 1e-11 relative; docs/constrained.md); a real relaxation point is ``optimal`` only then,
and returned as ``feasible`` within the solver's own tolerance ``SOLVER_TOL``. An ``infeasible`` claim from
the solver on a model with a known feasible point (e.g. the plain sum-and-bounds problem) is reported as
``error``. A rounded integer point that violates a constraint within the solver's tolerance is repaired by
unit moves to a feasible point (status ``feasible`` unless the solver's bound proves it), else there is no
point (``error``, or ``time_limit`` without an incumbent).
"""

from __future__ import annotations

import time

import numpy as np

from ... import _validate as V
from ...models.stratified import MinCostDesign, StratifiedDesign
from ...registry import register
from ...result import PROVEN_GAP, Certificate, Solution, Status, gap_proves  # noqa: F401
from . import _solver as PY
from .._routes import secant_for_extended
from .secant import solve_pyomo
from .build import (DEFAULT_MAX_MILP_VARS, FORMULATIONS, PyomoUnsupported, _ranges,  # noqa: F401 (public here)
                    build_pyomo_model)
from ...formulations.repair import (FEASIBILITY_TOL, SOLVER_TOL, known_feasible_point, max_violation,  # noqa: F401
                          repair_integer_point)

_DESCRIPTION = "Pyomo models: SCIP MINLP/NLP (scip_direct), HiGHS incremental MILP (appsi_highs), IPOPT if installed"
SOLVERS = ("scip", "highs", "ipopt")


# model building: dpopt/backends/pyomo/build.py; feasibility checks and repair: feasibility.py

# ---------------------------------------------------------------------------------- solving
# columns of the incremental MILP that Pyomo builds and HiGHS loads and solves per second (measured ~10⁴ on a
# 2-core x86_64 machine with presolve off for the integral LP: 2.6·10⁵ columns in ~30 s); a time-limited
# solve whose MILP needs more than this times the limit is refused up front
MILP_COLUMNS_PER_SECOND = 8000
def _unknown_solver_message(solver) -> str:
    return PY.unknown_solver_message(solver, SOLVERS, "stratified designs")


def _is_lp(m) -> bool:
    """The incremental model of the plain sum problem: one LP whose vertex is integral."""
    import pyomo.environ as pe
    return hasattr(m, "lp_integral") and bool(pe.value(m.lp_integral))


def _option_map(solver: str, lp: bool = False) -> dict:
    """dpopt's settings for each solver (time limit and gap come from :func:`_pyomo.limit_options`)."""
    opts = {}
    if solver == "scip":
        opts["limits/gap"] = 0.0
        # SCIP 10 symmetry detection treats x^-1 terms with different coefficients as symmetric and
        # returns wrong "optimal" answers on these models (seen on Chen Table 1, TuLap): switch it off
        opts["misc/usesymmetry"] = 0
    elif solver == "highs":
        opts["mip_rel_gap"] = 0.0
        opts["primal_feasibility_tolerance"] = 1e-10
        opts["dual_feasibility_tolerance"] = 1e-10
        if lp:
            # HiGHS's presolve of this LP (one sum row, k link rows, ~k·η columns) ignores the time limit
            # and took 289 s at 2.6e5 columns; the simplex alone needs seconds
            opts["presolve"] = "off"
    elif solver == "ipopt":
        opts["tol"] = 1e-12
    return opts


def _solve_built(m, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
                 verbose: bool = False, solver_options: dict | None = None):
    """Solve a model built by :func:`build_pyomo_model`: ``(status, message, lower_bound)`` with the variables
    loaded when a point exists (the solver's raw answer; :func:`solve_pyomo_model` makes it a Solution)."""
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return Status.UNSUPPORTED, _unknown_solver_message(solver), float("nan")
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, {})
    PY.check_solver_options(key, opts.solver_options)
    opt, why = PY.open_solver(key)
    if opt is None:
        return Status.UNSUPPORTED, f"{why}; allowed: {PY.allowed_text(SOLVERS)}", float("nan")
    settings = {**_option_map(key, _is_lp(m)), **PY.limit_options(key, opts), **opts.solver_options}
    status, tc, results, _ = PY.run(opt, key, m, settings, opts.verbose)
    return status, f"{PY.SOLVERS[key]}: termination {tc}", PY.lower_bound(results)


def solve_pyomo_model(m, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
                      verbose: bool = False, solver_options: dict | None = None) -> Solution:
    """Solve a model built by :func:`build_pyomo_model` (or extended from it, e.g. rows in ``m.extra``) and
    return a :class:`Solution` of the dpopt model it was built from (``m.dpopt_model``).

    ``solver`` is one of dpopt's names ("scip", "highs", "ipopt"); ``time_limit`` None means the default of
    :data:`dpopt.backends.pyomo._solver.DEFAULT_TIME_LIMIT` seconds. An integer answer goes through the shared
    :func:`dpopt.formulations.solution_from`: the one feasibility test on the model's rows, the gap certificate
    to the solver's bound (undone from ``m.objective_scale``/``m.objective_offset``) and the status it proves
    (the solver's own ``optimal`` at gap 0 on its unrepaired point counts, as on the backend's own route).
    A point the solver accepted within its own tolerance is repaired by unit moves only when ``m.extra`` is
    empty (a repair cannot see the analyst's rows); otherwise it is reported as ``error``. A real
    (``integer=False``) point is ``optimal`` only when the model's feasibility test accepts it. The variables
    stay loaded. A KeyboardInterrupt (also one the solver caught) propagates.
    """
    import pyomo.environ as pe

    from ...formulations.solution import solution_from

    t0 = time.perf_counter()
    model = getattr(m, "dpopt_model", None)
    if model is None:
        raise TypeError("solve_pyomo_model needs a model built by build_pyomo_model (m.dpopt_model is missing)")
    status, msg, lb = _solve_built(m, solver, time_limit, rel_gap, verbose, solver_options)
    key = PY.solver_key(solver, SOLVERS) or str(solver)[:80]
    vals = [m.n[i].value for i in range(model.k)]
    if status in (Status.UNSUPPORTED, Status.INFEASIBLE, Status.ERROR) or any(v is None for v in vals):
        return Solution(status, backend="pyomo", solver=key, message=msg, wall_time=time.perf_counter() - t0)
    scale = float(pe.value(m.objective_scale))
    offset = float(pe.value(m.objective_offset)) if hasattr(m, "objective_offset") else 0.0
    bound = lb * scale + offset if np.isfinite(lb) else -np.inf
    if m.n[0].is_integer() or _is_lp(m):
        sol = solution_from(model, np.array(vals, dtype=float), bound, status, rel_gap=rel_gap, solver=key,
                            message=msg, repair=len(m.extra) == 0, bound_source=f"{key} bound", t0=t0,
                            solver_proof=True)
    else:
        pt = np.clip(np.array(vals, dtype=float), model.lower, model.upper)
        if status == Status.OPTIMAL and not model.is_feasible(pt):
            status, msg = Status.FEASIBLE, f"{msg}; the point violates a row beyond {FEASIBILITY_TOL:g} (relative)"
        sol = model.make_solution(x=pt, status=status, solver=key, message=msg)
    sol.backend = "pyomo"
    if np.isfinite(lb):
        sol.details["solver_lower_bound"] = bound
    sol.wall_time = time.perf_counter() - t0
    return sol


def _check_opts(time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars, removed):
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, removed,
                            where="the pyomo backend for stratified designs")
    if formulation is not None and formulation not in FORMULATIONS:
        raise V.InvalidOption(f"formulation must be one of {FORMULATIONS}, got {formulation!r}")
    V.option(V.integer, "max_milp_vars", max_milp_vars, minimum=1)
    return opts


def _run(model, integer: bool, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
         removed) -> Solution:
    t0 = time.perf_counter()
    opts = _check_opts(time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars, removed)
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=str(solver)[:80],
                        message=_unknown_solver_message(solver))
    solver = key
    PY.check_solver_options(solver, opts.solver_options)
    formulation = formulation or ("milp" if solver == "highs" else "minlp")
    if solver == "highs" and formulation == "minlp":
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver="highs",
                        message="HiGHS solves linear models only: use formulation='milp' (the incremental MILP)")
    if solver == "ipopt" and integer:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver="ipopt",
                        message="IPOPT is a continuous NLP solver; use solver='scip' or 'highs' for integer designs")
    if not integer and formulation == "milp":
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver,
                        message="the LP relaxation of the incremental MILP is not the continuous relaxation of the "
                                "model; use formulation='minlp' (solver='scip' or 'ipopt')")
    try:
        import pyomo.environ  # noqa: F401
    except ImportError as exc:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=f"Pyomo is not installed: {exc}")
    time_limit = opts.time_limit
    if formulation == "milp":
        lo, hi = _ranges(model)
        columns = int(np.sum(hi - lo))
        if columns > MILP_COLUMNS_PER_SECOND * time_limit:
            # building the MILP and handing it to HiGHS through Pyomo runs before HiGHS's clock starts and
            # cannot be interrupted: refuse at once rather than overrun the limit by minutes
            return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                            details={"formulation": formulation, "milp_columns": columns, **opts.details()},
                            message=f"the incremental MILP has {columns} columns; building and loading it through "
                                    f"Pyomo takes about {columns / MILP_COLUMNS_PER_SECOND:.3g} s, beyond the "
                                    f"{opts.note()} (raise time_limit or use solver='scip' or exact)")
    clock = None
    if formulation == "minlp":
        # the MINLP's terms are timed as they are written (each written twice: m.g and the objective or the
        # variance row) and the build stops once it and Pyomo's hand-over would end past the limit
        d = model.design if isinstance(model, MinCostDesign) else model
        units = 2 * model.k * d.J + sum(int(np.count_nonzero(t.weights)) for t in model.precision_targets)
        clock = PY.BuildClock(t0, time_limit, units, f"the MINLP ({units} terms)", solver)
    try:
        with PY.paused_gc():    # (the build runs 2-3x faster without collections over its expression objects)
            m = build_pyomo_model(model, integer=integer, formulation=formulation, max_milp_vars=max_milp_vars,
                                  clock=clock)
            left = None if clock is None else clock.solver_time()
    except PyomoUnsupported as exc:
        return Solution(Status.UNSUPPORTED, backend="pyomo", solver=solver, message=str(exc))
    except PY.OutOfTime as exc:
        return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                        details={"formulation": formulation, "build_time": clock.elapsed_build(), **opts.details()},
                        message=f"{exc}; no point (use backend 'exact', or raise time_limit)")
    build_time = time.perf_counter() - t0
    # the limit covers the whole call: building counts, the solver gets what is left. (Pyomo's hand-over of
    # a large model to the solver happens before the solver's clock starts and cannot be interrupted; its
    # time is reported in details["load_and_solve_time"].)
    if build_time >= time_limit:
        return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, wall_time=build_time,
                        details={"formulation": formulation, "build_time": build_time, **opts.details()},
                        message=f"building the {formulation.upper()} took {build_time:.3g} s, beyond the "
                                f"{opts.note()} (lower max_milp_vars to refuse such models early)")
    time_limit = time_limit - build_time if left is None else left
    if formulation == "milp":
        # the hand-over to HiGHS runs before HiGHS's clock starts: leave it its estimated share
        time_limit = max(time_limit - columns / MILP_COLUMNS_PER_SECOND, 0.05 * time_limit)
    try:
        status, msg, lb = _solve_built(m, solver, time_limit, opts.rel_gap, opts.verbose, opts.solver_options)
    except (KeyboardInterrupt, V.InvalidOption):
        raise
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="pyomo", solver=solver, wall_time=time.perf_counter() - t0,
                        message=f"{type(exc).__name__}: {exc}", details=opts.details())
    if status == Status.TIME_LIMIT:
        msg = f"{msg} ({opts.note()})"
    return _to_solution(model, m, integer, solver, formulation, status, msg, lb, opts, t0, build_time)


def _to_solution(model, m, integer, solver, formulation, status, msg, lb, opts, t0, build_time) -> Solution:
    import pyomo.environ as pe

    vals = [m.n[i].value for i in range(model.k)]
    details = {"formulation": formulation, "build_time": build_time,
               "load_and_solve_time": time.perf_counter() - t0 - build_time, **opts.details()}
    if status == Status.INFEASIBLE:
        known = known_feasible_point(model)
        if known is not None:
            # the model object itself exhibits a feasible point: the solver's claim is a numerical failure
            status = Status.ERROR
            msg = (f"{msg}; the solver's infeasibility claim contradicts a known feasible point "
                   f"n={known.tolist()} (numerical trouble in the solver, not an infeasible model)")
    if any(v is None for v in vals) or status in (Status.INFEASIBLE, Status.ERROR, Status.UNSUPPORTED):
        if status == Status.TIME_LIMIT:
            msg = f"{msg}; no incumbent (no feasible point found within the time limit)"
        return Solution(status, backend="pyomo", solver=solver, message=msg, details=details,
                        wall_time=time.perf_counter() - t0)
    pt = np.array(vals, dtype=float)
    scale = float(pe.value(m.objective_scale))
    offset = float(pe.value(m.objective_offset)) if hasattr(m, "objective_offset") else 0.0
    if integer:
        n = np.round(pt).astype(np.int64)
        if formulation == "milp" and hasattr(m, "lp_integral") and pe.value(m.lp_integral) \
                and np.any(np.abs(pt - n) > 1e-6):
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            wall_time=time.perf_counter() - t0,
                            message=f"{msg}; the incremental LP returned a fractional point (ties); "
                                    "rerun with a model that has an extra constraint to force binaries")
        repaired = violation = None
        if not model.is_feasible(n):
            # the solver accepts points that violate a constraint by its own tolerance (~1e-6 relative):
            # move units to a feasible point nearby, else report the violation
            violation = max_violation(model, n)
            fixed = repair_integer_point(model, n) if violation <= SOLVER_TOL else None
            if fixed is not None:
                repaired, n = n, fixed
                msg = (f"{msg}; the solver's rounded point {repaired.tolist()} violated a constraint by "
                       f"{violation:.2g} (relative, within the solver's tolerance) and was repaired to a feasible "
                       f"point by unit moves")
                details["repaired_from"] = repaired.tolist()
            elif status == Status.TIME_LIMIT:
                return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0, message=f"{msg}; no incumbent")
            else:
                return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0,
                                message=f"{msg}; the solver's rounded point {n.tolist()} is infeasible "
                                        f"(relative violation {violation:.2g})")
        feasible = model.is_feasible(n)
        sol = model.make_solution(n=n, status=status, message=msg)
        # the status is the answer's own certificate's, whatever gap the solver was allowed to stop at
        # (rel_gap): optimal when it holds, and a solver's 'optimal' that it refutes is not
        if isinstance(model, StratifiedDesign) and model.is_plain:
            model.attach_certificate(sol)
        else:
            lbu = lb * scale + offset if np.isfinite(lb) else float("nan")
            gap = (sol.objective - lbu) / abs(sol.objective) if np.isfinite(lbu) and sol.objective else float("nan")
            # the solver's own proof (asked for gap 0, its point kept) or a gap to its bound within rel_gap
            # (the bound is valid for the exact model: the solver's feasible set contains the model's)
            solver_proof = status == Status.OPTIMAL and not opts.rel_gap and repaired is None
            proven = feasible and (solver_proof or gap_proves(gap, opts.rel_gap))
            if status == Status.OPTIMAL and not proven:
                sol.status = status = Status.FEASIBLE
            elif proven and status != Status.OPTIMAL:
                sol.status = status = Status.OPTIMAL
                sol.message = f"{msg}; relative gap {gap:.3g} to the {solver} bound proves it optimal" + \
                    (f" within rel_gap={opts.rel_gap:g}" if opts.rel_gap else "")
            sol.certificate = Certificate("gap", proven, lower_bound=lbu, gap=gap, tolerance=opts.rel_gap or 0.0,
                                          message=f"{solver} bound")
    else:
        pt = np.clip(pt, model.lower, model.upper)
        if status == Status.OPTIMAL and not model.is_feasible(pt):
            # SCIP's feasibility tolerance (1e-6) can leave g(x) ≤ V0 violated by ~1e-6 relative, with a
            # cost below the true optimum: not a proven optimum of the stated model
            status, msg = (Status.FEASIBLE, f"{msg}; the point violates a constraint beyond the feasibility "
                           f"tolerance {FEASIBILITY_TOL:g} (within the solver's)")
        if status != Status.OPTIMAL and not model.is_feasible(pt, tol=SOLVER_TOL):
            # a non-optimal answer carries a point only when it satisfies the model (e.g. a time-limited
            # solve that stopped before finding any feasible point)
            why = f"the solver's point {np.array2string(pt, precision=6, threshold=8)} violates the model's " \
                  f"constraints beyond relative tolerance {SOLVER_TOL:g}"
            if status == Status.TIME_LIMIT:
                return Solution(Status.TIME_LIMIT, backend="pyomo", solver=solver, details=details,
                                wall_time=time.perf_counter() - t0, message=f"{msg}; no feasible point ({why})")
            return Solution(Status.ERROR, backend="pyomo", solver=solver, details=details,
                            wall_time=time.perf_counter() - t0, message=f"{msg}; {why}")
        sol = model.make_solution(x=pt, status=status, message=msg)
    sol.solver = solver
    sol.details.update(details)
    if np.isfinite(lb):
        sol.details["solver_lower_bound"] = lb * scale + offset
    sol.wall_time = time.perf_counter() - t0
    return sol


def solve(model, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
          verbose: bool = False, solver_options: dict | None = None, formulation: str | None = None,
          max_milp_vars: int = DEFAULT_MAX_MILP_VARS, **removed) -> Solution:
    """Integer design with SCIP (MINLP) or HiGHS (incremental MILP)."""
    return _run(model, True, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
                removed)


def relax(model, solver: str = "scip", time_limit: float | None = None, rel_gap: float | None = None,
          verbose: bool = False, solver_options: dict | None = None, formulation: str | None = None,
          max_milp_vars: int = DEFAULT_MAX_MILP_VARS, **removed) -> Solution:
    """Continuous relaxation with SCIP (global NLP) or IPOPT (if installed)."""
    return _run(model, False, solver, time_limit, rel_gap, verbose, solver_options, formulation, max_milp_vars,
                removed)


solve.solvers = relax.solvers = SOLVERS    # read by compare and the CLI (row variants, --solver checks)


for _cls in (StratifiedDesign, MinCostDesign):
    register("pyomo", _cls, "solve", _DESCRIPTION)(secant_for_extended(solve, solve_pyomo))
    register("pyomo", _cls, "relax", _DESCRIPTION)(secant_for_extended(relax, None))
