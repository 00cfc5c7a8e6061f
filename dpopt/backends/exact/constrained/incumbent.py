"""The best feasible design found so far in a block (by the one feasibility test)."""

from __future__ import annotations

import math

from .checks import feasible


class Incumbent:
    def __init__(self, prog):
        self.prog = prog
        self.ub = math.inf
        self.n = None

    def offer(self, n) -> None:
        """Keep ``n`` when it is feasible and better than the incumbent."""
        if n is not None and feasible(self.prog, n):
            v = self.prog.evaluate(n.astype(float))[0]
            if v < self.ub:
                self.ub, self.n = v, n.copy()

    @property
    def found(self) -> bool:
        return self.n is not None
