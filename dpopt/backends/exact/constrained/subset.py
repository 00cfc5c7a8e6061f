"""A primal heuristic for blocks with one inequality row, alone or beside the fixed total Σ n = η (a min-cost design
under one variance bound, one domain's target in a min-cost design, a cost budget on a design of fixed size): a
feasible design whose objective is within ``rel_gap`` of the integer Lagrangian bound, when one exists near it. It
proves nothing itself: the certificate stays the bound's.

Why it is needed (docs/constrained.md, "One row: knapsack gaps"): with one row, every feasible n has
f(n) = LB + Σ_i r_i(n_i) + λ·s(n), and at the best multiplier λ many strata have a neighbour n_λ,i ± 1 whose
reduced cost is nearly zero (its cost per unit of variance is the critical one). Closing the gap is then a
subset-sum problem: pick moves of near-zero reduced cost whose row changes add up to the slack the Lagrangian
point leaves, to within rel_gap·f/λ. A core enumeration proves it by listing every such combination (2^h of
them for h near-ties, which is where it stalled), and HiGHS on the secant MILP stalls on the same near-ties.
A point within the gap ends the search at once.

Steps, each bounded: (1) from n_λ, a greedy repair adds the cheapest variance per unit of objective until the
row holds; (2) rounds of meet-in-the-middle over the ``2·half`` strata whose ±1 moves cost least: each half's
3^half combinations of {−1, 0, +1} are listed with their objective and row changes, one half sorted by row
change with the running minimum of its objective change, and for every combination of the other half the best
partner that keeps the row within its right-hand side is found by binary search (with a total, only among the
partners whose units cancel the first half's, so that Σ n stays η). With a total, the start is the Lagrangian
minimiser moved onto the total by marginal allocation, repaired onto the row by the one repair of every route
(:class:`.incumbent.Incumbent`). A round that finds nothing better draws half its strata from the next POOL
near-ties (seeded: a solve is reproducible); the search gives up after MAX_STALLED such rounds in a row
(MAX_STALLED_FAR while the gap is above NEAR·rel_gap = 1e-7 by default, where the optimum is likely not near the
bound and the cores are the faster proof). Every point is checked by the one
feasibility test (:class:`.incumbent.Incumbent`)."""

from __future__ import annotations

import functools
import math

import numpy as np

from ....formulations.repair import unit_terms
from .bound import lattice_step
from .fixing import reduced_ranges
from .incumbent import Incumbent, onto_total
from .inner import phi

HALF = 9               # strata per half of a meet-in-the-middle round (3^9 = 19 683 combinations each)
ROUNDS = 200            # meet-in-the-middle rounds at most
_REPAIR_PASSES = 60    # greedy repair passes at most (each adds at most one unit per stratum)
MAX_STALLED = 30       # rounds in a row without a better point before the search gives up (the cores take over)
MAX_STALLED_FAR = 8    # the same when the gap is still above NEAR·rel_gap (the optimum is likely not near the bound)
NEAR = 1e2
CHECK_CORE_AFTER = 4   # stalled rounds after which the size of the core holding every better design is checked ...
SMALL_CORE = 100       # ... and the search gives up for the cores when it has at most this many free strata
POOL = 120             # near-ties a stalled round draws from
USE_ALLOWANCE = 0.999  # share of the feasibility test's allowance the subset search may use


def applies(prog) -> bool:
    """One inequality row, alone or beside the total Σ n = η (the routes this heuristic serves)."""
    return int(np.sum(prog.inequality())) == 1 and prog.m == 1 + (prog.total_row() is not None)


def _row(prog) -> int:
    """The position of the one inequality row."""
    return int(np.flatnonzero(prog.inequality())[0])


def _total(prog) -> int | None:
    """η of the total row (None without one)."""
    t = prog.total_row()
    return None if t is None else int(round(prog.rows[t].rhs))


def _terms(prog, n):
    """Per stratum at n (an integer vector of the block): objective and row contributions."""
    g, f = unit_terms(prog, n)
    return f, g[:, _row(prog)]


