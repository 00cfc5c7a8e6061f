"""The one clock of a constrained solve: the time left, equal shares of it for pieces of work, and the grace a
solve that has no design yet may take after its limit to find one (``time_limit`` promises an answer within the
limit plus one second, docs/constrained.md)."""

from __future__ import annotations

import time

GRACE = 0.5     # seconds after the limit a search without any design may spend on a first one (once per solve)


class Deadline:
    def __init__(self, time_limit):
        self.t0 = time.perf_counter()
        self.end = None if time_limit is None else self.t0 + time_limit
        # the grace ends at one instant for the whole solve: every share and fraction inherits it
        self.hard_end = None if self.end is None else self.end + GRACE

    def left(self) -> float | None:
        return None if self.end is None else max(self.end - time.perf_counter(), 0.0)

    def passed(self) -> bool:
        return self.end is not None and time.perf_counter() >= self.end

    def _child(self, end) -> "Deadline":
        out = Deadline(None)
        out.end, out.hard_end = end, self.hard_end
        return out

    def share(self, parts: int) -> "Deadline":
        """A deadline for one of ``parts`` remaining pieces of work: an equal share of the time left."""
        if self.end is None:
            return self._child(None)
        now = time.perf_counter()
        return self._child(min(self.end, now + (self.left() or 0.0) / max(parts, 1)))

    def fraction(self, f: float) -> "Deadline":
        """A deadline at the fraction ``f`` of the time left (the rest kept for a later piece of work)."""
        if self.end is None:
            return self._child(None)
        return self._child(time.perf_counter() + (self.left() or 0.0) * f)

    def at_least(self, seconds: float) -> "Deadline":
        """This deadline, moved to ``seconds`` from now when less is left, but never past the grace's end: for a
        first design when the search found none (a point and a bound, not a bare time-limit status)."""
        if self.end is None:
            return self._child(None)
        return self._child(min(self.hard_end, max(self.end, time.perf_counter() + seconds)))

    def without_grace(self) -> "Deadline":
        """This deadline with no grace after it: for work whose caller holds a design already (a min-max level:
        a first design there is no answer the solve lacks)."""
        out = self._child(self.end)
        out.hard_end = self.end
        return out
