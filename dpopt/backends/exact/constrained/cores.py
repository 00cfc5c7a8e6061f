"""Step 3's exact core solver: every design of a core (the values reduced-cost fixing keeps per stratum) whose
objective is within a budget of the Lagrangian bound, by dynamic programming over its free strata, pruned by
the budget, by row reachability and by dominance. :func:`tabulate` and :func:`expand` serve both
:func:`enumerate_core` (the whole core) and :mod:`.linked` (groups of strata linked only by the total).

f(n) = LB + Σ_i r_i(n_i) + Σ_l λ_l s_l(n) with r_i ≥ 0 the reduced costs and s_l ≥ 0 the slacks of the inequality
rows, so a partial design is dropped once its reduced costs plus the slack its remaining strata cannot use
exceed the budget, or once no completion can meet a row (rows checked with a tolerance looser than the final
test). With at most one inequality row that some design of the core can break (the others hold all over
it), a partial design is also dropped when another with the same equality-row values (and linking-row value)
has no larger objective and no larger value of that row (it is dominated). Nothing that could be feasible
within the budget is lost, so an empty result proves f > LB + budget everywhere."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from .checks import FEAS_TOL, feasible
from .inner import phi

DENSE_VALUES = 4                  # strata with at most this many values are expanded densely (expand)
CHUNK = 1 << 16                   # partial designs expanded at once by the core enumeration
DEFAULT_MAX_STATES = 2_000_000    # partial designs a core enumeration keeps (~350 MB at the limit, measured)


@dataclass(frozen=True)
class CoreResult:
    """A finished core enumeration: the best verified design (or None), the smallest objective − bound among the
    surviving feasible designs (inf when none), the largest number of partial designs kept, and (groups linked
    by the total, :mod:`.linked`) each group's least part, empty elsewhere."""
    n: np.ndarray | None
    excess: float
    peak: int
    least: tuple = ()

    @property
    def parts(self) -> float:
        """The groups' least parts summed (0 without groups)."""
        return math.fsum(self.least)


@dataclass(frozen=True)
class CoreTable:
    """Per value of every free stratum (in enumeration order, ``starts`` delimiting the strata): the value, its
    reduced cost, the change of each row and of Σ|terms| against n_λ, and (linked groups) of the total; the
    rows' data at n_λ, the pruning tolerance and the suffix bounds on the row changes still to come."""
    free: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray
    v: np.ndarray
    r_all: np.ndarray
    d_all: np.ndarray
    dabs_all: np.ndarray
    dt_all: np.ndarray | None
    signed: np.ndarray
    rows0: np.ndarray
    abs0: np.ndarray
    rhs: np.ndarray
    ineq: np.ndarray
    lam: np.ndarray
    lam_in: np.ndarray
    tol: np.ndarray
    suf_min: np.ndarray
    suf_max: np.ndarray
    du_all: np.ndarray | None = None      # linked groups: the change of a tracked linear row (a cost budget)
    lam_track: float = 0.0                # ... and its multiplier, already in r_all

    @functools.cached_property
    def watched(self) -> np.ndarray:
        """The inequality rows some design of the core may break; every design of the core meets the others
        (their largest reachable value stays below rhs less the pruning tolerance), so dominance need not
        compare them."""
        return np.flatnonzero(self.ineq & (self.rows0 + self.suf_max[0] > self.rhs - self.tol))


@dataclass(frozen=True)
class Survivors:
    """The complete designs a dynamic programme kept: reduced costs, row values, Σ|terms| of the signed rows,
    totals (linked groups), the trail to trace them back and the largest number of partial designs kept."""
    S_r: np.ndarray
    S_row: np.ndarray
    S_abs: np.ndarray
    S_t: np.ndarray | None
    trail: list
    peak: int
    S_u: np.ndarray | None = None


