"""The one feasibility test of every stratified model, below both the models and the formulations.

A model's constraints are rows ``Σ_i Σ_j W_ij t_ij(n_i) + a·n (sense) rhs`` over its per-variable unit terms
t_ij (:class:`Row`); the models declare them (``program_rows()``), the formulations compile them
(:mod:`dpopt.formulations.separable`) and both decide feasibility here, with the one tolerance
:data:`FEASIBILITY_TOL` (docs/constrained.md, "Feasibility and safe bounds"). This module imports no other
dpopt module, so the models never import the formulations to ask whether a design is feasible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: The one feasibility tolerance of every stratified and min-cost model (docs/constrained.md, "Feasibility
#: and safe bounds"). Row l holds at n when
#:     row_l(n) − rhs_l ≤ FEASIBILITY_TOL · scale_l(n)        (|row_l(n) − rhs_l| for equalities),
#: scale_l(n) = max(|rhs_l|, Σ_i |term_il(n_i)|): relative to the magnitude of the numbers whose difference
#: decides the row (for a precision target, the domain variance before the fpc constant is subtracted).
#: :func:`feasible` applies it; ``model.is_feasible``, ``SeparableProgram.feasible``, both exact routes and the
#: Pyomo, cvxpy and secant repairs call that function.
FEASIBILITY_TOL = 1e-11

SENSES = ("<=", "==")


@dataclass
class Row:
    """``Σ W⊙t(n) + a·n (sense) rhs``; ``W`` is k×J (None: the row is linear), ``a`` length k (None: 0)."""

    name: str
    kind: str                      # "objective" | "total" | "linear" | "precision" | "variance"
    W: np.ndarray | None
    a: np.ndarray | None
    rhs: float = 0.0
    sense: str = "<="
    target: object = None          # the PrecisionTarget / LinearConstraint it came from, for reports

    @property
    def linear(self) -> bool:
        return self.W is None

    @property
    def integral(self) -> bool:
        """Linear with integer coefficients and an integer right-hand side (the fixed total, a stratum's bound):
        on an integer design the row's value and its distance from rhs are integers."""
        a = self.a
        return (self.W is None and a is not None and bool(np.all(np.isfinite(a))) and bool(np.all(a == np.round(a)))
                and math.isfinite(self.rhs) and self.rhs == round(self.rhs))


def used_columns(rows, J: int) -> np.ndarray:
    """The variables j that some row weighs (the unit-term columns worth computing)."""
    used = np.zeros(J, dtype=bool)
    for r in rows:
        if r.W is not None:
            used |= np.any(r.W != 0, axis=0)
    return np.flatnonzero(used)


def row_terms(row: Row, T: np.ndarray, x: np.ndarray, idx=None) -> np.ndarray:
    """Per-stratum contribution of ``row`` given the unit-term matrix T at x (``idx``: the strata of x)."""
    sl = slice(None) if idx is None else idx
    out = np.zeros(x.size)
    if row.W is not None:
        out = out + np.sum(row.W[sl] * T, axis=1)
    if row.a is not None:
        out = out + row.a[sl] * x
    return out


def row_scales(rows, T: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Magnitude of each row at x (for relative tolerances): max(|rhs|, Σ|terms|)."""
    return np.array([max(abs(r.rhs), float(np.sum(np.abs(row_terms(r, T, x)))), 1e-300) for r in rows])


def relative_violation(lhs, rhs, equality, scale) -> np.ndarray:
    """Relative violation of rows with left-hand sides ``lhs`` (rows on the last axis, any leading axes):
    (lhs − rhs)/scale, |.| for the ``equality`` rows; ≤ 0 satisfied."""
    d = np.asarray(lhs, dtype=float) - rhs
    return np.where(equality, np.abs(d), d) / scale


def violations(rows, T: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Relative violation per row (≤ 0 satisfied; equalities |.|) at x, T the unit-term matrix at x."""
    lhs = np.array([float(np.sum(row_terms(r, T, x))) for r in rows])
    return relative_violation(lhs, np.array([r.rhs for r in rows], dtype=float),
                              np.array([r.sense == "==" for r in rows], dtype=bool), row_scales(rows, T, x))


def feasible(n, lower, upper, rows, unit_matrix: Callable[[np.ndarray], np.ndarray],
             tol: float = FEASIBILITY_TOL) -> bool:
    """THE feasibility test: ``n`` finite, within ``[lower, upper]`` and every row's relative violation
    (:func:`violations`, ``unit_matrix(x)`` giving the unit-term matrix) ≤ ``tol``. Integer designs are always
    judged at the default tolerance."""
    x = np.asarray(n, dtype=float)
    lower, upper = np.asarray(lower), np.asarray(upper)
    if x.shape != lower.shape or not np.all(np.isfinite(x)) or np.any(x < lower) or np.any(x > upper):
        return False
    if not rows:
        return True
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        v = violations(rows, unit_matrix(x), x)
    return bool(np.all(v <= tol))


def row_holds(value: float, rhs: float, scale: float | None = None, tol: float = FEASIBILITY_TOL) -> bool:
    """One ``≤`` row: ``value − rhs ≤ tol · scale``, ``scale`` defaulting to max(|rhs|, |value|) (a row of
    non-negative terms)."""
    if scale is None:
        scale = max(abs(rhs), abs(value))
    return bool(value - rhs <= tol * scale)
