"""Shared numerical helpers: the one bisection every monotone root search in dpopt uses, the bracket
widening that precedes it, water-filling and the continuous-knapsack greedy.

``bisect(left, lo, hi)`` narrows a bracket [lo, hi] of a monotone predicate: ``left(x)`` is true below the
crossing and false above it (e.g. ``f(x) > target`` for a decreasing f). It works on scalars and, elementwise,
on numpy arrays of brackets; it always stops (``max_iter`` halvings at most) and returns the final bracket,
so callers pick the side their guarantee needs (the upper end keeps ``left`` false). ``widen`` finds such a
bracket first when only one end is known, and raises :class:`NotBracketed` at its limit.

``water_fill(w, lower, upper, total)`` is the allocation ``clip(t·w, lower, upper)`` with sum ``total``;
``fill_cheapest(c, lower, upper, total)`` minimises ``c·y`` over ``Σy = total`` within the box."""

from __future__ import annotations

import numpy as np


def bisect(left, lo, hi, *, xtol: float = 0.0, rtol: float = 0.0, max_iter: int = 200):
    """The bracket ``(lo, hi)`` after halving until ``hi − lo ≤ xtol + rtol·max(1, |hi|)`` (every element), the
    ends are adjacent floats, or ``max_iter`` halvings. ``left(mid)`` decides which half keeps the crossing.
    Scalars in, floats out."""
    scalar = np.ndim(lo) == 0 and np.ndim(hi) == 0
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    for _ in range(int(max_iter)):
        if np.all(hi - lo <= xtol + rtol * np.maximum(1.0, np.abs(hi))):
            break
        mid = 0.5 * (lo + hi)
        if np.all((mid == lo) | (mid == hi)):     # adjacent floats: no halving can narrow the bracket further
            break
        go = np.asarray(left(float(mid) if scalar else mid), dtype=bool)
        lo = np.where(go, mid, lo)
        hi = np.where(go, hi, mid)
    return (float(lo), float(hi)) if scalar else (lo, hi)


class NotBracketed(ValueError):
    """:func:`widen` reached its limit with the predicate still on the same side; ``side`` is ``"upper"`` or
    ``"lower"`` (which end could not be moved far enough), ``at`` the limit that was tried."""

    def __init__(self, side: str, at: float):
        super().__init__(f"no sign change of the predicate up to the {side} limit {at!r}")
        self.side, self.at = side, at


def widen(left, lo: float, hi: float, *, up: bool = True, limit: float, step: float = 0.0, grow: float = 1.0,
          max_steps: int = 200):
    """Move a scalar bracket until it holds the crossing of a monotone predicate (``left`` true below it).

    ``up=True`` assumes ``left(lo)`` and moves the upper end while ``left(hi)`` is true: each move takes
    ``lo ← hi`` and adds ``max(step, grow·|hi − anchor|)`` (``anchor`` the first ``lo``: ``grow=1`` from 0
    doubles, ``step`` alone adds a constant), never beyond ``limit``. ``up=False`` is the mirror image
    (assumes ``not left(hi)``, moves ``lo`` down to ``limit``). Raises :class:`NotBracketed` when ``left`` at
    ``limit`` is still on the wrong side or after ``max_steps`` moves. Returns ``(lo, hi)``."""
    lo, hi = float(lo), float(hi)
    anchor = lo if up else hi
    for _ in range(int(max_steps)):
        end = hi if up else lo
        if bool(left(end)) != up:
            return lo, hi
        if end == limit:
            break
        move = max(step, grow * abs(end - anchor))
        if up:
            lo, hi = hi, min(limit, hi + move)
        else:
            lo, hi = max(limit, lo - move), lo
    raise NotBracketed("upper" if up else "lower", hi if up else lo)


def _box(name_lower, lower, upper, total):
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if np.any(lo > hi):
        raise ValueError(f"{name_lower} must be <= upper in every entry")
    s_lo, s_hi = float(lo.sum()), float(hi.sum())
    if not s_lo - 1e-12 * abs(s_lo) <= total <= s_hi + 1e-12 * abs(s_hi):
        raise ValueError(f"total must be in [sum(lower), sum(upper)] = [{s_lo!r}, {s_hi!r}], got {total!r}")
    return lo, hi


def water_fill(weights, lower, upper, total: float) -> np.ndarray:
    """The real allocation ``x = clip(t·w, lower, upper)`` with ``Σx = total`` (``t`` by bisection: the sum is
    non-decreasing in t). Entries of weight 0 stay at ``lower`` until every positive-weight entry is at
    ``upper``; then they are filled equally (the limit of equal tiny weights). The sum is within rounding of
    ``total`` and never above it (the lower end of the final bracket), so a budget stays met.
    Requires ``weights ≥ 0`` and ``Σlower ≤ total ≤ Σupper``."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be a vector of finite numbers >= 0")
    total = float(total)
    lo, hi = _box("lower", lower, upper, total)
    if w.shape != lo.shape or w.shape != hi.shape:
        raise ValueError(f"weights, lower and upper must have the same length, got {w.size}, {lo.size}, {hi.size}")
    if total <= lo.sum():
        return lo.copy()
    if total >= hi.sum():
        return hi.copy()
    pos = w > 0
    if not np.any(pos):
        return water_fill(np.ones_like(w), lo, hi, total)
    if total >= hi[pos].sum() + lo[~pos].sum():   # every positive weight saturated: the rest fill equally
        x = hi.copy()
        x[~pos] = water_fill(np.ones(int(np.sum(~pos))), lo[~pos], hi[~pos], total - float(hi[pos].sum()))
        return x
    w = w / w.max()
    with np.errstate(divide="ignore", over="ignore"):
        t_lo = float(np.min(lo[pos] / w[pos]))            # every entry at its lower bound
        t_hi = float(np.min([np.max(hi[pos] / w[pos]), np.finfo(float).max]))   # every positive one at upper
    fill = lambda t: np.clip(t * w, lo, hi)  # noqa: E731
    t_lo, t_hi = bisect(lambda t: fill(t).sum() < total, min(t_lo, t_hi), t_hi, max_iter=2200)
    return fill(t_lo)


def fill_cheapest(cost, lower, upper, total: float) -> np.ndarray:
    """argmin ``c·y`` over ``Σy = total``, ``lower ≤ y ≤ upper``: the continuous knapsack, exact by the greedy
    that raises the cheapest entries first (ties: the first). Requires ``Σlower ≤ total ≤ Σupper``."""
    c = np.asarray(cost, dtype=float)
    total = float(total)
    lo, hi = _box("lower", lower, upper, total)
    y = lo.copy()
    room = total - float(lo.sum())
    for i in np.argsort(c, kind="stable"):
        if room <= 0:
            break
        take = min(hi[i] - lo[i], room)
        y[i] += take
        room -= take
    return y
