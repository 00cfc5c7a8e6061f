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
        """Q(μ): the weighted mean of the ratios over the designs meeting the other rows. Objective columns with
        the same noise (the same budget share and sensitivity, e.g. one variable under every scenario) are
        merged into one added column: Σ_j W_ij t_ij(x) = W'_i (σ'_i² + γ²)/x with W' = Σ_j W_ij and
        σ'² = Σ_j W_ij σ_ij² / W' (exact), so the program evaluates one term where it had S."""
        obj, const = self._objective(mu)
        model, obj, cons = _merged(self.model, obj, self.constraints)
        return SeparableProgram(model, self.lower, self.upper, obj, cons, const)

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



def _merged(model, obj: Row, constraints: list[Row]):
    """(model, objective, constraints) with the objective's columns of equal noise merged into added columns
    (see :meth:`MinMaxProgram.weighted`); unchanged when no two objective columns share their noise."""
    import copy as _copy

    if obj.W is None:
        return model, obj, list(constraints)
    used = np.flatnonzero(np.any(obj.W != 0, axis=0))
    groups: dict = {}
    for j in used:
        groups.setdefault((float(model.shares[j]), float(model.sensitivity_of(int(j)))), []).append(int(j))
    if all(len(g) == 1 for g in groups.values()):
        return model, obj, list(constraints)
    k, J = obj.W.shape
    G = len(groups)
    Wm = np.zeros((k, G))
    S2m = np.zeros((k, G))
    reps = []
    for g, cols in enumerate(groups.values()):
        Wg = obj.W[:, cols]
        Wm[:, g] = Wg.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            S2m[:, g] = np.where(Wm[:, g] > 0, np.sum(Wg * model.sigma2_matrix[:, cols], axis=1) / Wm[:, g], 0.0)
        reps.append(cols[0])
    # the merged program keeps only the columns its constraints use, then the merged ones
    keep = [int(j) for j in np.flatnonzero(np.any([np.any(r.W != 0, axis=0) for r in constraints
                                                  if r.W is not None], axis=0))] \
        if any(r.W is not None for r in constraints) else []
    cols = keep + reps
    out = _copy.copy(model)
    out.sigma2_matrix = np.hstack([model.sigma2_matrix[:, keep], S2m])
    out.J = len(cols)
    out.sigma2 = out.sigma2_matrix
    out.variables = [model.variables[j] for j in keep] + [f"merged{g}" for g in range(G)]
    out.shares = np.asarray(model.shares)[cols]
    out.sensitivities = np.asarray(model.sensitivities)[cols]
    out.value_ranges = None if model.value_ranges is None else np.asarray(model.value_ranges)[cols]
    out.variable_weights = np.append(np.asarray(model.variable_weights)[keep], np.zeros(G))
    out._convexity = None
    Jk = len(keep)

    def cut(W):
        return None if W is None else np.hstack([W[:, keep], np.zeros((W.shape[0], G))])

    W0 = np.hstack([np.zeros((k, Jk)), Wm])
    new_obj = Row(obj.name, obj.kind, W0, obj.a, obj.rhs, obj.sense, obj.target)
    cons = [Row(r.name, r.kind, cut(r.W), r.a, r.rhs, r.sense, r.target) for r in constraints]
    return out, new_obj, cons
