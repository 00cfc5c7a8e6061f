"""Exact backend for constrained stratified designs and min-cost designs (docs/constrained.md).

Works on the model's :class:`~dpopt.formulations.SeparableProgram` (objective row plus convex and linear
constraint rows over the unit terms). Three steps:

1. **Continuous relaxation** by its Lagrangian dual: for multipliers λ the Lagrangian separates into
   one-dimensional convex problems per stratum (bracketed Newton, vectorised); the dual is smooth and
   concave in λ and is maximised by a projected Newton method with line search (its Hessian is
   −Σ_i g_i g_iᵀ / φ_i''). A dual value above the objective's maximum over the box proves infeasibility.
2. **Integer Lagrangian bound**: the secant LP over a window around the relaxation is the convex hull of
   the integer problem there, so its row duals are the best multipliers λ; the integer Lagrangian then
   separates into discretely convex problems per stratum, solved by bisection on increments. Its value is a
   proven lower bound LB, and every feasible n satisfies f(n) = LB + Σ_i r_i(n_i) + Σ_l λ_l s_l(n) with
   r_i ≥ 0 the reduced costs and s_l ≥ 0 the slacks of the inequality rows.
3. **Integer optimum on cores**: with a budget b, reduced-cost fixing keeps per stratum the values with
   r_i ≤ b; this core holds every design within LB + b. A core is solved exactly by enumeration (dynamic
   programming over its free strata, pruned by the budget, by row reachability and by dominance) or, when
   too many partial designs survive, as a secant MILP (k integer columns, one epigraph column per stratum
   and nonlinear row) by HiGHS. Either proves that nothing lies below min(its optimum, LB + b); the budget
   starts at 1e-9·|LB| and grows until it covers the incumbent's excess ub − LB, when the core's optimum
   is global. The certificate's lower bound is the best of these; ``optimal`` means a relative gap ≤
   ``rel_gap``. Rows on disjoint sets of strata (e.g. one target per domain in a min-cost design) form
   blocks solved one by one, each with a share of the time left.

Secant cuts and the Lagrangian inner solves are exact lower bounds only where every row is discretely
convex in each n_i: proven for the built-in mechanisms with the whole budget, checked increment by
increment otherwise (``convexity_verified``); without that the answer is at best ``feasible``.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ... import _validate as V
from ...formulations.separable import (EVAL_RTOL, FEASIBILITY_TOL, SeparableProgram, program_of, safe_lower,
                                       secant_milp)
from ... import _log
from ...result import Certificate, Solution, Status
from .._output import new_highs
from .._status import status_of
from .domains import domain_structure, solve_domains

from ...options import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT  # noqa: E402  (the one default of every backend)
_FEAS_TOL = FEASIBILITY_TOL        # the one feasibility test's tolerance (formulations.separable)
_CHUNK = 1 << 16                  # partial designs expanded at once by the core enumeration
DEFAULT_MAX_STATES = 2_000_000    # partial designs a core enumeration keeps (~350 MB at the limit, measured)


class _Deadline:
    def __init__(self, time_limit):
        self.t0 = time.perf_counter()
        self.end = None if time_limit is None else self.t0 + time_limit

    def left(self) -> float | None:
        return None if self.end is None else max(self.end - time.perf_counter(), 0.0)

    def passed(self) -> bool:
        return self.end is not None and time.perf_counter() >= self.end

    def share(self, parts: int) -> "_Deadline":
        """A deadline for one of ``parts`` remaining pieces of work: an equal share of the time left."""
        out = _Deadline(None)
        if self.end is not None:
            out.end = min(self.end, out.t0 + (self.left() or 0.0) / max(parts, 1))
        return out


# ---------------------------------------------------------------------------------- inner problems
def _phi(prog: SeparableProgram, Om, ell, x, idx=None):
    sl = slice(None) if idx is None else idx
    T = prog.unit_matrix(x, idx)
    return np.sum(Om[sl] * T, axis=1) + ell[sl] * np.asarray(x, dtype=float)


def _phi_derivs(prog, Om, ell, x, idx=None):
    sl = slice(None) if idx is None else idx
    d1, d2 = prog.derivative_matrices(x, idx)
    return np.sum(Om[sl] * d1, axis=1) + ell[sl], np.sum(Om[sl] * d2, axis=1)


def _inner_continuous(prog, Om, ell, x0=None, max_iter: int = 100):
    """argmin of φ_i(x) = Σ_j Ω_ij t_ij(x) + ℓ_i x on [lo_i, hi_i] for every i (φ_i' is increasing)."""
    lo, hi = prog.lower.astype(float), prog.upper.astype(float)
    x = np.sqrt(lo * hi) if x0 is None else np.clip(np.asarray(x0, dtype=float), lo, hi)
    d_lo, _ = _phi_derivs(prog, Om, ell, lo)
    d_hi, _ = _phi_derivs(prog, Om, ell, hi)
    at_lo, at_hi = d_lo >= 0, d_hi <= 0
    x[at_lo] = lo[at_lo]
    x[at_hi & ~at_lo] = hi[at_hi & ~at_lo]
    idx = np.flatnonzero(~(at_lo | at_hi))
    if idx.size == 0:
        return x
    a, b = lo[idx].copy(), hi[idx].copy()
    xi = np.clip(x[idx], a, b)
    act = np.arange(idx.size)
    for _ in range(max_iter):
        xa = xi[act]
        g, h = _phi_derivs(prog, Om, ell, xa, idx[act])
        a[act] = np.where(g < 0, xa, a[act])
        b[act] = np.where(g > 0, xa, b[act])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # Newton on x²φ'(x) (same root): for φ = A/x + Bx that is Bx² − A, on which Newton converges from
            # any x > 0; plain Newton on φ' overshoots below zero from the right of the root
            xn = xa - xa * g / (2 * g + xa * h)
        aa, bb = a[act], b[act]
        # a step below the tolerance is convergence, even when rounding puts it on the bracket's end (treating
        # it as a bad step jumped back to the bracket's middle: 35 iterations per solve instead of 5)
        tiny = np.isfinite(xn) & (np.abs(xn - xa) <= 1e-13 * xa)
        bad = ~tiny & (~np.isfinite(xn) | (xn <= aa) | (xn >= bb))
        xn = np.where(bad, np.sqrt(aa * bb), xn)
        done = tiny | (g == 0) | (bb - aa <= 1e-13 * bb)
        xi[act] = xn
        act = act[~done]
        if act.size == 0:
            break
    x[idx] = xi
    return x


def _inner_integer(prog, Om, ell):
    """argmin over integers in [lo_i, hi_i] of φ_i: the first m with Δφ_i(m) ≥ 0 (increments non-decreasing)."""
    lo, hi = prog.lower.copy(), prog.upper.copy()
    a, b = lo.copy(), hi.copy()          # answer in [a, b]; b = hi means "no sign change below hi"
    act = np.flatnonzero(a < b)
    for _ in range(70):
        if act.size == 0:
            break
        mid = (a[act] + b[act]) // 2
        dphi = _increments(prog, Om, ell, mid, act)
        up = dphi >= 0
        b[act] = np.where(up, mid, b[act])
        a[act] = np.where(up, a[act], mid + 1)
        act = act[a[act] < b[act]]
    return a


def _increments(prog, Om, ell, m, idx):
    D = prog.increment_matrix(np.asarray(m, dtype=float), idx)
    return np.sum(Om[idx] * D, axis=1) + ell[idx]


# ---------------------------------------------------------------------------------- dual
class _Dual:
    """Values of the continuous Lagrangian dual and its derivatives at λ."""

    def __init__(self, prog: SeparableProgram):
        self.prog = prog
        self.rhs = prog.rhs()
        self.ineq = prog.inequality()
        self.x = None
        lo, hi = prog.lower.astype(float), prog.upper.astype(float)
        # the objective's maximum over the box (convex per stratum: at an endpoint) bounds every dual value
        # of a feasible program from above (weak duality)
        f_lo = prog.row_terms(prog.objective, prog.unit_matrix(lo), lo)
        f_hi = prog.row_terms(prog.objective, prog.unit_matrix(hi), hi)
        self.f_max = float(np.sum(np.maximum(f_lo, f_hi))) - prog.const

    def at(self, lam):
        prog = self.prog
        Om, ell = prog.combine(lam)
        x = _inner_continuous(prog, Om, ell, self.x)
        T = prog.unit_matrix(x)
        phi = np.sum(Om * T, axis=1) + ell * x
        q = float(np.sum(phi) - lam @ self.rhs) - prog.const
        lhs = np.array([np.sum(prog.row_terms(r, T, x)) for r in prog.rows])
        self.x = x
        return q, lhs - self.rhs, x, Om, ell

    def hessian(self, lam, x, Om, ell):
        prog = self.prog
        lo, hi = prog.lower, prog.upper
        d1, d2 = prog.derivative_matrices(x)
        phi2 = np.sum(Om * d2, axis=1)
        free = (x > lo) & (x < hi) & (phi2 > 0)
        G = np.zeros((int(free.sum()), prog.m))
        for l, r in enumerate(prog.rows):
            col = np.zeros(int(free.sum()))
            if r.W is not None:
                col += np.sum(r.W[free] * d1[free], axis=1)
            if r.a is not None:
                col += r.a[free]
            G[:, l] = col
        return -(G.T / phi2[free]) @ G


def _initial_multipliers(prog: SeparableProgram):
    """A start with the right scale: equality rows from the objective's slope at a proportional point,
    inequality rows at 0 (raised by the 1-D searches of :func:`_solve_dual` when violated)."""
    lam = np.zeros(prog.m)
    lo, hi = prog.lower.astype(float), prog.upper.astype(float)
    x = np.sqrt(lo * hi)
    if prog.objective.W is not None:
        d1, _ = prog.derivative_matrices(x)
        fprime = np.sum(prog.objective.W * d1, axis=1)
        for l, r in enumerate(prog.rows):
            if r.kind == "total":
                lam[l] = -float(np.median(fprime))
    return lam


def _row_scale_guess(prog, l):
    """Multiplier scale at which row l's slope balances the objective's (dimensional estimate)."""
    lo, hi = prog.lower.astype(float), prog.upper.astype(float)
    x = np.sqrt(lo * hi)
    d1, _ = prog.derivative_matrices(x)
    r = prog.rows[l]
    g_row = (np.sum(r.W * d1, axis=1) if r.W is not None else 0.0) + (r.a if r.a is not None else 0.0)
    o = prog.objective
    g_obj = (np.sum(o.W * d1, axis=1) if o.W is not None else 0.0) + (o.a if o.a is not None else 0.0)
    g_row, g_obj = np.broadcast_to(g_row, (prog.k,)), np.broadcast_to(g_obj, (prog.k,))
    ok = (np.abs(g_row) > 0) & np.isfinite(g_row) & np.isfinite(g_obj)
    if not np.any(ok):
        return 1.0
    return float(np.median(np.abs(g_obj[ok]) / np.abs(g_row[ok]))) or 1.0


_DUAL_PATIENCE = 5          # dual iterations in a row without progress before the dual hands over
_DUAL_TIME_SHARE = 0.25     # share of the time left that the continuous dual may use


def _solve_dual(prog: SeparableProgram, deadline: _Deadline, tol: float = 1e-11, max_iter: int = 300,
                patience: int = _DUAL_PATIENCE, time_share: float = _DUAL_TIME_SHARE):
    """Maximise the concave dual. Returns dict(lam, q, x, converged, infeasible, iterations, stalled).

    Any multipliers give valid bounds downstream (the integer Lagrangian is evaluated at whatever λ this
    returns), so the dual need not converge: it stops after ``patience`` iterations in a row that raise q by
    no more than rounding (dependent rows or kinks: the Newton steps then blow λ up and q stalls; measured
    12 851 dual evaluations, all of a 30 s limit on larger models) or once it has used ``time_share`` of the
    time left, and the integer phase (LP multipliers, cores, HiGHS) takes over.
    """
    dual = _Dual(prog)
    own = deadline.share(max(1.0 / time_share, 1.0)) if deadline.end is not None else deadline
    stalled = False
    idle = 0
    lam = _initial_multipliers(prog)
    q, g, x, Om, ell = dual.at(lam)
    ineq = dual.ineq
    best = (q, lam.copy(), x.copy())
    infeasible = False
    converged = False
    it = 0
    # 1-D searches first: every violated inequality row at λ = 0 gets a multiplier of the right scale
    for l in np.flatnonzero(ineq & (g > 0)):
        lam, q, g, x, Om, ell = _line_raise(dual, lam, l, _row_scale_guess(prog, l), q, g, x, Om, ell)
        if q > best[0]:
            best = (q, lam.copy(), x.copy())
    for it in range(1, max_iter + 1):
        if q > dual.f_max + 1e-9 * abs(dual.f_max) + 1e-300:
            # weak duality proves infeasibility only with the safe integer bound (exact minimisers, rows at
            # rhs + allowance, rounding subtracted); otherwise leave the claim to the integer phase
            infeasible = _integer_bound(prog, lam)[0] > dual.f_max + 1e-9 * abs(dual.f_max) + 1e-300
            break
        scale = prog.row_scale(x)
        viol = g / scale
        ok = np.where(ineq, np.where(lam > 0, np.abs(viol) <= tol, viol <= tol), np.abs(viol) <= tol)
        if np.all(ok):
            converged = True
            break
        if own.passed():
            break
        if idle >= patience:
            stalled = True
            break
        q_before = q
        H = dual.hessian(lam, x, Om, ell)
        act = ~(ineq & (lam <= 0) & (g < 0))
        d = np.zeros(prog.m)
        A = -H[np.ix_(act, act)]
        reg = 1e-12 * max(float(np.max(np.abs(np.diag(A)))) if A.size else 0.0, 1e-300)
        try:
            d[act] = np.linalg.solve(A + reg * np.eye(A.shape[0]), g[act])
        except np.linalg.LinAlgError:
            d[act] = g[act]
        if not np.all(np.isfinite(d)):
            d = np.where(act, g, 0.0)
        step, accepted = 1.0, False
        for _ in range(60):
            lam_new = lam + step * d
            lam_new = np.where(ineq, np.maximum(lam_new, 0.0), lam_new)
            q_new, g_new, x_new, Om_n, ell_n = dual.at(lam_new)
            if q_new >= q - 1e-15 * abs(q):
                accepted = True
                break
            step *= 0.5
        if not accepted:
            # Newton direction failed (kink or singular Hessian): raise the worst row alone
            l = int(np.argmax(np.where(act, np.abs(g) / scale, -np.inf)))
            dual.x = x
            lam, q, g, x, Om, ell = _line_raise(dual, lam, l, max(abs(lam[l]), _row_scale_guess(prog, l)),
                                                q, g, x, Om, ell)
        else:
            lam, q, g, x, Om, ell = lam_new, q_new, g_new, x_new, Om_n, ell_n
        # progress: q rises by more than rounding of its terms (q is a sum of k inner values) with a Newton step
        # that was not cut to nothing (a step below 2^-20 means the direction is wrong: a singular Hessian
        # when fewer strata are free than rows are active, and the ascent crawls)
        crawl = not accepted or step < 2.0 ** -20
        idle = idle + 1 if crawl or not q > q_before + 1e-12 * max(abs(q), abs(dual.f_max), 1e-300) else 0
        if q > best[0]:
            best = (q, lam.copy(), x.copy())
    q_b, lam_b, x_b = best
    if q > q_b:
        q_b, lam_b, x_b = q, lam, x
    return dict(lam=lam_b if not converged else lam, q=q if converged else q_b, x=x if converged else x_b,
                converged=converged, infeasible=infeasible, iterations=it, f_max=dual.f_max, stalled=stalled)


def _line_raise(dual: _Dual, lam, l, scale, q, g, x, Om, ell, max_eval: int = 200, rtol: float = 1e-3):
    """Maximise the dual along λ_l alone (its derivative g_l decreases in λ_l): bracket, then close in by
    regula falsi (Illinois) to a relative width ``rtol`` (a start for the Newton iterations, which converge
    from there)."""
    ineq = dual.ineq[l]
    sign = 1.0 if g[l] > 0 else -1.0
    lo_v = lam[l]
    cur = (q, g, x, Om, ell)
    step = scale
    hi_v = None
    g_lo, g_hi, side = sign * g[l], 0.0, 0      # signed slopes at the bracket's ends (> 0 at lo_v, ≤ 0 at hi_v)
    n = 0
    while n < max_eval:
        trial = lam.copy()
        if hi_v is None:
            trial[l] = lo_v + sign * step
        else:
            t = g_lo / (g_lo - g_hi) if np.isfinite(g_lo - g_hi) and g_lo - g_hi > 0 else 0.5
            trial[l] = lo_v + min(max(t, 1e-3), 1 - 1e-3) * (hi_v - lo_v)
        if ineq:
            trial[l] = max(trial[l], 0.0)
        res = dual.at(trial)
        n += 1
        slope = sign * res[1][l]
        if hi_v is None:
            if slope > 0 and np.isfinite(res[0]):
                lo_v, lam, cur, g_lo = trial[l], trial, res, slope
                step *= 4.0
                if res[0] > dual.f_max + 1e-9 * abs(dual.f_max):
                    break
            else:
                hi_v, g_hi = trial[l], slope
        else:
            if slope > 0:
                lo_v, lam, cur, g_lo = trial[l], trial, res, slope
                if side > 0:
                    g_hi *= 0.5     # Illinois: the end kept twice gets half its weight
                side = 1
            else:
                hi_v, g_hi = trial[l], slope
                if res[0] >= cur[0]:
                    lam, cur = trial, res
                if side < 0:
                    g_lo *= 0.5
                side = -1
            if abs(hi_v - lo_v) <= rtol * max(abs(hi_v), abs(lo_v)):
                break
        if ineq and trial[l] == 0.0 and sign < 0:
            break
    return (lam, *cur)


# ---------------------------------------------------------------------------------- integer phase
def _integer_bound(prog, lam):
    """(LB, n_λ, Ω, ℓ, margin): the integer Lagrangian dual value at λ and its minimiser, LB made safe in floating
    point (docs/constrained.md, "Feasibility and safe bounds"):

    * the bisection reads signs of increments, which are rounding noise where φ_i is flat: the least of
      φ_i(n_λ − 1), φ_i(n_λ), φ_i(n_λ + 1) is taken;
    * every design the feasibility test accepts has row_l ≤ rhs_l + allowance_l (|row_l − rhs_l| ≤
      allowance_l for equalities), so the bound subtracts Σ_l |λ_l|·allowance_l;
    * the sum Σ_i φ_i − λ·rhs − const cancels (φ_i carry λ·W terms far larger than LB when λ is large): it is
      summed exactly (fsum) and lowered by a rigorous estimate of the evaluation and rounding error,
      (EVAL_RTOL + (m + J + 4)·u)·(Σ_ij |Ω_ij| t_ij + Σ_i |ℓ_i n_i| + Σ_l |λ_l rhs_l| + |const|)."""
    Om, ell = prog.combine(lam)
    n_lam = _inner_integer(prog, Om, ell)
    lo, hi = prog.lower, prog.upper
    best = n_lam
    phi = _phi(prog, Om, ell, n_lam.astype(float))
    for d in (-1, 1):
        c = np.clip(n_lam + d, lo, hi)
        pc = _phi(prog, Om, ell, c.astype(float))
        better = pc < phi
        best = np.where(better, c, best)
        phi = np.where(better, pc, phi)
    n_lam = best
    x = n_lam.astype(float)
    T = prog.unit_matrix(x)
    mag = float(np.sum(np.abs(Om) * T) + np.sum(np.abs(ell * x)))
    lam = np.asarray(lam, dtype=float)
    rhs = prog.rhs()
    cost = -lam * rhs
    allow = -np.abs(lam) * prog.allowance() if prog.m else np.zeros(0)
    mag += float(np.sum(np.abs(cost))) + abs(prog.const)
    parts = np.concatenate([phi, cost, [-prog.const]])
    lb = safe_lower(np.concatenate([parts, allow]), mag, extra_ops=prog.m + prog.model.J + 4)
    # the rounding part of what was subtracted: also the most a computed excess f − LB can be off by
    margin = max(math.fsum(parts.tolist()) - lb + float(np.sum(allow)), 0.0)
    return lb, n_lam, Om, ell, margin


def _reduced_ranges(prog, Om, ell, n_lam, budget):
    """Per stratum, the integers v with φ_i(v) − φ_i(n_λ,i) ≤ budget (an interval: φ_i is convex)."""
    lo, hi = prog.lower, prog.upper
    base = _phi(prog, Om, ell, n_lam.astype(float))
    k = prog.k
    allr = np.arange(k)

    def search(direction):
        # largest step s in [0, room] with r(n_λ + direction·s) ≤ budget; r is non-decreasing in s
        room = (hi - n_lam) if direction > 0 else (n_lam - lo)
        a = np.zeros(k, dtype=np.int64)       # feasible step
        b = room.astype(np.int64)             # upper end of the search
        act = allr[a < b]
        for _ in range(70):
            if act.size == 0:
                break
            mid = (a[act] + b[act] + 1) // 2
            v = n_lam[act] + direction * mid
            r = _phi(prog, Om, ell, v.astype(float), act) - base[act]
            ok = r <= budget
            a[act] = np.where(ok, mid, a[act])
            b[act] = np.where(ok, b[act], mid - 1)
            act = act[a[act] < b[act]]
        return a

    return n_lam - search(-1), n_lam + search(+1)


def _segmented_first_min(group: np.ndarray, y: np.ndarray) -> np.ndarray:
    """For items sorted by group (then by their objective), True where y is below every earlier y of the group."""
    S = y.size
    rank = np.empty(S, dtype=np.int64)
    rank[np.argsort(y, kind="stable")] = np.arange(S)
    # ranks shifted down by S per group: the running minimum then restarts at each group's first item
    w = rank - group.astype(np.int64) * S
    prev = np.concatenate([[np.iinfo(np.int64).max], np.minimum.accumulate(w)[:-1]])
    return w < prev


def _enumerate_core(prog, Om, ell, lam, n_lam, r_lo, r_hi, budget, max_states, deadline=None):
    """Every design of the core whose objective is within ``budget`` of the Lagrangian bound, by dynamic
    programming over its free strata. Returns None when more than ``max_states`` partial designs survive
    (or 4·max_states have been kept over all strata, or the deadline passes), else (best verified design or
    None, smallest objective − bound among the surviving feasible designs or inf, largest number of partial
    designs kept).

    f(n) = LB + Σ_i r_i(n_i) + Σ_l λ_l s_l(n) with r_i ≥ 0 the reduced costs and s_l ≥ 0 the slacks of the
    inequality rows, so a partial design is dropped once its reduced costs plus the slack its remaining strata
    cannot use exceed the budget, or once no completion can meet a row (rows checked with a tolerance looser
    than the final test). With at most one inequality row, a partial design is also dropped when another with
    the same equality-row values has no larger objective and no larger row value (it is dominated). Nothing
    that could be feasible within the budget is lost, so an empty result proves f > LB + budget everywhere.
    """
    free = np.flatnonzero(r_hi > r_lo)
    m = prog.m
    rhs, ineq = prog.rhs(), prog.inequality()
    lam_in = np.where(ineq, lam, 0.0)
    x0 = n_lam.astype(float)
    T0 = prog.unit_matrix(x0)
    per0 = np.stack([prog.row_terms(r, T0, x0) for r in prog.rows], axis=1) if m else np.zeros((prog.k, 0))
    rows0, abs0 = per0.sum(axis=0), np.abs(per0).sum(axis=0)
    phi0 = _phi(prog, Om, ell, x0)
    # per free stratum: its values, reduced costs and row changes
    sizes = (r_hi[free] - r_lo[free] + 1).astype(np.int64)
    owner = np.repeat(np.arange(free.size), sizes)
    ii = free[owner]
    v = r_lo[ii] + np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    vf = v.astype(float)
    T = prog.unit_matrix(vf, ii)
    r_all = np.maximum(_phi(prog, Om, ell, vf, ii) - phi0[ii], 0.0)
    new = np.stack([prog.row_terms(r, T, vf, ii) for r in prog.rows], axis=1) if m else np.zeros((v.size, 0))
    d_all = new - per0[ii]
    dabs_all = np.abs(new) - np.abs(per0[ii])      # change of Σ|terms|, the rows' scale in _feasible
    # Σ|terms| equals the row itself where no term can be negative; only the other rows track it
    signed = np.flatnonzero((per0 < 0).any(axis=0) | (new < 0).any(axis=0))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if free.size > 1:
        # strata whose cheapest alternative costs most first: the many cheap moves come last, where the row
        # reachability and slack tests prune (measured: 4-10x fewer partial designs than in stratum order)
        cheapest = np.minimum.reduceat(np.where(r_all > 0, r_all, np.inf), starts[:-1])
        order = np.argsort(-cheapest, kind="stable")
        perm = np.concatenate([np.arange(starts[t], starts[t + 1]) for t in order])
        free, sizes = free[order], sizes[order]
        v, r_all, d_all, dabs_all = v[perm], r_all[perm], d_all[perm], dabs_all[perm]
        starts = np.concatenate([[0], np.cumsum(sizes)])
    # pruning keeps anything within twice the final test's tolerance (the final test is _feasible's own)
    abs_hi = abs0 + sum(np.maximum(dabs_all[starts[t]:starts[t + 1]].max(axis=0), 0.0) for t in range(free.size))
    tol = 2 * _FEAS_TOL * np.maximum(np.abs(rhs), abs_hi)
    dmin = np.array([d_all[starts[t]:starts[t + 1]].min(axis=0) for t in range(free.size)]).reshape(free.size, m)
    dmax = np.array([d_all[starts[t]:starts[t + 1]].max(axis=0) for t in range(free.size)]).reshape(free.size, m)
    suf_min = np.vstack([np.cumsum(dmin[::-1], axis=0)[::-1], np.zeros((1, m))])
    suf_max = np.vstack([np.cumsum(dmax[::-1], axis=0)[::-1], np.zeros((1, m))])
    eq_cols = np.flatnonzero(~ineq)
    dominance = int(np.sum(ineq)) <= 1
    # a design feasible within the tolerance may have slacks down to −tol: its f − LB can fall below
    # Σ r + λ·slack by λ·tol, so the budget test allows that much more
    cut = budget + float(lam_in @ tol)
    S_r, S_row, S_abs = np.zeros(1), rows0[None, :].copy(), abs0[None, signed].copy()
    trail, peak, work = [], 1, 0
    for t in range(free.size):
        s0, s1 = starts[t], starts[t + 1]
        nv = s1 - s0
        parts_idx, parts_R, parts_ROW = [], [], []
        for c0 in range(0, S_r.size, _CHUNK):
            # row by row on (states × values) arrays, a chunk of states at a time (bounded memory)
            c1 = min(c0 + _CHUNK, S_r.size)
            R = S_r[c0:c1, None] + r_all[None, s0:s1]
            ok = R <= cut
            pen = np.zeros(R.shape)
            cols = []
            for l in range(m):
                row = S_row[c0:c1, l, None] + d_all[None, s0:s1, l]
                ok &= row <= rhs[l] + tol[l] - suf_min[t + 1, l]
                if not ineq[l]:
                    ok &= row >= rhs[l] - tol[l] - suf_max[t + 1, l]
                elif lam_in[l] > 0:       # slack the remaining strata cannot use is paid at λ_l
                    pen += lam_in[l] * np.maximum(rhs[l] - suf_max[t + 1, l] - row, 0.0)
                cols.append(row)
            ok &= R + pen <= cut
            idx = np.flatnonzero(ok)
            parts_idx.append(idx + c0 * nv)
            parts_R.append(R.ravel()[idx])
            parts_ROW.append(np.stack([c.ravel()[idx] for c in cols], axis=1) if m else np.zeros((idx.size, 0)))
            if sum(p.size for p in parts_idx) > max_states * (4 if dominance else 1):
                return None
        idx_all = np.concatenate(parts_idx) if parts_idx else np.zeros(0, dtype=np.int64)
        R = np.concatenate(parts_R) if parts_R else np.zeros(0)
        ROW = np.concatenate(parts_ROW) if parts_ROW else np.zeros((0, m))
        sel = np.arange(idx_all.size)
        if dominance and idx_all.size > 1:
            F = R - (ROW - rows0) @ lam           # objective change so far
            if eq_cols.size:
                keys = ROW[:, eq_cols]
                order = np.lexsort((F, *keys.T[::-1]))
                ks = keys[order]
                group = np.concatenate([[0], np.cumsum(np.any(ks[1:] != ks[:-1], axis=1))])
            else:
                order = np.argsort(F, kind="stable")
                group = np.zeros(idx_all.size, dtype=np.int64)
            if np.any(ineq):
                keep = _segmented_first_min(group, ROW[order, int(np.flatnonzero(ineq)[0])])
            else:
                keep = np.concatenate([[True], group[1:] != group[:-1]])
            sel = np.sort(order[keep])
        idx = idx_all[sel]
        work += idx.size
        if idx.size > max_states or work > 4 * max_states or (deadline is not None and deadline.passed()):
            return None
        peak = max(peak, idx.size)
        trail.append(idx.astype(np.int32) if idx.size and idx[-1] < 2 ** 31 else idx)
        p_, c_ = idx // nv, idx % nv
        S_r, S_row = R[sel], ROW[sel]
        if signed.size:
            S_abs = S_abs[p_] + dabs_all[s0 + c_][:, signed]
        if idx.size == 0:
            return None, math.inf, peak
    # the final test is _feasible's: relative violation ≤ _FEAS_TOL of max(|rhs|, Σ|terms|)
    scale_rows = S_row.copy()
    scale_rows[:, signed] = S_abs
    lim = _FEAS_TOL * np.maximum(np.abs(rhs), np.maximum(scale_rows, 1e-300))
    feas = np.all(np.where(ineq, S_row - rhs <= lim, np.abs(S_row - rhs) <= lim), axis=1)
    excess = np.where(feas, S_r + (rhs - S_row) @ lam_in, math.inf)     # f − LB of each final design
    best_excess = float(np.min(excess)) if excess.size else math.inf
    for p in np.argsort(excess, kind="stable")[:20]:
        if not math.isfinite(excess[p]):
            break
        n = n_lam.copy()
        pos = int(p)
        for t in range(free.size - 1, -1, -1):      # expanded index = parent position × values + choice
            e = int(trail[t][pos])
            pos = e // int(sizes[t])
            n[free[t]] = v[starts[t] + e % int(sizes[t])]
        if _feasible(prog, n):
            return n, best_excess, peak
    return None, best_excess, peak


# ---------------------------------------------------------------------------------- groups linked by the total
def linked_groups(prog: SeparableProgram):
    """``(link, groups)`` when the rows are one linear equality with integer coefficients (the fixed total,
    row ``link``) plus at least two inequality rows that, without it, fall into at least two blocks on
    disjoint strata (e.g. one precision target per domain); ``groups`` = [(positions, row indices)], the
    strata in no other row forming one group without rows. Else None (the plain core enumeration runs)."""
    eq = [l for l, r in enumerate(prog.rows) if r.sense == "=="]
    if len(eq) != 1:
        return None
    link = eq[0]
    r = prog.rows[link]
    if r.W is not None or r.a is None or not (np.all(np.isfinite(r.a)) and np.all(r.a == np.round(r.a))
                                              and np.all(np.abs(r.a) < 2 ** 31) and r.rhs == round(r.rhs)):
        return None
    others = [l for l in range(prog.m) if l != link]
    if len(others) < 2:
        return None
    blocks = prog.subprogram(np.arange(prog.k), [prog.rows[l] for l in others]).components()
    if len(blocks) < 2:
        return None
    groups = [(pos, [others[j] for j in rows]) for pos, rows in blocks]
    covered = np.zeros(prog.k, dtype=bool)
    for pos, _ in groups:
        covered[pos] = True
    if not covered.all():
        groups.append((np.flatnonzero(~covered), []))
    return link, groups


def _enumerate_group(prog, Om, ell, lam, n_lam, r_lo, r_hi, cut, pos, rows, link, max_states, deadline):
    """Every completion of one group (strata ``pos`` with rows ``rows``) whose excess over the Lagrangian
    bound is within ``cut``, by dynamic programming over its free strata with dominance: among partial
    designs with the same linking-row value, one with no larger objective and no larger row value (≤ 1
    inequality row) wins. Returns None at the state limit or the deadline, else (tot, excess, trace, peak) with
    per linking-row value ``tot`` the least excess of a design meeting the group's rows, and ``trace(t)``
    the group's values for the entry t."""
    a = prog.rows[link].a
    rhs = prog.rhs()[rows]
    lam_g = lam[rows]
    ineq = prog.inequality()[rows]
    lam_in = np.where(ineq, lam_g, 0.0)
    nr = len(rows)
    x0 = n_lam[pos].astype(float)
    T0 = prog.unit_matrix(x0, pos)
    per0 = (np.stack([prog.row_terms(prog.rows[l], T0, x0, pos) for l in rows], axis=1) if nr
            else np.zeros((pos.size, 0)))
    rows0, abs0 = per0.sum(axis=0), np.abs(per0).sum(axis=0)
    tot0 = int(np.sum(a[pos] * n_lam[pos]))
    phi0 = _phi(prog, Om, ell, x0, pos)
    fl = r_hi[pos] > r_lo[pos]
    free, fpos = pos[fl], np.flatnonzero(fl)
    sizes = (r_hi[free] - r_lo[free] + 1).astype(np.int64)
    owner = np.repeat(np.arange(free.size), sizes)
    ii = free[owner]
    v = r_lo[ii] + np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    vf = v.astype(float)
    T = prog.unit_matrix(vf, ii)
    r_all = np.maximum(_phi(prog, Om, ell, vf, ii) - phi0[fpos[owner]], 0.0)
    new = (np.stack([prog.row_terms(prog.rows[l], T, vf, ii) for l in rows], axis=1) if nr
           else np.zeros((v.size, 0)))
    d_all = new - per0[fpos[owner]]
    dabs_all = np.abs(new) - np.abs(per0[fpos[owner]])
    dt_all = (a[ii] * (v - n_lam[ii])).astype(np.int64)
    signed = np.flatnonzero((per0 < 0).any(axis=0) | (new < 0).any(axis=0))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if free.size > 1:
        # costliest cheapest alternative first, as in _enumerate_core
        cheapest = np.minimum.reduceat(np.where(r_all > 0, r_all, np.inf), starts[:-1])
        order = np.argsort(-cheapest, kind="stable")
        perm = np.concatenate([np.arange(starts[t], starts[t + 1]) for t in order])
        free, sizes = free[order], sizes[order]
        v, r_all, d_all, dabs_all, dt_all = v[perm], r_all[perm], d_all[perm], dabs_all[perm], dt_all[perm]
        starts = np.concatenate([[0], np.cumsum(sizes)])
    nf = free.size
    abs_hi = abs0 + sum(np.maximum(dabs_all[starts[t]:starts[t + 1]].max(axis=0), 0.0) for t in range(nf))
    tol = 2 * _FEAS_TOL * np.maximum(np.abs(rhs), abs_hi)
    dmin = np.array([d_all[starts[t]:starts[t + 1]].min(axis=0) for t in range(nf)]).reshape(nf, nr)
    dmax = np.array([d_all[starts[t]:starts[t + 1]].max(axis=0) for t in range(nf)]).reshape(nf, nr)
    suf_min = np.vstack([np.cumsum(dmin[::-1], axis=0)[::-1], np.zeros((1, nr))])
    suf_max = np.vstack([np.cumsum(dmax[::-1], axis=0)[::-1], np.zeros((1, nr))])
    dominance = int(np.sum(ineq)) <= 1 and not np.any(~ineq)
    S_t, S_r, S_row = np.zeros(1, dtype=np.int64), np.zeros(1), rows0[None, :].copy()
    S_abs = abs0[None, signed].copy()
    trail, peak = [], 1
    for t in range(nf):
        s0, s1 = starts[t], starts[t + 1]
        nv = s1 - s0
        parts_idx, parts_R, parts_ROW = [], [], []
        for c0 in range(0, S_r.size, _CHUNK):
            c1 = min(c0 + _CHUNK, S_r.size)
            R = S_r[c0:c1, None] + r_all[None, s0:s1]
            ok = R <= cut
            pen = np.zeros(R.shape)
            cols = []
            for l in range(nr):
                row = S_row[c0:c1, l, None] + d_all[None, s0:s1, l]
                ok &= row <= rhs[l] + tol[l] - suf_min[t + 1, l]
                if not ineq[l]:
                    ok &= row >= rhs[l] - tol[l] - suf_max[t + 1, l]
                elif lam_in[l] > 0:       # slack the remaining strata cannot use is paid at λ_l
                    pen += lam_in[l] * np.maximum(rhs[l] - suf_max[t + 1, l] - row, 0.0)
                cols.append(row)
            ok &= R + pen <= cut
            idx = np.flatnonzero(ok)
            parts_idx.append(idx + c0 * nv)
            parts_R.append(R.ravel()[idx])
            parts_ROW.append(np.stack([c.ravel()[idx] for c in cols], axis=1) if nr else np.zeros((idx.size, 0)))
            if sum(p.size for p in parts_idx) > max_states * (4 if dominance else 1):
                return None
        idx_all = np.concatenate(parts_idx)
        R = np.concatenate(parts_R)
        ROW = np.concatenate(parts_ROW)
        TOT = S_t[idx_all // nv] + dt_all[s0 + idx_all % nv]
        sel = np.arange(idx_all.size)
        if dominance and idx_all.size > 1:
            F = R - (ROW - rows0) @ lam_g           # objective change so far, up to the linking row's
            order = np.lexsort((F, TOT))
            group = np.concatenate([[0], np.cumsum(TOT[order][1:] != TOT[order][:-1])])
            if nr:
                keep = _segmented_first_min(group, ROW[order, 0])
            else:
                keep = np.concatenate([[True], group[1:] != group[:-1]])
            sel = np.sort(order[keep])
        idx = idx_all[sel]
        if idx.size > max_states or (deadline is not None and deadline.passed()):
            return None
        peak = max(peak, idx.size)
        trail.append(idx)
        p_, c_ = idx // nv, idx % nv
        S_t, S_r, S_row = TOT[sel], R[sel], ROW[sel]
        if signed.size:
            S_abs = S_abs[p_] + dabs_all[s0 + c_][:, signed]
        if idx.size == 0:
            break
    # the final test is _feasible's (relative violation ≤ _FEAS_TOL of max(|rhs|, Σ|terms|)), per row
    scale_rows = S_row.copy()
    scale_rows[:, signed] = S_abs
    lim = _FEAS_TOL * np.maximum(np.abs(rhs), np.maximum(scale_rows, 1e-300))
    feas = np.all(np.where(ineq, S_row - rhs <= lim, np.abs(S_row - rhs) <= lim), axis=1)
    excess = S_r + (rhs - S_row) @ lam_in
    keep = np.flatnonzero(feas)
    if keep.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), None, peak
    order = np.lexsort((excess[keep], S_t[keep]))
    first = np.concatenate([[True], S_t[keep][order][1:] != S_t[keep][order][:-1]])
    best = keep[order[first]]

    def trace(p):
        out = n_lam[pos].copy()
        for t in range(nf - 1, -1, -1):      # expanded index = parent position × values + choice
            e = int(trail[t][p])
            p = e // int(sizes[t])
            out[np.searchsorted(pos, free[t])] = v[starts[t] + e % int(sizes[t])]
        return out

    return tot0 + S_t[best], excess[best], (lambda j: trace(int(best[j]))), peak


def _enumerate_linked(prog, Om, ell, lam, n_lam, r_lo, r_hi, budget, max_states, deadline, linked):
    """:func:`_enumerate_core` for groups of strata linked only by the total (:func:`linked_groups`): since
    f(n) − LB = Σ_groups (Σ r_i + λ·slack), each ≥ 0, the groups are enumerated one by one (each with the
    dominance a single row allows, which the joint enumeration loses with several inequality rows) and
    joined by a min-plus convolution over the total. Same returns as :func:`_enumerate_core`."""
    link, groups = linked
    rhs_link = int(round(prog.rows[link].rhs))
    ineq = prog.inequality()
    lam_in = np.where(ineq, lam, 0.0)
    tol_all = 2 * _FEAS_TOL * prog.row_scale(n_lam.astype(float))
    cut = budget + float(lam_in @ tol_all)
    tables, peak = [], 1
    for pos, rows in groups:
        res = _enumerate_group(prog, Om, ell, lam, n_lam, r_lo, r_hi, cut, pos, rows, link, max_states, deadline)
        if res is None:
            return None
        tot, exc, trace, pk = res
        peak = max(peak, pk)
        if tot.size == 0:
            return None, math.inf, peak
        tables.append((tot, exc, trace))
    # min-plus convolution over the groups' totals (dense on each group's range of totals)
    lo_t = 0
    acc = np.zeros(1)
    choices = []
    for tot, exc, _ in tables:
        t_min, t_max = int(tot.min()), int(tot.max())
        dense = np.full(t_max - t_min + 1, math.inf)
        dense[tot - t_min] = exc
        where = np.full(dense.size, -1)
        where[tot - t_min] = np.arange(tot.size)
        out = np.full(acc.size + dense.size - 1, math.inf)
        arg = np.full(out.size, -1, dtype=np.int64)
        for s in np.flatnonzero(np.isfinite(dense)):
            cand = acc + dense[s]
            seg = out[s:s + acc.size]
            better = cand < seg
            seg[better] = cand[better]
            arg[s:s + acc.size][better] = s
        choices.append((lo_t, t_min, arg, where))
        acc, lo_t = out, lo_t + t_min
    j = rhs_link - lo_t
    if not (0 <= j < acc.size) or not math.isfinite(acc[j]):
        return None, math.inf, peak
    best_excess = float(acc[j])
    n = n_lam.copy()
    for (prev_lo, t_min, arg, where), (pos, _), (_, _, trace) in zip(choices[::-1], groups[::-1], tables[::-1]):
        s = int(arg[j])
        n[pos] = trace(int(where[s]))
        j -= s
    return (n if _feasible(prog, n) else None), best_excess, peak


def _highs_model(milp, integer: bool = True, verbose: bool = False):
    """A HiGHS instance holding a SecantMILP (its LP relaxation when ``integer`` is False)."""
    import highspy

    h = new_highs(verbose)
    # rows hold to 1e-9 (dpopt's own feasibility test is 1e-9 relative)
    h.setOptionValue("primal_feasibility_tolerance", 1e-9)
    h.setOptionValue("mip_feasibility_tolerance", 1e-9)
    ncol = milp.c.size
    R, C, Vv, rlo, rhi = milp.to_coo()
    order = np.lexsort((R, C))
    R, C, Vv = R[order], C[order], Vv[order]
    start = np.searchsorted(C, np.arange(ncol + 1))
    inf = h.getInfinity()
    lp = highspy.HighsLp()
    lp.num_col_ = ncol
    lp.num_row_ = rlo.size
    lp.col_cost_ = milp.c
    lp.col_lower_ = np.where(np.isfinite(milp.col_lo), milp.col_lo, -inf)
    lp.col_upper_ = np.where(np.isfinite(milp.col_hi), milp.col_hi, inf)
    lp.row_lower_ = np.where(np.isfinite(rlo), rlo, -inf)
    lp.row_upper_ = np.where(np.isfinite(rhi), rhi, inf)
    lp.offset_ = milp.offset
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = R
    lp.a_matrix_.value_ = Vv
    if integer:
        lp.integrality_ = ([highspy.HighsVarType.kInteger] * milp.k
                           + [highspy.HighsVarType.kContinuous] * (ncol - milp.k))
    h.passModel(lp)
    return h


def _highs_solve(milp, rel_gap, abs_gap, time_limit, verbose=False, start=None):
    """Solve a SecantMILP with HiGHS, from the integer point ``start`` when given (HiGHS completes the
    epigraph columns). Returns (status, n or None, objective, dual bound, HiGHS's status text)."""
    import highspy

    h = _highs_model(milp, True, verbose)
    h.setOptionValue("mip_rel_gap", float(rel_gap))
    h.setOptionValue("mip_abs_gap", float(abs_gap))
    if time_limit is not None:
        h.setOptionValue("time_limit", max(float(time_limit), 1e-3))
    if start is not None:
        h.setSolution(milp.k, np.arange(milp.k, dtype=np.int32), np.asarray(start, dtype=float))
    h.run()
    st = h.getModelStatus()
    info = h.getInfo()
    name = status_of("highs", st).value     # the one HiGHS map (backends/_status.py)
    n = None
    if info.primal_solution_status == 2 or name == "optimal":   # 2 = feasible
        col = np.asarray(h.getSolution().col_value[:milp.k])
        n = np.round(col).astype(np.int64)
    bound = info.mip_dual_bound * milp.obj_scale if name in ("optimal", "time_limit") else -math.inf
    if not math.isfinite(bound):
        bound = -math.inf
    return name, n, info.objective_function_value * milp.obj_scale, bound, h.modelStatusToString(st)


def _lp_multipliers(prog, lo, hi, anchor, scale, time_limit):
    """Row multipliers of the secant LP on ``lo..hi``: the LP is the convex hull of the integer problem there,
    so its duals maximise the integer Lagrangian dual whenever the range holds its minimisers (any λ gives a
    valid bound, so a smaller range only weakens it). None when the LP fails."""
    import highspy

    milp = secant_milp(prog, lo, hi, anchor=anchor, obj_scale=scale * 1e-6)
    h = _highs_model(milp, False)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(float(time_limit), 1e-3))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal or not prog.m:
        return None
    y = np.asarray(h.getSolution().row_dual)[milp.con_rows]
    lam = -y * milp.obj_scale / milp.con_units
    lam = np.where(prog.inequality(), np.maximum(lam, 0.0), lam)
    return lam if np.all(np.isfinite(lam)) else None


