"""Domain precision targets on the objective's own scale, solved exactly by nested marginal allocation.

Per-domain precision targets at a fixed total (Bethel–Chromy's targets, here with DP noise): a fixed total Σ n = η, box bounds, and one or
more precision targets, each on a *domain* (a set of strata) whose row weights are the objective's weights
on that domain times a constant (the variance of the domain mean under the population-mean objective:
both weigh stratum i by N_i²). Domains are disjoint. Then, with φ_i the objective term of stratum i and
F_d(m) = min{Σ_{i∈d} φ_i(n_i) : Σ_{i∈d} n_i = m, box}, a target reads F_d(m_d) ≤ c_d, and the program is

    minimise Σ_d F_d(m_d) + Σ_{free i} φ_i(n_i)   subject to   Σ_d m_d + Σ_{free i} n_i = η,
                                                                F_d(m_d) ≤ c_d.

Each F_d is discretely convex (the value of a separable convex allocation; its marginals are the domain's
increments in increasing order), so {m : F_d(m) ≤ c_d} is an integer interval [m_lo, m_hi], and the
program is a separable convex allocation with bounds on the domain totals. Marginal allocation is exact
for it: give each domain its smallest feasible total m_lo (the domain's own greedy until F_d ≤ c_d), then
the remaining units one by one to the smallest increment anywhere, closing a domain when its next unit
would break its target. The answer carries an exchange certificate (no unit moved between two domains
or free strata lowers the objective), checked on the computed increments. Requires discretely convex
terms (``convexity_verified``); anything else goes to the general solver in :mod:`.constrained`.
See docs/constrained.md.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ...formulations.separable import SeparableProgram

_BLOCK = 64            # increments computed per stratum at a time, at first
_BLOCK_MAX = 1 << 14   # ... and at most (each refill of a stratum doubles its block)
_RTOL = 1e-12          # proportionality of a row's weights to the objective's
_GREY = 1e-12          # a domain value this close (relative) to its cap is too close to call by running sums


def domain_structure(prog: SeparableProgram):
    """``[(positions, cap, rows)]`` when every nonlinear row is a ≤ target on a domain with the objective's
    weights times a constant (``cap`` in objective units), the domains are disjoint and the one linear row
    is the total Σ n = η; else None. ``cap`` is (rhs + allowance)/constant: the largest domain value the one
    feasibility test accepts (FEASIBILITY_TOL; docs/constrained.md), so that a target met exactly by a design
    (or within the tolerance) is met here too."""
    obj = prog.objective
    if obj.W is None or (obj.a is not None and np.any(obj.a != 0)):
        return None
    linear = [l for l, r in enumerate(prog.rows) if r.W is None]
    if len(linear) != 1:
        return None
    tot = prog.rows[linear[0]]
    if tot.sense != "==" or tot.a is None or not np.all(tot.a == 1.0):
        return None
    owner = np.full(prog.k, -1)
    groups: list[list] = []
    allow = prog.allowance()
    for l, r in enumerate(prog.rows):
        if l == linear[0]:
            continue
        if r.sense != "<=" or (r.a is not None and np.any(r.a != 0)):
            return None
        S = np.flatnonzero(np.any(r.W != 0, axis=1))
        if S.size == 0:
            return None
        W0, Wl = obj.W[S], r.W[S]
        mask = W0 != 0
        if np.any((Wl != 0) != mask) or not np.any(mask):
            return None
        ratio = Wl[mask] / W0[mask]
        s = float(np.median(ratio))
        if not (s > 0 and np.all(np.abs(ratio - s) <= _RTOL * s)):
            return None
        cap = (r.rhs + allow[l]) / s
        taken = np.unique(owner[S])
        if taken.size == 1 and taken[0] >= 0 and np.array_equal(groups[taken[0]][0], S):
            g = groups[taken[0]]               # a second target on the same domain: the tighter one binds
            g[1] = min(g[1], cap)
            g[2].append(l)
            continue
        if np.any(owner[S] >= 0):
            return None                        # overlapping domains: not this structure
        owner[S] = len(groups)
        groups.append([S, cap, [l]])
    if not groups:
        return None
    return [(S, cap, rows) for S, cap, rows in groups]


class _Increments:
    """φ_i(n + 1) − φ_i(n) of the objective terms, computed in blocks of ``_BLOCK`` values per stratum. Bounds,
    block starts and blocks are Python lists: :meth:`at` runs once per unit allocated (10^6 times at k = 20 000,
    η = 10^6), where numpy's scalar indexing cost more than the increments' computation."""

    def __init__(self, prog: SeparableProgram, n: np.ndarray):
        self.prog = prog
        self.W = prog.objective.W
        self.upper = [int(u) for u in prog.upper]
        self.start = [int(v) for v in n]
        self.block: dict[int, list] = {}
        idx = np.flatnonzero(n < prog.upper)
        if idx.size:
            self._fill(idx, n[idx])

    def _fill(self, idx, start, size=_BLOCK):
        m = (start[:, None] + np.arange(size)[None, :]).ravel().astype(float)
        ii = np.repeat(idx, size)
        ok = m < self.prog.upper[ii]
        D = np.full(m.size, np.inf)
        if np.any(ok):
            inc = self.prog.increment_matrix(m[ok], ii[ok])
            D[ok] = np.sum(self.W[ii[ok]] * inc, axis=1)
        D = D.reshape(idx.size, size).tolist()
        for p, (i, v) in enumerate(zip(idx.tolist(), start.tolist())):
            self.block[i] = D[p]
            self.start[i] = v

    def at(self, i: int, v: int) -> float:
        """The increment of stratum i from v to v + 1 (inf at its upper bound)."""
        if v >= self.upper[i]:
            return math.inf
        off = v - self.start[i]
        blk = self.block.get(i)
        if blk is None or not 0 <= off < len(blk):
            # a stratum that used up its block gets one twice as long (each refill has a fixed cost of ~0.3 ms:
            # 12 000 refills of 64 were half of a k = 20 000 solve)
            size = min(2 * len(blk), _BLOCK_MAX) if blk is not None and off >= 0 else _BLOCK
            self._fill(np.array([i]), np.array([v], dtype=np.int64), size)
            blk, off = self.block[i], 0
        return blk[off]


def solve_domains(prog: SeparableProgram, groups, deadline=None):
    """The exact integer optimum of a program with :func:`domain_structure` ``groups`` (terms discretely
    convex), as ``(n, certificate slack, note, binding)`` (``binding[g]``: domain g's target moves the
    optimum: it was held at its least feasible total above the price of a unit, or closed at its cap); ``("infeasible", reason)`` when a target is below what
    its domain can reach or the total cannot be met; None when the deadline passes."""
    k = prog.k
    eta = int(round(next(r.rhs for r in prog.rows if r.W is None)))
    lo, hi = prog.lower.astype(np.int64), prog.upper.astype(np.int64)
    if lo.sum() > eta or hi.sum() < eta:
        return "infeasible", f"the total {eta} lies outside [Σ lower, Σ upper] = [{lo.sum()}, {hi.sum()}]"
    n = lo.copy()
    inc = _Increments(prog, n)
    T = prog.unit_matrix(n.astype(float))
    phi = np.sum(prog.objective.W * T, axis=1)
    group_of = np.full(k, -1)
    F, cap, forced, last_forced = [], [], [], []
    for g, (S, c, _rows) in enumerate(groups):
        group_of[S] = g
        F.append(math.fsum(phi[S]))
        cap.append(c)
    used = int(n.sum())
    # the unit-by-unit loops below run on Python lists (numpy scalar indexing was most of their time)
    nl, hl, gl = n.tolist(), hi.tolist(), group_of.tolist()
    # phase 1: each domain's smallest total meeting its target (its own marginal allocation)
    for g, (S, c, _rows) in enumerate(groups):
        heap = [(inc.at(i, nl[i]), i) for i in S.tolist() if nl[i] < hl[i]]
        heapq.heapify(heap)
        steps = 0
        last = -math.inf
        while F[g] > c:
            if not heap or heap[0][0] >= 0:
                if F[g] <= c * (1 + _GREY):
                    return None        # within rounding of the tolerance's edge: the general route decides
                return "infeasible", (f"domain target {g + 1} is below what its strata can reach (its smallest "
                                      f"value, {F[g]:.6g} on the objective's scale, exceeds {c:.6g})")
            d, i = heapq.heappop(heap)
            F[g] += d
            last = d
            nl[i] += 1
            used += 1
            steps += 1
            if used > eta:
                return "infeasible", "the domain targets together need more than the total sample size"
            if nl[i] < hl[i]:
                heapq.heappush(heap, (inc.at(i, nl[i]), i))
            if deadline is not None and steps % 4096 == 0 and deadline.passed():
                return None
        forced.append(sum(nl[i] for i in S.tolist()))
        last_forced.append(last)
    # phase 2: the remaining units, each to the smallest increment whose domain stays within its target
    closed = [False] * len(groups)
    price = -math.inf                      # the largest increment phase 2 paid: the price of a unit
    heap = [(inc.at(i, nl[i]), i) for i in range(k) if nl[i] < hl[i]]
    heapq.heapify(heap)
    steps = 0
    while used < eta:
        if not heap:
            return "infeasible", "the domain targets leave too little room for the total sample size"
        d, i = heapq.heappop(heap)
        g = gl[i]
        if g >= 0:
            if closed[g]:
                continue
            if F[g] + d > cap[g]:
                closed[g] = True           # its increments only grow from here: the domain is full
                continue
            F[g] += d
        price = max(price, d)
        nl[i] += 1
        used += 1
        steps += 1
        if nl[i] < hl[i]:
            heapq.heappush(heap, (inc.at(i, nl[i]), i))
        if deadline is not None and steps % 4096 == 0 and deadline.passed():
            return None
    n = np.array(nl, dtype=np.int64)
    binding = [closed[g] or (int(n[S].sum()) == forced[g] and last_forced[g] > price)
               for g, (S, _c, _rows) in enumerate(groups)]
    slack = _exchange_slack(n, lo, hi, inc, group_of, groups, forced, F, cap)
    return n, slack, f"nested marginal allocation over {len(groups)} domain(s)", binding


def _exchange_slack(n, lo, hi, inc, group_of, groups, forced, F, cap) -> float:
    """min over pairs of groups g ≠ h of (next marginal of g) − (last removable marginal of h): ≥ 0 proves
    the allocation of the domain totals optimal (free strata are groups of one)."""
    last: list[tuple[float, int]] = []      # (marginal saved by removing the group's last unit, group)
    nxt: list[tuple[float, int]] = []       # (marginal of the group's next unit, group)
    G = len(groups)
    for g, (S, _c, _rows) in enumerate(groups):
        taken = [inc.at(int(i), int(n[i]) - 1) for i in S if n[i] > lo[i]]
        if int(n[S].sum()) > forced[g] and taken:
            last.append((max(taken), g))
        room = [inc.at(int(i), int(n[i])) for i in S if n[i] < hi[i]]
        if room and F[g] + min(room) <= cap[g]:
            nxt.append((min(room), g))
    for i in np.flatnonzero(group_of < 0):
        if n[i] > lo[i]:
            last.append((inc.at(int(i), int(n[i]) - 1), G + int(i)))
        if n[i] < hi[i]:
            nxt.append((inc.at(int(i), int(n[i])), G + int(i)))
    if not last or not nxt:
        return math.inf
    last.sort(reverse=True)
    nxt.sort()
    best = math.inf
    for a, ga in last[:2]:
        for b, gb in nxt[:2]:
            if ga != gb:
                best = min(best, b - a)
    return best
