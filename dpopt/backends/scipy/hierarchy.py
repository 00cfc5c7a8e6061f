"""scipy backend for HierarchyBudget: SLSQP on programs (6) and (7) with analytic gradients.

The variables are scaled (ε = s·ε_ref) and the objective normalised so SLSQP sees O(1) numbers. The
answer is checked with the model's supporting-hyperplane gap certificate; it is reported ``optimal``
only when that certificate holds, else ``feasible``.
"""

from __future__ import annotations

import time

import numpy as np

from ...models.hierarchy import HierarchyBudget
from ... import _validate as V
from ...options import default_rel_gap
from ...registry import register
from ...result import Solution, Status


@register("scipy", HierarchyBudget, "solve", "scipy.optimize (SLSQP)")
def solve_hierarchy_scipy(model: HierarchyBudget, method: str = "SLSQP", ftol: float = 1e-15,
                          max_iter: int = 500, rel_gap: float = default_rel_gap("scipy", "HierarchyBudget"), time_limit=None) -> Solution:
    """Options: ``ftol`` (SLSQP's tolerance, ≤ 1e-6), ``max_iter``, ``rel_gap`` (the certificate's gap for
    ``optimal``), ``time_limit`` (SLSQP is stopped at the first evaluation past it: status ``time_limit``
    with the last iterate made feasible)."""
    if method != "SLSQP":
        raise V.InvalidOption(f"method must be 'SLSQP' for the hierarchy model, got {method!r}")
    ftol = V.tolerance("ftol", ftol, maximum=1e-6)
    max_iter = V.count("max_iter", max_iter, maximum=1_000_000)
    gap_tol = V.rel_gap(rel_gap)
    time_limit = V.time_limit(time_limit)
    try:
        from scipy.optimize import minimize
    except ImportError:  # pragma: no cover
        return Solution(Status.UNSUPPORTED, backend="scipy", message="scipy is not installed")
    t0 = time.perf_counter()
    lo, hi = model.level_bounds()
    L = model.n_levels
    u = model.uniform_split()
    ref = float(u.mean())
    data = model.compressed_levels()
    w = model.weights

    deadline = None if time_limit is None else t0 + time_limit
    last = {"s": None}

    def FG(eps):
        if deadline is not None and time.perf_counter() > deadline:
            raise _TimeUp   # SLSQP has no time limit: stop at the first evaluation past the deadline
        last["s"] = np.asarray(eps, dtype=float) / ref
        vals = [model.level_terms(eps[l], l, 1, *data[l]) for l in range(L)]
        return (np.array([v[0] for v in vals]) * w, np.array([v[1] for v in vals]) * w)

    bounds = list(zip(lo / ref, hi / ref))
    x0 = np.clip(u / ref, lo / ref, hi / ref)
    try:
        if model.program == "budget":
            scale = float(np.sum(FG(u)[0]))
            E = model.budget_total / ref

            def f(s):
                F, _ = FG(s * ref)
                return float(np.sum(F)) / scale

            def g(s):
                _, G = FG(s * ref)
                return G * ref / scale

            cons = [{"type": "ineq", "fun": lambda s: E - np.sum(s), "jac": lambda s: -np.ones(L)}]
            res = minimize(f, x0, jac=g, bounds=bounds, constraints=cons, method="SLSQP",
                           options={"ftol": ftol, "maxiter": max_iter})
        else:
            tau = model.mse_target

            def f(s):
                return float(np.sum(s))

            def c(s):
                F, _ = FG(s * ref)
                return 1.0 - float(np.sum(F)) / tau

            def cj(s):
                _, G = FG(s * ref)
                return -G * ref / tau

            cons = [{"type": "ineq", "fun": c, "jac": cj}]
            res = minimize(f, x0, jac=lambda s: np.ones(L), bounds=bounds, constraints=cons, method="SLSQP",
                           options={"ftol": ftol, "maxiter": max_iter})
    except _TimeUp:
        res = None
    except (ValueError, FloatingPointError, ArithmeticError) as exc:
        return Solution(Status.ERROR, backend="scipy", solver="SLSQP", message=f"SLSQP failed: {exc}")
    if res is None:
        x = x0 if last["s"] is None else np.clip(last["s"], lo / ref, hi / ref)
        eps = model.make_feasible(np.asarray(x, dtype=float) * ref)
        cert = model.certificate(eps, tol=gap_tol)
        sol = model.make_solution(x=eps, status=Status.TIME_LIMIT, backend="scipy", solver="SLSQP", certificate=cert,
                                  message=f"SLSQP: time limit of {time_limit:g} s reached; last iterate made "
                                          "feasible")
        sol.wall_time = time.perf_counter() - t0
        return sol
    # SLSQP honours constraints only to its tolerance: restore feasibility (privacy!)
    eps = model.make_feasible(np.asarray(res.x, dtype=float) * ref)
    wall = time.perf_counter() - t0
    cert = model.certificate(eps, tol=gap_tol)
    if cert.optimal:
        status = Status.OPTIMAL
    elif not res.success and "Iteration limit" in str(res.message):
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE
    sol = model.make_solution(x=eps, status=status, backend="scipy", solver="SLSQP", certificate=cert,
                              message=f"SLSQP: {res.message} ({res.nit} iterations)",
                              details={"iterations": int(res.nit)})
    sol.wall_time = wall
    return sol


class _TimeUp(Exception):
    pass


# the hierarchy program is continuous: relax is the same as solve
register("scipy", HierarchyBudget, "relax", "scipy.optimize (SLSQP)")(solve_hierarchy_scipy)