def _feasible(prog, n) -> bool:
    """The one feasibility test (SeparableProgram.feasible, FEASIBILITY_TOL; docs/constrained.md)."""
    return prog.feasible(np.asarray(n))


# ---------------------------------------------------------------------------------- entry points
def _check_options(rel_gap, time_limit, verbose):
    rel_gap = V.option(V.real, "rel_gap", rel_gap)
    if not 0 <= rel_gap < 1:
        raise V.InvalidOption(f"rel_gap must be in [0, 1), got {rel_gap:g}")
    verbose = V.option(V.flag, "verbose", verbose)
    time_limit = V.time_limit(time_limit)
    # HiGHS runs inside: a solve always ends, as with the other routes' external solvers
    return rel_gap, DEFAULT_TIME_LIMIT if time_limit is None else time_limit, verbose


_CONVEXITY_POINTS = 30_000_000     # increments checked for terms not proven convex (~1 s per 10^7, measured)


def _convexity(model):
    design = getattr(model, "design", model)
    return design.convexity_verified(max_points=_CONVEXITY_POINTS)


def _unreachable_rows(prog, integer: bool = True) -> str | None:
    """A row whose own minimum over the bounds exceeds its right-hand side plus the feasibility test's allowance
    makes the model infeasible; name it (e.g. a precision target below the floor the DP noise sets: more
    sample can mean more noise). ``integer``: the minimum over integer designs, exact per stratum (discretely
    convex terms) and lowered by its rounding error (safe_lower); else the continuous relaxation's minimum."""
    allow = prog.allowance() if prog.m else np.zeros(0)
    for l, r in enumerate(prog.rows):
        if r.sense != "<=":
            continue
        Om = np.zeros((prog.k, prog.model.J)) if r.W is None else r.W
        ell = np.zeros(prog.k) if r.a is None else r.a.astype(float)
        if integer:
            m = _inner_integer(prog, Om, ell)
            vals = _phi(prog, Om, ell, m.astype(float))
            for d in (-1, 1):
                vals = np.minimum(vals, _phi(prog, Om, ell, np.clip(m + d, prog.lower, prog.upper).astype(float)))
            low = safe_lower(vals, extra_ops=prog.model.J + 2)
            unreachable = low > r.rhs + allow[l]
        else:
            x = _inner_continuous(prog, Om, ell)
            low = float(np.sum(_phi(prog, Om, ell, x)))
            unreachable = low - r.rhs - allow[l] > 1e-9 * max(abs(r.rhs), abs(low))
        if unreachable:
            target = r.target
            if getattr(target, "kind", None) in ("se", "cv", "variance"):
                var = max(low - target.fpc_const, 0.0)
                floor = math.sqrt(var)
                what = {"se": f"SE {floor:.6g}", "cv": f"CV {floor / abs(target.mean or 1.0):.6g}",
                        "variance": f"variance {var:.6g}"}[target.kind]
                return (f"precision target {r.name!r} ({target.kind} {target.target:g}) cannot be met: the smallest "
                        f"{what} any design within the bounds reaches")
            return f"row {r.name!r} cannot be met: its smallest value within the bounds is {low:.6g} > {r.rhs:.6g}"
    return None