def tabulate(prog, Om, ell, lam, n_lam, r_lo, r_hi, pos=None, rows=None, link_a=None, track=None) -> CoreTable:
    """The :class:`CoreTable` of the core ``r_lo..r_hi`` on strata ``pos`` (all when None) and rows ``rows``
    (all when None); ``link_a``: the linking row's integer coefficients, whose changes are tabulated too;
    ``track``: (coefficients, multiplier) of a linear row whose changes are tabulated (no test on it)."""
    sel = slice(None) if pos is None else pos
    rs = prog.rows if rows is None else [prog.rows[l] for l in rows]
    rhs, ineq = (prog.rhs(), prog.inequality()) if rows is None else (prog.rhs()[rows], prog.inequality()[rows])
    lam_r = lam if rows is None else lam[rows]
    x0 = n_lam[sel].astype(float)
    T0 = prog.unit_matrix(x0, pos)
    per0 = np.stack([prog.row_terms(r, T0, x0, pos) for r in rs], axis=1) if rs else np.zeros((x0.size, 0))
    phi0 = phi(prog, Om, ell, x0, pos)
    # a stratum whose one value is not n_λ's (a range clipped by a row on it) is free too: its row terms change
    fpos = np.flatnonzero((r_hi[sel] > r_lo[sel]) | (r_lo[sel] != n_lam[sel]))
    free = fpos if pos is None else pos[fpos]
    sizes = (r_hi[free] - r_lo[free] + 1).astype(np.int64)
    owner = np.repeat(np.arange(free.size), sizes)
    ii, loc = free[owner], fpos[owner]
    v = r_lo[ii] + np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    vf = v.astype(float)
    T = prog.unit_matrix(vf, ii)
    r_all = np.maximum(phi(prog, Om, ell, vf, ii) - phi0[loc], 0.0)
    new = np.stack([prog.row_terms(r, T, vf, ii) for r in rs], axis=1) if rs else np.zeros((v.size, 0))
    cols = dict(v=v, r_all=r_all, d_all=new - per0[loc], dabs_all=np.abs(new) - np.abs(per0[loc]))
    if link_a is not None:
        cols["dt_all"] = (link_a[ii] * (v - n_lam[ii])).astype(np.int64)
    if track is not None:
        cols["du_all"] = track[0][ii] * (v - n_lam[ii]).astype(float)
    # Σ|terms| (the rows' scale in feasible()) equals the row itself where no term can be negative; only
    # the other rows track it
    signed = np.flatnonzero((per0 < 0).any(axis=0) | (new < 0).any(axis=0))
    free, sizes, cols = _costliest_first(free, sizes, cols)
    # each stratum's values by reduced cost: the values a partial design can still afford are then a prefix (expand)
    owner_sorted = np.repeat(np.arange(free.size), sizes)
    perm = np.lexsort((cols["r_all"], owner_sorted))
    cols = {c: a[perm] for c, a in cols.items()}
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows0, abs0 = per0.sum(axis=0), np.abs(per0).sum(axis=0)
    tol, suf_min, suf_max = _reach(cols["d_all"], cols["dabs_all"], starts, free.size, rhs, abs0)
    return CoreTable(free=free, sizes=sizes, starts=starts, dt_all=cols.get("dt_all"), signed=signed,
                     du_all=cols.get("du_all"), lam_track=0.0 if track is None else float(track[1]),
                     rows0=rows0, abs0=abs0, rhs=rhs, ineq=ineq, lam=lam_r, lam_in=np.where(ineq, lam_r, 0.0),
                     tol=tol, suf_min=suf_min, suf_max=suf_max,
                     **{c: cols[c] for c in ("v", "r_all", "d_all", "dabs_all")})


def _costliest_first(free, sizes, cols):
    """Strata whose cheapest alternative costs most first: the many cheap moves come last, where the row
    reachability and slack tests prune (measured: 4-10x fewer partial designs than in stratum order)."""
    if free.size <= 1:
        return free, sizes, cols
    starts = np.concatenate([[0], np.cumsum(sizes)])
    r_all = cols["r_all"]
    cheapest = np.minimum.reduceat(np.where(r_all > 0, r_all, np.inf), starts[:-1])
    order = np.argsort(-cheapest, kind="stable")
    perm = _stratum_values(starts, order, sizes)
    return free[order], sizes[order], {c: a[perm] for c, a in cols.items()}


