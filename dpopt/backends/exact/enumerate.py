"""``enumerate`` backend: brute force over every feasible integer design (tiny instances only).

It is the oracle for instances the exact backend does not cover (custom linear constraints, the
min-cost variant). The scan is vectorised with numpy: designs are decoded in chunks from a mixed-radix
index over a box of coordinates, one coordinate being implied by the sum constraint, and the objective is
a sum of per-stratum lookup tables. It refuses (status ``unsupported``) when the box holds more than
``max_candidates`` designs; the caller may raise the limit.

The same scanner (:func:`scan_box`) does the exhaustive part of Algorithm 1.
"""

from __future__ import annotations

import time

import numpy as np

from ...models.stratified import MinCostDesign, StratifiedDesign
from ... import _validate as V
from ...feasibility import FEASIBILITY_TOL
from ...registry import register
from ...result import Certificate, Solution, Status
from .._routes import classical_only

_DESCRIPTION = "brute-force enumeration of all feasible integer designs (tiny instances; the oracle)"
DEFAULT_MAX_CANDIDATES = 10_000_000
_FEAS_RTOL = FEASIBILITY_TOL   # the one tolerance of Model.is_feasible (dpopt/feasibility.py)


class ScanResult:
    __slots__ = ("n", "value", "secondary", "scanned", "feasible", "timed_out")

    def __init__(self):
        self.n = None
        self.value = np.inf
        self.secondary = np.inf
        self.scanned = 0
        self.feasible = 0
        self.timed_out = False


def box_count(lo: np.ndarray, hi: np.ndarray) -> int:
    """Number of integer points of the box (Python int, no overflow)."""
    out = 1
    for a, b in zip(lo.tolist(), hi.tolist()):
        out *= max(0, int(b) - int(a) + 1)
    return out