def relax_constrained(model, rel_gap: float = DEFAULT_REL_GAP, time_limit: float | None = None,
                      verbose: bool = False) -> Solution:
    """The continuous relaxation with every constraint (stratallo's opt/optcost and Bethel–Chromy's targets, with DP noise)."""
    rel_gap, time_limit, verbose = _check_options(rel_gap, time_limit, verbose)
    deadline = _Deadline(time_limit)
    prog = program_of(model)
    why = _unreachable_rows(prog, integer=False)
    if why:
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {why}")
    res = _solve_dual(prog, deadline, time_share=1.0)
    return _finish_relaxation(model, prog, res, rel_gap, deadline)


def _finish_relaxation(model, prog, res, rel_gap, deadline):
    if res["infeasible"]:
        return Solution(status=Status.INFEASIBLE, message="the continuous relaxation has no point: the "
                        "Lagrangian dual exceeds the objective's maximum over the bounds")
    x = res["x"]
    viol = prog.violation(x)
    obj, _ = prog.evaluate(x)
    lb = res["q"]
    gap = (obj - lb) / abs(obj) if obj else 0.0
    cert = Certificate("gap", bool(res["converged"] and np.all(viol <= 1e-8) and gap <= max(rel_gap, 1e-9)),
                       lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message=f"Lagrangian dual bound; max relative row violation {max(np.max(viol), 0.0):.2e}")
    if cert.optimal:
        status = Status.OPTIMAL
    elif deadline.passed():
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE if np.all(viol <= 1e-8) else Status.ERROR
    sol = model.make_solution(x=x, status=status, certificate=cert,
                              message=f"dual Newton, {res['iterations']} iterations"
                              + ("" if res["converged"] else " (not converged)"))
    sol.details.update(lower_bound=lb, multipliers=res["lam"], row_violation=viol,
                       row_names=[r.name for r in prog.rows])
    return sol


