"""Exact backend for SampleSizeProgram: interval branch and bound, or a vectorised full scan.

V_n = s(n) + v(n) is not convex in general, but its parts are monotone: the sampling term s(n)
decreases in n, and the noise term has a known monotone structure for each sensitivity model
(``SampleSizeProgram.noise_lower_bound``). On an integer interval [a, b] therefore

    V_n ≥ s(b) + v_lb(a, b)     for every n in [a, b],

and branch and bound over intervals is exact: an interval is discarded only when this bound exceeds
the best value found (plus a relative slack of 1e-12 that only keeps *more* intervals alive, so
floating-point ties are resolved by evaluating them). Intervals are processed in vectorised rounds:
each survivor is split into ``branching`` pieces; intervals of at most ``leaf`` integers are
evaluated point by point. Among exact ties the smallest n is returned (as ``argmin`` of a scan).

The scan evaluates every n in chunks (exact by construction); it is used when N ≤ ``scan_limit`` and
``method="auto"`` picks it for small N, and it is the only option for a callable sensitivity
without a declared monotone trend.
"""

from __future__ import annotations

import time

import numpy as np

from ...models.sample_size import SampleSizeProgram
from ... import _validate as V
from ...options import DEFAULT_REL_GAP
from ...registry import register
from ...result import Certificate, Solution, Status

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"
_SLACK = 1e-12


def _scan(model: SampleSizeProgram, chunk: int = 1 << 20, deadline: float = np.inf):
    best_n, best_v, evals = 0, np.inf, 0
    for start in range(model.n_min, model.N + 1, chunk):
        if best_n and time.perf_counter() > deadline:
            return best_n, best_v, evals, False
        n = np.arange(start, min(model.N, start + chunk - 1) + 1, dtype=float)
        v = model.variance(n)
        evals += n.size
        i = int(np.argmin(v))
        if v[i] < best_v:
            best_n, best_v = int(n[i]), float(v[i])
    return best_n, best_v, evals, True


def _bnb(model: SampleSizeProgram, branching: int = 16, leaf: int = 64, deadline: float = np.inf):
    N = model.N
    cand = np.array([float(model.n_min), float(N)])
    vals = model.variance(cand)
    i = int(np.argmin(vals))
    best_n, best_v = int(cand[i]), float(vals[i])
    a = np.array([float(model.n_min)])
    b = np.array([float(N)])
    pruned_lb = np.inf
    evals, rounds, max_live = 2, 0, 1
    check_trend = model.kind == "callable"
    while a.size:
        rounds += 1
        if time.perf_counter() > deadline:
            return best_n, best_v, min(pruned_lb, float(np.min(model.sampling_variance(b)
                                                               + model.noise_lower_bound(a, b)))), \
                evals, rounds, max_live, "time_limit"
        size = b - a + 1
        small = size <= leaf
        # leaves: evaluate every integer they hold
        if np.any(small):
            sa, sb = a[small], b[small]
            lens = (sb - sa + 1).astype(np.int64)
            starts = np.repeat(sa, lens)
            offs = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
            pts = starts + offs
            v = model.variance(pts)
            evals += pts.size
            j = int(np.argmin(v))
            if v[j] < best_v or (v[j] == best_v and pts[j] < best_n):
                best_n, best_v = int(pts[j]), float(v[j])
        a, b = a[~small], b[~small]
        if not a.size:
            break
        if check_trend:
            da, db = model.sensitivity_at(a), model.sensitivity_at(b)
            bad = (da < db) if model.sensitivity_trend == "nonincreasing" else (da > db)
            if np.any(bad):
                k = int(np.flatnonzero(bad)[0])
                raise _TrendError(f"the sensitivity callable is not {model.sensitivity_trend}: "
                                  f"Delta({a[k]:.0f}) = {da[k]:g}, Delta({b[k]:.0f}) = {db[k]:g}")
        # incumbent update from the interval ends and midpoints
        mid = np.floor(0.5 * (a + b))
        pts = np.concatenate([a, b, mid])
        v = model.variance(pts)
        evals += pts.size
        j = int(np.argmin(v))
        if v[j] < best_v or (v[j] == best_v and pts[j] < best_n):
            best_n, best_v = int(pts[j]), float(v[j])
        lb = model.sampling_variance(b) + model.noise_lower_bound(a, b)
        keep = lb <= best_v + _SLACK * abs(best_v)
        if np.any(~keep):
            pruned_lb = min(pruned_lb, float(np.min(lb[~keep])))
        a, b = a[keep], b[keep]
        if not a.size:
            break
        # split each survivor into `branching` pieces
        k = branching
        edges = a[:, None] + np.floor((b - a + 1)[:, None] * np.arange(k + 1)[None, :] / k)
        na = edges[:, :-1]
        nb = edges[:, 1:] - 1
        ok = nb >= na
        a, b = na[ok], nb[ok]
        max_live = max(max_live, a.size)
    return best_n, best_v, min(pruned_lb, best_v), evals, rounds, max_live, "done"


