"""The best feasible design found so far in a block (by the one feasibility test), which first repairs a point that
misses its rows by a little (HiGHS's points do: its MILP answers were measured up to ~1e-6 relative outside rows it
was asked to hold to 1e-11, which the feasibility test rightly rejects) with the one repair of every route
(:func:`dpopt.formulations.repair.repair_integer_point`), and a first design from the Lagrangian of tightened rows
when the cores find none (:func:`lagrangian_design`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ....formulations.repair import repair_integer_point
from .checks import feasible

REPAIR_VIOLATION = 1e-3   # relative violation beyond which a point is not repaired (it is not nearly feasible)


class Incumbent:
    def __init__(self, prog, deadline=None):
        self.prog = prog
        self.ub = math.inf
        self.n = None
        self.deadline = deadline      # the repair's (None: bounded by its steps alone)

    def offer(self, n, repair_it: bool = True) -> None:
        """Keep ``n`` when it is feasible and better than the incumbent; a point that misses inequality rows by
        a little is first repaired by unit moves (:func:`~dpopt.formulations.repair.repair_integer_point`), and the
        repaired point is offered instead."""
        if n is None:
            return
        if not feasible(self.prog, n):
            if not repair_it:
                return
            # repaired, then improved by unit moves (formulations.repair)
            n = repair_integer_point(self.prog, n, self.deadline, within=REPAIR_VIOLATION)
            if n is None or not feasible(self.prog, n):
                return
        v = self.prog.evaluate(n.astype(float))[0]
        if v < self.ub:
            self.ub, self.n = v, n.copy()

    @property
    def found(self) -> bool:
        return self.n is not None


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
    """The integer minimiser of the Lagrangian at ``lam`` moved onto Σ n = η (None: no total) by
    :func:`onto_total`."""
    from .inner import inner_integer

    Om, ell = prog.combine(lam)
    n = inner_integer(prog, Om, ell)
    return n if eta is None else onto_total(prog, Om, ell, n, eta)


def onto_total(prog, Om, ell, n, eta):
    """A copy of ``n`` moved onto Σ n = η by marginal allocation on the Lagrangian's terms φ (``Om``, ``ell``;
    :func:`..stratified.fill_to_total`, at most 64 rounds), or None when that does not reach it."""
    from ..stratified import fill_to_total
    from .inner import increments

    out = fill_to_total(np.asarray(n, dtype=np.int64).copy(), eta, prog.lower, prog.upper,
                        lambda m, idx: increments(prog, Om, ell, m, idx), 64)
    return None if out is None else out[0]