_START_BUDGET = 1e-9      # first reduced-cost budget, relative to the Lagrangian bound
_ENUM_SLOW = 0.25         # seconds: a core enumeration slower than this hands the following cores to HiGHS
_GROWTH = 2.0             # budget growth between core MILPs


def _window(prog, x, n_lam, width):
    """Integers within ``width`` of the relaxation x (and the Lagrangian minimiser) per stratum."""
    lo, hi = prog.lower, prog.upper
    w_lo = np.minimum(np.clip(np.floor(x).astype(np.int64) - width, lo, hi), n_lam)
    w_hi = np.maximum(np.clip(np.ceil(x).astype(np.int64) + width, lo, hi), n_lam)
    return w_lo, w_hi


_BOX_POINTS = 100_000     # a box with at most this many integer designs is enumerated when the dual fails


def _box(prog):
    """The box lower..upper tightened by a fixed total (n_i ≤ η − Σ_{j≠i} lo_j, n_i ≥ η − Σ_{j≠i} hi_j), and
    its number of integer designs (a float: it may exceed any integer type)."""
    lo, hi = prog.lower.copy(), prog.upper.copy()
    for r in prog.rows:
        if r.kind == "total" and r.sense == "==" and r.a is not None and np.all(r.a == 1):
            eta = int(round(r.rhs))
            hi = np.minimum(hi, eta - (lo.sum() - lo))
            lo = np.maximum(lo, eta - (hi.sum() - hi))
    if np.any(lo > hi):
        return lo, hi, 0.0
    return lo, hi, float(np.prod((hi - lo + 1).astype(float)))


