"""Reduced-cost fixing: per stratum, the values whose reduced cost r_i(v) = φ_i(v) − φ_i(n_λ,i) stays within a
budget (the core), and the window of integers around the relaxation that the secant LP's multipliers use."""

from __future__ import annotations

import numpy as np

from .inner import phi


def reduced_ranges(prog, Om, ell, n_lam, budget):
    """Per stratum, the integers v with φ_i(v) − φ_i(n_λ,i) ≤ budget (an interval: φ_i is convex)."""
    base = phi(prog, Om, ell, n_lam.astype(float))
    return (n_lam - _largest_step(prog, Om, ell, n_lam, base, budget, -1),
            n_lam + _largest_step(prog, Om, ell, n_lam, base, budget, +1))


def _largest_step(prog, Om, ell, n_lam, base, budget, direction):
    """Per stratum, the largest step s in [0, room] with r(n_λ + direction·s) ≤ budget (r non-decreasing in s).

    Galloping (steps 1, 2, 4, ... until one fails), then bisection between the last step that passed and the
    first that failed: a core of width w costs about 2·log2(w) + 1 evaluations per stratum instead of log2(room)
    (cores are a few values wide, rooms thousands: case (d) at k = 1 000 called this 132 times per solve)."""
    lo, hi = prog.lower, prog.upper
    room = (hi - n_lam) if direction > 0 else (n_lam - lo)
    a = np.zeros(prog.k, dtype=np.int64)       # feasible step
    b = room.astype(np.int64)                  # upper end of the search
    gallop = np.ones(prog.k, dtype=bool)       # no step has failed yet
    act = np.arange(prog.k)[a < b]
    for _ in range(140):                       # ≤ 63 doublings, then ≤ 63 halvings
        if act.size == 0:
            break
        aa, bb, g = a[act], b[act], gallop[act]
        mid = np.where(g, np.minimum(np.maximum(2 * aa, 1), bb), (aa + bb + 1) // 2)
        v = n_lam[act] + direction * mid
        r = phi(prog, Om, ell, v.astype(float), act) - base[act]
        ok = r <= budget
        a[act] = np.where(ok, mid, aa)
        b[act] = np.where(ok, bb, mid - 1)
        gallop[act] = g & ok
        act = act[a[act] < b[act]]
    return a


def window(prog, x, n_lam, width):
    """Integers within ``width`` of the relaxation x (and the Lagrangian minimiser) per stratum."""
    lo, hi = prog.lower, prog.upper
    w_lo = np.minimum(np.clip(np.floor(x).astype(np.int64) - width, lo, hi), n_lam)
    w_hi = np.maximum(np.clip(np.ceil(x).astype(np.int64) + width, lo, hi), n_lam)
    return w_lo, w_hi
