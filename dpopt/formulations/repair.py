"""Checks of a solver's answer against the model itself, for every backend: the largest relative violation,
the repair of a rounded integer point by unit moves (what :func:`solution_from` applies to a point a solver
accepted within its own tolerance), and a point the model certifies feasible (used to recognise a solver's
wrong ``infeasible`` claim)."""

from __future__ import annotations

import math
import time

import numpy as np

from ..models.stratified import MinCostDesign, StratifiedDesign


# the one feasibility test and its tolerance (docs/constrained.md): an integer point is feasible only if
# model.is_feasible accepts it; FEASIBILITY_TOL is re-exported here for the callers that report violations
from .separable import FEASIBILITY_TOL, program_of  # noqa: E402,F401

# a rounded solver point is worth repairing by unit moves when it violates a row by at most the solver's own
# feasibility tolerance (relative, as the test measures it); a *real* relaxation point is returned (as
# feasible, never optimal) within the same solver tolerance
SOLVER_TOL = 1e-6
# the repair of a rounded integer point gives up after this many unit moves (plus 2 per stratum)
REPAIR_MOVES = 20


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


def repair_integer_point(model, n, deadline: float | None = None):
    """A feasible integer point a few unit moves from ``n`` (a rounded solver point that violates a constraint
    by the solver's tolerance), or None.

    Greedy and bounded: each step takes the move that most reduces :func:`max_violation` (ties: the smaller
    objective) among the exchanges of one unit between two strata (designs with a fixed total) or the ±1 moves
    of one stratum (min-cost designs), and stops when the point is feasible, when no move reduces the violation,
    after ``REPAIR_MOVES + 2k`` moves, or at ``deadline`` (a ``time.perf_counter`` instant: a solve's time
    limit covers its repair)."""
    n = np.asarray(n, dtype=np.int64).copy()
    k = model.k
    lo, hi = np.asarray(model.lower, dtype=np.int64), np.asarray(model.upper, dtype=np.int64)
    prog = program_of(model)

    def violation(x):
        if np.any(x < lo) or np.any(x > hi):
            return math.inf
        return max(float(np.max(prog.violation(x.astype(float)))), 0.0) if prog.m else 0.0

    for _ in range(REPAIR_MOVES + 2 * k):
        if model.is_feasible(n):
            return n
        if deadline is not None and time.perf_counter() > deadline:
            return None
        current = violation(n)
        if isinstance(model, StratifiedDesign):
            moves = [(i, j) for i in range(k) if n[i] > lo[i] for j in range(k) if j != i and n[j] < hi[j]]
        else:
            moves = [(i, -1) for i in range(k) if n[i] > lo[i]] + [(-1, j) for j in range(k) if n[j] < hi[j]]
        best = None
        for count, (i, j) in enumerate(moves):
            # one step weighs k² exchanges (measured: 75 s for one step at k = 500, a 10 s limit overrun by 73 s):
            # the deadline is checked within the step too
            if deadline is not None and count % 256 == 0 and time.perf_counter() > deadline:
                return None
            cand = n.copy()
            if i >= 0:
                cand[i] -= 1
            if j >= 0:
                cand[j] += 1
            key = (violation(cand), model.objective_value(cand))
            if best is None or key < best[0]:
                best = (key, cand)
        if best is None or not best[0][0] < current:
            return None
        n = best[1]
    return n if model.is_feasible(n) else None


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