def _enumerate_box(prog, deadline, limit: int = 1000):
    """Every integer design of the box (:func:`_box`), by the rows' own test: (best design or None, its
    objective, points scanned), or None when the deadline passes first or the rows' test and the vectorised
    scan disagree on more than ``limit`` candidates. A proof on its own: no convexity, bound or dual is used.

    Per stratum and value the objective's and rows' contributions (and their absolute values, the rows'
    scale in :meth:`SeparableProgram.row_scale`) are tabulated once; a design's values are sums of table
    entries. Designs within twice the tolerance of :func:`_feasible` are candidates, taken in order of their
    objective until one passes :func:`_feasible` itself (the one test of feasibility)."""
    lo, hi, count = _box(prog)
    k, m = prog.k, prog.m
    if count == 0:
        return None, math.inf, 0
    sizes = (hi - lo + 1).astype(np.int64)
    rhs, ineq = prog.rhs(), prog.inequality()
    obj_t, row_t, abs_t = [], [], []
    for i in range(k):
        v = np.arange(lo[i], hi[i] + 1, dtype=float)
        idx = np.full(v.size, i)
        T = prog.unit_matrix(v, idx)
        obj_t.append(prog.row_terms(prog.objective, T, v, idx))
        per = np.stack([prog.row_terms(r, T, v, idx) for r in prog.rows], axis=1) if m else np.zeros((v.size, 0))
        row_t.append(per)
        abs_t.append(np.abs(per))
    total = int(count)
    cand_p, cand_f = [], []
    for c0 in range(0, total, _CHUNK):
        if deadline.passed():
            return None
        p = np.arange(c0, min(c0 + _CHUNK, total), dtype=np.int64)
        pos = np.unravel_index(p, tuple(sizes))
        f = np.zeros(p.size)
        lhs = np.zeros((p.size, m))
        mag = np.zeros((p.size, m))
        for i in range(k):
            f += obj_t[i][pos[i]]
            lhs += row_t[i][pos[i]]
            mag += abs_t[i][pos[i]]
        viol = (lhs - rhs) / np.maximum(np.maximum(np.abs(rhs), mag), 1e-300)
        viol = np.where(ineq, viol, np.abs(viol))
        ok = np.all(viol <= 2 * _FEAS_TOL, axis=1)
        cand_p.append(p[ok])
        cand_f.append(f[ok])
    cp, cf = np.concatenate(cand_p), np.concatenate(cand_f)
    for t, j in enumerate(np.argsort(cf, kind="stable")):
        if t >= limit:
            return None
        n = lo + np.array(np.unravel_index(int(cp[j]), tuple(sizes)), dtype=np.int64)
        if _feasible(prog, n):
            return n, prog.evaluate(n.astype(float))[0], total
    return None, math.inf, total


