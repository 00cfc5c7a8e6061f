"""Enumeration of every integer design of the box, by the rows' own test: a proof on its own (no convexity,
bound or dual is used), for small boxes when the terms are not proven convex or the dual fails."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....formulations.separable import ranges
from .checks import FEAS_TOL, feasible
from .cores import CHUNK

BOX_POINTS = 100_000     # a box with at most this many integer designs is enumerated when the dual fails


@dataclass(frozen=True)
class BoxResult:
    """The best feasible design of the box (None: none is feasible), its objective and the designs scanned."""
    n: np.ndarray | None
    value: float
    scanned: int


def box(prog):
    """The box lower..upper tightened by a fixed total (n_i ≤ η − Σ_{j≠i} lo_j, n_i ≥ η − Σ_{j≠i} hi_j), and
    its number of integer designs (a float: it may exceed any integer type)."""
    lo, hi = ranges(prog)
    if np.any(lo > hi):
        return lo, hi, 0.0
    with np.errstate(over="ignore"):      # a count past 1.8e308 is inf: larger than every limit, as meant
        return lo, hi, float(np.prod((hi - lo + 1).astype(float)))


def enumerate_box(prog, deadline, limit: int = 1000) -> BoxResult | None:
    """Every integer design of the box (:func:`box`), or None when the deadline passes first or the rows' test
    and the vectorised scan disagree on more than ``limit`` candidates.

    Per stratum and value the objective's and rows' contributions (and their absolute values, the rows'
    scale in :meth:`SeparableProgram.row_scale`) are tabulated once; a design's values are sums of table
    entries. Designs within twice the tolerance of :func:`feasible` are candidates, taken in order of their
    objective until one passes :func:`feasible` itself (the one test of feasibility)."""
    lo, hi, count = box(prog)
    if count == 0:
        return BoxResult(None, math.inf, 0)
    sizes = (hi - lo + 1).astype(np.int64)
    tables = _box_tables(prog, lo, hi)
    total = int(count)
    cand_p, cand_f = [], []
    for c0 in range(0, total, CHUNK):
        if deadline.passed():
            return None
        p = np.arange(c0, min(c0 + CHUNK, total), dtype=np.int64)
        f, ok = _scan(prog, tables, np.unravel_index(p, tuple(sizes)), p.size)
        cand_p.append(p[ok])
        cand_f.append(f[ok])
    cp, cf = np.concatenate(cand_p), np.concatenate(cand_f)
    for t, j in enumerate(np.argsort(cf, kind="stable")):
        if t >= limit:
            return None
        n = lo + np.array(np.unravel_index(int(cp[j]), tuple(sizes)), dtype=np.int64)
        if feasible(prog, n):
            return BoxResult(n, prog.evaluate(n.astype(float))[0], total)
    return BoxResult(None, math.inf, total)


def _box_tables(prog, lo, hi):
    """Per stratum, the objective's terms, the rows' terms and their absolute values at every value."""
    obj_t, row_t, abs_t = [], [], []
    for i in range(prog.k):
        v = np.arange(lo[i], hi[i] + 1, dtype=float)
        idx = np.full(v.size, i)
        T = prog.unit_matrix(v, idx)
        obj_t.append(prog.row_terms(prog.objective, T, v, idx))
        per = (np.stack([prog.row_terms(r, T, v, idx) for r in prog.rows], axis=1) if prog.m
               else np.zeros((v.size, 0)))
        row_t.append(per)
        abs_t.append(np.abs(per))
    return obj_t, row_t, abs_t


def _scan(prog, tables, pos, size):
    """Objectives of the designs at table positions ``pos``, and which pass the rows within twice the tolerance."""
    obj_t, row_t, abs_t = tables
    rhs, ineq = prog.rhs(), prog.inequality()
    f = np.zeros(size)
    lhs = np.zeros((size, prog.m))
    mag = np.zeros((size, prog.m))
    for i in range(prog.k):
        f += obj_t[i][pos[i]]
        lhs += row_t[i][pos[i]]
        mag += abs_t[i][pos[i]]
    viol = (lhs - rhs) / np.maximum(np.maximum(np.abs(rhs), mag), 1e-300)
    viol = np.where(ineq, viol, np.abs(viol))
    return f, np.all(viol <= 2 * FEAS_TOL, axis=1)
