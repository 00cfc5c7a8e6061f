"""Checks of a solver's answer against the model itself, for every backend: the largest relative violation,
the repair of a rounded integer point by unit moves (what :func:`solution_from` applies to a point a solver
accepted within its own tolerance), and a point the model certifies feasible (used to recognise a solver's
wrong ``infeasible`` claim)."""

from __future__ import annotations

import math
import time

import numpy as np

from ..feasibility import relative_violation
from ..models.stratified import StratifiedDesign


# the one feasibility test and its tolerance (docs/constrained.md): an integer point is feasible only if
# model.is_feasible accepts it; FEASIBILITY_TOL is re-exported here for the callers that report violations
from .separable import FEASIBILITY_TOL, SeparableProgram, program_of  # noqa: E402,F401

# a rounded solver point is worth repairing by unit moves when it violates a row by at most the solver's own
# feasibility tolerance (relative, as the test measures it); a *real* relaxation point is returned (as
# feasible, never optimal) within the same solver tolerance
SOLVER_TOL = 1e-6
# the repair of an integer point gives up after this many steps (plus 2 per stratum); a step takes the best
# move and then every further one, on strata not yet moved, that still lowers the violation
REPAIR_MOVES = 20
# moves of each direction whose pairs a transfer step evaluates (the 2·PAIR_CANDIDATES best by violation and
# by objective); with at most 2·PAIR_CANDIDATES strata every transfer is evaluated
PAIR_CANDIDATES = 32


def max_violation(model, n) -> float:
    """Largest relative row violation at n as the feasibility test measures it
    (:meth:`SeparableProgram.violation <dpopt.formulations.separable.SeparableProgram.violation>`); inf
    outside the bounds, 0 if none."""
    n = np.asarray(n, dtype=float)
    if np.any(n < model.lower) or np.any(n > model.upper):
        return math.inf
    prog = program_of(model)
    if not prog.m:
        return 0.0
    return max(float(np.max(prog.violation(n))), 0.0)


def unit_terms(prog, n):
    """Every row's and the objective's term per stratum at the integer point ``n`` (shapes (k, m) and (k,))."""
    x = np.asarray(n).astype(float)
    T = prog.unit_matrix(x)
    g = np.stack([prog.row_terms(r, T, x) for r in prog.rows], axis=1) if prog.m else np.zeros((prog.k, 0))
    return g, prog.row_terms(prog.objective, T, x)


def unit_move(prog, n, d, g0, f0):
    """The strata that may move by ``d`` (±1) within their bounds, and each one's change of every row and of the
    objective (against the terms ``g0``, ``f0`` at ``n``, from :func:`unit_terms`)."""
    v = np.asarray(n) + d
    ok = np.flatnonzero((v >= prog.lower) & (v <= prog.upper))
    xv = v[ok].astype(float)
    Tv = prog.unit_matrix(xv, ok)
    g = np.stack([prog.row_terms(r, Tv, xv, ok) for r in prog.rows], axis=1) if prog.m else np.zeros((ok.size, 0))
    return ok, g - g0[ok], prog.row_terms(prog.objective, Tv, xv, ok) - f0[ok]


def repair_integer_point(prog_or_model, n, deadline=None, within: float = math.inf):
    """A feasible integer point a few unit moves from ``n`` (a rounded solver point that violates rows by the
    solver's tolerance), or None: the one repair of every route (Pyomo's and cvxpy's points, HiGHS's inside
    ``exact``).

    The moves keep the fixed total: with a row Σ n = η they are transfers of one unit between two strata, else
    single ±1 moves (a point off the total is not repaired: on case (e) at k = 20 000 the Lagrangian minimiser,
    189 units over, moved onto the total gave a design 6.8e-4 above the bound, which then stood in for the 1.9e-4
    one the tightened rows give when no design exists). Two greedy repairs (:func:`_greedy_repair`), one taking
    the cheapest moves that clear the rows, one the moves that buy most row decrease per unit of objective, are
    each followed by :func:`improve_by_unit_moves`, and the better point is returned. Why both: the cheapest
    clearing move leaves no slack, while the most efficient one overshoots and the improvement then spends the
    slack elsewhere; of 22 HiGHS points of case (d) at k = 20 000 the second ended lower on 10 (by up to 12×,
    nearest to feasible) and the first on 12 (by at most 30 %), docs/constrained.md.

    Bounded: gives up (None) when the point is outside the bounds, when a row is violated by more than
    ``within`` (relative), when no move lowers the violation, after ``REPAIR_MOVES + 2k`` steps or at
    ``deadline`` (a ``time.perf_counter`` instant or a :class:`Deadline`: a solve's time limit covers its
    repair). The result is judged by the one feasibility test; it is a feasible point, never a claim about its
    objective."""
    prog = prog_or_model if isinstance(prog_or_model, SeparableProgram) else program_of(prog_or_model)
    n = np.asarray(n, dtype=np.int64).copy()
    lo, hi = prog.lower, prog.upper
    if n.shape != lo.shape or np.any(n < lo) or np.any(n > hi):
        return None
    if prog.feasible(n):
        return n
    late = _clock(deadline)
    best, best_f = None, math.inf
    for efficient in (False, True):
        out = _greedy_repair(prog, n, late, within, efficient)
        if out is None:
            continue
        better = improve_by_unit_moves(prog, out, deadline)
        if prog.feasible(better):
            out = better
        f = prog.evaluate(out.astype(float))[0]
        if f < best_f:
            best, best_f = out, f
    return best