def scan_box(k: int, free: np.ndarray, lo: np.ndarray, hi: np.ndarray, obj_tables: list[np.ndarray],
             implied: tuple | None = None, con_tables: list[np.ndarray] | None = None, con_budget: float = np.inf,
             constraints=(), chunk: int = 1 << 18, deadline: float | None = None) -> ScanResult:
    """Minimise Σ obj_tables over the integer box ``lo[p] ≤ n[free[p]] ≤ hi[p]``.

    obj_tables[p][v] is the objective term of coordinate free[p] at value lo[p] + v.
    implied = (j, total, jlo, jhi, table_j): n_j = total − Σ n_free must lie in [jlo, jhi]; table_j[v] is its
    term at jlo + v. con_tables (same layout, incl. the implied coordinate last) give a secondary sum that
    must stay ≤ con_budget (relative tolerance FEASIBILITY_TOL); it also breaks ties of the objective.
    constraints: LinearConstraint objects checked on the full design (relative tolerance FEASIBILITY_TOL).
    """
    res = ScanResult()
    sizes = (hi - lo + 1).astype(np.int64)
    if np.any(sizes <= 0):
        return res
    total_count = int(np.prod(sizes.astype(object)))
    strides = np.ones(len(free), dtype=np.int64)
    for p in range(len(free) - 2, -1, -1):
        strides[p] = strides[p + 1] * sizes[p + 1]
    base = int(lo.sum())
    budget = con_budget + _FEAS_RTOL * abs(con_budget) if np.isfinite(con_budget) else np.inf
    start = 0
    while start < total_count:
        end = min(total_count, start + chunk)
        idx = np.arange(start, end, dtype=np.int64)
        val = np.zeros(idx.size)
        sec = np.zeros(idx.size) if con_tables is not None else None
        ssum = np.zeros(idx.size, dtype=np.int64)
        digits = []
        for p in range(len(free)):
            d = (idx // strides[p]) % sizes[p] if len(free) > 1 else idx
            digits.append(d)
            val += obj_tables[p][d]
            if sec is not None:
                sec += con_tables[p][d]
            ssum += d
        ok = np.ones(idx.size, dtype=bool)
        nj = None
        if implied is not None:
            j, total, jlo, jhi, table_j = implied
            nj = total - base - ssum
            ok &= (nj >= jlo) & (nj <= jhi)
            off = np.clip(nj - jlo, 0, table_j.size - 1)
            val += table_j[off]
            if sec is not None:
                sec += con_tables[-1][off]
        if sec is not None:
            ok &= sec <= budget
        if constraints:
            n = np.empty((idx.size, k), dtype=np.int64)
            for p, i in enumerate(free):
                n[:, i] = lo[p] + digits[p]
            if implied is not None:
                n[:, implied[0]] = nj
            nf = n.astype(float)
            for con in constraints:
                lhs = nf @ con.A.T
                tol = _FEAS_RTOL * (1 + np.abs(con.b))
                if con.sense == "<=":
                    ok &= np.all(lhs - con.b <= tol, axis=1)
                elif con.sense == ">=":
                    ok &= np.all(con.b - lhs <= tol, axis=1)
                else:
                    ok &= np.all(np.abs(lhs - con.b) <= tol, axis=1)
        res.scanned += idx.size
        nok = int(ok.sum())
        res.feasible += nok
        if nok:
            v = np.where(ok, val, np.inf)
            best = float(v.min())
            if sec is not None:
                # ties of the objective (e.g. equal costs) are broken by the secondary sum
                close = ok & (v <= best + 1e-12 * abs(best))
                cand = np.flatnonzero(close)
                pos = int(cand[np.argmin(sec[cand])])
            else:
                pos = int(np.argmin(v))
            vb = float(val[pos])
            sb = float(sec[pos]) if sec is not None else 0.0
            better = vb < res.value - 1e-12 * abs(vb) or (
                abs(vb - res.value) <= 1e-12 * abs(vb) and sb < res.secondary)
            if res.n is None or better:
                n_best = np.empty(k, dtype=np.int64)
                for p, i in enumerate(free):
                    n_best[i] = lo[p] + digits[p][pos]
                if implied is not None:
                    n_best[implied[0]] = nj[pos]
                res.n, res.value, res.secondary = n_best, vb, sb
        start = end
        if deadline is not None and time.perf_counter() > deadline and start < total_count:
            res.timed_out = True
            break
    return res


def sum_box(model: StratifiedDesign, lo: np.ndarray, hi: np.ndarray):
    """Free coordinates, implied coordinate and candidate count of the box lo ≤ n ≤ hi with Σ n = total.

    The implied coordinate is the one with the widest range (fewest candidates).
    """
    sizes = hi - lo + 1
    j = int(np.argmax(sizes))
    free = np.array([i for i in range(model.k) if i != j], dtype=np.int64)
    flo, fhi = lo[free].copy(), hi[free].copy()
    # tighten the free ranges using the implied coordinate's bounds
    rest_lo, rest_hi = int(flo.sum()), int(fhi.sum())
    for p in range(free.size):
        others_lo, others_hi = rest_lo - flo[p], rest_hi - fhi[p]
        flo[p] = max(flo[p], model.total - int(hi[j]) - others_hi)
        fhi[p] = min(fhi[p], model.total - int(lo[j]) - others_lo)
    jlo = max(int(lo[j]), model.total - int(fhi.sum()))
    jhi = min(int(hi[j]), model.total - int(flo.sum()))
    return free, flo, fhi, j, jlo, jhi, box_count(flo, fhi)


def _terms_table(fn, a: int, b: int) -> np.ndarray:
    if b < a:
        return np.zeros(1)
    return np.asarray(fn(np.arange(a, b + 1, dtype=float)), dtype=float)


def scan_sum_problem(model: StratifiedDesign, lo: np.ndarray, hi: np.ndarray, deadline=None,
                     use_constraints: bool = True) -> tuple[ScanResult, int]:
    """Exhaustive minimum of g over {lo ≤ n ≤ hi, Σ n = total} (and the model's linear constraints)."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    free, flo, fhi, j, jlo, jhi, count = sum_box(model, lo, hi)
    if jhi < jlo or np.any(fhi < flo):
        return ScanResult(), 0
    tables = [_terms_table(lambda v, i=int(i): _term(model, i, v), int(a), int(b)) for i, a, b in zip(free, flo, fhi)]
    tj = _terms_table(lambda v: _term(model, j, v), jlo, jhi)
    if free.size == 0:
        # k = 1: the design is fixed by the sum
        res = ScanResult()
        res.scanned = 1
        n = np.array([model.total], dtype=np.int64)
        if lo[0] <= model.total <= hi[0] and (not use_constraints or model.is_feasible(n)):
            res.n, res.value, res.feasible = n, float(model.terms(n).sum()), 1
        return res, 1
    res = scan_box(model.k, free, flo, fhi, tables, implied=(j, model.total, jlo, jhi, tj),
                   constraints=model.constraints if use_constraints else (), deadline=deadline)
    return res, count


def _term(model: StratifiedDesign, i: int, v: np.ndarray) -> np.ndarray:
    """f_i(v) for a vector of values of one stratum (the model's own terms)."""
    x = np.asarray(v, dtype=float)
    return model.terms(x, np.full(x.shape, int(i)))


def _too_big(count: int, limit: int, what: str) -> Solution:
    return Solution(Status.UNSUPPORTED, backend="enumerate",
                    message=f"instance too large for enumerate: {count} candidate {what} > max_candidates="
                            f"{limit} (pass max_candidates=... to raise the limit)",
                    details={"candidates": count, "max_candidates": limit})


def _check_limit(max_candidates) -> int:
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, (int, np.integer)) or max_candidates < 1:
        raise V.InvalidOption(f"max_candidates must be a positive integer, got {max_candidates!r}")
    return int(max_candidates)


def _check_time(time_limit):
    return V.time_limit(time_limit)


def solve_stratified(model: StratifiedDesign, max_candidates: int = DEFAULT_MAX_CANDIDATES,
                     time_limit: float | None = None) -> Solution:
    """Exhaustive search over Σ n = total within the bounds and the linear constraints."""
    t0 = time.perf_counter()
    limit = _check_limit(max_candidates)
    time_limit = _check_time(time_limit)
    count = sum_box(model, model.lower, model.upper)[-1]
    if count > limit:
        return _too_big(count, limit, "designs")
    res, count = scan_sum_problem(model, model.lower, model.upper,
                                  deadline=None if time_limit is None else t0 + time_limit)
    return _finish(model, res, count, t0)


def _finish(model, res: ScanResult, count: int, t0: float) -> Solution:
    details = {"candidates": count, "scanned": res.scanned, "feasible_designs": res.feasible}
    if res.n is None:
        status = Status.TIME_LIMIT if res.timed_out else Status.INFEASIBLE
        return Solution(status, backend="enumerate", details=details, wall_time=time.perf_counter() - t0,
                        message="time limit before any feasible design" if res.timed_out
                        else f"no feasible design among {count} candidates")
    if res.timed_out:
        sol = model.make_solution(n=res.n, status=Status.TIME_LIMIT,
                                  message=f"time limit: scanned {res.scanned} of {count} candidates; best so far")
    else:
        if model.is_plain:
            cert = model.certificate(res.n)
        else:
            cert = Certificate("enumeration", True, message=f"exhaustive over {count} candidates")
        sol = model.make_solution(n=res.n, status=Status.OPTIMAL, certificate=cert,
                                  message=f"exhaustive search over {count} candidates ({res.feasible} feasible)")
    sol.details.update(details)
    sol.wall_time = time.perf_counter() - t0
    return sol


def solve_min_cost(model: MinCostDesign, max_candidates: int = DEFAULT_MAX_CANDIDATES,
                   time_limit: float | None = None) -> Solution:
    """Exhaustive search over the box for min Σ c n s.t. g(n) ≤ V0 and the linear constraints."""
    t0 = time.perf_counter()
    limit = _check_limit(max_candidates)
    time_limit = _check_time(time_limit)
    lo, hi = model.lower.astype(np.int64), model.upper.astype(np.int64)
    count = box_count(lo, hi)
    if count > limit:
        return _too_big(count, limit, "designs")
    d = model.design
    free = np.arange(model.k, dtype=np.int64)
    obj = [model.cost[i] * np.arange(lo[i], hi[i] + 1, dtype=float) for i in range(model.k)]
    con = [_term(d, i, np.arange(lo[i], hi[i] + 1)) for i in range(model.k)]
    res = scan_box(model.k, free, lo, hi, obj, con_tables=con, con_budget=model.variance_budget,
                   constraints=model.constraints, deadline=None if time_limit is None else t0 + time_limit)
    return _finish(model, res, count, t0)


register("enumerate", StratifiedDesign, "solve", _DESCRIPTION)(classical_only(solve_stratified))
register("enumerate", MinCostDesign, "solve", _DESCRIPTION)(classical_only(solve_min_cost))
