"""Side-by-side timing shared by the benchmarks: the two compared calls alternate (a, b, a, b, ...), so a
load on the machine hits both alike, and the figure is the ratio of each adjacent pair (median and minimum
of the pairwise ratios), never the ratio of two minima taken in separate loops."""

from __future__ import annotations

import statistics
import time


def timed(fn):
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def interleaved(fn_a, fn_b, pairs: int = 5) -> dict:
    """Time ``fn_a`` and ``fn_b`` alternately ``pairs`` times. Returns the median and minimum of the pairwise
    ratios a/b, the median time of each, and the last result of each."""
    ratios, ta, tb = [], [], []
    out_a = out_b = None
    for _ in range(max(int(pairs), 1)):
        t_a, out_a = timed(fn_a)
        t_b, out_b = timed(fn_b)
        ta.append(t_a)
        tb.append(t_b)
        ratios.append(t_a / t_b)
    return {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
            "a_median": statistics.median(ta), "b_median": statistics.median(tb), "a": out_a, "b": out_b,
            "a_times": ta, "b_times": tb}
