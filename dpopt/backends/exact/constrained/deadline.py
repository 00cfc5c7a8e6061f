"""The one clock of a constrained solve: the time left, and equal shares of it for pieces of work."""

from __future__ import annotations

import time


class Deadline:
    def __init__(self, time_limit):
        self.t0 = time.perf_counter()
        self.end = None if time_limit is None else self.t0 + time_limit

    def left(self) -> float | None:
        return None if self.end is None else max(self.end - time.perf_counter(), 0.0)

    def passed(self) -> bool:
        return self.end is not None and time.perf_counter() >= self.end

    def share(self, parts: int) -> "Deadline":
        """A deadline for one of ``parts`` remaining pieces of work: an equal share of the time left."""
        out = Deadline(None)
        if self.end is not None:
            out.end = min(self.end, out.t0 + (self.left() or 0.0) / max(parts, 1))
        return out

    def fraction(self, f: float) -> "Deadline":
        """A deadline at the fraction ``f`` of the time left (the rest kept for a later piece of work)."""
        out = Deadline(None)
        if self.end is not None:
            out.end = out.t0 + (self.left() or 0.0) * f
        return out
