"""Shared numerical helpers: the one bisection every monotone root search in dpopt uses.

``bisect(left, lo, hi)`` narrows a bracket [lo, hi] of a monotone predicate: ``left(x)`` is true below the
crossing and false above it (e.g. ``f(x) > target`` for a decreasing f). It works on scalars and, elementwise,
on numpy arrays of brackets; it always stops (``max_iter`` halvings at most) and returns the final bracket,
so callers pick the side their guarantee needs (the upper end keeps ``left`` false)."""

from __future__ import annotations

import numpy as np


def bisect(left, lo, hi, *, xtol: float = 0.0, rtol: float = 0.0, max_iter: int = 200):
    """The bracket ``(lo, hi)`` after halving until ``hi − lo ≤ xtol + rtol·max(1, |hi|)`` (every element) or
    ``max_iter`` halvings. ``left(mid)`` decides which half keeps the crossing. Scalars in, floats out."""
    scalar = np.ndim(lo) == 0 and np.ndim(hi) == 0
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    for _ in range(int(max_iter)):
        if np.all(hi - lo <= xtol + rtol * np.maximum(1.0, np.abs(hi))):
            break
        mid = 0.5 * (lo + hi)
        go = np.asarray(left(float(mid) if scalar else mid), dtype=bool)
        lo = np.where(go, mid, lo)
        hi = np.where(go, hi, mid)
    return (float(lo), float(hi)) if scalar else (lo, hi)