def _clock(deadline):
    """``deadline`` (None, a ``time.perf_counter`` instant or a :class:`Deadline`) as a callable: has it passed?"""
    if deadline is None:
        return lambda: False
    if hasattr(deadline, "passed"):
        return deadline.passed
    return lambda: time.perf_counter() > deadline


def _greedy_repair(prog, n, late, within, efficient: bool):
    """One greedy repair of ``n`` (see :func:`repair_integer_point`), or None. Each step scores every move (pairs of
    the candidates for transfers: :func:`_candidates`) against V, the summed relative violation of the rows as the
    feasibility test measures them (equalities by |.|), and orders them:

    * ``efficient`` False: the moves that clear every row, cheapest first, then the others by objective per unit
      of V removed (one exchange that suffices is then the cheapest such exchange);
    * ``efficient`` True: by objective per unit of row decrease, the decrease of each violated row counted
      against its excess without a cap, moves that break a satisfied row by themselves left out.

    The step takes the first move and every further one, in that order and on strata not yet moved, that still
    lowers V at the point reached (rows are separable, so that is exact), until V is zero."""
    if not prog.m:
        return n
    n = n.copy()
    rhs, ineq = prog.rhs(), prog.inequality()
    total = prog.total_row()
    for _ in range(REPAIR_MOVES + 2 * prog.k):
        if prog.feasible(n):
            return n
        if late():
            return None
        g0, f0 = unit_terms(prog, n)
        scale = prog.row_scale(n.astype(float))
        rows = g0.sum(axis=0)

        def total_violation(values):
            return np.sum(np.maximum(relative_violation(values, rhs, ~ineq, scale), 0.0), axis=-1)

        v0 = float(total_violation(rows))
        if float(np.max(relative_violation(rows, rhs, ~ineq, scale))) > within:
            return None
        excess = rows - rhs             # of the inequality rows (the efficient order reads only those)
        if total is not None and int(round(rows[total] - rhs[total])):
            return None           # off the total: transfers cannot reach it
        up, dn = unit_move(prog, n, 1, g0, f0), unit_move(prog, n, -1, g0, f0)
        if total is not None:
            a, b = _candidates(up, rows, total_violation), _candidates(dn, rows, total_violation)
            ia, ib = np.repeat(a, b.size), np.tile(b, a.size)
            keep = up[0][ia] != dn[0][ib]
            ia, ib = ia[keep], ib[keep]
            moves = [(up[0][ia], np.ones(ia.size, np.int64)), (dn[0][ib], -np.ones(ib.size, np.int64))]
            dg, df = up[1][ia] + dn[1][ib], up[2][ia] + dn[2][ib]
        else:
            moves = [(np.concatenate([up[0], dn[0]]), np.concatenate([np.ones(up[0].size, np.int64),
                                                                       -np.ones(dn[0].size, np.int64)]))]
            dg, df = np.concatenate([up[1], dn[1]]), np.concatenate([up[2], dn[2]])
        if efficient:
            viol = ineq & (excess > 0)
            gain = np.sum(np.where(viol, -dg / np.where(viol, excess, 1.0), 0.0), axis=1)
            # a move that by itself breaks a satisfied inequality row, or moves an equality row, is left out
            harm = np.any(np.where(ineq, ~viol & (dg > -excess), dg != 0), axis=1)
            good = (gain > 0) & ~harm
            key = np.where(good, np.maximum(df, 0.0) / np.where(good, gain, 1.0), np.inf)
            order = np.argsort(key, kind="stable")
            order = order[np.isfinite(key[order])]
        else:
            after = total_violation(rows[None, :] + dg)
            clears = after <= FEASIBILITY_TOL
            progress = v0 - after
            rate = np.where(progress > 0, np.maximum(df, 0.0) / np.where(progress > 0, progress, 1.0), np.inf)
            # clearing moves first, cheapest first; then the others by objective per unit of violation removed
            order = np.lexsort((-progress, np.where(clears, df, rate), ~clears))
            order = order[clears[order] | np.isfinite(rate[order])]
        if order.size == 0:
            return None
        moved = np.zeros(prog.k, dtype=bool)
        cur, v = rows.copy(), v0
        for p in order[:4096]:
            strata = [(int(idx[p]), int(d[p])) for idx, d in moves]
            if any(moved[i] for i, _ in strata):
                continue
            nxt = cur + dg[p]
            vn = float(total_violation(nxt))
            if vn >= v:
                continue
            for i, d in strata:
                n[i] += d
                moved[i] = True
            cur, v = nxt, vn
            if v <= 0.0:
                break
    return n if prog.feasible(n) else None