def _enumerated_block(prog, out, deadline, steps, why) -> dict | None:
    """``out`` completed by :func:`_enumerate_box` (the optimum, or infeasibility, proven by enumeration), or
    None when the box is too large or the scan did not finish."""
    _, _, count = _box(prog)
    if count > _BOX_POINTS:
        return None
    t0 = time.perf_counter()
    res = _enumerate_box(prog, deadline)
    if res is None:
        return None
    n, val, total = res
    steps.append(f"{why}: enumerated all {total} designs of the box in {time.perf_counter() - t0:.2f} s")
    if n is None:
        out.update(infeasible=True, reason="no integer design meets every constraint (every design in the "
                   "bounds was enumerated)")
        return out
    out.update(n=n, ub=val, lb=val, enumerated=True, timed_out=False, budget=0.0, core_bound=val)
    return out


def _solve_block(prog, convex, deadline, rel_gap, window, max_cols, verbose, max_states=DEFAULT_MAX_STATES,
                 resume: dict | None = None) -> dict:
    """Certified integer optimum of one block of the program (see the module docstring).

    Returns dict(n, ub, lb, lagrangian, x, q, lam, infeasible, reason, steps, timed_out, budget,
    core_bound); ``lb`` is a proven lower bound (−inf without convexity), ``n`` None when no feasible point
    was found. ``resume``: an earlier result for this block that ran out of time (its incumbent, bound and
    last budget are taken up).
    """
    steps: list[str] = []
    if not convex and resume is None:
        # no bound exists without convexity, but a small box is its own proof
        out = dict(n=None, ub=math.inf, lb=-math.inf, lagrangian=-math.inf, x=prog.lower.astype(float),
                   q=-math.inf, lam=np.zeros(prog.m), infeasible=False, reason="", steps=steps, converged=False)
        done = _enumerated_block(prog, out, deadline, steps, "terms not proven convex")
        if done is not None:
            return done
    res = _solve_dual(prog, deadline)
    out = dict(n=None, ub=math.inf, lb=-math.inf, lagrangian=-math.inf, x=res["x"], q=res["q"], lam=res["lam"],
               infeasible=False, reason="", steps=steps, converged=res["converged"])
    if res["infeasible"]:
        out.update(infeasible=True, reason="the continuous relaxation has no point (the Lagrangian dual exceeds "
                   "the objective's maximum over the bounds)")
        return out
    if not res["converged"] and resume is None:
        # the dual stalled or used its share of the time: a small box is enumerated instead
        done = _enumerated_block(prog, out, deadline, steps, "the continuous dual stalled"
                                 if res.get("stalled") else "the continuous dual did not converge")
        if done is not None:
            return done
        steps.append(f"continuous dual not converged after {res['iterations']} iterations"
                     + (" (no progress)" if res.get("stalled") else ""))
    x, lam = res["x"], res["lam"]
    lo, hi = prog.lower, prog.upper
    lb, n_lam, Om, ell, margin = _integer_bound(prog, lam)
    w_lo, w_hi = _window(prog, x, n_lam, window)
    scale = max(abs(lb), abs(prog.evaluate(n_lam.astype(float))[0]), 1e-300)
    if convex and prog.m:
        # the secant LP's duals are the best multipliers: its value is the convex hull bound
        lam_lp = _lp_multipliers(prog, w_lo, w_hi, x, scale, deadline.left())
        if lam_lp is not None:
            lb_lp, n_lp, Om_lp, ell_lp, m_lp = _integer_bound(prog, lam_lp)
            if lb_lp > lb:
                lb, n_lam, Om, ell, lam, margin = lb_lp, n_lp, Om_lp, ell_lp, lam_lp, m_lp
    out["lam"] = lam
    ub, inc = math.inf, None

    def offer(n):
        nonlocal ub, inc
        if n is not None and _feasible(prog, n):
            v = prog.evaluate(n.astype(float))[0]
            if v < ub:
                ub, inc = v, n.copy()

    offer(n_lam)
    if not convex:
        # no bound exists: look for a good point on a widening window around the relaxation
        region = (w_lo, w_hi)
        for attempt in range(6):
            size = int(np.sum(region[1] - region[0]))
            if size > max_cols or deadline.passed():
                break
            milp = secant_milp(prog, region[0], region[1], anchor=x, obj_scale=scale * 1e-6, row_tighten=2e-10)
            status, n, _, _, hs = _highs_solve(milp, rel_gap * 0.25, 0.0, deadline.left(), verbose)
            steps.append(f"HiGHS on {size} segments: {hs}")
            offer(n)
            if inc is not None or status != "infeasible":
                break
            grow = 4 ** (attempt + 1) * (window + 1)
            region = (np.clip(region[0] - grow, lo, hi), np.clip(region[1] + grow, lo, hi))
        out.update(n=inc, ub=ub, timed_out=deadline.passed())
        return out
    out["lagrangian"] = lb
    # Cores: reduced-cost fixing with budget b keeps, per stratum, the values v with r_i(v) ≤ b. Every feasible
    # n has f(n) = lb + Σ r_i(n_i) + λ·slack ≥ lb + r_i(n_i), so the core holds every design within lb + b.
    # A core is solved by enumeration (exact, fast while few partial designs survive) or else as a secant
    # MILP; either proves f > lb + b when the core has nothing better, and its optimum is global once
    # b ≥ ub − lb. Budgets start small (fast, tight cores) and grow.
    b = _START_BUDGET * scale
    bound = -math.inf        # proven lower bound from the cores
    done = 0.0               # largest budget whose core was enumerated completely
    # designs feasible within the rows' tolerance have slacks down to −tol: r_i may exceed f − lb by λ·tol
    allow = 2 * _FEAS_TOL * float(np.where(prog.inequality(), lam, 0.0) @ prog.row_scale(n_lam.astype(float))) \
        if prog.m else 0.0
    retries = 0
    if resume is not None:
        offer(resume["n"])
        b, bound = max(b, resume["budget"]), resume["core_bound"]
    enumerate_ok = True
    # groups of strata linked only by the total (one target per domain) are enumerated group by group
    linked = linked_groups(prog)
    by_groups = "" if linked is None else f" in {len(linked[1])} groups linked by the total"
    for _ in range(200):
        if inc is not None and ub - max(lb, bound) <= rel_gap * abs(ub):
            break
        if deadline.passed():
            break
        if inc is not None:
            b = min(b, ub - lb)
        r_lo, r_hi = _reduced_ranges(prog, Om, ell, n_lam, b * (1 + 1e-12) + allow + 1e-300)
        whole = bool(np.all(r_lo == lo) and np.all(r_hi == hi))
        free = int(np.sum(r_hi > r_lo))
        if enumerate_ok and max_states > 0:
            t0 = time.perf_counter()
            if linked is not None:
                res = _enumerate_linked(prog, Om, ell, lam, n_lam, r_lo, r_hi, b, max_states, deadline, linked)
            else:
                res = _enumerate_core(prog, Om, ell, lam, n_lam, r_lo, r_hi, b, max_states, deadline)
            if res is not None:
                offer(res[0])
                # nothing outside the core or pruned lies below lb + b; the best design examined is res[0] (its
                # excess res[1] was computed against the unsafe Lagrangian value, ranking within `margin`)
                best_seen = lb + res[1]
                if res[0] is not None:
                    best_seen = max(best_seen, prog.evaluate(res[0].astype(float))[0] - 2 * margin)
                bound = max(bound, min(lb + b, best_seen))
                steps.append(f"enumerated {free} strata{by_groups} (budget {b / scale:.1e}, {res[2]} partial designs) in {time.perf_counter() - t0:.2f} s"
                             + ("" if math.isfinite(res[1]) else ": nothing within the budget"))
                if inc is not None and (ub - max(lb, bound) <= rel_gap * abs(ub) or b >= ub - lb):
                    break       # proven, or the core held every better design (rounding left a sliver)
                if whole and inc is None and not math.isfinite(b):
                    out.update(infeasible=True, reason="no integer design meets every constraint (the continuous "
                               "relaxation is feasible; every design in the bounds was enumerated)")
                    return out
                if whole and inc is None and not math.isfinite(res[1]):
                    # the whole box holds no design within the budget: enumerate it without one (an empty
                    # answer then proves the integer problem infeasible)
                    b = math.inf
                    continue
                # the number of partial designs grows steeply with the budget (~b^7 measured): grow gently
                # once it is a sizeable share of the limit
                done = b
                grow = 4.0 if res[2] <= 100 else min(max((max_states / (2.0 * res[2])) ** (1 / 7), 1.05), 4.0)
                b = b * grow if math.isfinite(b) else b
                if time.perf_counter() - t0 > _ENUM_SLOW and math.isfinite(b):
                    # each larger budget costs several times more (many rows: no dominance, wide cores); HiGHS
                    # on the core's secant MILP closes such gaps in a fraction of the time (measured: 0.3 s
                    # instead of 6.9 s for 5 strata with four equality rows)
                    enumerate_ok = False
                    steps.append(f"enumeration slowing down (over {_ENUM_SLOW:g} s): further cores go to HiGHS")
                continue
            steps.append(f"enumeration of {free} strata (budget {b / scale:.1e}) stopped at its limit "
                         f"({max_states} partial designs)")
            retries += 1
            if done > 0 and b > 1.05 * done and retries <= 3:
                b = math.sqrt(b * done)         # overshot: a smaller step may still enumerate
                continue
            enumerate_ok = False
        size = int(np.sum(r_hi - r_lo))
        if size > max_cols:
            steps.append(f"core of {size} secant segments exceeds max_milp_columns={max_cols}")
            break
        covers = inc is not None and b >= ub - lb
        sc = abs(ub) if inc is not None else scale
        # rows at rhs + allowance: the MILP's bound (and an infeasibility proof) must hold for every design the
        # feasibility test accepts, including those with no slack or a violation within the tolerance (a target
        # set from a design's own precision; tightened rows missed them and proved a worse point); HiGHS's
        # points are then checked against the rows by _feasible
        milp = secant_milp(prog, r_lo, r_hi, anchor=x, obj_scale=max(sc, 1e-300) * 1e-6, relax_rows=True)
        t0 = time.perf_counter()
        status, n, _, bnd, hs = _highs_solve(milp, rel_gap * 0.25, 0.0, deadline.left(), verbose,
                                             start=inc if covers else None)
        steps.append(f"HiGHS on {free} strata, {size} segments (budget {b / scale:.1e}): {hs} "
                     f"in {time.perf_counter() - t0:.2f} s")
        offer(n)
        if status == "optimal":
            bound = max(bound, min(bnd, lb + b))
            if inc is not None and b >= ub - lb:
                bound = max(bound, min(bnd, ub))
                break
            b = b * _GROWTH if inc is None else min(ub - lb, b * _GROWTH)
            continue
        if status == "infeasible":
            if whole:
                out.update(infeasible=True, reason="no integer design meets every constraint (the continuous "
                           "relaxation is feasible; HiGHS proved the whole box infeasible)")
                return out
            bound = max(bound, lb + b)
            if inc is not None and b >= ub - lb:
                # nothing better than the incumbent (it lies in the core but only meets the rows within tolerance)
                bound = max(bound, ub)
                break
            b = b * _GROWTH if inc is None else min(ub - lb, b * _GROWTH)
            if b > 1e3 * scale:
                b = math.inf
            continue
        if math.isfinite(bnd):      # time limit: HiGHS's bound holds over the core
            bound = max(bound, min(bnd, lb + b))
            if inc is not None and b >= ub - lb:
                bound = max(bound, min(bnd, ub))
        break
    out.update(n=inc, ub=ub, lb=max(lb, min(bound, ub)) if inc is not None else max(lb, bound),
               timed_out=deadline.passed(), budget=b, core_bound=bound)
    return out


