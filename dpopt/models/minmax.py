"""Min-max designs: the integer design whose worst scaled row is smallest (docs/robust.md, "The min-max engine").

    minimise  max_r (R_r(n) − d_r) / c_r     over integer n meeting the other rows and the bounds,

where every R_r(n) = Σ_i Σ_j W_r,ij t_ij(n_i) + a_r·n is a separable convex row over a stratified design's unit
terms (the same :class:`~dpopt.feasibility.Row` the compiled program holds), d_r an offset (e.g. a domain's
finite-population constant) and c_r > 0 a scale (a scenario's own optimum, a domain's ρ_d²). The other rows are
any rows of the design (its total, linear constraints, precision targets).

:class:`MinMaxDesign` declares it; the exact backend solves it (``dpopt/backends/exact/minmax.py``): a search on
the level t in which each step is the constrained exact route on the rows R_r(n) ≤ t·c_r + d_r, with a proven
lower bound and a gap certificate. Two families are built on it: robust designs over variance scenarios
(:mod:`dpopt.models.robust`) and multi-domain controlled precision.

:func:`scenario_terms` gives the unit terms of several σ² scenarios as one design with J·S columns (scenario s,
variable j in column s·J + j); the noise of column s·J + j is variable j's own (mechanism, share, sensitivity),
so a row over those columns is the design's variance under scenario s.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from .. import _validate as V
from ..feasibility import FEASIBILITY_TOL, Row, feasible, used_columns
from ..result import Solution, Status
from .base import DesignDelegate, Model, honest_status
from .stratified import StratifiedDesign


def scenario_terms(design: StratifiedDesign, sigma2s) -> StratifiedDesign:
    """A copy of ``design`` whose unit terms hold S scenarios of σ²: ``sigma2s`` is a list of S k×J matrices (or
    k-vectors when J = 1); column s·J + j of the copy is variable j under scenario s, with variable j's own noise
    (mechanism, budget share, sensitivity), so Σ_j W_j t_{s·J+j}(n) is a row of ``design`` under scenario s.
    The copy only evaluates unit terms (its objective, rows and reports are not used)."""
    if not isinstance(design, StratifiedDesign):
        raise TypeError(f"design must be a StratifiedDesign, got {type(design).__name__}")
    k, J = design.k, design.J
    mats = []
    for s, S in enumerate(sigma2s):
        arr = V._as_float_array(f"scenario {s} sigma2", S)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.shape != (k, J):
            raise ValueError(f"scenario {s} sigma2 must have shape ({k}, {J}) (strata × variables), got "
                             f"{np.shape(S)}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"scenario {s} sigma2 must be finite and >= 0")
        mats.append(arr)
    if not mats:
        raise ValueError("sigma2s must hold at least one scenario")
    S = len(mats)
    out = copy.copy(design)
    out.sigma2_matrix = np.hstack(mats)
    out.J = S * J
    out.sigma2 = out.sigma2_matrix
    out.variables = [f"{v}@{s}" for s in range(S) for v in design.variables]
    out.shares = np.tile(design.shares, S)
    out.sensitivities = np.tile(design.sensitivities, S)
    out.noise_mechanisms = tuple(design.noise_mechanisms) * S    # column s·J + j: variable j's own noise
    out.value_ranges = None if design.value_ranges is None else np.tile(design.value_ranges, (S, 1))
    out.variable_weights = np.tile(design.variable_weights, S)
    out.precision_targets, out.constraints = [], []
    out._convexity = None
    return out


def widen(W: np.ndarray | None, J_total: int, block: int = 0) -> np.ndarray | None:
    """A k×J row weight placed in columns block·J .. block·J + J − 1 of a k×J_total matrix (a row of the design
    read over :func:`scenario_terms`' columns; block = the scenario)."""
    if W is None:
        return None
    out = np.zeros((W.shape[0], J_total))
    J = W.shape[1]
    out[:, block * J:(block + 1) * J] = W
    return out


class MinMaxDesign(DesignDelegate, Model):
    """Minimise the worst scaled row, max_r (R_r(n) − d_r)/c_r, over integer designs meeting ``constraints``.

    Parameters
    ----------
    terms : the StratifiedDesign whose unit terms the rows weigh (its bounds are the design's bounds; for
        scenarios, :func:`scenario_terms`)
    rows : the min-max rows R_r (:class:`~dpopt.feasibility.Row`, ``W`` k×terms.J and/or ``a`` length k)
    scales : c_r > 0, one per row
    offsets : d_r (default 0), one per row
    constraints : the other rows every design must meet (default: ``terms``' own rows: the total, linear
        constraints and precision targets, :meth:`StratifiedDesign.program_rows`)
    names : a name per min-max row (default the rows' names)

    :meth:`from_design` builds one over a design's own terms and rows. ``solve(backend="exact")`` returns the
    design with the smallest worst ratio, its certified lower bound and the ratio of every row
    (``details["ratios"]``).
    """

    default_backend = "exact"

    def __init__(self, terms: StratifiedDesign, rows, scales, offsets=None, constraints=None, names=None,
                 name: str = ""):
        if not isinstance(terms, StratifiedDesign):
            raise TypeError(f"terms must be a StratifiedDesign, got {type(terms).__name__}")
        self.terms = terms
        rows = list(rows)
        if not rows:
            raise ValueError("rows must hold at least one min-max row")
        for r, row in enumerate(rows):
            if not isinstance(row, Row):
                raise TypeError(f"rows[{r}] must be a dpopt.feasibility.Row, got {type(row).__name__}")
            if row.W is not None and (np.shape(row.W) != (terms.k, terms.J) or np.any(np.asarray(row.W) < 0)
                                      or not np.all(np.isfinite(row.W))):
                raise ValueError(f"rows[{r}].W must be a finite, non-negative {terms.k}×{terms.J} matrix")
            if row.a is not None and (np.shape(row.a) != (terms.k,) or not np.all(np.isfinite(row.a))):
                raise ValueError(f"rows[{r}].a must be a finite vector of length {terms.k}")
            if row.W is None and row.a is None:
                raise ValueError(f"rows[{r}] weighs nothing (W and a are both None)")
        self.rows = rows
        self.scales = V.positive_vector("scales", scales, length=len(rows))
        self.offsets = (np.zeros(len(rows)) if offsets is None
                        else V.vector("offsets", offsets, length=len(rows)))
        if constraints is None:
            _, constraints, _ = terms.program_rows()
        self.constraints_rows = list(constraints)
        self.names = [r.name or f"row {i}" for i, r in enumerate(rows)] if names is None else \
            [str(v) for v in names]
        if len(self.names) != len(rows):
            raise ValueError(f"names has {len(self.names)} entries, expected {len(rows)} (one per row)")
        self.name = str(name)
        # the model's linear constraints, for routes that look at them (none: every row is in constraints_rows)
        self.constraints = []

    @classmethod
    def from_design(cls, design: StratifiedDesign, rows, scales, offsets=None, names=None, name: str = ""):
        """Min-max rows over ``design``'s own unit terms, with ``design``'s total, linear constraints and
        precision targets as the other rows."""
        return cls(design, rows, scales, offsets, None, names, name)

    # ------------------------------------------------------------------ delegated data
    @property
    def design(self) -> StratifiedDesign:
        """The design whose unit terms the rows weigh (the exact route asks it about convexity)."""
        return self.terms

    @property
    def is_plain(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"MinMaxDesign(k={self.k}, rows={len(self.rows)}, constraints={len(self.constraints_rows)})"

    # ------------------------------------------------------------------ evaluation
    def _columns(self):
        return used_columns([*self.rows, *self.constraints_rows], self.terms.J)

    def row_values(self, n) -> np.ndarray:
        """R_r(n) per min-max row (before the offset and scale)."""
        x = V.vector("n", n, length=self.k)
        if np.any(x <= 0) or np.any(x > self.N):
            raise ValueError("n must satisfy 0 < n_i <= N_i")
        T = self.terms.unit_matrix(x, self._columns())
        out = np.empty(len(self.rows))
        for r, row in enumerate(self.rows):
            v = 0.0
            if row.W is not None:
                v += math.fsum(np.sum(row.W * T, axis=1).tolist())
            if row.a is not None:
                v += float(row.a @ x)
            out[r] = v
        return out

    def ratios(self, n) -> np.ndarray:
        """(R_r(n) − d_r)/c_r per row."""
        return (self.row_values(n) - self.offsets) / self.scales

    def objective_value(self, n) -> float:
        """The worst ratio max_r (R_r(n) − d_r)/c_r."""
        return float(np.max(self.ratios(n)))

    def program_rows(self) -> tuple[Row, list[Row], float]:
        """``(objective, rows, const)``: the mean ratio Σ_r (R_r − d_r)/(c_r·m) as the objective row (a tie-break
        the search uses, not the min-max objective) and the other rows."""
        m = len(self.rows)
        W = np.zeros((self.k, self.terms.J))
        a = np.zeros(self.k)
        for row, c in zip(self.rows, self.scales):
            if row.W is not None:
                W += row.W / (c * m)
            if row.a is not None:
                a += row.a / (c * m)
        const = float(np.sum(self.offsets / self.scales) / m)
        return Row("mean ratio", "objective", W, a if np.any(a) else None), list(self.constraints_rows), const

    def is_feasible(self, n, tol: float | None = None) -> bool:
        """Does ``n`` meet the bounds and the other rows (the one feasibility test, FEASIBILITY_TOL)?"""
        n = np.asarray(n)
        if n.shape != (self.k,):
            return False
        cols = self._columns()
        return feasible(n, self.lower, self.upper, self.constraints_rows,
                        lambda x: self.terms.unit_matrix(x, cols),
                        FEASIBILITY_TOL if tol is None else max(float(tol), FEASIBILITY_TOL))

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: the objective is the worst ratio; ``details["ratios"]`` every row's
        ratio and ``details["worst_row"]`` the name of the largest."""
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.terms.labels))
        if pt is not None:
            rat = self.ratios(pt)
            sol.objective = float(np.max(rat))
            sol.details.setdefault("ratios", rat)
            sol.details.setdefault("row_names", list(self.names))
            sol.details.setdefault("worst_row", self.names[int(np.argmax(rat))])
        return honest_status(sol, rel_gap)