def _candidates(move, rows, total_violation):
    """Positions (within ``move``, from :func:`unit_move`) of the PAIR_CANDIDATES moves that lower the summed
    violation most, and of the PAIR_CANDIDATES cheapest (objective) among those that do not raise it."""
    ok, dg, df = move
    if ok.size <= 2 * PAIR_CANDIDATES:
        return np.arange(ok.size)
    after = total_violation(rows[None, :] + dg)
    best = np.argpartition(after, PAIR_CANDIDATES)[:PAIR_CANDIDATES]
    harmless = np.flatnonzero(after <= total_violation(rows))
    cheap = harmless[np.argsort(df[harmless], kind="stable")[:PAIR_CANDIDATES]]
    return np.union1d(best, cheap)


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
    the rows (:func:`repair_integer_point`) keeps the units the repair added where others
    would serve."""
    n = np.asarray(n, dtype=np.int64).copy()
    ineq = prog.inequality()
    eq = np.flatnonzero(~ineq)
    if eq.size > 1 or (eq.size == 1 and prog.rows[eq[0]].kind != "total"):
        return n
    rhs = prog.rhs()
    late = _clock(deadline)
    for _ in range(MOVE_PASSES):
        if late():
            break
        g0, f0 = unit_terms(prog, n)
        cur = np.where(ineq, g0.sum(axis=0) - rhs, -np.inf)    # ≤ 0 on a feasible point; equality rows ignored
        moves = []
        for d in (1, -1):
            ok, dg, df = unit_move(prog, n, d, g0, f0)
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
    cand = np.flatnonzero(df < 0)
    cand = cand[np.argsort(df[cand], kind="stable")]
    # the inequality rows' values as Python floats: a pass visits every improving move in turn, and numpy's
    # per-call overhead on m-vectors was half of a classical min-cost solve at k = 10 000 (same sums, same order)
    rows = np.flatnonzero(ineq)
    now = cur[rows].tolist()
    gained = False
    for i, d, step in zip(idx[cand].tolist(), dirs[cand].tolist(), dg[cand][:, rows].tolist()):
        if moved[i]:
            continue
        after = [a + b for a, b in zip(now, step)]
        if all(a <= 0 for a in after):
            n[i] += d
            moved[i] = True
            now, gained = after, True
    cur[rows] = now
    return cur, gained


def _transfers(n, moves, cur, ineq, moved):
    """One pass of unit transfers (in place on ``n``): the cheapest additions paired with the largest removal
    savings, a pair taken when it lowers the objective and the rows allow it; stops at the first pair that would
    not lower the objective."""
    (add, _, dga, dfa), (rem, _, dgr, dfr) = moves
    rows = np.flatnonzero(ineq)
    now = cur[rows].tolist()           # Python floats, as in _single_moves
    add_l, rem_l, dfa_l, dfr_l = add.tolist(), rem.tolist(), dfa.tolist(), dfr.tolist()
    dga_l, dgr_l = dga[:, rows].tolist(), dgr[:, rows].tolist()
    a = r = 0
    gained = False
    while a < len(add_l) and r < len(rem_l) and dfa_l[a] + dfr_l[r] < 0:
        i, j = add_l[a], rem_l[r]
        if moved[i]:
            a += 1
            continue
        if moved[j] or i == j:
            r += 1
            continue
        plus = [c + x for c, x in zip(now, dga_l[a])]
        both = [c + y for c, y in zip(plus, dgr_l[r])]
        if all(v <= 0 for v in both):
            n[i] += 1
            n[j] -= 1
            moved[i] = moved[j] = True
            now, gained = both, True
            a += 1
            r += 1
        elif any(v > 0 for v in plus):
            a += 1            # the addition alone breaks a row
        else:
            r += 1            # the removal breaks one (alone or with this addition)
    cur[rows] = now
    return cur, gained


def known_feasible_point(model):
    """An integer point the model itself certifies feasible (``model.is_feasible``), or None if none is known.

    For the plain sum-and-bounds problem one always exists after validation (Σlo ≤ η ≤ Σhi): the
    largest-remainder proportional design. With linear constraints or a variance bound, a few simple
    candidates are tried and only a point that passes ``is_feasible`` is returned.
    """
    from ..models.stratified import largest_remainder

    lo, hi = np.asarray(model.lower, dtype=np.int64), np.asarray(model.upper, dtype=np.int64)
    cands = []
    if isinstance(model, StratifiedDesign):
        for w in (model.N.astype(float), np.ones(model.k)):
            try:
                cands.append(largest_remainder(w, model.total, lo, hi))
            except ValueError:
                pass
    else:
        cands += [hi, lo]
    for n in cands:
        try:
            if model.is_feasible(n):
                return np.asarray(n, dtype=np.int64)
        except (ValueError, FloatingPointError):
            continue
    return None