def _stratum_values(starts, order, sizes):
    """The value positions of strata ``order`` (each stratum's values in turn, ``starts`` delimiting them)."""
    n = sizes[order]
    return np.repeat(starts[:-1][order] - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(int(n.sum()))


def _reach(d_all, dabs_all, starts, nf, rhs, abs0):
    """The pruning tolerance per row (twice the final test's, which is feasible()'s own) and, per stratum, the
    least and largest total row change the strata after it can still make."""
    m = rhs.size
    if nf == 0:
        return 2 * FEAS_TOL * np.maximum(np.abs(rhs), abs0), np.zeros((1, m)), np.zeros((1, m))
    abs_hi = abs0 + np.maximum(np.maximum.reduceat(dabs_all, starts[:-1], axis=0), 0.0).sum(axis=0)
    tol = 2 * FEAS_TOL * np.maximum(np.abs(rhs), abs_hi)
    return (tol,) + _suffix_bounds(d_all, starts, nf, m)


def _suffix_bounds(d_all, starts, nf, m):
    """Per stratum t, the least and largest total row change strata t, t+1, ... can make (row nf: zero)."""
    if nf == 0:
        return np.zeros((1, m)), np.zeros((1, m))
    dmin = np.minimum.reduceat(d_all, starts[:-1], axis=0).reshape(nf, m)
    dmax = np.maximum.reduceat(d_all, starts[:-1], axis=0).reshape(nf, m)
    suf_min = np.vstack([np.cumsum(dmin[::-1], axis=0)[::-1], np.zeros((1, m))])
    suf_max = np.vstack([np.cumsum(dmax[::-1], axis=0)[::-1], np.zeros((1, m))])
    return suf_min, suf_max


def narrow(tab: CoreTable, cut: float, n_lam) -> CoreTable:
    """``tab`` without the values a design within ``cut`` cannot take and without the strata left only at n_λ.

    Every partial design's reduced cost is ≥ 0 and a sum of non-negative floats is no smaller than any of its
    terms, so a value whose own reduced cost exceeds the cut fails :func:`expand`'s exact budget test whatever
    it is paired with. A stratum whose only value left is n_λ's own (reduced cost and every tabulated change
    exactly 0) changes no partial design: the programme skips it and a traced design keeps n_λ there. At the small
    cuts of the linked groups' first enumerations most strata are such (case (e), k = 20 000: 15 000 of 19 000
    stratum steps had one to three partial designs, a third of the solve in fixed per-step costs). Each stratum
    keeps at least its cheapest value (a core none of whose values fits then still ends the programme empty).
    The pruning tolerance stays the whole table's (looser, sound); the reachability bounds are the narrowed
    table's (every design within the cut is one of it)."""
    nf = tab.free.size
    if nf == 0:
        return tab
    owner = np.repeat(np.arange(nf), tab.sizes)
    keep = tab.r_all <= cut
    keep[tab.starts[:-1]] = True               # each stratum's cheapest value (values by reduced cost)
    counts = np.bincount(owner[keep], minlength=nf)
    first = tab.starts[:-1]
    zero = (tab.r_all[first] == 0) & np.all(tab.d_all[first] == 0, axis=1) & np.all(tab.dabs_all[first] == 0, axis=1)
    for extra in (tab.dt_all, tab.du_all):
        if extra is not None:
            zero &= extra[first] == 0
    idle = (counts == 1) & zero & (tab.v[first] == np.asarray(n_lam)[tab.free])
    if not idle.any() and keep.all():
        return tab
    keep &= ~idle[owner]
    free, sizes = tab.free[~idle], counts[~idle]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    cols = {c: getattr(tab, c)[keep] for c in ("v", "r_all", "d_all", "dabs_all")}
    for c in ("dt_all", "du_all"):
        cols[c] = None if getattr(tab, c) is None else getattr(tab, c)[keep]
    suf_min, suf_max = _suffix_bounds(cols["d_all"], starts, free.size, tab.rhs.size)
    return dataclasses.replace(tab, free=free, sizes=sizes, starts=starts, suf_min=suf_min, suf_max=suf_max, **cols)


def expand(tab: CoreTable, t, S_r, S_row, cut, limit, deadline=None):
    """Every partial design × value of free stratum t that passes the budget and reachability tests: (expanded
    indices = parent position × values + choice, in increasing order, reduced costs, row values), or None above
    ``limit`` survivors or once ``deadline`` has passed (checked per chunk). A stratum's values come by reduced
    cost (:func:`tabulate`), so a partial design is paired only with the prefix of values its budget left can
    afford (a margin of 1e-9 on that prefix, then the exact test: the same survivors as every pair tested;
    measured on case (d), k = 1 000: 36 % of the pairs); a chunk of states at a time (bounded memory)."""
    s0, s1 = tab.starts[t], tab.starts[t + 1]
    nv, m = s1 - s0, tab.rhs.size
    ineq, lam_in = tab.ineq, tab.lam_in
    r_blk, d_blk = tab.r_all[s0:s1], tab.d_all[s0:s1]
    row_hi = tab.rhs + tab.tol - tab.suf_min[t + 1]        # above it no completion meets the row
    row_lo = tab.rhs - tab.tol - tab.suf_max[t + 1]        # equality rows: below it none reaches the row
    unused = tab.rhs - tab.suf_max[t + 1]                  # slack below it the remaining strata cannot use
    parts_idx, parts_R, parts_ROW = [], [], []
    kept = 0

    def tests(R, row_of):
        """The budget and reachability tests on candidates of reduced costs R (any shape) and row values
        ``row_of(l)`` (R's shape): (passing mask, the rows' values)."""
        ok = R <= cut
        pen = np.zeros(R.shape)
        cols = []
        for l in range(m):
            row = row_of(l)
            ok &= row <= row_hi[l]
            if not ineq[l]:
                ok &= row >= row_lo[l]
            elif lam_in[l] > 0:       # slack the remaining strata cannot use is paid at λ_l
                pen += lam_in[l] * np.maximum(unused[l] - row, 0.0)
            cols.append(row)
        ok &= R + pen <= cut
        return ok, cols

    for c0 in range(0, S_r.size, CHUNK):
        c1 = min(c0 + CHUNK, S_r.size)
        sr = S_r[c0:c1]
        if nv <= DENSE_VALUES:
            # every pair of a partial design and a value, as a (designs × values) array: no index arrays to
            # build and gather through, and the survivors' positions are the expanded indices themselves
            R = sr[:, None] + r_blk[None, :]
            ok, cols = tests(R, lambda l: S_row[c0:c1, l][:, None] + d_blk[None, :, l])
            sel = np.flatnonzero(ok)
            idx, R, cols = sel + c0 * nv, R.ravel()[sel], [c.ravel()[sel] for c in cols]
        else:
            cnt = np.searchsorted(r_blk, cut - sr + 1e-9 * (abs(cut) + np.abs(sr)) + 1e-300, side="right")
            parent = np.repeat(np.arange(c1 - c0), cnt)
            choice = np.arange(parent.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            R = sr[parent] + r_blk[choice]
            ok, cols = tests(R, lambda l: S_row[c0:c1, l][parent] + d_blk[choice, l])
            sel = np.flatnonzero(ok)
            idx, R, cols = (parent[sel] + c0) * nv + choice[sel], R[sel], [c[sel] for c in cols]
        parts_idx.append(idx)
        parts_R.append(R)
        parts_ROW.append(np.stack(cols, axis=1) if m else np.zeros((idx.size, 0)))
        kept += idx.size
        if kept > limit or (deadline is not None and deadline.passed()):
            return None
    if not parts_idx:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, m))
    return np.concatenate(parts_idx), np.concatenate(parts_R), np.concatenate(parts_ROW)


