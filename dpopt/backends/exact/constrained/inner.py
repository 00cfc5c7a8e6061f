"""The per-stratum inner problems of the Lagrangian: φ_i(x) = Σ_j Ω_ij t_ij(x) + ℓ_i x, its derivatives and its
minimisers over the box, continuous (bracketed Newton) and integer (bisection on increments), vectorised."""

from __future__ import annotations

import numpy as np

from ....formulations.separable import SeparableProgram


def phi(prog: SeparableProgram, Om, ell, x, idx=None):
    sl = slice(None) if idx is None else idx
    T = prog.unit_matrix(x, idx)
    return np.sum(Om[sl] * T, axis=1) + ell[sl] * np.asarray(x, dtype=float)


def phi_derivs(prog, Om, ell, x, idx=None):
    sl = slice(None) if idx is None else idx
    d1, d2 = prog.derivative_matrices(x, idx)
    return np.sum(Om[sl] * d1, axis=1) + ell[sl], np.sum(Om[sl] * d2, axis=1)


def increments(prog, Om, ell, m, idx):
    D = prog.increment_matrix(np.asarray(m, dtype=float), idx)
    return np.sum(Om[idx] * D, axis=1) + ell[idx]


def inner_continuous(prog, Om, ell, x0=None, max_iter: int = 100):
    """argmin of φ_i(x) = Σ_j Ω_ij t_ij(x) + ℓ_i x on [lo_i, hi_i] for every i (φ_i' is increasing)."""
    lo, hi = prog.lower.astype(float), prog.upper.astype(float)
    x = np.sqrt(lo * hi) if x0 is None else np.clip(np.asarray(x0, dtype=float), lo, hi)
    (d1_lo, _), (d1_hi, _) = prog.bound_derivatives()
    d_lo = np.sum(Om * d1_lo, axis=1) + ell
    d_hi = np.sum(Om * d1_hi, axis=1) + ell
    at_lo, at_hi = d_lo >= 0, d_hi <= 0
    x[at_lo] = lo[at_lo]
    x[at_hi & ~at_lo] = hi[at_hi & ~at_lo]
    idx = np.flatnonzero(~(at_lo | at_hi))
    if idx.size:
        x[idx] = _bracketed_newton(prog, Om, ell, idx, lo[idx].copy(), hi[idx].copy(), x[idx], max_iter)
    return x


def _bracketed_newton(prog, Om, ell, idx, a, b, x, max_iter):
    """The roots of φ_i' in the brackets [a, b] (φ_i'(a) < 0 < φ_i'(b)), from x."""
    xi = np.clip(x, a, b)
    act = np.arange(idx.size)
    for _ in range(max_iter):
        xa = xi[act]
        g, h = phi_derivs(prog, Om, ell, xa, idx[act])
        a[act] = np.where(g < 0, xa, a[act])
        b[act] = np.where(g > 0, xa, b[act])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # Newton on x²φ'(x) (same root): for φ = A/x + Bx that is Bx² − A, on which Newton converges from
            # any x > 0; plain Newton on φ' overshoots below zero from the right of the root
            xn = xa - xa * g / (2 * g + xa * h)
        aa, bb = a[act], b[act]
        # a step below the tolerance is convergence, even when rounding puts it on the bracket's end (treating
        # it as a bad step jumped back to the bracket's middle: 35 iterations per solve instead of 5)
        tiny = np.isfinite(xn) & (np.abs(xn - xa) <= 1e-13 * xa)
        bad = ~tiny & (~np.isfinite(xn) | (xn <= aa) | (xn >= bb))
        xn = np.where(bad, np.sqrt(aa * bb), xn)
        done = tiny | (g == 0) | (bb - aa <= 1e-13 * bb)
        xi[act] = xn
        act = act[~done]
        if act.size == 0:
            break
    return xi


def inner_integer(prog, Om, ell):
    """argmin over integers in [lo_i, hi_i] of φ_i: the first m with Δφ_i(m) ≥ 0 (increments non-decreasing)."""
    lo, hi = prog.lower.copy(), prog.upper.copy()
    a, b = lo.copy(), hi.copy()          # answer in [a, b]; b = hi means "no sign change below hi"
    act = np.flatnonzero(a < b)
    for _ in range(70):
        if act.size == 0:
            break
        mid = (a[act] + b[act]) // 2
        dphi = increments(prog, Om, ell, mid, act)
        up = dphi >= 0
        b[act] = np.where(up, mid, b[act])
        a[act] = np.where(up, a[act], mid + 1)
        act = act[a[act] < b[act]]
    return a
