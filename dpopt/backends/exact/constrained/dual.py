"""Step 1, the continuous relaxation by its Lagrangian dual: for multipliers λ the Lagrangian separates into
one-dimensional convex problems per stratum (:mod:`.inner`); the dual is smooth and concave in λ and is
maximised by a projected Newton method with line search (its Hessian is −Σ_i g_i g_iᵀ / φ_i''), started by
1-D searches on the violated inequality rows. A dual value above the objective's maximum over the box
proves infeasibility (with the safe integer bound, :mod:`.bound`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....formulations.separable import SeparableProgram
from .bound import integer_bound
from .deadline import Deadline
from .inner import inner_continuous

_DUAL_PATIENCE = 5          # dual iterations in a row without progress before the dual hands over
_DUAL_TIME_SHARE = 0.25     # share of the time left that the continuous dual may use
_DUAL_MIN_TIME = 0.1        # seconds it may use at least, within the solve's grace (.deadline): its multipliers
                            # are the bound and the first design (measured: 8 iterations, 25 ms at k = 200)


@dataclass(frozen=True)
class DualResult:
    """The dual's answer: the best multipliers found, the dual value there (a bound when ``converged``, and
    always one for a convex program) and the relaxation's point; ``infeasible`` proven by weak duality."""
    lam: np.ndarray
    q: float
    x: np.ndarray
    converged: bool
    infeasible: bool
    iterations: int
    f_max: float
    stalled: bool


@dataclass(frozen=True)
class DualPoint:
    """The dual at one λ: its value q, gradient g (row values − rhs), the inner minimiser x and Ω, ℓ."""
    lam: np.ndarray
    q: float
    g: np.ndarray
    x: np.ndarray
    Om: np.ndarray
    ell: np.ndarray


class Dual:
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

    def at(self, lam) -> DualPoint:
        prog = self.prog
        Om, ell = prog.combine(lam)
        x = inner_continuous(prog, Om, ell, self.x)
        T = prog.unit_matrix(x)
        phi = np.sum(Om * T, axis=1) + ell * x
        q = float(np.sum(phi) - lam @ self.rhs) - prog.const
        lhs = np.array([np.sum(prog.row_terms(r, T, x)) for r in prog.rows])
        self.x = x
        return DualPoint(lam, q, lhs - self.rhs, x, Om, ell)

    def _row_slopes(self, p: DualPoint):
        """Each row's derivative per free stratum (x strictly inside its bounds, φ'' > 0) and those φ''."""
        prog = self.prog
        lo, hi = prog.lower, prog.upper
        d1, d2 = prog.derivative_matrices(p.x)
        phi2 = np.sum(p.Om * d2, axis=1)
        free = (p.x > lo) & (p.x < hi) & (phi2 > 0)
        G = np.zeros((int(free.sum()), prog.m))
        for l, r in enumerate(prog.rows):
            col = np.zeros(int(free.sum()))
            if r.W is not None:
                col += np.sum(r.W[free] * d1[free], axis=1)
            if r.a is not None:
                col += r.a[free]
            G[:, l] = col
        return G, phi2[free]

    def hessian(self, p: DualPoint):
        G, phi2 = self._row_slopes(p)
        return -(G.T / phi2) @ G

    def curvature(self, p: DualPoint, l) -> float:
        """∂g_l/∂λ_l (≤ 0): the Hessian's diagonal entry for row l."""
        G, phi2 = self._row_slopes(p)
        return -float(np.sum(G[:, l] ** 2 / phi2))


def initial_multipliers(prog: SeparableProgram):
    """A start with the right scale: equality rows from the objective's slope at a proportional point,
    inequality rows at 0 (raised by the 1-D searches of :func:`solve_dual` when violated)."""
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


def row_scale_guess(prog, l):
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