def _undominated(tab: CoreTable, R, ROW, keys, U=None, deadline=None, choice=None):
    """Positions kept by dominance: per value of ``keys`` (equality rows, linking total), the partial designs
    that no other with no larger objective change has a smaller (or equal) inequality-row value (and, with a
    tracked row's changes ``U``, no larger one of those: :func:`_tracked_undominated`, which stops dropping
    once ``deadline`` has passed). With one key or none, the positions come in order of objective change, the
    order :func:`dynamic_programme` keeps its partial designs in; ``choice``: each one's value index at this
    stratum (:func:`_objective_order`)."""
    F = R - (ROW - tab.rows0) @ tab.lam           # objective change so far (up to the linking row's)
    if U is not None:
        F = F - tab.lam_track * U
    by_f = order = None if keys.shape[1] > 1 else _objective_order(F, choice)
    if keys.shape[1] == 1:
        # one integer key (the linking total): a stable sort on it keeps F's order within each key; on a small
        # range as int16, numpy's radix sort (measured: the lexsort was half of case (e)'s enumeration time)
        k = keys[order, 0]
        k = k - k.min()
        if k.max() < 2 ** 15:
            k = k.astype(np.int16)
        by_k = np.argsort(k, kind="stable")
        order, ks = order[by_k], k[by_k]
        group = np.concatenate([[0], np.cumsum(ks[1:] != ks[:-1])])
    elif keys.shape[1]:
        order = np.lexsort((F, *keys.T[::-1]))
        ks = keys[order]
        group = np.concatenate([[0], np.cumsum(np.any(ks[1:] != ks[:-1], axis=1))])
    else:
        group = np.zeros(R.size, dtype=np.int64)
    watched = tab.watched
    if U is not None:
        y = ROW[order, int(watched[0])] if watched.size else None
        keep = _tracked_undominated(group, F[order], y, U[order], deadline)
    elif watched.size:
        keep = segmented_first_min(group, ROW[order, int(watched[0])])
    else:
        keep = np.concatenate([[True], group[1:] != group[:-1]])
    mask = np.zeros(R.size, dtype=bool)
    mask[order[keep]] = True
    if keys.shape[1] > 1:
        return np.flatnonzero(mask)
    # the kept positions in order of objective change, without a sort (measured: sorting them was 12 % of case (e)
    # at k = 20 000)
    return by_f[mask[by_f]]


def _objective_order(F, choice):
    """Positions by increasing objective change ``F``. Ties may fall in any order: dominance then keeps both of
    two equal designs or drops the one with the larger row value, never a design no other dominates.

    With ``choice`` (the value index at this stratum of each partial design, listed parent by parent): the
    parents came in order of objective change (:func:`_undominated`) and a value adds the same change to each,
    so the designs that took one value are in order already, up to rounding. A stable sort on the value index
    (numpy's radix sort on 16-bit integers) then lines those runs up, and a stable sort of F (timsort) merges
    them: 2-3x faster than sorting F afresh (measured on 20 000-500 000 designs of 3-6 values; the sort was a
    third of case (e)'s enumeration at k = 20 000). The result is a sort either way; only its speed rests on
    the runs."""
    if choice is None:
        return np.argsort(F)
    runs = np.argsort(choice.astype(np.int16) if choice.size and choice.max() < 2 ** 15 else choice, kind="stable")
    return runs[np.argsort(F[runs], kind="stable")]