def _solve_by_domains(model, prog, groups, rel_gap, deadline):
    """Domain targets on the objective's scale (:mod:`.domains`): exact by nested marginal allocation, or
    None (the general route below then runs) when the point fails the rows' check or time runs out."""
    res = solve_domains(prog, groups, deadline)
    if res is None:
        return None
    if isinstance(res[0], str):
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {res[1]}")
    n, slack, note, binding = res
    if not _feasible(prog, n):
        return None
    obj = prog.evaluate(n.astype(float))[0]
    gap = max(0.0, -slack) / abs(obj) if obj else (0.0 if slack >= 0 else math.inf)
    if gap > rel_gap:
        return None
    cert = Certificate("exchange", True, lower_bound=obj - max(0.0, -slack), gap=gap, tolerance=rel_gap,
                       slack=slack, message=f"{note}: no unit moved between two domains or free strata lowers "
                                            "the objective (discretely convex terms)")
    sol = model.make_solution(n=n, status=Status.OPTIMAL, certificate=cert, message=note, rel_gap=rel_gap)
    bind = np.zeros(prog.m, dtype=bool)
    for (_S, _cap, rows), b in zip(groups, binding):
        bind[rows] = b
    sol.details.update(lower_bound=cert.lower_bound, integrality_gap=gap, method="domains",
                       row_names=[r.name for r in prog.rows], binding_rows=bind)
    return sol