def solve_dual(prog: SeparableProgram, deadline: Deadline, tol: float = 1e-11, max_iter: int = 300,
               patience: int = _DUAL_PATIENCE, time_share: float = _DUAL_TIME_SHARE) -> DualResult:
    """Maximise the concave dual.

    Any multipliers give valid bounds downstream (the integer Lagrangian is evaluated at whatever λ this
    returns), so the dual need not converge: it stops after ``patience`` iterations in a row that raise q by
    no more than rounding (dependent rows or kinks: the Newton steps then blow λ up and q stalls; measured
    12 851 dual evaluations, all of a 30 s limit on larger models) or once it has used ``time_share`` of the
    time left, and the integer phase (LP multipliers, cores, HiGHS) takes over.
    """
    dual = Dual(prog)
    own = deadline.share(max(1.0 / time_share, 1.0)).at_least(_DUAL_MIN_TIME)
    p = dual.at(initial_multipliers(prog))
    best = (p.q, p.lam.copy(), p.x.copy())
    # 1-D searches first: every violated inequality row at λ = 0 gets a multiplier of the right scale
    for l in np.flatnonzero(dual.ineq & (p.g > 0)):
        p = line_raise(dual, p, l, row_scale_guess(prog, l))
        if p.q > best[0]:
            best = (p.q, p.lam.copy(), p.x.copy())
    idle, it, end = 0, 0, ""
    for it in range(1, max_iter + 1):
        end = _stop(dual, p, tol, own, idle >= patience)
        if end:
            break
        q_before = p.q
        p, crawl = _ascent_step(dual, p)
        idle = idle + 1 if crawl or not p.q > q_before + 1e-12 * max(abs(p.q), abs(dual.f_max), 1e-300) else 0
        if p.q > best[0]:
            best = (p.q, p.lam.copy(), p.x.copy())
    converged = end == "converged"
    if converged:
        q_b, lam_b, x_b = p.q, p.lam, p.x
    else:
        q_b, lam_b, x_b = best if not p.q > best[0] else (p.q, p.lam, p.x)
    return DualResult(lam=lam_b, q=q_b, x=x_b, converged=converged, infeasible=end == "infeasible",
                      iterations=it, f_max=dual.f_max, stalled=end == "stalled")


def _stop(dual: Dual, p: DualPoint, tol, own: Deadline, idle: bool) -> str:
    """Why the ascent stops at p ("infeasible", "converged", "time", "stalled", "above": q above the objective's
    maximum without a proof), or "" to go on."""
    prog = dual.prog
    if p.q > dual.f_max + 1e-9 * abs(dual.f_max) + 1e-300:
        # weak duality proves infeasibility only with the safe integer bound (exact minimisers, rows at
        # rhs + allowance, rounding subtracted); otherwise leave the claim to the integer phase
        proof = integer_bound(prog, p.lam).lb > dual.f_max + 1e-9 * abs(dual.f_max) + 1e-300
        return "infeasible" if proof else "above"
    viol = p.g / prog.row_scale(p.x)
    ineq = dual.ineq
    ok = np.where(ineq, np.where(p.lam > 0, np.abs(viol) <= tol, viol <= tol), np.abs(viol) <= tol)
    if np.all(ok):
        return "converged"
    if own.passed():
        return "time"
    return "stalled" if idle else ""


def _ascent_step(dual: Dual, p: DualPoint) -> tuple[DualPoint, bool]:
    """One projected Newton step with backtracking, or (when no step raises q) a 1-D search on the worst row.
    Returns the new point and whether the step made no real progress."""
    prog, ineq = dual.prog, dual.ineq
    H = dual.hessian(p)
    act = ~(ineq & (p.lam <= 0) & (p.g < 0))
    d = np.zeros(prog.m)
    A = -H[np.ix_(act, act)]
    # the system is solved in rows scaled to a unit diagonal (Jacobi): rows in very different units (a total
    # with λ ~ 1e2 beside domain targets with λ ~ 1e7, case (e)) put the diagonal 1e10 apart, and a
    # regularisation relative to the largest entry swamped the small rows, whose steps then crawled (300
    # iterations at k = 20 000 left rows 1.5 % off). The Newton direction itself does not depend on the scaling.
    dg = np.sqrt(np.abs(np.diag(A))) if A.size else np.zeros(0)
    dg = np.where(np.isfinite(dg) & (dg > 0), dg, 1.0)
    As = A / dg[:, None] / dg[None, :]
    try:
        d[act] = np.linalg.solve(As + 1e-12 * np.eye(As.shape[0]), p.g[act] / dg) / dg
    except np.linalg.LinAlgError:
        d[act] = p.g[act]
    if not np.all(np.isfinite(d)):
        d = np.where(act, p.g, 0.0)
    step = 1.0
    for _ in range(60):
        lam_new = p.lam + step * d
        trial = dual.at(np.where(ineq, np.maximum(lam_new, 0.0), lam_new))
        if trial.q >= p.q - 1e-15 * abs(p.q):
            # progress: q rises by more than rounding of its terms (judged by the caller) with a Newton step
            # that was not cut to nothing (a step below 2^-20 means the direction is wrong: a singular Hessian
            # when fewer strata are free than rows are active, and the ascent crawls)
            return trial, step < 2.0 ** -20
        step *= 0.5
    # Newton direction failed (kink or singular Hessian): raise the worst row alone
    l = int(np.argmax(np.where(act, np.abs(p.g) / prog.row_scale(p.x), -np.inf)))
    dual.x = p.x
    return line_raise(dual, p, l, max(abs(p.lam[l]), row_scale_guess(prog, l))), True