TRACK_LEVELS = 12    # halvings of a tracked row's value range, for dominance across them (_tracked_undominated)


def _tracked_undominated(group, F, y, u, deadline=None) -> np.ndarray:
    """:func:`segmented_first_min` for two criteria, an inequality row's value ``y`` (None: none) and a tracked
    row's value ``u``, for items sorted by group, then by objective F: False where an item is dominated (an
    earlier item of its group has no larger y and no larger u). Sound, and exact up to 2^TRACK_LEVELS bands of
    u: (1) among items with the same u exactly (many strata have no cost on a budget), the one-row test on y;
    (2) the values of u ranked and halved level by level (divide and conquer on u): within each band of a
    level, an earlier item of its lower half with a strictly smaller y drops an item of its upper half. Each
    drop is by an item with a smaller u or, at the same u, an earlier one: no cycle, so every dropped design
    is dominated by a kept one. Once ``deadline`` has passed no further level runs: every item still kept is
    kept (sound, only less pruned; the caller stops at its own check right after). On 455 000 partial designs
    the levels took 0.7 s alone, the likeliest cause of case (f) solves at k = 1 000 returning 0.7-1.0 s after
    their 10 s limit under the benchmark's load."""
    S = u.size
    if S == 0:
        return np.zeros(0, dtype=bool)
    if y is None:
        return segmented_first_min(group, u)
    # (1) groups of (group, u), in objective order within each
    o2 = np.lexsort((F, u, group))
    g2 = np.concatenate([[0], np.cumsum((group[o2][1:] != group[o2][:-1]) | (u[o2][1:] != u[o2][:-1]))])
    keep = np.zeros(S, dtype=bool)
    keep[o2] = segmented_first_min(g2, y[o2])
    # (2) the ranks of u, halved level by level, over the items still kept (an item dropped is dominated by one
    # that drops, at the same level, whatever it would drop later); ``cur`` lists them by (group, band,
    # objective), and each level splits every band in two, stably, in linear time
    cur = np.flatnonzero(keep)
    _, rank = np.unique(u[cur], return_inverse=True)
    rank = rank.ravel().astype(np.int64)
    bits = max(int(rank.max()).bit_length(), 1)
    yc = y[cur]
    lo, hi = float(np.min(yc)), float(np.max(yc))
    D = 2.0 * (hi - lo) + 1.0 + abs(hi) + abs(lo)
    seg = group[cur].astype(np.int64)
    for level in range(min(bits, TRACK_LEVELS)):
        if deadline is not None and deadline.passed():
            break
        bit = (rank >> (bits - level - 1)) & 1
        seg = np.concatenate([[0], np.cumsum(seg[1:] != seg[:-1])])
        z = yc - seg * D
        prev = np.concatenate([[np.inf], np.minimum.accumulate(np.where(bit == 0, z, np.inf))[:-1]])
        live = ~((bit == 1) & (prev < z))
        keep[cur[~live]] = False
        cur, rank, yc, seg, bit = cur[live], rank[live], yc[live], seg[live], bit[live]
        if cur.size == 0:
            break
        # each band's lower half first, both halves in their order
        start = np.flatnonzero(np.concatenate([[True], seg[1:] != seg[:-1]]))
        band = np.cumsum(np.concatenate([[True], seg[1:] != seg[:-1]])) - 1
        first = start[band]
        zeros, ones = np.cumsum(bit == 0), np.cumsum(bit == 1)
        z0, o0 = zeros[first] - (bit[first] == 0), ones[first] - (bit[first] == 1)
        n0 = np.add.reduceat((bit == 0).astype(np.int64), start)[band]
        pos = first + np.where(bit == 0, zeros - z0 - 1, n0 + ones - o0 - 1)
        order = np.empty_like(pos)
        order[pos] = np.arange(pos.size)
        cur, rank, yc = cur[order], rank[order], yc[order]
        seg = (seg * 2 + bit)[order]
    return keep


