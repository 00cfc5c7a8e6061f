"""cvxpy backend for ImportanceSampling with linear profiles (Problem 7 as a conic program).

With ε(w, x_i) = c_i·w, write t_i = c_i·w_i = c_i/q_i (the record's loss before sampling). The
constraint ψ_i ≤ ε* reads expm1(t_i) ≤ a·t_i/c_i, a = expm1(ε*), i.e. in log form

    t_i − log(t_i + c_i/a) ≤ L_i,   L_i = log(a/c_i) = log_expm1(ε*) − log c_i,

a convex constraint (an exponential cone), with t_i ≥ c_i (q_i ≤ 1). Every coefficient is a
logarithm, so ε* up to 700 and slopes down to 1e-300 stay well scaled (the q-form
q·exp(c/q) ≤ a + q overflows above ε* ≈ 50 and its tiny-q records drowned in the conic tolerance: q off
by up to 1e5x). The feasible t_i form an interval [c_i, t_i*], so the problem is separable and any
objective increasing in each t_i has the same optimum: the backend maximises Σ log t_i, which gives every
record the same relative accuracy (Σ q_i = Σ c_i/t_i would weight the records by their size).

The conic answer is accurate to the solver's tolerance only, so it goes through the model's own check:
records whose ψ_i exceed ε* are raised to private values (:meth:`ImportanceSampling.repair`), and the
certificate is the proven gap of :meth:`ImportanceSampling.make_solution` — ``optimal`` only within
``rel_gap``. Solved by Clarabel (or SCS as fallback, or the ``solver`` option). General (non-linear)
profiles are not DCP in general and are reported ``unsupported``.
"""

from __future__ import annotations

import time

import numpy as np

from ... import _validate as V
from ...options import time_limit_or_default
from ...models.importance import DEFAULT_REL_GAP, ImportanceSampling, log_target
from ...registry import register
from ...result import Solution, Status
from .. import _status
from .._highs import absorb_highs_banner

_DESCRIPTION = "cvxpy modelling layer (conic solvers: Clarabel, SCS, ...)"


def _fail(status, msg, solver=""):
    return Solution(status=status, backend="cvxpy", solver=solver, model="ImportanceSampling", message=msg)


_TIME_OPTION = {"CLARABEL": "time_limit", "SCS": "time_limit_secs", "ECOS": None}
# Clarabel's default tolerances (1e-8) leave records with c_i close to ε* ~1e-4 off; 1e-11 brings them
# to ~1e-7 (an 'optimal_inaccurate' answer is still checked by the model's certificate)
_ACCURACY = {"CLARABEL": {"tol_feas": 1e-11, "tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_ktratio": 1e-9}}


@register("cvxpy", ImportanceSampling, "solve", _DESCRIPTION)
def solve_cvxpy(model: ImportanceSampling, solver: str | None = None, time_limit: float | None = None,
                rel_gap: float = DEFAULT_REL_GAP, verbose: bool = False, solver_options: dict | None = None):
    """Options: ``solver`` (a cvxpy exponential-cone solver, default Clarabel then SCS), ``time_limit`` (s),
    ``rel_gap`` (proven gap for ``optimal``), ``verbose``, ``solver_options`` (passed to the solver)."""
    time_limit = V.time_limit(time_limit)
    rel_gap = V.rel_gap(rel_gap)
    verbose = V.verbose(verbose)
    extra = V.solver_options(solver_options)
    if solver is not None and not isinstance(solver, str):
        raise V.InvalidOption(f"solver must be a cvxpy solver name, got {type(solver).__name__}")
    if not model.linear:
        return _fail(Status.UNSUPPORTED, "cvxpy handles linear profiles (slopes) only; general profiles are not DCP")
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - cvxpy is a dependency
        return _fail(Status.UNSUPPORTED, f"cvxpy is not installed: {exc}")
    installed = cp.installed_solvers()
    if solver is not None:
        name = solver.strip().upper()
        if name not in _TIME_OPTION:
            raise V.InvalidOption(f"solver must be one of {', '.join(_TIME_OPTION)} (exponential-cone solvers), "
                                  f"got {solver!r}")
        if name not in installed:
            return _fail(Status.UNSUPPORTED, f"cvxpy solver {name} is not installed")
        order = [name]
    else:
        order = [s for s in ("CLARABEL", "SCS") if s in installed]
    if not order:
        return _fail(Status.UNSUPPORTED, "no exponential-cone solver (Clarabel, SCS) is installed")
    # a record with c_i = ε* has the single private point q_i = 1 (t_i* = c_i): no interior for the solver
    free = np.flatnonzero(model.slopes < model.epsilon)
    q = np.ones(model.n)
    if not free.size:
        return model.make_solution(x=q, status=Status.OPTIMAL, backend="cvxpy", rel_gap=rel_gap,
                                   message="every record has eps(1, x) = eps*: q = 1 is the only private point")
    c = model.slopes[free]
    L = log_target(model.epsilon, c)
    with np.errstate(under="ignore"):
        inv_ratio = np.exp(-L)                       # c/a, may underflow to 0 harmlessly
    # t = L·τ: the root t* lies in [L, 2L] (s/2 ≤ log(expm1(s)/s) ≤ s), so τ* ∈ [1, 2] for every record and
    # the bound τ ≤ 2 is redundant but keeps the solver's iterates in range
    tau = cp.Variable(free.size)
    t = cp.multiply(L, tau)
    prob = cp.Problem(cp.Maximize(cp.sum(cp.log(tau))),
                      [t - cp.log(t + inv_ratio) <= L, tau >= c / L, tau <= 2.0])
    t0 = time.perf_counter()
    last = ""
    for name in order:
        opts = dict(_ACCURACY.get(name, {}), **extra)
        key = _TIME_OPTION.get(name)
        if key:     # what is left of the limit (None: the one default, so no solve runs unbounded)
            opts.setdefault(key, max(time_limit_or_default(time_limit) - (time.perf_counter() - t0), 1e-3))
        try:
            absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
            prob.solve(solver=name, verbose=verbose, **opts)
            _status.record(prob.status)     # the solver's own reason: Solution.termination
        except Exception as exc:  # solver error: try the next one
            if time_limit is not None and time.perf_counter() - t0 >= time_limit:
                return _fail(Status.TIME_LIMIT, f"{name} stopped at the time limit ({time_limit:g} s) "
                                                f"without a point: {exc}", name)
            last = f"{name} failed: {exc}"
            continue
        if prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.USER_LIMIT) and tau.value is not None:
            tv = L * np.asarray(tau.value, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                q[free] = np.where(np.isfinite(tv) & (tv > 0), c / tv, 1.0)
            q = model.repair(np.clip(q, np.finfo(float).tiny, 1.0))
            claimed = Status.TIME_LIMIT if prob.status == cp.USER_LIMIT else Status.OPTIMAL
            return model.make_solution(x=q, status=claimed, backend="cvxpy", solver=name, rel_gap=rel_gap,
                                       message=f"cvxpy status {prob.status}")
        if prob.status == cp.USER_LIMIT:
            return _fail(Status.TIME_LIMIT, f"{name}: stopped at the time limit without a point", name)
        if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            # q = 1 is always private (Assumption 8, checked when the model was built): a solver fault
            last = f"{name}: status {prob.status} on a feasible problem"
            continue
        last = f"{name}: status {prob.status}"
    return _fail(Status.ERROR, last or "no solver succeeded")
