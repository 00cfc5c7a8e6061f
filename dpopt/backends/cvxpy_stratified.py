"""``cvxpy`` backend for StratifiedDesign and MinCostDesign (SPEC §5).

DLap (Δ = 1) and TuLap are DCP: with q = n/N the term is ``f_i(n) = a_i/n + b_i n + c_i``,
``a_i = α_i²(σ_i² [+ 1/12])``, ``b_i = 2α_i²/(cN_i)²``, ``c_i = 2α_i²/(cN_i)``, so the objective is
``a @ inv_pos(n) + b @ n + const``. :func:`build_cvxpy_problem` returns that ``Problem`` and its
variables. ``relax`` solves it with Clarabel; ``solve`` solves the integer design with SCIP (through
cvxpy). The min-cost variant puts the same expression in the constraint ``g(n) ≤ V0``.

Laplace (and DLap with Δ > 1, or a user mechanism) is not DCP. ``relax`` then uses a tangent-cut outer
approximation of the separable objective (an LP re-solved with local refinement of the cut points);
it reports the LP bound and the relative gap ``(g(x) − bound)/g(x)`` as a ``gap`` certificate and stops
at ``gap_tol`` (default 1e-9; the LP is solved with HiGHS tolerances 1e-10). cvxpy's DNLP mode with IPOPT is not used in this version (IPOPT is not
installed here); ``method="dnlp"`` answers ``unsupported``. Integer Laplace designs are ``unsupported``
in this backend (use pyomo).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..models.min_cost import MinCostDesign
from ..models.stratified import StratifiedDesign
from ..registry import register
from ..result import Certificate, Solution, Status
from .enumerate import _term

_DESCRIPTION = "cvxpy: DCP (DLap/TuLap) with Clarabel / SCIP; tangent cuts with a certified gap otherwise"


class CvxpyUnsupported(ValueError):
    """The model is not DCP-representable in this backend."""


def _design(model) -> StratifiedDesign:
    return model.design if isinstance(model, MinCostDesign) else model


def dcp_coefficients(d: StratifiedDesign):
    """(a, b, const) with f_i(n) = a_i/n + b_i n + const_i, or raise CvxpyUnsupported."""
    mech = d.mechanism
    if mech.name not in ("dlap", "tulap") or d.sensitivity != 1:
        raise CvxpyUnsupported(f"mechanism {mech.name!r} with sensitivity {d.sensitivity:g} is not DCP "
                               "(only DLap/TuLap with sensitivity 1 are)")
    extra = 1.0 / 12 if mech.name == "tulap" else 0.0
    inv_cN = np.exp(-d.log_c - d.log_N)
    a = d.alpha2 * (d.sigma2 + extra)
    b = 2 * d.alpha2 * inv_cN ** 2
    const = 2 * d.alpha2 * inv_cN
    return a, b, const


def build_cvxpy_problem(model, integer: bool = False):
    """``(problem, {"n": variable})`` for a DLap/TuLap StratifiedDesign or MinCostDesign.

    The objective (sum problem) is divided by a positive constant, ``problem.objective_scale``-style
    attribute ``variables["scale"]``; add constraints with ``cp.Problem(problem.objective,
    problem.constraints + [...])``. Raises :class:`CvxpyUnsupported` for non-DCP mechanisms.
    """
    import cvxpy as cp

    if not isinstance(model, (StratifiedDesign, MinCostDesign)):
        raise TypeError(f"model must be a StratifiedDesign or MinCostDesign, got {type(model).__name__}")
    d = _design(model)
    a, b, const = dcp_coefficients(d)
    k = model.k
    n = cp.Variable(k, integer=bool(integer), name="n")
    g = a @ cp.inv_pos(n) + b @ n + float(const.sum())
    cons = [n >= model.lower.astype(float), n <= model.upper.astype(float)]
    for con in model.constraints:
        lhs = con.A @ n
        if con.sense == "<=":
            cons.append(lhs <= con.b)
        elif con.sense == ">=":
            cons.append(lhs >= con.b)
        else:
            cons.append(lhs == con.b)
    if isinstance(model, StratifiedDesign):
        cons.append(cp.sum(n) == model.total)
        x0 = np.clip(model.N * model.total / model.N.sum(), model.lower, model.upper)
        scale = float(np.sum(d.terms(x0)))
        prob = cp.Problem(cp.Minimize(g / scale), cons)
    else:
        scale = 1.0
        V0 = model.variance_target
        cons.append(g / V0 <= model.variance_budget / V0)
        prob = cp.Problem(cp.Minimize(model.cost @ n), cons)
    return prob, {"n": n, "scale": scale, "g": g}


_STATUS = {"optimal": Status.OPTIMAL, "optimal_inaccurate": Status.FEASIBLE, "infeasible": Status.INFEASIBLE,
           "infeasible_inaccurate": Status.INFEASIBLE, "unbounded": Status.ERROR,
           "user_limit": Status.TIME_LIMIT}


def _check(time_limit, method=None):
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if method is not None and method not in ("auto", "dcp", "cuts", "dnlp"):
        raise ValueError(f"method must be 'auto', 'dcp', 'cuts' or 'dnlp', got {method!r}")


def _solve_dcp(model, integer: bool, time_limit, t0) -> Solution:
    import cvxpy as cp

    solver = "SCIP" if integer else "CLARABEL"
    if solver not in cp.installed_solvers():
        return Solution(Status.UNSUPPORTED, backend="cvxpy", solver=solver.lower(),
                        message=f"cvxpy solver {solver} is not installed")
    prob, var = build_cvxpy_problem(model, integer=integer)
    kw = {}
    if integer:
        params = {"limits/gap": 0.0, "misc/usesymmetry": 0}
        if time_limit is not None:
            params["limits/time"] = float(time_limit)
        kw["scip_params"] = params
    else:
        kw.update(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
        if time_limit is not None:
            kw["time_limit"] = float(time_limit)
    try:
        prob.solve(solver=solver, **kw)
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="cvxpy", solver=solver.lower(), wall_time=time.perf_counter() - t0,
                        message=f"{type(exc).__name__}: {exc}")
    status = _STATUS.get(prob.status, Status.ERROR)
    val = var["n"].value
    msg = f"{solver}: {prob.status}"
    if val is None or status in (Status.INFEASIBLE, Status.ERROR):
        return Solution(status if val is None else Status.ERROR, backend="cvxpy", solver=solver.lower(),
                        message=msg, wall_time=time.perf_counter() - t0)
    if integer:
        n = np.round(val).astype(np.int64)
        if not model.is_feasible(n, tol=1e-7):
            return Solution(Status.ERROR, backend="cvxpy", solver="scip", wall_time=time.perf_counter() - t0,
                            message=f"{msg}; rounded point {n.tolist()} is infeasible")
        sol = model.make_solution(n=n, status=status, message=msg)
        if isinstance(model, StratifiedDesign) and model.is_plain:
            sol.certificate = model.certificate(n)
            if status == Status.OPTIMAL and not sol.certificate.optimal:
                sol.status = Status.FEASIBLE
                sol.message = f"{msg}; solver claimed optimal but the exchange certificate fails"
    else:
        x = np.clip(np.asarray(val, dtype=float), model.lower, model.upper)
        sol = model.make_solution(x=x, status=status, message=msg)
    sol.solver = solver.lower()
    sol.wall_time = time.perf_counter() - t0
    return sol


def _tangent_cuts(model: StratifiedDesign, time_limit, gap_tol: float, max_iter: int, t0) -> Solution:
    """Outer approximation of the separable objective by tangent cuts, refined around the LP point."""
    import cvxpy as cp

    lp_solver = "HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL"
    lp_opts = ({"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10} if lp_solver == "HIGHS"
               else {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10})
    k = model.k
    lo, hi = model.lower.astype(float), model.upper.astype(float)
    x0 = np.clip(model.N * model.total / model.N.sum(), lo, hi)
    pts = []
    for i in range(k):
        if hi[i] > lo[i]:
            grid = np.geomspace(lo[i], hi[i], 9)
        else:
            grid = np.array([lo[i]])
        pts.append(np.unique(np.concatenate([grid, [x0[i]]])))
    scale = float(np.sum(model.terms(x0)))
    x = cp.Variable(k)
    t = cp.Variable(k)
    base = [x >= lo, x <= hi, cp.sum(x) == model.total]
    for con in model.constraints:
        lhs = con.A @ x
        base.append(lhs <= con.b if con.sense == "<=" else lhs >= con.b if con.sense == ">=" else lhs == con.b)
    best_x, best_ub, lb, gap, it = None, math.inf, -math.inf, math.inf, 0
    status = Status.ERROR
    msg = ""
    for it in range(1, max_iter + 1):
        cuts = []
        for i in range(k):
            p = pts[i]
            f = _term(model, i, p) / scale
            dfd = model.terms_derivative(p, 1, np.full(p.size, i)) / scale
            cuts.append(t[i] >= f + cp.multiply(dfd, x[i] - p))
        prob = cp.Problem(cp.Minimize(cp.sum(t)), base + cuts)
        try:
            prob.solve(solver=lp_solver, **lp_opts)
        except Exception as exc:
            return Solution(Status.ERROR, backend="cvxpy", solver=lp_solver.lower(),
                            message=f"{type(exc).__name__}: {exc}", wall_time=time.perf_counter() - t0)
        if prob.status == "infeasible":
            return Solution(Status.INFEASIBLE, backend="cvxpy", solver=lp_solver.lower(),
                            message="the linear constraints are infeasible", wall_time=time.perf_counter() - t0)
        if prob.status != "optimal" or x.value is None:
            msg = f"LP solver status {prob.status}"
            status = Status.ERROR
            break
        xv = np.clip(np.asarray(x.value, dtype=float), lo, hi)
        lb = max(lb, float(prob.value) * scale - model._fpc_const)
        ub = model.objective_value(xv)
        if ub < best_ub:
            best_ub, best_x = ub, xv
        gap = (best_ub - lb) / abs(best_ub) if best_ub else 0.0
        if gap <= gap_tol:
            status, msg = Status.OPTIMAL, f"tangent cuts: gap {gap:.2e} after {it} LPs"
            break
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            status, msg = Status.TIME_LIMIT, f"time limit: gap {gap:.2e} after {it} LPs"
            break
        for i in range(k):
            p = pts[i]
            pos = int(np.searchsorted(p, xv[i]))
            new = [xv[i]]
            if pos > 0:
                new.append(0.5 * (p[pos - 1] + xv[i]))
            if pos < p.size:
                right = p[pos] if p[pos] > xv[i] else (p[pos + 1] if pos + 1 < p.size else None)
                if right is not None:
                    new.append(0.5 * (right + xv[i]))
            pts[i] = np.unique(np.concatenate([p, np.clip(new, lo[i], hi[i])]))
    else:
        status, msg = Status.FEASIBLE, f"iteration limit: gap {gap:.2e} after {max_iter} LPs"
    if best_x is None:
        return Solution(status, backend="cvxpy", solver=lp_solver.lower(), message=msg,
                        wall_time=time.perf_counter() - t0)
    sol = model.make_solution(x=best_x, status=status, message=msg)
    sol.certificate = Certificate("gap", status == Status.OPTIMAL, lower_bound=lb, gap=gap, tolerance=gap_tol,
                                  message="tangent-cut LP bound")
    sol.solver = lp_solver.lower()
    sol.details.update(lower_bound=lb, gap=gap, lp_solves=it, cuts=int(sum(p.size for p in pts)))
    sol.wall_time = time.perf_counter() - t0
    return sol


def _missing():
    try:
        import cvxpy  # noqa: F401
    except ImportError as exc:
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message=f"cvxpy is not installed: {exc}")
    return None


def relax(model, time_limit: float | None = None, method: str = "auto", gap_tol: float = 1e-9,
          max_iter: int = 200) -> Solution:
    """Continuous relaxation: DCP + Clarabel (DLap/TuLap), tangent cuts otherwise (sum problem)."""
    t0 = time.perf_counter()
    _check(time_limit, method)
    miss = _missing()
    if miss:
        return miss
    d = _design(model)
    try:
        dcp_coefficients(d)
        dcp_ok, why = True, ""
    except CvxpyUnsupported as exc:
        dcp_ok, why = False, str(exc)
    if method == "dnlp":
        return Solution(Status.UNSUPPORTED, backend="cvxpy",
                        message="cvxpy DNLP mode needs IPOPT, which this installation does not use; "
                                "use method='cuts' or the pyomo/scipy backends")
    if method == "dcp" and not dcp_ok:
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message=why)
    if dcp_ok and method in ("auto", "dcp"):
        return _solve_dcp(model, False, time_limit, t0)
    if isinstance(model, MinCostDesign):
        return Solution(Status.UNSUPPORTED, backend="cvxpy",
                        message=f"{why}; tangent cuts are implemented for the sum problem only "
                                "(use pyomo or scipy for the min-cost relaxation)")
    return _tangent_cuts(model, time_limit, gap_tol, max_iter, t0)


def solve(model, time_limit: float | None = None) -> Solution:
    """Integer design with SCIP through cvxpy (DLap/TuLap only)."""
    t0 = time.perf_counter()
    _check(time_limit)
    miss = _missing()
    if miss:
        return miss
    try:
        dcp_coefficients(_design(model))
    except CvxpyUnsupported as exc:
        return Solution(Status.UNSUPPORTED, backend="cvxpy",
                        message=f"{exc}; integer designs need a DCP objective (use pyomo for Laplace)")
    return _solve_dcp(model, True, time_limit, t0)


for _cls in (StratifiedDesign, MinCostDesign):
    register("cvxpy", _cls, "solve", _DESCRIPTION)(solve)
    register("cvxpy", _cls, "relax", _DESCRIPTION)(relax)
