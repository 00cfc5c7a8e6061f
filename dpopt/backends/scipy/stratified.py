"""``scipy`` backend: continuous relaxations of StratifiedDesign and MinCostDesign with SLSQP or trust-constr.

Variables are scaled (``x = s·z`` with ``s`` the proportional start) and the objective is divided by its
value at the start, so the default tolerances mean relative accuracy. Linear constraints of the model
are passed on as they are; for the min-cost variant the variance bound is a nonlinear constraint with
its exact gradient (and, for trust-constr, exact diagonal Hessians). No integer designs (``solve`` is unsupported; round with care or use another
backend). Options: ``method`` ("SLSQP" | "trust-constr"), ``tol`` (default 1e-13), ``max_iter``, ``time_limit``.
trust-constr's answer is polished by an SLSQP pass started at it (its barrier stops short of active
bounds by ~1e-6 relative); both must succeed for ``optimal``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ... import _validate as V
from ...models.stratified import MinCostDesign, StratifiedDesign
from ...registry import register
from ...result import Solution, Status
from .._routes import classical_only

_DESCRIPTION = "scipy.optimize (SLSQP / trust-constr) continuous relaxations"
METHODS = ("SLSQP", "trust-constr")


def relax(model, method: str = "SLSQP", tol: float = 1e-13, max_iter: int = 2000,
          time_limit: float | None = None) -> Solution:
    """Continuous relaxation by scipy.optimize.minimize; ``time_limit`` stops it at the next objective evaluation."""
    from scipy.optimize import Bounds, LinearConstraint, NonlinearConstraint, OptimizeWarning, minimize

    t0 = time.perf_counter()
    if method not in METHODS:
        raise V.InvalidOption(f"method must be one of {METHODS}, got {method!r}")
    tol = V.tolerance("tol", tol, maximum=1e-6)    # a looser tol would still be reported optimal
    max_iter = V.count("max_iter", max_iter, maximum=1_000_000)
    deadline = None if time_limit is None else t0 + V.time_limit(time_limit)
    d = model.design if isinstance(model, MinCostDesign) else model
    lo, hi = model.lower.astype(float), model.upper.astype(float)
    k = model.k
    if isinstance(model, StratifiedDesign):
        x0 = np.clip(model.N * model.total / model.N.sum(), lo, hi)
    else:
        x0 = hi.copy()   # the most precise design; feasible whenever the problem is
    s = np.maximum(x0, 1.0)
    z0 = x0 / s
    lin_rows, lin_lo, lin_hi = [], [], []
    for con in model.constraints:
        for row, b in zip(con.A, con.b):
            lin_rows.append(row * s)
            lin_lo.append(-np.inf if con.sense == "<=" else b)
            lin_hi.append(np.inf if con.sense == ">=" else b)
    if isinstance(model, StratifiedDesign):
        scale = float(np.sum(d.terms(x0)))
        fun = lambda z: float(np.sum(d.terms(s * z))) / scale  # noqa: E731
        jac = lambda z: d.terms_derivative(s * z, 1) * s / scale  # noqa: E731
        hess = lambda z: np.diag(d.terms_derivative(s * z, 2) * s * s / scale)  # noqa: E731
        lin_rows.append(s.copy())
        lin_lo.append(float(model.total))
        lin_hi.append(float(model.total))
        nonlin = []
    else:
        scale = float(model.cost @ x0)
        fun = lambda z: float(model.cost @ (s * z)) / scale  # noqa: E731
        jac = lambda z: model.cost * s / scale  # noqa: E731
        hess = lambda z: np.zeros((k, k))  # noqa: E731
        V0 = model.variance_target
        nonlin = [NonlinearConstraint(lambda z: np.array([np.sum(d.terms(s * z)) / V0]),
                                      -np.inf, model.variance_budget / V0,
                                      jac=lambda z: (d.terms_derivative(s * z, 1) * s / V0)[None, :],
                                      hess=lambda z, v: v[0] * np.diag(d.terms_derivative(s * z, 2) * s * s / V0))]
    cons = []
    if lin_rows:
        cons.append(LinearConstraint(np.array(lin_rows), np.array(lin_lo), np.array(lin_hi)))
    cons += nonlin
    bounds = Bounds(lo / s, hi / s)
    opts = {"maxiter": int(max_iter)}
    if method == "SLSQP":
        opts["ftol"] = tol
    else:
        opts.update(gtol=tol, xtol=tol, barrier_tol=tol, initial_barrier_parameter=1e-6)
    if deadline is not None:
        inner = fun

        def fun(z):   # scipy has no time limit: stop at the first evaluation past the deadline
            if time.perf_counter() > deadline:
                raise _TimeUp
            return inner(z)
    try:
        with warnings.catch_warnings():   # SLSQP ignores the Hessian options trust-constr uses: expected
            warnings.filterwarnings("ignore", message="Constraint options", category=OptimizeWarning)
            warnings.filterwarnings("ignore", message="Equality and inequality", category=OptimizeWarning)
            extra = {"hess": hess} if method == "trust-constr" else {}   # exact (diagonal) Hessian
            res = minimize(fun, z0, jac=jac, bounds=bounds, constraints=cons, method=method, options=opts,
                           **extra)
            if method == "trust-constr" and res.success:
                # the barrier stops iterates just short of active bounds (1e-6 relative seen); an SLSQP
                # pass started there lands on the active set exactly and must succeed too for "optimal"
                polish = minimize(fun, res.x, jac=jac, bounds=bounds, constraints=cons, method="SLSQP",
                                  options={"maxiter": max_iter, "ftol": tol})
                if polish.success and polish.fun <= res.fun:
                    res.x = polish.x
                res.success = bool(polish.success)
                res.message = f"{res.message}; SLSQP polish: {polish.message}"
    except _TimeUp:
        return Solution(Status.TIME_LIMIT, backend="scipy", solver=method, wall_time=time.perf_counter() - t0,
                        message=f"{method}: time limit of {time_limit:g} s reached; no verified point")
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="scipy", solver=method, message=f"{type(exc).__name__}: {exc}",
                        wall_time=time.perf_counter() - t0)
    x = np.clip(res.x * s, lo, hi)
    feasible = _feasible(model, x)
    if res.success and feasible:
        status = Status.OPTIMAL
    elif feasible:
        status = Status.FEASIBLE
    else:
        return Solution(Status.ERROR, backend="scipy", solver=method, wall_time=time.perf_counter() - t0,
                        message=f"{method}: {res.message} (the returned point is infeasible)")
    sol = model.make_solution(x=x, status=status, message=f"{method}: {res.message}")
    sol.solver = method
    sol.details.update(iterations=int(getattr(res, "nit", 0) or 0))
    sol.wall_time = time.perf_counter() - t0
    return sol


class _TimeUp(Exception):
    pass


def _feasible(model, x, tol: float = 1e-7) -> bool:
    """The model's one feasibility test (docs/constrained.md) at a real point, loosened to the local solver's
    tolerance: a relaxation point is accepted within ``tol`` of each row's magnitude."""
    return bool(np.all(np.isfinite(x))) and model.is_feasible(x, tol=tol)


for _cls in (StratifiedDesign, MinCostDesign):
    register("scipy", _cls, "relax", _DESCRIPTION)(classical_only(relax))
