"""Pyomo backend for SampleSizeProgram: one integer variable, solved globally by SCIP.

Pyomo 6.10 ships ``SolverFactory("scip_direct")`` (pyomo.contrib.solver, talking to PySCIPOpt in
process), which accepts ``log`` and division, so the program is passed as written:

    min_n  [S²(1/n − 1/N) + 2Δ(n)²/ε_n²] / V_N,     n ∈ {1, …, N},
    ε_n = log(1 + N·c/n),   c = expm1(ε)   (written by :func:`.build.nominal_budget_expr`: no coefficient
                                            above ~1e15 and no overflow for ε up to 700),

with Δ(n) = R/n (mean), a constant, or the user callable applied to the Pyomo variable (it must build
a Pyomo expression, e.g. ``lambda n: 1/n**0.5``; otherwise the model is ``unsupported`` here).

SCIP's default tolerances (feasibility 1e-6, gap 1e-4) cannot separate neighbouring sample sizes of a
flat objective; the backend sets ``limits/gap = limits/absgap = 0``, ``numerics/feastol =
numerics/epsilon = numerics/sumepsilon = 1e-10``, ``numerics/dualfeastol = 1e-9`` (the tightest SCIP
accepts without GMP and without printing warnings; override with ``solver_options``) and divides the objective by the smallest V_n on a log grid of 64 sizes so that it is O(1) near the
optimum. ``optimal`` is SCIP's proof within those tolerances: neighbouring sizes whose V differ by
less than ~1e-10 relative may be confused (the exact backend has no such limit).

Options: the common ones of :mod:`dpopt.backends.pyomo._solver`: ``solver`` ("scip"), ``time_limit`` (None: the
300 s default), ``rel_gap`` (SCIP's limits/gap; default 0; the answer is ``optimal`` when its
gap to SCIP's bound is within rel_gap + :data:`dpopt.result.PROVEN_GAP`, whatever gap SCIP stopped at), ``verbose``,
``solver_options`` (SCIP parameters, applied last).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...models.sample_size import SampleSizeProgram
from ...privacy.amplification import log_expm1
from ...privacy.mechanisms import laplace_variance
from ...registry import register
from ...result import Certificate, Solution, Status, gap_proves
from ... import _validate as V
from . import _solver as PY
from .build import nominal_budget_expr

_DESCRIPTION = "Pyomo modelling layer; SCIP through scip_direct (global MINLP)"
#: solvers of this route (one integer variable in a nonlinear objective)
SOLVERS = ("scip",)
# SCIP without GMP refuses tolerances below 1e-10 and then prints a warning each time it re-applies
# them: these are the tightest values that trigger no warning
_TIGHT = {"limits/gap": 0.0, "limits/absgap": 0.0, "numerics/feastol": 1e-10, "numerics/epsilon": 1e-10,
          "numerics/sumepsilon": 1e-10, "numerics/dualfeastol": 1e-9}


def _fail(status, msg, solver="scip", details=None):
    return Solution(status=status, backend="pyomo", solver=solver, model="SampleSizeProgram", message=msg,
                    details=details or {})


@register("pyomo", SampleSizeProgram, "solve", _DESCRIPTION)
def solve_pyomo(model: SampleSizeProgram, solver: str = "scip", time_limit: float | None = None,
                rel_gap: float | None = None, verbose: bool = False, solver_options: dict | None = None,
                **removed) -> Solution:
    start = time.perf_counter()        # the limit covers the whole call: SCIP gets what is left
    opts = PY.check_options(time_limit, rel_gap, verbose, solver_options, removed,
                            where="the pyomo backend for sample sizes")
    key = PY.solver_key(solver, SOLVERS)
    if key is None:
        return _fail(Status.UNSUPPORTED, PY.unknown_solver_message(solver, SOLVERS, "sample-size programs"),
                     solver=str(solver)[:80])
    PY.check_solver_options(key, opts.solver_options)
    try:
        import pyomo.environ as pyo
    except ImportError as exc:  # pragma: no cover - pyomo is a dependency
        return _fail(Status.UNSUPPORTED, f"pyomo is not installed: {exc}")
    opt, why = PY.open_solver(key)
    if opt is None:
        return _fail(Status.UNSUPPORTED, why)

    if getattr(model, "mechanism", "laplace") != "laplace":
        return _fail(Status.UNSUPPORTED, f"the {model.mechanism} noise variance (the analytic Gaussian calibration, "
                                         "an inverse of the normal CDF) has no algebraic Pyomo form: use the exact "
                                         "backend")
    N = model.N
    eps = model.epsilon
    lc = float(log_expm1(eps))
    m = pyo.ConcreteModel("sample_size")
    m.n = pyo.Var(domain=pyo.Integers, bounds=(getattr(model, "n_min", 1), N), initialize=N)   # n ≥ ⌈Nδ⌉
    eps_n = nominal_budget_expr(lc + math.log(N), m.n, N)
    if model.kind == "mean":
        delta = model.value_range / m.n
    elif model.kind == "constant":
        delta = model.constant
    else:
        try:
            delta = model._fn(m.n)
            pyo.value(delta * 1.0)  # must be an expression (or number) pyomo can evaluate
        except Exception as exc:
            return _fail(Status.UNSUPPORTED, "the sensitivity callable cannot be applied to a Pyomo variable "
                                             f"(build it from +, *, /, ** and pyomo functions): {exc}")
    grid = np.unique(np.round(np.geomspace(1.0, N, 64)))
    VN = float(np.min(model.variance(grid)))   # objective scale
    m.obj = pyo.Objective(expr=(model.S2 * (1.0 / m.n - 1.0 / N) + laplace_variance(eps_n, delta)[0]) / VN,
                          sense=pyo.minimize)
    left = max(opts.time_limit - (time.perf_counter() - start), 1e-3)
    options = {**_TIGHT, **PY.limit_options(key, opts, left), **opts.solver_options}
    details = opts.details()
    t0 = time.perf_counter()
    try:
        status, tc, res, has_point = PY.run(opt, key, m, options, opts.verbose)
    except (KeyboardInterrupt, V.InvalidOption):
        raise
    except Exception as exc:  # noqa: BLE001 - a solver fault becomes a status
        return _fail(Status.ERROR, f"SCIP failed: {exc}", details=details)
    wall = time.perf_counter() - t0
    n_val = pyo.value(m.n, exception=False) if has_point else None
    has_point = n_val is not None
    if status == Status.OPTIMAL and has_point:
        msg = (f"SCIP stopped within rel_gap={opts.rel_gap:g}" if opts.rel_gap else
               "SCIP proved optimality (gap 0 within its tolerances)")
    elif status == Status.TIME_LIMIT:
        msg = f"SCIP stopped: {tc} ({opts.note()})"
    elif status == Status.INFEASIBLE:
        # n = N (the population itself, δ_N = δ) is always a feasible point
        return _fail(Status.ERROR, f"SCIP reports {tc}, but n = N is always feasible "
                                   "(numerical trouble in the solver)", details=details)
    else:
        status, msg = (Status.FEASIBLE if has_point else Status.ERROR), f"SCIP termination: {tc}"
    if not has_point:
        sol = _fail(status if status == Status.TIME_LIMIT else Status.ERROR, msg + "; no point returned",
                    details=details)
        sol.wall_time = wall
        return sol
    n_star = int(round(n_val))
    lb = PY.lower_bound(res) * VN
    v_star = float(model.variance(n_star))
    gap = abs(v_star - lb) / v_star if math.isfinite(lb) and v_star > 0 else float("nan")
    # the answer's own certificate decides, whatever gap SCIP was allowed to stop at: SCIP's proof at gap 0,
    # or a gap to its bound within rel_gap (+ PROVEN_GAP, the evaluation noise of the scaled objective)
    proven = (status == Status.OPTIMAL and not opts.rel_gap) or gap_proves(gap, opts.rel_gap)
    if proven and status != Status.OPTIMAL:
        status, msg = Status.OPTIMAL, f"{msg}; relative gap {gap:.3g} to SCIP's bound proves it optimal"
    elif status == Status.OPTIMAL and not proven:
        status, msg = Status.FEASIBLE, f"{msg}; relative gap {gap:.3g} to SCIP's bound exceeds rel_gap"
    cert = Certificate(kind="gap", optimal=proven, lower_bound=lb, gap=gap,
                       tolerance=opts.rel_gap or 0.0, message="SCIP dual bound")
    sol = model.make_solution(n=n_star, status=status, backend="pyomo", solver=key, certificate=cert,
                              message=msg, details=details)
    sol.wall_time = wall
    return sol


solve_pyomo.solvers = SOLVERS    # read by compare and the CLI