class _TrendError(ValueError):
    pass


@register("exact", SampleSizeProgram, "solve", _DESCRIPTION)
def solve_exact(model: SampleSizeProgram, method: str = "auto", scan_limit: int = 2_000_000,
                branching: int = 16, leaf: int = 64, time_limit: float | None = None) -> Solution:
    """Exact integer optimum n* of V_n.

    method : ``"auto"`` (scan when N ≤ 4096 or no bound is available, else branch and bound),
        ``"bnb"`` or ``"scan"``.
    scan_limit : largest N a scan may cover (a callable without trend and larger N is ``unsupported``).
    branching, leaf : pieces per split and the interval length evaluated point by point (integers ≥ 2, ≥ 1).
    time_limit : seconds; both methods stop at it with the best point so far (status ``time_limit``).
    The search covers n_min ≤ n ≤ N (δ_n ≤ 1).
    """
    method = V.option(V.choice, "method", method, allowed=("auto", "bnb", "scan"))
    scan_limit = V.count("scan_limit", scan_limit)
    branching = V.count("branching", branching, minimum=2)
    leaf = V.count("leaf", leaf)
    t0 = time.perf_counter()
    deadline = np.inf if time_limit is None else t0 + float(time_limit)
    use_scan = method == "scan" or (method == "auto" and (model.N <= 4096 or not model.bounded))
    if method == "bnb" and not model.bounded:
        return Solution(status=Status.UNSUPPORTED, backend="exact", model="SampleSizeProgram",
                        message="branch and bound needs sensitivity_trend for a callable sensitivity; "
                                "use method='scan'")
    if use_scan:
        if model.N > scan_limit:
            return Solution(status=Status.UNSUPPORTED, backend="exact", model="SampleSizeProgram",
                            message=(f"a scan over N = {model.N} exceeds scan_limit = {scan_limit}; declare "
                                     "sensitivity_trend for the callable (branch and bound) or raise scan_limit"))
        n_star, v_star, evals, done = _scan(model, deadline=deadline)
        if not done:
            return model.make_solution(n=n_star, status=Status.TIME_LIMIT, backend="exact", solver="scan",
                                       message=f"time limit reached after {evals} of "
                                               f"{model.N - model.n_min + 1} sample sizes; best point so far",
                                       details={"method": "scan", "evaluations": evals})
        cert = Certificate(kind="scan", optimal=True, lower_bound=v_star, gap=0.0,
                           message=f"all {evals} feasible sample sizes evaluated")
        return model.make_solution(n=n_star, backend="exact", solver="scan", certificate=cert,
                                   details={"method": "scan", "evaluations": evals})
    try:
        n_star, v_star, lb, evals, rounds, live, why = _bnb(model, branching, leaf, deadline)
    except _TrendError as exc:
        return Solution(status=Status.ERROR, backend="exact", model="SampleSizeProgram", message=str(exc))
    gap = max(0.0, (v_star - lb) / v_star) if v_star > 0 else 0.0
    done = why == "done"
    cert = Certificate(kind="gap", optimal=done, lower_bound=lb, gap=gap, tolerance=_SLACK,
                       message=f"interval branch and bound, {rounds} rounds")
    return model.make_solution(n=n_star, status=Status.OPTIMAL if done else Status.TIME_LIMIT, backend="exact",
                               solver="interval-bnb", certificate=cert,
                               message="" if done else "time limit reached; best point so far",
                               details={"method": "bnb", "evaluations": evals, "rounds": rounds,
                                      "max_live_intervals": live})


