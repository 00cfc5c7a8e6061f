"""Step 2, the integer Lagrangian bound: at multipliers λ the integer Lagrangian separates into discretely
convex problems per stratum (:func:`.inner.inner_integer`); its value, made safe in floating point, is a
proven lower bound LB, and every feasible n satisfies f(n) = LB + Σ_i r_i(n_i) + Σ_l λ_l s_l(n) with r_i ≥ 0
the reduced costs and s_l ≥ 0 the slacks of the inequality rows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....formulations.separable import safe_lower
from .inner import inner_integer, phi


@dataclass(frozen=True)
class IntegerBound:
    """The integer Lagrangian at λ: its safe value ``lb``, minimiser ``n``, the combined terms Ω, ℓ of
    φ_i, and ``margin``, the most a computed excess f − LB can be off by (the rounding allowance)."""
    lb: float
    n: np.ndarray
    Om: np.ndarray
    ell: np.ndarray
    margin: float


def integer_bound(prog, lam) -> IntegerBound:
    """The integer Lagrangian dual value at λ and its minimiser, LB made safe in floating point
    (docs/constrained.md, "Feasibility and safe bounds"):

    * the bisection reads signs of increments, which are rounding noise where φ_i is flat: the least of
      φ_i(n_λ − 1), φ_i(n_λ), φ_i(n_λ + 1) is taken;
    * every design the feasibility test accepts has row_l ≤ rhs_l + allowance_l (|row_l − rhs_l| ≤
      allowance_l for equalities), so the bound subtracts Σ_l |λ_l|·allowance_l;
    * the sum Σ_i φ_i − λ·rhs − const cancels (φ_i carry λ·W terms far larger than LB when λ is large): it is
      summed exactly (fsum) and lowered by a rigorous estimate of the evaluation and rounding error,
      (EVAL_RTOL + (m + J + 4)·u)·(Σ_ij |Ω_ij| t_ij + Σ_i |ℓ_i n_i| + Σ_l |λ_l rhs_l| + |const|)."""
    Om, ell = prog.combine(lam)
    n_lam, phis = _flat_safe_minimiser(prog, Om, ell)
    x = n_lam.astype(float)
    T = prog.unit_matrix(x)
    mag = float(np.sum(np.abs(Om) * T) + np.sum(np.abs(ell * x)))
    lam = np.asarray(lam, dtype=float)
    rhs = prog.rhs()
    cost = -lam * rhs
    allow = -np.abs(lam) * prog.allowance() if prog.m else np.zeros(0)
    mag += float(np.sum(np.abs(cost))) + abs(prog.const)
    parts = np.concatenate([phis, cost, [-prog.const]])
    lb = safe_lower(np.concatenate([parts, allow]), mag, extra_ops=prog.m + prog.model.J + 4)
    # the rounding part of what was subtracted: also the most a computed excess f − LB can be off by
    margin = max(math.fsum(parts.tolist()) - lb + float(np.sum(allow)), 0.0)
    return IntegerBound(lb, n_lam, Om, ell, margin)


def _flat_safe_minimiser(prog, Om, ell):
    """The integer minimiser of every φ_i, moved to a neighbour where that is lower (flat φ_i), and φ_i there."""
    n_lam = inner_integer(prog, Om, ell)
    lo, hi = prog.lower, prog.upper
    best = n_lam
    val = phi(prog, Om, ell, n_lam.astype(float))
    for d in (-1, 1):
        c = np.clip(n_lam + d, lo, hi)
        pc = phi(prog, Om, ell, c.astype(float))
        better = pc < val
        best = np.where(better, c, best)
        val = np.where(better, pc, val)
    return best, val
