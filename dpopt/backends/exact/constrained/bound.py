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
    φ_i, ``margin``, the most a computed excess f − LB can be off by (the rounding allowance), and
    ``tolerance``, Σ_l |λ_l|·allowance_l, the part of the gap between LB and the Lagrangian's value that covers
    designs within the rows' tolerance: an enumeration that counts each design's own slack λ·s (negative
    within the tolerance) may add it back."""
    lb: float
    n: np.ndarray
    Om: np.ndarray
    ell: np.ndarray
    margin: float
    tolerance: float = 0.0


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
    return IntegerBound(lb, n_lam, Om, ell, margin, float(-np.sum(allow)) * (1 - 1e-12))


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


LATTICE_DIGITS = 6        # decimals tried when looking for the objective's cost unit (costs like 19.6 → 0.1)


def cost_unit(prog) -> tuple[float, np.ndarray] | None:
    """(u, m): the objective is linear, Σ a_i n_i with every a_i = u·m_i for integers m_i ≥ 1 up to float
    representation (|a_i − u·m_i| ≤ 1e-12·a_i), and u the largest such unit of the form g·10^−d; else None."""
    obj = prog.objective
    if obj.W is not None and np.any(obj.W != 0) or obj.a is None or prog.const != 0:
        return None
    a = np.asarray(obj.a, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0) or np.max(a) > 2.0 ** 40:
        return None
    for d in range(LATTICE_DIGITS + 1):
        s = a * 10.0 ** d
        m = np.round(s)
        if np.all(np.abs(s - m) <= 1e-12 * s) and np.all(m >= 1):
            g = int(np.gcd.reduce(m.astype(np.int64)))
            return g / 10.0 ** d, m / g
    return None


def _representation_error(prog, u, m) -> float:
    """E ≥ Σ_i |a_i − u·m_i|·hi_i: how far a design's cost can be from its lattice value u·Σ m_i n_i."""
    a = np.asarray(prog.objective.a, dtype=float)
    eps = np.finfo(float).eps
    return float(np.sum((np.abs(a - u * m) + 4 * eps * a) * prog.upper.astype(float))) * (1 + 1e-6)


def lattice_step(prog) -> tuple[float, float]:
    """(step, slip) on a cost lattice (:func:`lattice_bound`), else (0, 0): a design that costs less than the
    incumbent ub at all costs at most ub − step (step = u − 2E, less a margin), and one that costs more than ub − step costs
    at least ub − slip (slip = 2E)."""
    found = cost_unit(prog)
    if found is None:
        return 0.0, 0.0
    u, m = found
    slip = 2 * _representation_error(prog, u, m)
    # a margin of 1e-6·u keeps the core's bound lb + budget clear of the lattice point below ub, where
    # lattice_bound's rounding-down margins would otherwise leave it
    step = u * (1 - 1e-6) - slip
    return (step, slip) if step > 0 else (0.0, 0.0)


def lattice_bound(prog, lb: float) -> float:
    """A lower bound at least ``lb`` using that every design's cost lies on the lattice u·ℤ (:func:`cost_unit`):
    with E ≥ Σ_i |a_i − u·m_i|·hi_i the representation error over the box, every design has
    u·Σ m_i n_i ≥ lb − E, hence u·Σ m_i n_i ≥ u·⌈(lb − E)/u⌉ and a·n ≥ u·⌈(lb − E)/u⌉ − E (docs/constrained.md,
    "Costs on a lattice"). Returns ``lb`` when the objective is not such a cost or the bound is not finite."""
    found = cost_unit(prog)
    if found is None or not math.isfinite(lb):
        return lb
    u, m = found
    eps = np.finfo(float).eps
    E = _representation_error(prog, u, m)
    q = (lb - E) / u
    q = q - 4 * eps * abs(q) - 1e-9                 # the quotient rounded down, never up past an integer
    up = u * math.ceil(q)
    out = up - E - 8 * eps * abs(up)
    return max(lb, out)
