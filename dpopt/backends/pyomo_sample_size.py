"""Pyomo backend for SampleSizeProgram: one integer variable, solved globally by SCIP.

Pyomo 6.10 ships ``SolverFactory("scip_direct")`` (pyomo.contrib.solver, talking to PySCIPOpt in
process), which accepts ``log`` and division, so the program is passed as written:

    min_n  [S²(1/n − 1/N) + 2Δ(n)²/ε_n²] / V_N,     n ∈ {1, …, N},
    ε_n = log(1 + N·c/n)            (c < 1)
        = log(c) + log(1/c + N/n)   (c ≥ 1, no overflow for ε up to 700),

with Δ(n) = R/n (mean), a constant, or the user callable applied to the Pyomo variable (it must build
a Pyomo expression, e.g. ``lambda n: 1/n**0.5``; otherwise the model is ``unsupported`` here).

SCIP's default tolerances (feasibility 1e-6, gap 1e-4) cannot separate neighbouring sample sizes of a
flat objective; the backend sets ``limits/gap = limits/absgap = 0``, ``numerics/feastol =
numerics/epsilon = numerics/sumepsilon = 1e-10``, ``numerics/dualfeastol = 1e-9`` (the tightest SCIP
accepts without GMP and without printing warnings) and ``display/verblevel = 0`` (override with
``scip_options``; SCIP output beyond 64 KB dead-locks pyomo's output capture, see ``_TIGHT``)
and divides the objective by the smallest V_n on a log grid of 64 sizes so that it is O(1) near the
optimum. ``optimal`` is SCIP's proof within those tolerances: neighbouring sizes whose V differ by
less than ~1e-10 relative may be confused (the exact backend has no such limit). Default ``time_limit`` is 60 s.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..models.sample_size import SampleSizeProgram
from ..privacy.amplification import log_expm1
from ..registry import register
from ..result import Certificate, Solution, Status
from ._pyomo import quiet_pyomo_log

_DESCRIPTION = "Pyomo modelling layer; SCIP through scip_direct (global MINLP)"
# SCIP without GMP refuses tolerances below 1e-10 and then prints a warning each time it re-applies
# them. pyomo's scip_direct captures SCIP's output through a pipe drained by a Python thread while
# PySCIPOpt's optimize() holds the GIL, so more than one pipe buffer (64 KB) of output dead-locks
# the process. These values (the tightest that trigger no warning) and verblevel 0 keep it silent.
_TIGHT = {"limits/gap": 0.0, "limits/absgap": 0.0, "numerics/feastol": 1e-10, "numerics/epsilon": 1e-10,
          "numerics/sumepsilon": 1e-10, "numerics/dualfeastol": 1e-9, "display/verblevel": 0}


def _fail(status, msg):
    return Solution(status=status, backend="pyomo", solver="scip_direct", model="SampleSizeProgram", message=msg)


@register("pyomo", SampleSizeProgram, "solve", _DESCRIPTION)
def solve_pyomo(model: SampleSizeProgram, time_limit: float | None = 60.0, scip_options: dict | None = None,
                tee: bool = False) -> Solution:
    try:
        import pyomo.environ as pyo
        from pyomo.opt import TerminationCondition as TC
    except ImportError as exc:  # pragma: no cover - pyomo is a dependency
        return _fail(Status.UNSUPPORTED, f"pyomo is not installed: {exc}")
    try:
        opt = pyo.SolverFactory("scip_direct")
        if not opt.available(exception_flag=False):
            return _fail(Status.UNSUPPORTED, "SCIP (scip_direct / PySCIPOpt) is not available")
    except Exception as exc:  # unknown solver name in another pyomo version
        return _fail(Status.UNSUPPORTED, f"pyomo has no usable scip_direct solver: {exc}")

    N = model.N
    eps = model.epsilon
    lc = float(log_expm1(eps))
    m = pyo.ConcreteModel("sample_size")
    m.n = pyo.Var(domain=pyo.Integers, bounds=(1, N), initialize=N)
    if lc < 0.0:
        eps_n = pyo.log(1.0 + (N * math.exp(lc)) / m.n)
    else:
        eps_n = lc + pyo.log(math.exp(-lc) + N / m.n)
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
    m.obj = pyo.Objective(expr=(model.S2 * (1.0 / m.n - 1.0 / N) + 2.0 * delta ** 2 / eps_n ** 2) / VN,
                          sense=pyo.minimize)
    options = dict(_TIGHT)
    if tee:
        options["display/verblevel"] = 4
    if time_limit is not None:
        options["limits/time"] = float(time_limit)
    options.update(scip_options or {})
    t0 = time.perf_counter()
    try:
        with quiet_pyomo_log():
            res = opt.solve(m, options=options, tee=tee, load_solutions=False)
    except Exception as exc:
        return _fail(Status.ERROR, f"SCIP failed: {exc}")
    wall = time.perf_counter() - t0
    tc = res.solver.termination_condition
    has_point = len(getattr(res, "solution", [])) > 0 if hasattr(res, "solution") else False
    try:
        with quiet_pyomo_log():
            m.solutions.load_from(res)
        n_val = pyo.value(m.n, exception=False)
        has_point = n_val is not None
    except Exception:
        n_val, has_point = None, False
    if tc == TC.optimal and has_point:
        status, msg = Status.OPTIMAL, "SCIP proved optimality (gap 0 within its tolerances)"
    elif tc in (TC.maxTimeLimit, TC.maxIterations):
        status, msg = Status.TIME_LIMIT, f"SCIP stopped: {tc}"
    elif tc == TC.infeasible:
        return _fail(Status.INFEASIBLE, "SCIP reports infeasible")
    else:
        status, msg = (Status.FEASIBLE if has_point else Status.ERROR), f"SCIP termination: {tc}"
    if not has_point:
        sol = _fail(status if status != Status.OPTIMAL else Status.ERROR, msg + "; no point returned")
        sol.wall_time = wall
        return sol
    n_star = int(round(n_val))
    lb = getattr(res.problem, "lower_bound", float("nan"))
    try:
        lb = float(lb) * VN
    except (TypeError, ValueError):
        lb = float("nan")
    cert = Certificate(kind="gap", optimal=status == Status.OPTIMAL, lower_bound=lb,
                       gap=abs(float(model.variance(n_star)) - lb) / float(model.variance(n_star))
                       if math.isfinite(lb) and float(model.variance(n_star)) > 0 else float("nan"),
                       tolerance=options.get("numerics/feastol", 0.0), message="SCIP dual bound")
    sol = model.make_solution(n_star, status=status, backend="pyomo", solver="scip_direct", certificate=cert,
                              message=msg)
    sol.wall_time = wall
    return sol
