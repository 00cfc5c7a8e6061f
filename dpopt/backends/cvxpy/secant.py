"""The shared secant MILP (:mod:`dpopt.backends._secant`) through cvxpy (SCIP or HiGHS)."""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from ...result import Solution, Status
from .. import _status
from .._secant import _CVXPY_SOLVERS, _prepare, solve_outer
from .._highs import absorb_highs_banner
from .._highs_run import guarded_highs_objects


def solve_cvxpy(model, **options) -> Solution:
    """The secant MILP through cvxpy (SCIP or HiGHS)."""
    t0 = time.perf_counter()
    prep, early = _prepare(model, options, _CVXPY_SOLVERS)
    if early is not None:
        return early
    return solve_outer(model, prep, lambda milp, deadline: _solve_once(milp, prep, deadline), t0)


def _solve_once(milp, prep, deadline):
    """One MILP of the outer loop through cvxpy: (status word, n, bound, termination, message) or a Solution."""
    import cvxpy as cp
    import scipy.sparse as sp

    R, C, Vv, rlo, rhi = milp.to_coo()
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
    try:
        absorb_highs_banner()   # HiGHS prints a banner on stdout on its first use in a process
        # cvxpy's compilation runs before the solver's clock starts: it is done first, so that the solver gets
        # what is left of the limit after it (measured 0.5 s at k = 60, half of a 1 s limit)
        data, chain, inverse = prob.get_problem_data(_CVXPY_SOLVERS[key])
        left = max(deadline - time.perf_counter(), 1e-9)
        kw = ({"scip_params": {"limits/time": left, "limits/gap": prep["gap"], **prep["solver_options"]}}
              if key == "scip" else {"time_limit": left, "mip_rel_gap": prep["gap"], **prep["solver_options"]})
        # cvxpy makes its own HiGHS object: it runs in a worker killed past the limit (backends/_highs_run.py)
        with (guarded_highs_objects(left, prep["verbose"]) if key == "highs" else contextlib.nullcontext()):
            raw = chain.solve_via_data(prob, data, warm_start=False, verbose=prep["verbose"], solver_opts=kw)
        prob.unpack_results(raw, chain, inverse)
        _status.record(prob.status)     # the solver's own reason: Solution.termination
    except cp.error.SolverError as exc:
        return Solution(status=Status.ERROR, solver=key, message=f"cvxpy/{key}: {exc}")
    st = prob.status
    pt = None if n.value is None else np.round(n.value).astype(np.int64)
    word = _status.cvxpy_status(prob, pt is not None).value     # the one cvxpy map (backends/_status.py)
    # cvxpy reports no dual bound for MILPs: without one the answer cannot be certified optimal
    bound = prob.value * milp.obj_scale if word == "optimal" and prob.value is not None else -math.inf
    if word == "optimal":
        bound -= prep["gap"] * abs(bound)       # the solver's own stopping gap
    return word, pt, bound, str(st), f"cvxpy status {st}"