def solve_constrained(model, rel_gap: float = DEFAULT_REL_GAP, time_limit: float | None = None,
                      verbose: bool = False, window: int = 1, max_milp_columns: int = 400_000,
                      max_states: int = DEFAULT_MAX_STATES) -> Solution:
    """Certified integer optimum of a constrained stratified or min-cost design (see the module docstring).

    ``window``: half-width of the secant LP that gives the multipliers; ``max_milp_columns``: largest core
    (secant segments) handed to HiGHS; ``max_states``: partial designs a core enumeration may keep before
    the core goes to HiGHS instead (0: never enumerate).
    """
    rel_gap, time_limit, verbose = _check_options(rel_gap, time_limit, verbose)
    # (a window wider than every range is the whole range; the cap keeps its arithmetic inside 64-bit integers)
    window = V.option(V.integer, "window", window, minimum=0, maximum=2**31 - 1)
    max_milp_columns = V.option(V.integer, "max_milp_columns", max_milp_columns, minimum=1)
    max_states = V.option(V.integer, "max_states", max_states, minimum=0)
    deadline = _Deadline(time_limit)
    prog = program_of(model)
    convex, why = _convexity(model)
    # the integer row minimum is exact only for discretely convex terms: no claim without them
    unreachable = _unreachable_rows(prog) if convex else None
    if unreachable:
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {unreachable}")
    if convex:
        groups = domain_structure(prog)
        if groups is not None:
            sol = _solve_by_domains(model, prog, groups, rel_gap, deadline)
            if sol is not None:
                return sol
    k = prog.k
    blocks = prog.components()
    if len(blocks) == 1 and blocks[0][0].size == k and len(blocks[0][1]) == prog.m:
        parts = [(np.arange(k), list(range(prog.m)), prog)]
    else:
        # rows on disjoint sets of strata (e.g. min-cost with one target per domain): each block alone
        parts = [(pos, rows, prog.subprogram(pos, [prog.rows[l] for l in rows])) for pos, rows in blocks]
    n = np.zeros(k, dtype=np.int64)
    x = np.zeros(k)
    lam = np.zeros(prog.m)
    # block values carry the program's constant only when the block is the program itself
    ub = lb = lagr = q = 0.0 if parts[0][2] is prog else -prog.const
    steps: list[str] = []
    found, timed_out = True, False
    covered = np.zeros(k, dtype=bool)
    gap_b = rel_gap * (0.5 if len(parts) > 1 else 1.0)
    results = []
    for b, (pos, rows, sub) in enumerate(parts):
        # each block gets an equal share of the time left, so a hard block cannot starve the later ones
        r = _solve_block(sub, convex, deadline.share(len(parts) - b), gap_b, window, max_milp_columns, verbose,
                         max_states)
        if r["infeasible"]:
            return Solution(status=Status.INFEASIBLE, message=f"infeasible: {r['reason']}")
        results.append(r)
    # blocks stopped by their share resume with the time the others left
    again = [b for b, r in enumerate(results) if r["timed_out"] and r["lb"] > -math.inf
             and not (r["n"] is not None and r["ub"] - r["lb"] <= gap_b * abs(r["ub"]))]
    for c, b in enumerate(again):
        if deadline.passed():
            break
        r = _solve_block(parts[b][2], convex, deadline.share(len(again) - c), gap_b, window, max_milp_columns,
                         verbose, max_states, resume=results[b])
        if r["infeasible"]:
            return Solution(status=Status.INFEASIBLE, message=f"infeasible: {r['reason']}")
        r["steps"] = results[b]["steps"] + ["resumed"] + r["steps"]
        results[b] = r
    for (pos, rows, sub), r in zip(parts, results):
        covered[pos] = True
        x[pos] = r["x"]
        lam[rows] = r["lam"]
        q += r["q"]
        lb += r["lb"]
        lagr += r["lagrangian"]
        steps += r["steps"]
        timed_out |= bool(r.get("timed_out"))
        if r["n"] is None:
            found = False
        else:
            n[pos] = r["n"]
            ub += r["ub"]
    rest = np.flatnonzero(~covered)
    if rest.size:
        # strata in no row: each at its own minimum (discretely convex, or linear for a cost objective)
        sub = prog.subprogram(rest, [])
        Om, ell = sub.combine(np.zeros(0))
        n[rest] = _inner_integer(sub, Om, ell)
        x[rest] = _inner_continuous(sub, Om, ell)
        f_rest = float(np.sum(_phi(sub, Om, ell, n[rest].astype(float))))
        ub += f_rest
        lb += f_rest
        lagr += f_rest
        q += float(np.sum(_phi(sub, Om, ell, x[rest])))
    if len(parts) > 1:
        steps.insert(0, f"{len(parts)} independent blocks")
    if not found:
        status = Status.TIME_LIMIT if timed_out or deadline.passed() else Status.ERROR
        # a sentence for people; the trail goes to the dpopt log and details["steps"] (dpopt/_log.py)
        msg = ("no integer point found before the time limit" if status == Status.TIME_LIMIT
               else "no integer point found")
        if any("infeasible" in s.lower() for s in steps) and status != Status.TIME_LIMIT:
            # HiGHS proved a core infeasible, not the whole box: say so without claiming
            msg = ("no feasible integer point found near the relaxation (a core was infeasible, not the whole "
                   "box)")
        sol = Solution(status=status, message=msg + "; the search's steps are in details['steps']")
        sol.details.update(lower_bound=lb, relaxation=x, steps=_log.steps(steps, "exact"))
        return sol
    ub = prog.evaluate(n.astype(float))[0]
    enumerated = not rest.size and all(r.get("enumerated") for r in results)
    if not convex and not enumerated:
        lb = lagr = -math.inf     # neither the Lagrangian inner solve nor secants are bounds without convexity
    gap = (ub - lb) / abs(ub) if ub else (0.0 if lb >= ub else math.inf)
    # a bound above the point is a numerical failure, never a proof (the bounds are made safe, so this guards
    # against a defect, not rounding): no claim rests on it
    above = lb > ub + 4 * EVAL_RTOL * abs(ub)
    gap = max(gap, 0.0)
    proven = (convex or enumerated) and gap <= rel_gap and not above
    if above:
        steps.append(f"the lower bound {lb!r} exceeds the point's objective {ub!r}: not a proof")
    cert = Certificate("gap", bool(proven), lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message=("every design of the box enumerated" if enumerated else
                                "Lagrangian bound, reduced-cost fixing, cores enumerated or solved as secant MILPs "
                                "(HiGHS)") + ("" if convex or enumerated else f"; no bound: {why}"))
    if proven:
        status = Status.OPTIMAL
    elif timed_out or deadline.passed():
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE
    bound_kind = "every design enumerated" if enumerated else "Lagrangian and secant bounds"
    message = (f"proven optimal: relative gap {gap:.2e} ({bound_kind})" if status == Status.OPTIMAL else
               f"stopped at the time limit with relative gap {gap:.2e} ({bound_kind})" if status == Status.TIME_LIMIT
               else f"not proven optimal: relative gap {gap:.2e}" + (f" exceeds rel_gap={rel_gap:g}" if convex or
                                                                    enumerated else f" (no bound: {why})"))
    if above:
        message = "not proven optimal: the computed lower bound exceeds the point's objective (not a proof)"
    sol = model.make_solution(n=n, status=status, certificate=cert, message=message)
    sol.details["steps"] = _log.steps(steps, "exact")
    sol.details.update(lower_bound=lb, lagrangian_bound=lagr, integrality_gap=gap, multipliers=lam,
                       relaxation=x, relaxation_bound=q, row_names=[r.name for r in prog.rows])
    return sol
