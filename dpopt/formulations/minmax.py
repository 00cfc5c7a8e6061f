"""The compiled programs of a min-max design (docs/robust.md, "The min-max engine").

A :class:`~dpopt.models.minmax.MinMaxDesign` asks for min_n max_r (R_r(n) − d_r)/c_r over the integer designs
meeting its other rows. Two separable programs of :mod:`.separable` answer it:

* the **level program** P(t, μ): minimise Σ_r μ_r (R_r − d_r)/c_r subject to the other rows and
  R_r(n) ≤ t·c_r + d_r for every r. Any design it finds has worst ratio ≤ t; a proof that it has no design
  proves t* > t.
* the **weighted program** Q(μ): minimise Σ_r μ_r (R_r − d_r)/c_r subject to the other rows only. For μ ≥ 0 with
  Σ μ_r = 1 its minimum is ≤ t* (a weighted mean of the ratios is at most their maximum), so any proven lower
  bound of Q(μ) is a proven lower bound of the min-max (the Lagrangian bound of the epigraph form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..feasibility import Row
from .separable import SeparableProgram


@dataclass
class MinMaxProgram:
    """The rows of a min-max design over one set of unit terms: ``rows`` R_r, ``scales`` c_r, ``offsets`` d_r and
    the ``constraints`` every design meets, between ``lower`` and ``upper``."""

    model: object                  # the StratifiedDesign supplying the unit terms
    lower: np.ndarray
    upper: np.ndarray
    rows: list[Row]
    scales: np.ndarray
    offsets: np.ndarray
    constraints: list[Row]

    @property
    def m(self) -> int:
        return len(self.rows)

    def _objective(self, mu) -> tuple[Row, float]:
        mu = np.asarray(mu, dtype=float)
        k, J = self.lower.size, self.model.J
        W = np.zeros((k, J))
        a = np.zeros(k)
        hasW = hasa = False
        for row, c, w in zip(self.rows, self.scales, mu):
            if w == 0:
                continue
            if row.W is not None:
                W += (w / c) * row.W
                hasW = True
            if row.a is not None:
                a += (w / c) * row.a
                hasa = True
        const = float(np.sum(mu * self.offsets / self.scales))
        return Row("weighted ratio", "objective", W if hasW else None, a if hasa else None), const

    def weighted(self, mu) -> SeparableProgram:
        """Q(μ): the weighted mean of the ratios over the designs meeting the other rows."""
        obj, const = self._objective(mu)
        return SeparableProgram(self.model, self.lower, self.upper, obj, list(self.constraints), const)

    def level(self, t: float, mu) -> SeparableProgram:
        """P(t, μ): Q(μ) with every row at level t, R_r(n) ≤ t·c_r + d_r (rows appended after the others, in
        order, named ``level: <row name>``)."""
        obj, const = self._objective(mu)
        lev = [Row(f"level: {r.name}", "precision", r.W, r.a, float(t * c + d), "<=")
               for r, c, d in zip(self.rows, self.scales, self.offsets)]
        return SeparableProgram(self.model, self.lower, self.upper, obj, list(self.constraints) + lev, const)

    def ratios(self, n) -> np.ndarray:
        """(R_r(n) − d_r)/c_r per row at an integer or real design."""
        x = np.asarray(n, dtype=float)
        prog = SeparableProgram(self.model, self.lower, self.upper, Row("none", "objective", None, None),
                                list(self.rows), 0.0)
        _, lhs = prog.evaluate(x)
        return (lhs - self.offsets) / self.scales


def minmax_program(model) -> MinMaxProgram:
    """The :class:`MinMaxProgram` of a :class:`~dpopt.models.minmax.MinMaxDesign`."""
    return MinMaxProgram(model.terms, model.lower, model.upper, list(model.rows), np.asarray(model.scales, float),
                         np.asarray(model.offsets, float), list(model.constraints_rows))