def _move_table(prog, n, idx, deltas):
    """Objective and row changes of moving strata ``idx`` by each of ``deltas`` (inf where out of the box)."""
    f0, g0 = _terms(prog, n)
    df = np.full((idx.size, len(deltas)), np.inf)
    dg = np.full((idx.size, len(deltas)), np.inf)
    for c, d in enumerate(deltas):
        v = n[idx] + d
        ok = (v >= prog.lower[idx]) & (v <= prog.upper[idx])
        if not np.any(ok):
            continue
        sel = idx[ok]
        x = v[ok].astype(float)
        T = prog.unit_matrix(x, sel)
        df[ok, c] = prog.row_terms(prog.objective, T, x, sel) - f0[sel]
        dg[ok, c] = prog.row_terms(prog.rows[_row(prog)], T, x, sel) - g0[sel]
    return df, dg


def repair(prog, n, deadline) -> np.ndarray | None:
    """From ``n``, add units where they buy the most row decrease per unit of objective until the row holds
    (None when even that cannot reach it within the passes)."""
    n = n.copy()
    rhs = float(prog.rows[_row(prog)].rhs)
    idx = np.arange(prog.k)
    for _ in range(_REPAIR_PASSES):
        _, g0 = _terms(prog, n)
        need = float(np.sum(g0)) - rhs
        if need <= 0:
            return n
        if deadline.passed():
            return None
        df, dg = _move_table(prog, n, idx, (1,))
        df, dg = df[:, 0], dg[:, 0]
        useful = np.isfinite(dg) & (dg < 0)
        if not np.any(useful):
            return None
        cand = np.flatnonzero(useful)
        rate = np.maximum(df[cand], 0.0) / -dg[cand]
        order = cand[np.argsort(rate, kind="stable")]
        covered = np.cumsum(-dg[order])
        take = order[: int(np.searchsorted(covered, need)) + 1]
        n[take] += 1
    return n if float(np.sum(_terms(prog, n)[1])) <= rhs else None


@functools.lru_cache(maxsize=4)
def _choices(h: int) -> np.ndarray:
    """The 3^h × h matrix of every choice of one of three columns per row."""
    return np.indices((3,) * h, dtype=np.int8).reshape(h, -1).T.copy()


def _combinations(df, dg):
    """All 3^h choices of one column per row of (h×3) tables: summed objective and row changes, and the
    choices (h-vectors of column indices)."""
    h = df.shape[0]
    choice = _choices(h)
    F = np.zeros(choice.shape[0])
    G = np.zeros(choice.shape[0])
    for t in range(h):
        F += df[t, choice[:, t]]
        G += dg[t, choice[:, t]]
    return F, G, choice


def improve(prog, ib, inc: Incumbent, lb: float, rel_gap: float, deadline) -> None:
    """Offer ``inc`` designs within ``rel_gap`` of ``lb`` (module docstring); stops as soon as one is found."""
    if not applies(prog):
        return
    eta = _total(prog)
    if not inc.found:
        inc.offer(repair(prog, ib.n, deadline) if eta is None else onto_total(prog, ib.Om, ib.ell, ib.n, eta))
    if not inc.found:
        return
    # the feasibility test accepts a row up to rhs + allowance (docs/constrained.md, "Feasibility and safe
    # bounds") and the bound LB holds over that set, so the subset search aims at the same set (a whisker
    # inside it, for rounding); offer() applies the test itself
    row = _row(prog)
    rhs = float(prog.rows[row].rhs) + USE_ALLOWANCE * float(prog.allowance()[row])
    per_round = 2 * HALF
    stalled = 0
    rng = np.random.default_rng(0)
    step = lattice_step(prog)[0]
    checked = math.inf          # the incumbent's objective when the core was last checked
    for _ in range(ROUNDS):
        # near the bound (a few lattice units, say) stalled rounds are worth more tries than far from it
        near = inc.ub - lb <= NEAR * rel_gap * abs(inc.ub)
        if inc.ub - lb <= rel_gap * abs(inc.ub) or deadline.passed() \
                or stalled >= (MAX_STALLED if near else MAX_STALLED_FAR):
            return
        if stalled >= CHECK_CORE_AFTER and inc.ub < checked:
            # every better design lies in the core of budget ub − step − LB: when that core is small, its
            # enumeration proves (or improves) faster than further rounds (measured: classical min-cost at
            # k = 1 000, 25 stalled rounds in 0.17 s, then 10 strata enumerated in 2 ms)
            checked = inc.ub
            r_lo, r_hi = reduced_ranges(prog, ib.Om, ib.ell, ib.n, max(inc.ub - step - ib.lb, 0.0))
            if int(np.sum(r_hi > r_lo)) <= SMALL_CORE:
                return
        n = inc.n
        ranked = _near_ties(prog, ib, n)
        # the closest near-ties at the incumbent, with the others drawn from the next POOL (a seeded draw, so a
        # solve is reproducible) once a round finds nothing
        if stalled == 0 or ranked.size <= per_round:
            idx = ranked[:per_round]
        else:
            idx = np.concatenate([ranked[:HALF], rng.choice(ranked[HALF:HALF + POOL],
                                                            min(per_round - HALF, ranked.size - HALF), replace=False)])
        if idx.size < 2:
            return
        had = inc.ub
        slack = rhs - float(np.sum(_terms(prog, n)[1]))
        df, dg = _move_table(prog, n, idx, (-1, 0, 1))
        df[:, 1] = dg[:, 1] = 0.0
        bad = ~np.isfinite(df) | ~np.isfinite(dg)
        df[bad], dg[bad] = np.inf, np.inf
        h = idx.size // 2
        FL, GL, CL = _combinations(df[:h], dg[:h])
        FR, GR, CR = _combinations(df[h:], dg[h:])
        best, partner = _best_pair(FL, GL, CL, FR, GR, CR, slack, with_total=eta is not None)
        if best is None:
            stalled += 1
            continue
        cand = n.copy()
        cand[idx[:h]] += CL[best].astype(np.int64) - 1
        cand[idx[h:]] += CR[partner].astype(np.int64) - 1
        inc.offer(cand)
        stalled = 0 if inc.ub < had else stalled + 1


