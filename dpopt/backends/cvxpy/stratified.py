"""``cvxpy`` backend for StratifiedDesign and MinCostDesign (docs/stratified.md, docs/constrained.md).

DLap (Δ = 1) and TuLap are DCP: with q = n/N the term is ``f_i(n) = a_i/n + b_i n + c_i``,
``a_i = α_i²(σ_i² [+ 1/12])``, ``b_i = 2α_i²/(cN_i)²``, ``c_i = 2α_i²/(cN_i)``, so the objective is
``a @ inv_pos(n) + b @ n + const``. :func:`build_cvxpy_problem` returns that ``Problem`` and its
variables. ``relax`` solves it with Clarabel; ``solve`` solves the integer design with SCIP (through
cvxpy). The min-cost variant puts the same expression in the constraint ``g(n) ≤ V0``.

Laplace (and DLap with Δ > 1) is not DCP. ``relax`` then uses cvxpy's DNLP mode with IPOPT when the
optional extra is installed (``pip install "dpopt[ipopt]"``): the nominal budget is written in log-space as
``L = logistic(log(cN) − log n)``, so ε up to 700 and N up to 1e9 stay finite. The objective is convex,
so IPOPT's KKT point is the global optimum; the answer is nevertheless certified independently by the
linearisation bound ``g(x) + min_{y feasible} ∇g(x)·(y − x)`` (exact greedy for the sum-and-bounds
problem, an LP otherwise) and reported as a ``gap`` certificate. Without IPOPT, ``relax`` falls back to
a tangent-cut outer approximation (an LP re-solved with local refinement of the cut points) that
reports the LP bound and relative gap ``(g(x) − bound)/g(x)``, stopping at ``rel_gap`` (default 1e-9;
the LP is solved with HiGHS tolerances 1e-10). ``method`` picks the route: "auto" (DCP, else DNLP,
else cuts), "dcp", "dnlp" or "cuts". Integer Laplace designs are ``unsupported`` in this backend (use
pyomo); a mechanism is translated through its ``cvxpy_variance`` hook, and one without it is refused.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from ...models.stratified import MinCostDesign, StratifiedDesign
from ... import _validate as V
from ...options import DEFAULT_REL_GAP
from ...registry import register
from ...result import Certificate, Solution, Status
from .. import _status
from ..exact.enumerate import _term
from .._routes import secant_for_extended
from .secant import solve_cvxpy

_DESCRIPTION = ("cvxpy: DCP (DLap/TuLap) with Clarabel / SCIP; DNLP with IPOPT (extra) or tangent cuts with a "
                "certified gap otherwise")


from .._highs import absorb_highs_banner
from ...formulations.repair import SOLVER_TOL
from .build import (CvxpyUnsupported, _design, noise_variance_hook, build_cvxpy_problem,  # noqa: F401
                    dcp_coefficients, linearisation_bound)




def _left(time_limit, t0) -> float:
    """Seconds left for the solver of a call started at ``t0`` (``time.perf_counter``) with ``time_limit``
    (None: the one default, :data:`dpopt.options.DEFAULT_TIME_LIMIT`): every solver call gets a finite limit,
    and the time cvxpy spent before it counts."""
    from ...options import time_limit_or_default

    return max(time_limit_or_default(time_limit) - (time.perf_counter() - t0), 1e-9)


def _check(time_limit, method=None):
    V.time_limit(time_limit)
    if method is not None and method not in ("auto", "dcp", "cuts", "dnlp"):
        raise V.InvalidOption(f"method must be 'auto', 'dcp', 'cuts' or 'dnlp', got {method!r}")


def _solve_dcp(model, integer: bool, time_limit, t0) -> Solution:
    import cvxpy as cp

    solver = "SCIP" if integer else "CLARABEL"
    if solver not in cp.installed_solvers():
        return Solution(Status.UNSUPPORTED, backend="cvxpy", solver=solver.lower(),
                        message=f"cvxpy solver {solver} is not installed")
    prob, var = build_cvxpy_problem(model, integer=integer)
    kw = {}
    if integer:
        params = {"limits/gap": 0.0, "misc/usesymmetry": 0, "limits/time": _left(time_limit, t0)}
        kw["scip_params"] = params
    else:
        kw.update(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500,
                  time_limit=_left(time_limit, t0))
    try:
        absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
        prob.solve(solver=solver, **kw)
        _status.record(prob.status)     # the solver's own reason: Solution.termination
    except Exception as exc:  # solver faults become a status
        wall = time.perf_counter() - t0
        if _left(time_limit, t0) <= 1e-6:   # SCIP stopped without a point: cvxpy raises
            return Solution(Status.TIME_LIMIT, backend="cvxpy", solver=solver.lower(), wall_time=wall,
                            message=f"{solver} reached the time limit ({wall:.3g} s) without a point")
        return Solution(Status.ERROR, backend="cvxpy", solver=solver.lower(), wall_time=wall,
                        message=f"{type(exc).__name__}: {exc}")
    status = _status.cvxpy_status(prob)     # the one cvxpy map (backends/_status.py), SCIP's limits read as such
    val = var["n"].value
    msg = f"{solver}: {prob.status}"
    if val is None or status in (Status.INFEASIBLE, Status.ERROR):
        return Solution(status if val is None else Status.ERROR, backend="cvxpy", solver=solver.lower(),
                        message=msg, wall_time=time.perf_counter() - t0, termination=str(prob.status))
    if integer:
        n = np.round(val).astype(np.int64)
        if not model.is_feasible(n):
            return Solution(Status.ERROR, backend="cvxpy", solver="scip", wall_time=time.perf_counter() - t0,
                            message=f"{msg}; rounded point {n.tolist()} is infeasible")
        sol = model.make_solution(n=n, status=status, message=msg)
        if isinstance(model, StratifiedDesign) and model.is_plain:
            model.attach_certificate(sol)
    else:
        x = np.clip(np.asarray(val, dtype=float), model.lower, model.upper)
        sol = model.make_solution(x=x, status=status, message=msg)
    sol.solver = solver.lower()
    sol.termination = str(prob.status)
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
            absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
            prob.solve(solver=lp_solver, time_limit=_left(time_limit, t0), **lp_opts)
            _status.record(prob.status)     # the solver's own reason: Solution.termination
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
        if _left(time_limit, t0) <= 1e-6:
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


def _solve_dnlp(model, time_limit, gap_tol: float, t0) -> Solution:
    """DNLP + IPOPT, certified by the linearisation bound."""

    prob, var = build_cvxpy_problem(model, form="dnlp")
    # tol 1e-12 made IPOPT exit "search direction too small" at converged points (Σn = 1e4 is met to 2e-12,
    # i.e. to rounding); optimality comes from the linearisation bound below, not from IPOPT's tolerance
    opts = {"tol": 1e-10, "acceptable_tol": 1e-8, "print_level": 0, "sb": "yes",
            "max_wall_time": _left(time_limit, t0)}
    try:
        with warnings.catch_warnings():
            # cvxpy cannot see that n ≥ lower ≥ 1 keeps every denominator positive
            warnings.filterwarnings("ignore", message=".*denominator of a division")
            prob.solve(solver="IPOPT", nlp=True, **opts)
            _status.record(prob.status)     # the solver's own reason: Solution.termination
    except Exception as exc:  # solver faults become a status
        return Solution(Status.ERROR, backend="cvxpy", solver="ipopt", wall_time=time.perf_counter() - t0,
                        message=f"{type(exc).__name__}: {exc}")
    val = var["n"].value
    msg = f"IPOPT (cvxpy DNLP): {prob.status}"
    if val is None or prob.status in ("infeasible", "infeasible_inaccurate", "unbounded"):
        status = Status.INFEASIBLE if prob.status.startswith("infeasible") else Status.ERROR
        return Solution(status, backend="cvxpy", solver="ipopt", message=msg, wall_time=time.perf_counter() - t0)
    x = np.clip(np.asarray(val, dtype=float), model.lower, model.upper)
    sol = model.make_solution(x=x, status=Status.FEASIBLE, message=msg)
    lb = linearisation_bound(model, x)
    gap = (sol.objective - lb) / abs(sol.objective) if np.isfinite(lb) and sol.objective else float("nan")
    feasible = model.is_feasible(x)
    certified = feasible and bool(gap <= gap_tol)
    if certified:     # the bound proves optimality whatever IPOPT's own exit status
        sol.status = Status.OPTIMAL
    else:
        if prob.status == "user_limit":
            sol.status = Status.TIME_LIMIT
            msg = "IPOPT (cvxpy DNLP) stopped at its time or iteration limit"
        if not model.is_feasible(x, tol=SOLVER_TOL):
            # an uncertified iterate is returned only when it satisfies the model (as on the Pyomo routes): a
            # point stopped mid-way may violate the rows
            return Solution(sol.status if sol.status == Status.TIME_LIMIT else Status.ERROR, backend="cvxpy",
                            solver="ipopt", wall_time=time.perf_counter() - t0, termination=str(prob.status),
                            message=f"{msg}; no point: IPOPT's iterate violates the model's rows beyond relative "
                                    f"tolerance {SOLVER_TOL:g}")
        sol.message = f"{msg}; not certified (gap {gap:.2e}, feasible {feasible})"
    sol.certificate = Certificate("gap", certified, lower_bound=lb, gap=gap, tolerance=gap_tol,
                                  message="linearisation (Frank-Wolfe) bound at the IPOPT point")
    sol.solver = "ipopt"
    sol.termination = str(prob.status)
    sol.details.update(lower_bound=lb, gap=gap)
    sol.wall_time = time.perf_counter() - t0
    return sol


def _missing():
    try:
        import cvxpy  # noqa: F401
    except ImportError as exc:
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message=f"cvxpy is not installed: {exc}")
    return None


def _has_ipopt() -> bool:
    import cvxpy as cp
    return "IPOPT" in cp.installed_solvers()


def relax(model, time_limit: float | None = None, method: str = "auto", rel_gap: float = DEFAULT_REL_GAP,
          max_iter: int = 200) -> Solution:
    """Continuous relaxation: DCP + Clarabel (DLap/TuLap), else DNLP + IPOPT, else tangent cuts.
    ``rel_gap``: the certified relative gap at which the cuts stop and ``optimal`` may be claimed."""
    t0 = time.perf_counter()
    _check(time_limit, method)
    gap_tol = V.rel_gap(rel_gap)
    if gap_tol == 0:
        raise V.InvalidOption("rel_gap must be > 0 for the cvxpy relaxation (its bounds are numerical)")
    max_iter = V.count("max_iter", max_iter, maximum=100_000)
    miss = _missing()
    if miss:
        return miss
    d = _design(model)
    try:
        dcp_coefficients(d)
        dcp_ok, why = True, ""
    except CvxpyUnsupported as exc:
        dcp_ok, why = False, str(exc)
    if method == "dcp" and not dcp_ok:
        return Solution(Status.UNSUPPORTED, backend="cvxpy", message=why)
    if dcp_ok and method in ("auto", "dcp"):
        return _solve_dcp(model, False, time_limit, t0)
    if method == "dnlp" or (method == "auto" and _has_ipopt()):
        if not _has_ipopt():
            return Solution(Status.UNSUPPORTED, backend="cvxpy", solver="ipopt",
                            message='cvxpy DNLP mode needs IPOPT: pip install "dpopt[ipopt]" '
                                    "(or use method='cuts', or the pyomo/scipy backends)")
        try:
            noise_variance_hook(d.noise_mechanism(0))
        except CvxpyUnsupported as exc:
            return Solution(Status.UNSUPPORTED, backend="cvxpy", solver="ipopt", message=str(exc))
        return _solve_dnlp(model, time_limit, gap_tol=max(gap_tol, 1e-8), t0=t0)
    if isinstance(model, MinCostDesign):
        return Solution(Status.UNSUPPORTED, backend="cvxpy",
                        message=f"{why}; without IPOPT, tangent cuts cover the sum problem only "
                                '(pip install "dpopt[ipopt]", or use pyomo or scipy for the min-cost relaxation)')
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
    register("cvxpy", _cls, "solve", _DESCRIPTION)(secant_for_extended(solve, solve_cvxpy))
    register("cvxpy", _cls, "relax", _DESCRIPTION)(secant_for_extended(relax, None))