def segmented_first_min(group: np.ndarray, y: np.ndarray) -> np.ndarray:
    """For items sorted by group (then by their objective), False where an earlier item of the same group has a
    smaller y (the item is dominated), True otherwise.

    No sort: y is shifted down by D per group, D above twice y's range, so every earlier group's shifted values
    lie above the current group's and one running minimum serves all groups. Rounding is monotone, so a
    shifted value strictly below another's means a y no larger. Where an item's shifted value equals the
    running minimum, its y is compared with that of the item that set the minimum (same group), so exact ties
    (identical strata) are dropped as before and values merged by rounding are kept: never a design wrongly
    dropped."""
    S = y.size
    if S == 0:
        return np.zeros(0, dtype=bool)
    lo, hi = float(np.min(y)), float(np.max(y))
    D = 2.0 * (hi - lo) + 1.0 + abs(hi) + abs(lo)
    z = y - group * D
    prev = np.empty(S)
    prev[0] = np.inf
    np.minimum.accumulate(z[:-1], out=prev[1:])
    new = z < prev
    tie = np.flatnonzero(z == prev)
    if tie.size:
        # the item that set the running minimum: the last new one before (ties are few; found by bisection)
        setters = np.flatnonzero(new)
        new[tie] = y[setters[np.searchsorted(setters, tie, side="right") - 1]] > y[tie]
    return new


FUSED = 3     # strata expanded together at the end of a programme without dominance (_expand_last)