def _best_pair(FL, GL, CL, FR, GR, CR, slack, with_total: bool):
    """The pair (left combination, right combination) of least summed objective change below zero whose summed
    row change is at most ``slack`` (and, ``with_total``, whose units cancel); (None, None) when there is none.
    Per group of right combinations (one group without a total, one per unit change with it): sorted by row
    change with the running minimum of the objective change, searched by binary search for each left one."""
    units_l = CL.sum(axis=1, dtype=np.int64) - CL.shape[1] if with_total else np.zeros(FL.size, dtype=np.int64)
    units_r = CR.sum(axis=1, dtype=np.int64) - CR.shape[1] if with_total else np.zeros(FR.size, dtype=np.int64)
    order = np.lexsort((GR, units_r))
    GR, FR, units_r = GR[order], FR[order], units_r[order]
    bounds = np.flatnonzero(np.concatenate([[True], units_r[1:] != units_r[:-1], [True]]))
    best_val, best_l, best_r = 0.0, None, None
    for s0, s1 in zip(bounds[:-1], bounds[1:]):
        left = np.flatnonzero((units_l == -units_r[s0]) & np.isfinite(FL))
        if left.size == 0:
            continue
        g, f = GR[s0:s1], FR[s0:s1]
        run = np.minimum.accumulate(f)
        arg = np.zeros(run.size, dtype=np.int64)
        new = np.concatenate([[True], f[1:] < run[:-1]])
        arg[new] = np.flatnonzero(new)
        arg = np.maximum.accumulate(arg)              # position of the running minimum
        # the group's combination with the least objective change among those with row change ≤ room
        pos = np.searchsorted(g, slack - GL[left], side="right") - 1
        ok = pos >= 0
        if not np.any(ok):
            continue
        value = np.where(ok, FL[left] + run[np.maximum(pos, 0)], np.inf)
        j = int(np.argmin(value))
        if value[j] < best_val:
            best_val, best_l, best_r = float(value[j]), int(left[j]), int(order[s0 + arg[pos[j]]])
    return best_l, best_r


def _near_ties(prog, ib, n):
    """Strata ranked by the least change of reduced cost (at λ, against n_λ) a ±1 move from ``n`` makes: moves
    that undo the repair's dearest units, then the near-ties of the multiplier."""
    Om, ell = ib.Om, ib.ell
    here = phi(prog, Om, ell, n.astype(float))
    key = np.full(prog.k, np.inf)
    for d in (-1, 1):
        v = n + d
        ok = np.flatnonzero((v >= prog.lower) & (v <= prog.upper))
        if ok.size:
            key[ok] = np.minimum(key[ok], phi(prog, Om, ell, v[ok].astype(float), ok) - here[ok])
    ranked = np.argsort(key, kind="stable")
    return ranked[np.isfinite(key[ranked])]
