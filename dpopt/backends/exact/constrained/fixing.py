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
    """Per stratum, the largest step s in [0, room] with r(n_λ + direction·s) ≤ budget (r non-decreasing in s)."""
    lo, hi = prog.lower, prog.upper
    room = (hi - n_lam) if direction > 0 else (n_lam - lo)
    a = np.zeros(prog.k, dtype=np.int64)       # feasible step
    b = room.astype(np.int64)                  # upper end of the search
    act = np.arange(prog.k)[a < b]
    for _ in range(70):
        if act.size == 0:
            break
        mid = (a[act] + b[act] + 1) // 2
        v = n_lam[act] + direction * mid
        r = phi(prog, Om, ell, v.astype(float), act) - base[act]
        ok = r <= budget
        a[act] = np.where(ok, mid, a[act])
        b[act] = np.where(ok, b[act], mid - 1)
        act = act[a[act] < b[act]]
    return a


def window(prog, x, n_lam, width):
    """Integers within ``width`` of the relaxation x (and the Lagrangian minimiser) per stratum."""
    lo, hi = prog.lower, prog.upper
    w_lo = np.minimum(np.clip(np.floor(x).astype(np.int64) - width, lo, hi), n_lam)
    w_hi = np.maximum(np.clip(np.ceil(x).astype(np.int64) + width, lo, hi), n_lam)
    return w_lo, w_hi