def _expand_last(tab: CoreTable, t0, S_r, S_row, cut, limit, work_room, deadline):
    """The free strata from ``t0`` to the last expanded together, depth first, a chunk of partial designs at a time:
    the complete designs that pass the budget and the rows, as (per stratum from t0 on, the expanded indices of the
    partial designs some complete design extends, against the positions kept at the stratum before; reduced
    costs; row values; per stratum, the partial designs built there), or None above ``limit`` designs at a stratum
    within a chunk or complete ones, above ``work_room`` built before the last stratum, or once the deadline has
    passed. The last strata's partial designs are the most numerous and have only the reach of the few strata after
    them to prune them (case (d), k = 1 000: 0.64, 1.07 and 1.48 million after 28, 29 and 30 of 31 strata, then 10
    complete designs); built per chunk, they are never all stored."""
    nf = tab.free.size
    nvs = [int(tab.starts[t + 1] - tab.starts[t]) for t in range(t0, nf)]
    trails = [[] for _ in nvs]
    offsets = [0] * len(nvs)          # entries kept at each stratum by the chunks before
    Rs, ROWs = [], []
    total = 0
    built = np.zeros(len(nvs), dtype=np.int64)
    for c0 in range(0, S_r.size, CHUNK):
        c1 = min(c0 + CHUNK, S_r.size)
        levels = []
        R, ROW = S_r[c0:c1], S_row[c0:c1]
        for j in range(len(nvs)):
            # a stratum's partial designs from one chunk are a part of those the programme would store there:
            # the same limit bounds them (and the memory), never stopping a programme the limit would not
            out = expand(tab, t0 + j, R, ROW, cut, limit, deadline)
            if out is None:
                return None
            levels.append(out[0])
            R, ROW = out[1], out[2]
            built[j] += out[0].size
        if built[:-1].sum() > work_room:
            return None
        # back from the complete designs: at each stratum only the partial designs they extend are kept, and the
        # stratum after indexes them by their position among those kept (in increasing order, after the entries
        # the earlier chunks kept)
        sel = np.arange(levels[-1].size)
        for j in range(len(nvs) - 1, -1, -1):
            e = levels[j][sel]
            if j == 0:
                trails[0].append(e + c0 * nvs[0])
            else:
                sel, inv = np.unique(e // nvs[j], return_inverse=True)
                trails[j].append((offsets[j - 1] + inv.ravel()) * nvs[j] + e % nvs[j])
            offsets[j] += e.size
        Rs.append(R)
        ROWs.append(ROW)
        total += R.size
        if total > limit:
            return None
    m = tab.rhs.size
    if not Rs:
        return [np.zeros(0, dtype=np.int64) for _ in nvs], np.zeros(0), np.zeros((0, m)), built
    return [np.concatenate(tr) for tr in trails], np.concatenate(Rs), np.concatenate(ROWs), built


def _carry(tab: CoreTable, t, idx, S_t, S_abs, S_u):
    """The linking totals (linked groups; None elsewhere), Σ|terms| of the signed rows and the tracked row's
    change (None without one) of the partial designs ``idx`` (expanded indices at stratum t), from their
    parents'."""
    nv = tab.starts[t + 1] - tab.starts[t]
    parent, value = idx // nv, tab.starts[t] + idx % nv
    if S_t is not None:
        S_t = S_t[parent] + tab.dt_all[value]
    if tab.signed.size:
        S_abs = S_abs[parent] + tab.dabs_all[value][:, tab.signed]
    if S_u is not None:
        S_u = S_u[parent] + tab.du_all[value]
    return S_t, S_abs, S_u


def dynamic_programme(tab: CoreTable, cut, max_states, deadline, dominance: bool,
                      work_limit=None) -> Survivors | None:
    """The dynamic programme over the free strata of ``tab``: None when more than ``max_states`` partial designs
    survive a stratum (4·max_states before dominance), more than ``work_limit`` have been kept over all
    strata, or the deadline passes; else the survivors (empty when nothing is within the budget). Without
    dominance the last FUSED strata are expanded together (:func:`_expand_last`); with it, dominance prunes
    each stratum's partial designs first."""
    linked = tab.dt_all is not None
    eq_cols = np.flatnonzero(~tab.ineq)
    S_t = np.zeros(1, dtype=np.int64) if linked else None
    S_u = None if tab.du_all is None else np.zeros(1)
    S_r, S_row, S_abs = np.zeros(1), tab.rows0[None, :].copy(), tab.abs0[None, tab.signed].copy()
    trail, peak, work = [], 1, 0
    nf = tab.free.size

    t = 0
    while t < nf:
        # never build more partial designs than the work limit still allows (a wide core used to build its
        # full 4·max_states before the limit was checked: 3-5 s lost on 952 strata in case (a) at k = 20 000)
        room = max_states if work_limit is None else max(min(max_states, work_limit - work), 0)
        limit = room * (4 if dominance else 1)
        if t == nf - FUSED and nf > FUSED and not dominance:
            # the partial designs built at the fused strata count as work and as the peak (the budget steps are
            # calibrated on it), though only those some complete design extends are stored
            out = _expand_last(tab, t, S_r, S_row, cut, limit,
                               math.inf if work_limit is None else work_limit - work, deadline)
            if out is None:
                return None
            levels, R, ROW, built = out
            work += int(built[:-1].sum())
            peak = max(peak, int(built[:-1].max()))
            for e in levels[:-1]:
                trail.append(e.astype(np.int32) if e.size and e[-1] < 2 ** 31 else e)
                S_t, S_abs, S_u = _carry(tab, t, e, S_t, S_abs, S_u)
                t += 1
            idx_all = levels[-1]
        else:
            out = expand(tab, t, S_r, S_row, cut, limit, deadline)
            if out is None:
                return None
            idx_all, R, ROW = out
        TOT, ABS, USE = _carry(tab, t, idx_all, S_t, S_abs, S_u)
        sel = np.arange(idx_all.size)
        if dominance and idx_all.size > 1:
            keys = TOT[:, None] if linked else ROW[:, eq_cols]
            sel = _undominated(tab, R, ROW, keys, USE, deadline, idx_all % (tab.starts[t + 1] - tab.starts[t]))
        idx = idx_all[sel]
        work += idx.size
        # the kept designs per stratum rarely shrink, so work·free/(t+1) under-estimates the total: past the limit
        # the programme would most likely stop there anyway, after many more strata (case (a), k = 20 000: 643 of
        # 952 strata, 2.4 s, before the limit stopped it)
        projected = work * nf / (t + 1) if t >= 15 else 0
        if idx.size > max_states or (work_limit is not None and max(work, projected) > work_limit) \
                or (deadline is not None and deadline.passed()):
            return None
        peak = max(peak, idx.size)
        trail.append(idx.astype(np.int32) if idx.size and idx.max() < 2 ** 31 else idx)    # (in objective order)
        S_r, S_row = R[sel], ROW[sel]
        S_t = TOT[sel] if linked else None
        S_u = None if USE is None else USE[sel]
        if tab.signed.size:
            S_abs = ABS[sel]
        t += 1
        if idx.size == 0:
            break
    return Survivors(S_r, S_row, S_abs, S_t, trail, peak, S_u)


def final_test(tab: CoreTable, s: Survivors):
    """feasible()'s test on the survivors (relative violation ≤ FEAS_TOL of max(|rhs|, Σ|terms|), per row) and
    each one's excess f − LB (reduced costs plus the inequality rows' slack at λ)."""
    scale_rows = s.S_row.copy()
    scale_rows[:, tab.signed] = s.S_abs
    lim = FEAS_TOL * np.maximum(np.abs(tab.rhs), np.maximum(scale_rows, 1e-300))
    feas = np.all(np.where(tab.ineq, s.S_row - tab.rhs <= lim, np.abs(s.S_row - tab.rhs) <= lim), axis=1)
    return feas, s.S_r + (tab.rhs - s.S_row) @ tab.lam_in


def trace(tab: CoreTable, s: Survivors, p: int):
    """The free strata and their values in survivor p (expanded index = parent position × values + choice)."""
    strata, values = [], []
    for t in range(tab.free.size - 1, -1, -1):
        e = int(s.trail[t][p])
        p = e // int(tab.sizes[t])
        strata.append(tab.free[t])
        values.append(tab.v[tab.starts[t] + e % int(tab.sizes[t])])
    return strata, values


def enumerate_core(prog, Om, ell, lam, n_lam, r_lo, r_hi, budget, max_states, deadline=None) -> CoreResult | None:
    """Every design of the core whose objective is within ``budget`` of the Lagrangian bound (module
    docstring). None when more than ``max_states`` partial designs survive (or 4·max_states have been kept
    over all strata, or the deadline passes)."""
    tab = tabulate(prog, Om, ell, lam, n_lam, r_lo, r_hi)
    # a design feasible within the tolerance may have slacks down to −tol: its f − LB can fall below
    # Σ r + λ·slack by λ·tol, so the budget test allows that much more
    cut = budget + float(tab.lam_in @ tab.tol)
    tab = narrow(tab, cut, n_lam)
    # dominance compares one inequality row: it applies when the core can break at most one (CoreTable.watched;
    # case (d), k = 1 000: 25 of 68 cores with two rows, 1.85 s -> 1.45 s)
    dominance = tab.watched.size <= 1
    s = dynamic_programme(tab, cut, max_states, deadline, dominance, work_limit=4 * max_states)
    if s is None:
        return None
    if s.S_r.size == 0:
        return CoreResult(None, math.inf, s.peak)
    feas, excess = final_test(tab, s)
    excess = np.where(feas, excess, math.inf)
    best_excess = float(np.min(excess)) if excess.size else math.inf
    return CoreResult(_least_feasible(prog, tab, s, n_lam, excess), best_excess, s.peak)


def _least_feasible(prog, tab: CoreTable, s: Survivors, n_lam, excess) -> np.ndarray | None:
    """The survivor of least ``excess`` (inf: failed final_test) that feasible() accepts, among the 20 least."""
    for p in np.argsort(excess, kind="stable")[:20]:
        if not math.isfinite(excess[p]):
            break
        n = n_lam.copy()
        for i, val in zip(*trace(tab, s, int(p))):
            n[i] = val
        if feasible(prog, n):
            return n
    return None


BEAM_CANDIDATES = 20_000_000     # width × a stratum's values above which no beam runs (memory: ~160 MB a column)


def beam_core(prog, Om, ell, lam, n_lam, r_lo, r_hi, budget, width: int, deadline=None) -> np.ndarray | None:
    """A good design of the core, not a proof: :func:`dynamic_programme`'s passes (budget, reachability) with the
    ``width`` partial designs of least reduced cost kept per stratum instead of every one. None when no kept
    design passes the feasibility test, when at most one row can break there (dominance then enumerates the
    core exactly at the same cost), when a stratum's values times ``width`` exceed BEAM_CANDIDATES, or when the
    deadline passes.

    Why: with two or more rows a core enumeration that finds the optimum lists every design within the budget
    (no dominance applies), ~10^6 of them on Bethel-type blocks, where the optimum lies among the few of least
    reduced cost; found first, it leaves the proof only the designs one lattice step cheaper (measured on the 20
    largest cores of the Bethel-type benchmark at k = 1 000, tight CVs: a width of 20 000 found each core's
    optimum in 0.01-0.06 s, where the exact enumerations took 0.01-0.85 s and one stopped at its state limit).
    The partial designs kept are the least in reduced cost so far: the budget and the rows' reachability
    prune as in the exact programme, so every design kept can still be completed within both."""
    tab = tabulate(prog, Om, ell, lam, n_lam, r_lo, r_hi)
    cut = budget + float(tab.lam_in @ tab.tol)
    tab = narrow(tab, cut, n_lam)
    if tab.watched.size <= 1 or tab.free.size == 0 or width * int(tab.sizes.max()) > BEAM_CANDIDATES:
        return None
    S_r, S_row, S_abs = np.zeros(1), tab.rows0[None, :].copy(), tab.abs0[None, tab.signed].copy()
    trail = []
    for t in range(tab.free.size):
        # at most width × values new partial designs: the expansion's own limit never binds
        out = expand(tab, t, S_r, S_row, cut, S_r.size * int(tab.sizes[t]) + 1, deadline)
        if out is None:
            return None
        idx, R, ROW = out
        _, ABS, _ = _carry(tab, t, idx, None, S_abs, None)
        sel = np.sort(np.argpartition(R, width)[:width]) if idx.size > width else np.arange(idx.size)
        trail.append(idx[sel])
        S_r, S_row = R[sel], ROW[sel]
        if tab.signed.size:
            S_abs = ABS[sel]
        if sel.size == 0:
            return None
    s = Survivors(S_r, S_row, S_abs, None, trail, 0)
    feas, excess = final_test(tab, s)
    return _least_feasible(prog, tab, s, n_lam, np.where(feas, excess, math.inf))
