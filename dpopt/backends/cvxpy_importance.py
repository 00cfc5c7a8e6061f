"""cvxpy backend for ImportanceSampling with linear profiles (Problem 7 as a conic program).

With ε(w, x_i) = c_i·w and w_i = 1/q_i, the constraint ψ_i ≤ ε* reads q_i·(e^{c_i/q_i} − 1) ≤ a,
a = expm1(ε*), i.e. ``q_i·exp(c_i/q_i) ≤ a + q_i`` — the perspective of exp, which is exactly the
exponential cone ``(c_i, q_i, a + q_i) ∈ K_exp`` (``cp.constraints.ExpCone``). The objective Σ q_i is
linear and 0 < q_i ≤ 1. (The equivalent w-form ``c·w ≤ log(1 + a·w)``, objective ``inv_pos(w)``, is
badly scaled for small q and loses up to 30 % at ε*=1, b=300 with Clarabel; the q-form agrees with
the closed form to ~1e-8.) Solved by Clarabel (or
SCS as fallback, or the ``solver`` option). General (non-linear) profiles are not DCP in general and
are reported ``unsupported``. The answer is accurate to the conic solver's tolerance (~1e-8), not to
machine precision; ``details['max_violation']`` reports how far the worst ψ_i exceeds ε*.
"""

from __future__ import annotations

import numpy as np

from ..models.importance import ImportanceSampling
from ..privacy.amplification import log_expm1
from ..registry import register
from ..result import Solution, Status

_DESCRIPTION = "cvxpy modelling layer (conic solvers: Clarabel, SCS, ...)"


def _fail(status, msg, solver=""):
    return Solution(status=status, backend="cvxpy", solver=solver, model="ImportanceSampling", message=msg)


@register("cvxpy", ImportanceSampling, "solve", _DESCRIPTION)
def solve_cvxpy(model: ImportanceSampling, solver: str | None = None, verbose: bool = False, **solver_options):
    if not model.linear:
        return _fail(Status.UNSUPPORTED, "cvxpy handles linear profiles (slopes) only; general profiles are not DCP")
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - cvxpy is a dependency
        return _fail(Status.UNSUPPORTED, f"cvxpy is not installed: {exc}")
    eps = model.epsilon
    if eps > 50:
        return _fail(Status.UNSUPPORTED, f"eps* = {eps:g} gives expm1(eps*) = e**{float(log_expm1(eps)):.0f}, "
                                         "beyond what a conic solver can scale; use backend 'exact'")
    a = float(np.expm1(eps))
    c = model.slopes
    q = cp.Variable(model.n)
    cons = [cp.constraints.ExpCone(c, q, a + q), q <= 1]
    prob = cp.Problem(cp.Minimize(cp.sum(q)), cons)
    installed = cp.installed_solvers()
    order = [solver] if solver else [s for s in ("CLARABEL", "SCS") if s in installed]
    if not order:
        return _fail(Status.UNSUPPORTED, "no exponential-cone solver (Clarabel, SCS) is installed")
    last = ""
    for name in order:
        try:
            prob.solve(solver=name, verbose=verbose, **solver_options)
        except Exception as exc:  # solver error: try the next one
            last = f"{name} failed: {exc}"
            continue
        if prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and q.value is not None:
            qv = np.clip(np.asarray(q.value, dtype=float), np.finfo(float).tiny, 1.0)
            status = Status.OPTIMAL if prob.status == cp.OPTIMAL else Status.FEASIBLE
            sol = model.make_solution(qv, status=status, backend="cvxpy", solver=name,
                                      message=f"cvxpy status {prob.status}")
            if sol.certificate is not None and status == Status.OPTIMAL:
                # conic tolerance: accept violations up to 1e-6 relative
                sol.certificate.optimal = sol.details["max_violation"] <= 1e-6 * eps
                sol.certificate.tolerance = 1e-6
            return sol
        if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            return _fail(Status.INFEASIBLE, f"{name}: {prob.status}", name)
        last = f"{name}: status {prob.status}"
    return _fail(Status.ERROR, last or "no solver succeeded")
