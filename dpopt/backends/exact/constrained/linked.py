"""The core enumeration for groups of strata linked only by the total (e.g. one precision target per domain
with a fixed total): since f(n) − LB = Σ_groups (Σ r_i + λ·slack), each ≥ 0, the groups are enumerated one by
one (:mod:`.cores`, each with the dominance a single row allows, which the joint enumeration loses with
several inequality rows) and joined by a min-plus convolution over the total."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from ....formulations.separable import SeparableProgram
from .checks import FEAS_TOL, feasible
from .cores import CoreResult, dynamic_programme, final_test, narrow, segmented_first_min, tabulate, trace

_FIRST_CUT_DIVISOR = 256.0    # a group's least excess is looked for from the cut / this
_FIRST_CUT_GROWTH = 4.0       # and at cuts growing by this factor


@dataclass(frozen=True)
class GroupTable:
    """A group's enumeration: per reachable linking-row value ``totals`` the least ``excess`` of a design meeting
    the group's rows, ``design(j)`` the group's values for entry j, and the most partial designs kept. With a
    tracked row, every design per total that no other beats in both excess less λ·``use`` and ``use`` (the
    tracked row's change against n_λ)."""
    totals: np.ndarray
    excess: np.ndarray
    design: Callable[[int], np.ndarray] | None
    peak: int
    use: np.ndarray | None = None

    def within(self, cut: float) -> "GroupTable":
        """The entries whose excess is within ``cut`` (the table holds every design up to a larger cut)."""
        keep = np.flatnonzero(self.excess <= cut)
        design = None if self.design is None else (lambda j, f=self.design: f(int(keep[j])))
        return GroupTable(self.totals[keep], self.excess[keep], design, self.peak,
                          None if self.use is None else self.use[keep])


class LinkedGroups(NamedTuple):
    """Groups of strata linked by the total: ``link`` the total's row, ``groups`` [(positions, row indices)],
    ``relaxed`` the linear inequality rows over several groups (cost budgets), left out of the groups' tables."""
    link: int
    groups: list
    relaxed: list


def linked_groups(prog: SeparableProgram) -> LinkedGroups | None:
    """The groups when the rows are one linear equality with integer coefficients (the fixed total, row ``link``)
    plus at least two inequality rows that, without it, fall into at least two blocks on disjoint strata (e.g. one
    precision target per domain); the strata in no other row form one group without rows. Linear inequality rows
    over the strata of several such blocks (a cost budget over every stratum) are ``relaxed``: each group's part
    of f − LB is still Σ r_i plus its own rows' λ·slack, and a relaxed row's λ·slack is ≥ 0 on every feasible
    design, so the join over the total without them bounds every design from below (:func:`enumerate_linked`).
    Else None (the plain core enumeration runs)."""
    eq = [l for l, r in enumerate(prog.rows) if r.sense == "=="]
    if len(eq) != 1:
        return None
    link = eq[0]
    r = prog.rows[link]
    if not (r.integral and np.all(np.abs(r.a) < 2 ** 31)):
        return None
    others = [l for l in range(prog.m) if l != link]
    if len(others) < 2:
        return None
    relaxed: list = []
    blocks = prog.subprogram(np.arange(prog.k), [prog.rows[l] for l in others]).components()
    if len(blocks) < 2:
        # linear inequality rows that span the blocks of the others (budgets over every domain) are relaxed
        linear = [l for l in others if prog.rows[l].W is None]
        keep = [l for l in others if prog.rows[l].W is not None]
        if not linear or len(keep) < 2:
            return None
        label = np.full(prog.k, -1)
        for b, (pos, _) in enumerate(prog.subprogram(np.arange(prog.k), [prog.rows[l] for l in keep]).components()):
            label[pos] = b
        for l in linear:
            support = np.flatnonzero(prog.rows[l].a != 0)
            owners = set(label[support].tolist()) - {-1}
            # a row on one stratum (at least 30 in one stratum) is its bound: the enumeration clips that stratum's
            # values to it (enumerate_linked), and its group keeps a single row and with it dominance
            (relaxed if len(owners) > 1 or support.size == 1 else keep).append(l)
        others = sorted(keep)
        blocks = prog.subprogram(np.arange(prog.k), [prog.rows[l] for l in others]).components()
        if len(blocks) < 2:
            return None
    groups = [(pos, [others[j] for j in rows]) for pos, rows in blocks]
    covered = np.zeros(prog.k, dtype=bool)
    for pos, _ in groups:
        covered[pos] = True
    if not covered.all():
        groups.append((np.flatnonzero(~covered), []))
    return LinkedGroups(link, groups, sorted(relaxed))


def enumerate_group(prog, Om, ell, lam, n_lam, r_lo, r_hi, cut, pos, rows, link, max_states,
                    deadline, track=None) -> GroupTable | None:
    """Every completion of one group (strata ``pos`` with rows ``rows``) whose excess over the Lagrangian
    bound is within ``cut``, by dynamic programming over its free strata with dominance: among partial
    designs with the same linking-row value, one with no larger objective and no larger row value (≤ 1
    inequality row) wins; with ``track`` (coefficients, λ of a linear row over several groups), no larger
    value of that row either. None at the state limit or the deadline."""
    a = prog.rows[link].a
    tab = narrow(tabulate(prog, Om, ell, lam, n_lam, r_lo, r_hi, pos=pos, rows=rows, link_a=a, track=track), cut,
                 n_lam)
    dominance = int(np.sum(tab.ineq)) <= 1 and not np.any(~tab.ineq)
    tot0 = int(np.sum(a[pos] * n_lam[pos]))
    s = dynamic_programme(tab, cut, max_states, deadline, dominance)
    if s is None:
        return None
    feas, excess = final_test(tab, s)
    keep = np.flatnonzero(feas)
    if keep.size == 0:
        return GroupTable(np.zeros(0, dtype=np.int64), np.zeros(0), None, s.peak)
    if track is None:
        order = np.lexsort((excess[keep], s.S_t[keep]))
        first = np.concatenate([[True], s.S_t[keep][order][1:] != s.S_t[keep][order][:-1]])
    else:
        # per total, the designs no other beats in both the excess less the tracked row's λ·change and that change
        adj = excess[keep] - track[1] * s.S_u[keep]
        order = np.lexsort((adj, s.S_t[keep]))
        st = s.S_t[keep][order]
        first = segmented_first_min(np.concatenate([[0], np.cumsum(st[1:] != st[:-1])]), s.S_u[keep][order])
    best = keep[order[first]]

    def design(j):
        out = n_lam[pos].copy()
        strata, values = trace(tab, s, int(best[j]))
        for i, val in zip(strata, values):
            out[np.searchsorted(pos, i)] = val
        return out

    return GroupTable(tot0 + s.S_t[best], excess[best], design, s.peak, None if track is None else s.S_u[best])


def enumerate_linked(prog, Om, ell, lam, n_lam, r_lo, r_hi, budget, max_states, deadline,
                     linked, track: bool = False) -> CoreResult | None:
    """:func:`.cores.enumerate_core` for groups of strata linked only by the total (:func:`linked_groups`),
    group by group and joined over the total. Same returns as :func:`.cores.enumerate_core`, except with relaxed
    rows: ``excess`` is then the join's least, a lower bound on the excess of every design of the core, and ``n``
    the joined design when it meets every row (its own excess may be larger, by its relaxed rows' λ·slack).
    ``track``: keep the relaxed row over several strata with the largest λ·scale (:func:`tracked_row`) in the
    tables and the join (:func:`_join_tracked`), so that its λ·slack is counted exactly."""
    link, groups, relaxed = linked
    r_lo, r_hi = _within_stratum_rows(prog, relaxed, r_lo, r_hi)
    if np.any(r_lo > r_hi):
        return CoreResult(None, math.inf, 1)
    ineq = prog.inequality()
    lam_in = np.where(ineq, lam, 0.0)
    tol_all = 2 * FEAS_TOL * prog.row_scale(n_lam.astype(float))
    cut = budget + float(lam_in @ tol_all)
    peak = 1
    # the relaxed row over several groups with the largest multiplier (the budget that binds) is tracked: the
    # tables keep, per total, every design not beaten in both excess and that row's use, and the join keeps the
    # row, so its λ·slack is counted exactly instead of bounded by 0
    tracked = tracked_row(prog, lam, n_lam, relaxed) if track else None
    track = None if tracked is None else (prog.rows[tracked].a.astype(float), float(lam[tracked]))

    def group(g, c, tr=None):
        pos, rows = groups[g]
        return enumerate_group(prog, Om, ell, lam, n_lam, r_lo, r_hi, c, pos, rows, link, max_states, deadline,
                               tr)

    # Each group's part of f − LB is at least its own least excess e_g, so in a design within the cut group g's
    # part is at most cut − Σ_{h≠g} e_h. The e_g come first, from cheap enumerations at cuts growing from
    # cut/256 (a group's first non-empty table holds its least excess); each group is then enumerated only up
    # to its own cut (or its table filtered to it). Measured on case (e), k = 1 000: the ten groups' parts were
    # 0.3-1.8 of a cut of 8.8, so each group's cut fell from 8.8 to its e_g + 0.6 and its partial designs from
    # ~10^5 to a few thousand.
    first = []
    for g in range(len(groups)):
        c = cut / _FIRST_CUT_DIVISOR
        while True:
            c = min(c, cut)
            res = group(g, c)
            if res is None:
                return None
            peak = max(peak, res.peak)
            if res.totals.size or c >= cut:
                break
            c *= _FIRST_CUT_GROWTH
        if res.totals.size == 0:
            return CoreResult(None, math.inf, peak)
        first.append((res, c))
    least = [float(res.excess.min()) for res, _ in first]
    room = cut - math.fsum(least)
    # room < 0: nothing lies within the cut, but the first tables still join into a design (an incumbent whose
    # excess, above the cut, tells the search how far to go)
    tables = [res for res, _ in first] if room < 0 else []
    for g, (res, c) in enumerate(first if room >= 0 else []):
        own = least[g] + room
        if own > c or track is not None:
            # tracked, each group again: its first table keeps one design per total, not every one not beaten
            # in both excess and the budget's use
            res = group(g, own, track)
            if res is None:
                return None
            peak = max(peak, res.peak)
        else:
            res = res.within(own)
        if res.totals.size == 0:
            return CoreResult(None, math.inf, peak)
        tables.append(res)
    total = int(round(prog.rows[link].rhs))
    if track is not None and room >= 0:
        a_t, lam_t = track
        u_lam = float(a_t @ n_lam)
        allow_t = float(prog.allowance()[tracked])
        # f − LB = Σ(excess − λ_t·use) + λ_t·(rhs_t − u(n_λ)) (+ the other relaxed rows' λ·slack)
        const = lam_t * (prog.rows[tracked].rhs - u_lam)
        joined = _join_tracked(tables, total, lam_t, prog.rows[tracked].rhs + allow_t - u_lam,
                               cut + lam_t * allow_t, cut + lam_t * allow_t - const, max_states, deadline)
        if joined == "stopped":
            return None
        if joined is not None:
            joined = (joined[0] + const, joined[1])
    else:
        joined = _join(tables, total)
    if joined is None:
        return CoreResult(None, math.inf, peak)
    best_excess, picks = joined
    n = n_lam.copy()
    for (pos, _), table, j in zip(groups, tables, picks):
        n[pos] = table.design(j)
    return CoreResult(n if feasible(prog, n) else None, best_excess, peak, tuple(least))


def tracked_row(prog, lam, n_lam, relaxed):
    """The relaxed row over several strata with the largest positive λ·scale (at n_λ), or None."""
    best, row = 0.0, None
    scale = prog.row_scale(n_lam.astype(float)) if relaxed else None
    for l in relaxed:
        a = prog.rows[l].a
        if prog.rows[l].sense == "<=" and np.count_nonzero(a) > 1 and lam[l] > 0 and lam[l] * scale[l] > best:
            best, row = lam[l] * scale[l], l
    return row


def _join_tracked(tables: list[GroupTable], total: int, lam_t: float, u_room: float, cut: float, a_cut: float,
                  max_states: int, deadline=None):
    """The join over the total that keeps a tracked row: (least Σ(excess − λ_t·use) over the designs joined
    at ``total`` with Σ use ≤ ``u_room``, the entry picked per group), None when there is none, or "stopped"
    above ``max_states`` partial joins or once ``deadline`` has passed.

    Groups are joined smallest table first. A partial join is kept while its Σ excess plus the least Σ excess
    of the groups still to come at the total it leaves them (their min-plus convolution) passes ``cut``, its
    Σ(excess − λ_t·use) plus theirs passes ``a_cut`` (the budget's own slack counted: Σ(excess − λ_t·use) is
    f − LB less a constant) and its Σ use plus their least use fits ``u_room``, and, per total, while no other is
    smaller in both Σ(excess − λ_t·use) and Σ use. The last group is looked up, not paired: per total, its
    entries by increasing use have decreasing excess − λ_t·use, so the best one that fits is the last whose use
    fits."""
    order = sorted(range(len(tables)), key=lambda g: tables[g].totals.size)
    tabs = [tables[g] for g in order]
    n = len(tabs)
    # rest[g], rest_a[g]: (lowest total, dense least Σ excess, resp. Σ(excess − λ_t·use), per total) of the
    # groups after g
    def suffixes(values):
        out = [(0, np.zeros(1))]
        for tab in tabs[:0:-1]:
            t0, acc = out[-1]
            t_min, dense = _dense(tab, values(tab))
            out.append((t0 + t_min, _min_plus(acc, dense)[0]))
        return out[::-1]

    rest = suffixes(lambda tab: tab.excess)
    rest_a = suffixes(lambda tab: tab.excess - lam_t * tab.use)
    umin = np.array([float(t.use.min()) for t in tabs])
    rest_u = np.concatenate([np.cumsum(umin[::-1])[::-1][1:], [0.0]])

    def ahead(r, T2):
        t0, acc = r
        j = total - T2 - t0
        ok = (j >= 0) & (j < acc.size)
        out = np.full(T2.size, math.inf)
        out[ok] = acc[j[ok]]
        return out

    T, E, A, U = np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1), np.zeros(1)
    back = []
    for g, tab in enumerate(tabs[:-1]):
        m = tab.totals.size
        adj = tab.excess - lam_t * tab.use
        kept = []
        step = max(1, (1 << 20) // max(m, 1))
        for c0 in range(0, T.size, step):
            si = np.repeat(np.arange(c0, min(c0 + step, T.size)), m)
            mj = np.tile(np.arange(m), si.size // m)
            T2 = T[si] + tab.totals[mj]
            ok = ((E[si] + tab.excess[mj] + ahead(rest[g], T2) <= cut)
                  & (A[si] + adj[mj] + ahead(rest_a[g], T2) <= a_cut)
                  & (U[si] + tab.use[mj] + rest_u[g] <= u_room))
            kept.append((si[ok], mj[ok]))
        si = np.concatenate([k[0] for k in kept])
        mj = np.concatenate([k[1] for k in kept])
        if si.size == 0:
            return None
        T2, E2, U2, A2 = T[si] + tab.totals[mj], E[si] + tab.excess[mj], U[si] + tab.use[mj], A[si] + adj[mj]
        o = np.lexsort((A2, T2))
        ts = T2[o]
        sel = o[segmented_first_min(np.concatenate([[0], np.cumsum(ts[1:] != ts[:-1])]), U2[o])]
        if sel.size > max_states or (deadline is not None and deadline.passed()):
            return "stopped"
        back.append((si[sel], mj[sel]))
        T, E, U, A = T2[sel], E2[sel], U2[sel], A2[sel]
    # the last group: per state, the entry at the total left whose use is the largest that fits
    last = tabs[-1]
    o = np.lexsort((last.use, last.totals))
    lt, lu, la = last.totals[o], last.use[o], (last.excess - lam_t * last.use)[o]
    starts = np.flatnonzero(np.concatenate([[True], lt[1:] != lt[:-1]]))
    ends = np.concatenate([starts[1:], [lt.size]])
    seg = np.searchsorted(lt[starts], total - T)
    seg[seg >= starts.size] = 0
    hit = lt[starts[seg]] == total - T
    best, pick_state, pick_entry = math.inf, -1, -1
    for q in np.unique(seg[hit]):          # one searchsorted per total of the last group, over its states
        st = np.flatnonzero(hit & (seg == q))
        j = starts[q] + np.searchsorted(lu[starts[q]:ends[q]], u_room - U[st], side="right") - 1
        ok = j >= starts[q]
        if ok.any():
            val = A[st[ok]] + la[j[ok]]
            w = int(np.argmin(val))
            if val[w] < best:
                best, pick_state, pick_entry = float(val[w]), int(st[ok][w]), int(o[j[ok][w]])
    if pick_state < 0:
        return None
    picks = [pick_entry]
    j = pick_state
    for si, mj in back[::-1]:
        picks.append(int(mj[j]))
        j = int(si[j])
    picks = picks[::-1]
    out = [0] * n
    for g, p in zip(order, picks):
        out[g] = p
    return float(best), out


def _dense(tab: GroupTable, values=None):
    """(lowest total, least excess (or of ``values``, one per entry) per total from it, inf where none) of a
    group's table."""
    t_min, t_max = int(tab.totals.min()), int(tab.totals.max())
    dense = np.full(t_max - t_min + 1, math.inf)
    np.minimum.at(dense, tab.totals - t_min, tab.excess if values is None else values)
    return t_min, dense


def _min_plus(acc: np.ndarray, dense: np.ndarray):
    """The min-plus convolution of two dense arrays over totals and, per entry, the offset in ``dense`` used."""
    out = np.full(acc.size + dense.size - 1, math.inf)
    arg = np.full(out.size, -1, dtype=np.int64)
    for s in np.flatnonzero(np.isfinite(dense)):
        cand = acc + dense[s]
        seg = out[s:s + acc.size]
        better = cand < seg
        seg[better] = cand[better]
        arg[s:s + acc.size][better] = s
    return out, arg


def _within_stratum_rows(prog, rows, r_lo, r_hi):
    """The core's ranges clipped to the relaxed rows on a single stratum (a·n_i ≤ rhs, at rhs + allowance so
    that every value the feasibility test accepts stays)."""
    allow = prog.allowance()
    for l in rows:
        a = prog.rows[l].a
        nz = np.flatnonzero(a != 0)
        if nz.size != 1:
            continue
        i, c, b = int(nz[0]), float(a[nz[0]]), prog.rows[l].rhs + allow[l]
        r_lo, r_hi = r_lo.copy(), r_hi.copy()
        if c > 0:
            r_hi[i] = min(r_hi[i], math.floor(b / c))
        else:
            r_lo[i] = max(r_lo[i], math.ceil(b / c))
    return r_lo, r_hi


def _join(tables: list[GroupTable], total: int):
    """Min-plus convolution of the groups' tables over the total (dense on each group's range of totals): the
    least summed excess of designs with the linking row at ``total`` and the entry picked per group, or None."""
    lo_t = 0
    acc = np.zeros(1)
    choices = []
    for tab in tables:
        t_min, dense = _dense(tab)
        where = np.full(dense.size, -1)
        where[tab.totals - t_min] = np.arange(tab.totals.size)      # one entry per total
        acc, arg = _min_plus(acc, dense)
        choices.append((arg, where))
        lo_t += t_min
    j = total - lo_t
    if not (0 <= j < acc.size) or not math.isfinite(acc[j]):
        return None
    best = float(acc[j])
    picks = []
    for arg, where in choices[::-1]:
        s = int(arg[j])
        picks.append(int(where[s]))
        j -= s
    return best, picks[::-1]
