"""The best feasible design found so far in a block (by the one feasibility test), and the unit-move repair of a
point that misses its inequality rows by a little (HiGHS's points do: its MILP answers were measured up to
~1e-6 relative outside rows it was asked to hold to 1e-11, which the feasibility test rightly rejects), and a
first design from the Lagrangian of tightened rows when the cores find none (:func:`lagrangian_design`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .checks import feasible

REPAIR_PASSES = 40        # repair passes at most (each moves a few strata by one unit)
REPAIR_VIOLATION = 1e-3   # relative violation beyond which a point is not repaired (it is not nearly feasible)


class Incumbent:
    def __init__(self, prog, deadline=None):
        self.prog = prog
        self.ub = math.inf
        self.n = None
        self.deadline = deadline      # for improving repaired points (improve_by_unit_moves); None: not improved

    def offer(self, n, repair_it: bool = True) -> None:
        """Keep ``n`` when it is feasible and better than the incumbent; a point that misses inequality rows by
        a little is first repaired by unit moves (:func:`repair`), and the repaired point is offered instead."""
        if n is None:
            return
        if not feasible(self.prog, n):
            if not repair_it:
                return
            n = repair(self.prog, n)
            if n is None or not feasible(self.prog, n):
                return
            if self.deadline is not None:
                better = improve_by_unit_moves(self.prog, n, self.deadline)
                if feasible(self.prog, better):
                    n = better
        v = self.prog.evaluate(n.astype(float))[0]
        if v < self.ub:
            self.ub, self.n = v, n.copy()

    @property
    def found(self) -> bool:
        return self.n is not None


def repair(prog, n) -> np.ndarray | None:
    """From an integer point ``n`` in the bounds whose only faults are inequality rows above their right-hand side
    by at most REPAIR_VIOLATION (relative): unit moves (±1 per stratum) that lower the violated rows most per unit
    of objective, each pass taking moves in that order until they cover every violated row, none making a
    satisfied row's slack negative by itself. None when the program has equality rows, the point is far off or
    the passes do not reach a point the feasibility test accepts. The result is a feasible point, never a claim:
    the caller tests it again and it only ever serves as an incumbent."""
    if not prog.m or not np.all(prog.inequality()):
        return None
    n = np.asarray(n, dtype=np.int64).copy()
    lo, hi = prog.lower, prog.upper
    if n.shape != lo.shape or np.any(n < lo) or np.any(n > hi):
        return None
    rhs = prog.rhs()
    for _ in range(REPAIR_PASSES):
        x = n.astype(float)
        g0, f0 = _terms(prog, n)
        excess = g0.sum(axis=0) - rhs
        scale = prog.row_scale(x)
        if np.all(excess <= 0):
            return n
        if np.any(excess > REPAIR_VIOLATION * scale):
            return None
        viol = excess > 0
        best_rate, best = None, None
        for d in (-1, 1):
            ok, dg, df = _unit_move(prog, n, d, g0, f0)
            # benefit: the share of each violated row's excess the move removes; a move that by itself makes a
            # satisfied row fail is not taken
            gain = np.sum(np.where(viol, -dg / np.where(viol, excess, 1.0), 0.0), axis=1)
            harm = np.any(~viol & (dg > -excess), axis=1)
            good = (gain > 0) & ~harm
            rate = np.where(good, np.maximum(df, 0.0) / np.where(good, gain, 1.0), np.inf)
            cand = (ok, d, dg, rate)
            if best is None:
                best = [cand]
            else:
                best.append(cand)
        idx = np.concatenate([c[0] for c in best])
        dirs = np.concatenate([np.full(c[0].size, c[1]) for c in best])
        dgs = np.concatenate([c[2] for c in best])
        rates = np.concatenate([c[3] for c in best])
        order = np.argsort(rates, kind="stable")
        order = order[np.isfinite(rates[order])]
        if order.size == 0:
            return None
        # moves in rate order (one per stratum) until every violated row's excess is covered
        seen = set()
        covered = np.zeros(prog.m)
        for p in order[:4096]:
            i = int(idx[p])
            if i in seen:
                continue
            seen.add(i)
            n[i] += int(dirs[p])
            covered -= dgs[p]
            if np.all(covered[viol] >= excess[viol]):
                break
    x = n.astype(float)
    return n if feasible(prog, n) else None


def _terms(prog, n):
    """Every row's and the objective's term per stratum at the integer point ``n`` (shapes (k, m) and (k,))."""
    x = np.asarray(n).astype(float)
    T = prog.unit_matrix(x)
    g = np.stack([prog.row_terms(r, T, x) for r in prog.rows], axis=1) if prog.m else np.zeros((prog.k, 0))
    return g, prog.row_terms(prog.objective, T, x)


def _unit_move(prog, n, d, g0, f0):
    """The strata that may move by ``d`` (±1) within their bounds, and each one's change of every row and of the
    objective (against the terms ``g0``, ``f0`` at ``n``)."""
    v = n + d
    ok = np.flatnonzero((v >= prog.lower) & (v <= prog.upper))
    xv = v[ok].astype(float)
    Tv = prog.unit_matrix(xv, ok)
    g = np.stack([prog.row_terms(r, Tv, xv, ok) for r in prog.rows], axis=1) if prog.m else np.zeros((ok.size, 0))
    return ok, g - g0[ok], prog.row_terms(prog.objective, Tv, xv, ok) - f0[ok]


MOVE_PASSES = 60     # passes of improving unit moves at most (each: one evaluation of every ±1 move)


def improve_by_unit_moves(prog, n, deadline) -> np.ndarray:
    """``n`` (feasible) improved by unit moves that lower the objective while every inequality row stays at or below
    its right-hand side: without equality rows, single units in or out (in order of objective gain); with the
    total Σ n = η as the only equality row, transfers, one unit out of one stratum and into another (the
    cheapest additions paired with the largest removal savings, in that order). Rows are separable, so a pass
    tracks their values exactly; a stratum moves at most once per pass, and passes repeat until one finds
    nothing. Other equality rows: ``n`` unchanged.

    A heuristic for the incumbent only; the feasibility test judges the result. Why: the design the tightened
    rows give leaves their slack unused (case (e) at k = 20 000: gap 2.7e-3 before, 1.9e-4 after, in 0.6 s;
    ranking the moves by their price at the multipliers as well found nothing more), and a point repaired onto
    the rows (:func:`repair`) keeps the units the repair added where others would serve."""
    n = np.asarray(n, dtype=np.int64).copy()
    ineq = prog.inequality()
    eq = np.flatnonzero(~ineq)
    if eq.size > 1 or (eq.size == 1 and prog.rows[eq[0]].kind != "total"):
        return n
    rhs = prog.rhs()
    for _ in range(MOVE_PASSES):
        if deadline.passed():
            break
        g0, f0 = _terms(prog, n)
        cur = np.where(ineq, g0.sum(axis=0) - rhs, -np.inf)    # ≤ 0 on a feasible point; equality rows ignored
        moves = []
        for d in (1, -1):
            ok, dg, df = _unit_move(prog, n, d, g0, f0)
            order = np.argsort(df, kind="stable")
            moves.append((ok[order], np.full(ok.size, d), dg[order], df[order]))
        moved = np.zeros(prog.k, dtype=bool)
        if eq.size:
            cur, gained = _transfers(n, moves, cur, ineq, moved)
        else:
            cur, gained = _single_moves(n, moves, cur, ineq, moved)
        if not gained:
            break
    return n


def _single_moves(n, moves, cur, ineq, moved):
    """One pass of single unit moves (in place on ``n``) in order of objective gain, each taken when it lowers the
    objective and the rows allow it."""
    idx, dirs, dg, df = (np.concatenate(c) for c in zip(*moves))
    gained = False
    for p in np.flatnonzero(df < 0)[np.argsort(df[df < 0], kind="stable")]:
        i = int(idx[p])
        if moved[i]:
            continue
        after = cur + dg[p]
        if np.all(after[ineq] <= 0):
            n[i] += int(dirs[p])
            moved[i] = True
            cur, gained = after, True
    return cur, gained


def _transfers(n, moves, cur, ineq, moved):
    """One pass of unit transfers (in place on ``n``): the cheapest additions paired with the largest removal
    savings, a pair taken when it lowers the objective and the rows allow it; stops at the first pair that would
    not lower the objective."""
    (add, _, dga, dfa), (rem, _, dgr, dfr) = moves
    a = r = 0
    gained = False
    while a < add.size and r < rem.size and dfa[a] + dfr[r] < 0:
        i, j = int(add[a]), int(rem[r])
        if moved[i]:
            a += 1
            continue
        if moved[j] or i == j:
            r += 1
            continue
        both = cur + dga[a] + dgr[r]
        if np.all(both[ineq] <= 0):
            n[i] += 1
            n[j] -= 1
            moved[i] = moved[j] = True
            cur, gained = both, True
            a += 1
            r += 1
        elif np.any((cur + dga[a])[ineq] > 0):
            a += 1            # the addition alone breaks a row
        else:
            r += 1            # the removal breaks one (alone or with this addition)
    return cur, gained


TIGHTEN_ROUNDS = 7        # tightenings of the inequality rows at most (each: one continuous dual solve)
TIGHTEN_START = 1e-4      # first tightening, relative to each row's scale; ×4 per round
TIGHTEN_BISECTIONS = 3    # log-scale halvings towards the least tightening that works


def lagrangian_design(prog, x, deadline) -> np.ndarray | None:
    """A feasible design from the Lagrangian of the program with its inequality rows tightened, or None.

    Each round tightens every inequality row by δ of its scale at the relaxation ``x`` (δ = 1e-4, ×4 per
    round), solves that program's continuous dual (:mod:`.dual`) and takes the integer minimiser of the
    Lagrangian at its multipliers, moved onto the fixed total Σ n = η by the cheapest unit moves (marginal
    allocation on φ). Rounding moves each row by about the tightening's size, so some round's design meets
    every row of the program itself; the first that does is returned.

    Why: with several targets coupled by a total, the cores can need a budget far above the first ones before
    they hold any feasible design (case (e) at k = 20 000: none found in 10 s). Programs with equality rows
    other than one total are left to the cores. The result only ever serves as an incumbent: the feasibility
    test judges it."""
    from .dual import solve_dual

    if not prog.m:
        return None
    ineq = prog.inequality()
    eq = np.flatnonzero(~ineq)
    if eq.size > 1 or (eq.size == 1 and prog.rows[eq[0]].kind != "total"):
        return None
    eta = int(round(prog.rows[eq[0]].rhs)) if eq.size else None
    if eta is not None and not int(prog.lower.sum()) <= eta <= int(prog.upper.sum()):
        return None
    scale = prog.row_scale(np.asarray(x, dtype=float))

    def attempt(delta):
        rows = [dataclasses.replace(r, rhs=r.rhs - delta * s) if r.sense == "<=" else r
                for r, s in zip(prog.rows, scale)]
        # any multipliers give a design to test: a dual stopped early (by the time left) still serves
        res = solve_dual(dataclasses.replace(prog, rows=rows), deadline, time_share=0.5)
        if res.infeasible:
            return None
        n = _on_total(prog, res.lam, eta)
        return n if n is not None and feasible(prog, n) else None

    delta, below, found = TIGHTEN_START, 0.0, None
    for _ in range(TIGHTEN_ROUNDS):
        if deadline.passed():
            return None
        found = attempt(delta)
        if found is not None:
            break
        below, delta = delta, delta * 4.0
    if found is None:
        return None
    # the least tightening that still gives a feasible design (less tightening, a better design): halvings
    # on a log scale between the last failed δ and the first that worked
    for _ in range(TIGHTEN_BISECTIONS if below > 0 else 0):
        if deadline.passed():
            break
        mid = math.sqrt(below * delta)
        n = attempt(mid)
        if n is not None:
            found, delta = n, mid
        else:
            below = mid
    return found


def _on_total(prog, lam, eta):
    """The integer minimiser of the Lagrangian at ``lam`` moved onto Σ n = η (None: no total) by marginal
    allocation on φ (:func:`..stratified.fill_to_total`, at most 64 rounds)."""
    from ..stratified import fill_to_total
    from .inner import increments, inner_integer

    Om, ell = prog.combine(lam)
    n = inner_integer(prog, Om, ell)
    if eta is None:
        return n
    out = fill_to_total(n, eta, prog.lower, prog.upper, lambda m, idx: increments(prog, Om, ell, m, idx), 64)
    return None if out is None else out[0]