def line_raise(dual: Dual, p: DualPoint, l, scale, max_eval: int = 60, rtol: float = 1e-3) -> DualPoint:
    """Maximise the dual along λ_l alone (its derivative g_l decreases in λ_l), to a relative width ``rtol`` (a
    start for the Newton iterations, which converge from there); returns the best point evaluated.

    Each step is Newton's on log(row value) against log λ_l: a variance row under a linear cost is a power of
    λ_l (x_i ∝ √λ), so the step is exact there and near-exact for the noise terms, where regula falsi on λ
    from a guess 10³ off took 20-24 evaluations (case (d) of benchmarks/bench_constrained.py: 0.6 s of 2.5 s).
    A step outside the bracket the evaluations have found, or none (no free stratum, a row of either sign),
    falls back to steps growing by 4 from the bracket's end while its other side is open, else to the bracket's
    geometric (or plain) middle."""
    ineq = dual.ineq[l]
    rhs = float(dual.rhs[l])
    lam0 = float(p.lam[l])
    sign = 1.0 if p.g[l] > 0 else -1.0
    # the bracket: g_l > 0 at a, g_l < 0 at b
    a, b = (lam0, math.inf) if sign > 0 else ((0.0 if ineq else -math.inf), lam0)
    best = cur = p
    step = scale
    for n in range(max_eval):
        u = float(cur.lam[l])
        nxt = _log_newton(dual, cur, l, rhs) if n else math.nan
        if not a < nxt < b:
            if math.isinf(b):
                nxt = a + step              # growing steps from the open side's last point
                step *= 4.0
            elif math.isinf(a):
                nxt = b - step
                step *= 4.0
            elif a > 0 and b > 4 * a:
                nxt = math.sqrt(a * b)
            else:
                nxt = 0.5 * (a + b)
        trial = cur.lam.copy()
        trial[l] = max(nxt, 0.0) if ineq else nxt
        res = dual.at(trial)
        if res.q > best.q or not np.isfinite(best.q):
            best = res
        if res.q > dual.f_max + 1e-9 * abs(dual.f_max):
            break
        if res.g[l] > 0:
            a = trial[l]
        else:
            b = trial[l]
        cur = res
        closed = math.isfinite(a) and math.isfinite(b) and b - a <= rtol * max(abs(a), abs(b))
        if closed or abs(trial[l] - u) <= 0.1 * rtol * abs(trial[l]) or (ineq and trial[l] == 0.0 and res.g[l] <= 0):
            break
    return best


def _log_newton(dual: Dual, p: DualPoint, l, rhs) -> float:
    """The λ_l where row l's value reaches rhs if it is a power of λ_l near p (Newton on the logs); plain Newton
    on g_l where the logs do not apply; nan without curvature."""
    u, g = float(p.lam[l]), float(p.g[l])
    h = dual.curvature(p, l)
    if not (h < 0 and math.isfinite(h)):
        return math.nan
    value = g + rhs
    if u > 0 and value > 0 and rhs > 0:
        power = -u * h / value
        if power > 0 and math.isfinite(power):
            return u * math.exp(min(max((math.log(value) - math.log(rhs)) / power, -14.0), 14.0))
    return u - g / h