@register("exact", SampleSizeProgram, "relax", _DESCRIPTION)
def relax_exact(model: SampleSizeProgram, rel_gap: float = DEFAULT_REL_GAP, time_limit: float | None = None,
                branching: int = 8, max_rounds: int = 400) -> Solution:
    """Continuous relaxation: the real n in [max(1, N·δ), N] minimising V_n, certified by the same interval
    bound as the integer search (s decreases in n; the noise term's monotone bound holds for real n too).

    Stops when the relative gap between the best value and the smallest live or pruned interval bound is
    ≤ ``rel_gap`` (``optimal``), at ``time_limit`` or after ``max_rounds`` rounds of ``branching``-way splits
    (``time_limit`` / ``feasible`` with the gap). ``x`` is a float; the integer optimum is ``solve()``."""
    rel_gap = V.rel_gap(rel_gap)
    branching = V.count("branching", branching, minimum=2, maximum=1024)
    max_rounds = V.count("max_rounds", max_rounds, maximum=100_000)
    if not model.bounded:
        return Solution(status=Status.UNSUPPORTED, backend="exact", model="SampleSizeProgram",
                        message="the relaxation needs an interval bound: declare sensitivity_trend for the "
                                "sensitivity callable")
    t0 = time.perf_counter()
    deadline = np.inf if time_limit is None else t0 + float(time_limit)
    lo = model.x_min
    hi = float(model.N)
    a, b = np.array([lo]), np.array([hi])
    ends = np.array([lo, hi])
    v = model.variance(ends)
    j = int(np.argmin(v))
    best_x, best_v = float(ends[j]), float(v[j])
    retired_lb = np.inf          # bounds of intervals pruned or too narrow to split further
    rounds, why = 0, "done"
    while a.size:
        if rounds >= max_rounds:
            why = "rounds"
            break
        if time.perf_counter() > deadline:
            why = "time_limit"
            break
        rounds += 1
        mid = 0.5 * (a + b)
        v = model.variance(mid)
        j = int(np.argmin(v))
        if v[j] < best_v:
            best_x, best_v = float(mid[j]), float(v[j])
        lb = model.sampling_variance(b) + model.noise_lower_bound(a, b)
        close = best_v - rel_gap * abs(best_v)          # an interval that cannot beat this is done
        narrow = (b - a) <= 1e-13 * b                  # float resolution: split no further
        done = (lb >= close) | narrow
        if np.any(done):
            retired_lb = min(retired_lb, float(np.min(lb[done])))
        a, b = a[~done], b[~done]
        if a.size:
            edges = a[:, None] + (b - a)[:, None] * (np.arange(branching + 1)[None, :] / branching)
            a, b = edges[:, :-1].ravel(), edges[:, 1:].ravel()
    live_lb = float(np.min(model.sampling_variance(b) + model.noise_lower_bound(a, b))) if a.size else np.inf
    bound = min(retired_lb, live_lb, best_v)
    gap = max(0.0, (best_v - bound) / abs(best_v)) if best_v != 0 else 0.0
    optimal = gap <= rel_gap
    status = Status.OPTIMAL if optimal else (Status.TIME_LIMIT if why == "time_limit" else Status.FEASIBLE)
    cert = Certificate(kind="gap", optimal=optimal, lower_bound=bound, gap=gap, tolerance=rel_gap,
                       message=f"real-interval branch and bound, {rounds} rounds")
    message = "" if optimal else ("time limit reached" if why == "time_limit" else
                                  f"stopped after {rounds} rounds") + f"; gap {gap:.2e}"
    return model.make_solution(x=best_x, status=status, certificate=cert, backend="exact", solver="interval-bnb",
                               message=message, details={"rounds": rounds})
