"""Cells: strata on which the objective and every row are the same function up to a constant factor, solved as one
variable each (docs/constrained.md, "Cells: strata every row weighs alike").

Stratum i's part of row l is κ_li·g_i(n_i) + a_li·n_i with g_i(n) = h_i·t_i(n) for one weight vector h_i (every row's
W_l,i proportional to it, κ_li ≥ 0). Strata that share every κ_l and every a_l form a cell c. For a given cell total
M = Σ_{i∈c} n_i, one allocation minimises the objective's part and every row's part at once: the one that minimises
G_c = Σ_{i∈c} g_i(n_i), i.e. F_c(M) = min {G_c : Σ n_i = M, lo ≤ n ≤ hi}, found by marginal allocation (each g_i
is discretely convex, so the merged increments in increasing order are F_c's increments and F_c is discretely
convex). The program on the cells,

    minimise Σ_c κ_0c F_c(M_c) + a_0c M_c   subject to   Σ_c κ_lc F_c(M_c) + a_lc M_c ≤ b_l  (linear equalities),

has the same optimum as the program on the strata, and its MILP has one integer column per cell (and, in
incremental form, one column per unit segment of its range: :func:`cell_milp`). It is exact where the strata's
secant MILP is weak: with domains that cross (a stratum in two domains), every row is proportional to the
objective on each cell, so the rows see only the cells' totals; the strata's Lagrangian bound lets those totals
be fractional, and its gap to the integer optimum (one unit's marginal value per cell, ~1e-4 relative at
k = 200) leaves HiGHS branching on hundreds of strata. On the cells HiGHS branches on a few dozen totals.

Safety: κ is compared within a cell to 1e-12 relative; the MILP uses each row's smallest κ in the cell, shrunk
by 1e-14 (a relaxation: its bound holds for every design of the core), and its points are checked by the one
feasibility test before they are kept (:class:`.incumbent.Incumbent`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....formulations.separable import SecantMILP

MAX_CELL_SHARE = 0.5    # cells are used when they are at most this share of the strata
KAPPA_RTOL = 1e-12      # relative spread of a row's factor within one cell
_SHRINK = 1.0 - 1e-14   # the factors the MILP uses, rounded down (a relaxation of every stratum's row)


@dataclass(frozen=True)
class Cells:
    """Per stratum its ``cell`` (0..C−1) and weight vector ``h`` (k×J); per cell and row (objective first) the
    factor ``kappa`` (C×(m+1), the smallest in the cell) and linear coefficient ``lin`` (C×(m+1))."""
    cell: np.ndarray
    h: np.ndarray
    kappa: np.ndarray
    lin: np.ndarray

    @property
    def count(self) -> int:
        return int(self.kappa.shape[0])


def cells_of(prog) -> Cells | None:
    """The cells of ``prog`` when they are at most MAX_CELL_SHARE of its strata and the structure applies (every row's W
    proportional to one vector per stratum, non-negative factors, no W in an equality row); else None."""
    k, J = prog.k, prog.model.J
    rows = [prog.objective, *prog.rows]
    for r in prog.rows:
        if r.sense == "==" and r.W is not None and np.any(r.W != 0):
            return None
    W = np.stack([np.zeros((k, J)) if r.W is None else np.asarray(r.W, dtype=float) for r in rows])   # (m+1)×k×J
    A = np.stack([np.zeros(k) if r.a is None else np.asarray(r.a, dtype=float) for r in rows], axis=1)  # k×(m+1)
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(A))) or np.any(W < 0):
        return None
    norms = np.max(np.abs(W), axis=2)                               # (m+1)×k
    has = norms > 0
    first = np.argmax(has, axis=0)                                   # the first row with W at each stratum
    any_w = np.any(has, axis=0)
    h = W[first, np.arange(k)]                                       # k×J
    jmax = np.argmax(np.abs(h), axis=1)
    hj = h[np.arange(k), jmax]
    safe = np.where(any_w, hj, 1.0)
    kappa = np.where(any_w, W[:, np.arange(k), jmax] / safe, 0.0).T  # k×(m+1)
    resid = np.abs(W - kappa.T[:, :, None] * h[None, :, :])
    if np.any(resid > 1e-12 * norms[:, :, None] + 1e-300):
        return None                                                  # rows not proportional at some stratum
    # group: same linear coefficients exactly, same factors to KAPPA_RTOL (keyed at 11 significant digits;
    # a key split by rounding only leaves two cells where one would do)
    key = np.column_stack([np.where(any_w, first, -1), _round_sig(kappa, 11), A])
    # a column with more distinct values than cells may number rules them out at once (one 1-D unique per column
    # instead of the row-wise unique: 0.25 s at k = 20 000 with 15 rows, case (f), where no cells apply)
    if any(np.unique(key[:, c]).size > MAX_CELL_SHARE * k for c in range(key.shape[1])):
        return None
    _, cell = np.unique(key, axis=0, return_inverse=True)
    cell = cell.ravel()
    C = int(cell.max()) + 1 if k else 0
    if C > MAX_CELL_SHARE * k:
        return None         # a few strata that happen to match (equal sizes under A-optimality): not worth it
    kap = np.full((C, len(rows)), np.inf)
    kmax = np.zeros((C, len(rows)))
    np.minimum.at(kap, cell, kappa)
    np.maximum.at(kmax, cell, kappa)
    if np.any(kmax - kap > KAPPA_RTOL * kmax):
        return None
    lin = np.zeros((C, len(rows)))
    lin[cell] = A
    return Cells(cell, h, kap * _SHRINK, lin)


def _round_sig(v, digits):
    out = np.zeros_like(v)
    nz = v != 0
    e = np.floor(np.log10(np.abs(v[nz])))
    out[nz] = np.round(v[nz] / 10.0 ** e, digits - 1) * 10.0 ** e
    return out


@dataclass(frozen=True)
class CellMILP:
    """The secant MILP on the cells of a core (``milp``: one integer column per cell) with what turns its cell
    totals back into a design (:meth:`design`) and a design into totals (:meth:`totals`)."""
    milp: SecantMILP
    cells: Cells
    lo: np.ndarray
    owner: np.ndarray        # per increment (in each cell's increasing order): its stratum
    starts: np.ndarray       # per cell: its first increment in ``owner``
    L: np.ndarray            # per cell: the least total in the core

    def totals(self, n) -> np.ndarray:
        return np.bincount(self.cells.cell, weights=np.asarray(n, dtype=float),
                           minlength=self.cells.count).round().astype(np.int64)

    def design(self, M) -> np.ndarray:
        """The allocation that attains F_c(M_c) in every cell: its first M_c − L_c increments."""
        n = self.lo.copy()
        take = np.clip(np.asarray(M, dtype=np.int64) - self.L, 0, None)
        ends = np.r_[self.starts[1:], self.owner.size]
        take = np.minimum(take, ends - self.starts)
        sel = np.concatenate([self.owner[s:s + t] for s, t in zip(self.starts, take)]) if take.size else []
        np.add.at(n, np.asarray(sel, dtype=np.int64), 1)
        return n


def cell_milp(prog, cells: Cells, lo, hi, anchor, obj_scale: float, lam=None, budget: float | None = None) -> CellMILP:
    """The program on ``lo ≤ n ≤ hi`` written on its cells (module docstring), every row at rhs + allowance (as
    the strata's ``secant_milp(relax_rows=True)``) so that its bound covers every design the feasibility test
    accepts; each cell's F_c written relative to its secant at the anchor's total (an exact linear part plus a
    small non-negative remainder), each row divided by its magnitude at the anchor."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    C, cell, h = cells.count, cells.cell, cells.h
    anchor = np.clip(np.asarray(anchor, dtype=float), lo, hi)
    # per stratum g_i at lo and its increments on lo..hi−1
    base = np.sum(h * prog.unit_matrix(lo.astype(float)), axis=1)
    sizes = (hi - lo).astype(np.int64)
    own = np.repeat(np.arange(prog.k), sizes)
    st = np.cumsum(sizes) - sizes
    v = (lo[own] + np.arange(own.size) - st[own]).astype(float)
    d = np.sum(h[own] * prog.increment_matrix(v, own), axis=1) if own.size else np.zeros(0)
    # each cell's increments in increasing order (stable: a stratum's equal increments keep their order)
    order = np.lexsort((np.arange(own.size), d, cell[own]))
    owner, d = own[order], d[order]
    ccount = np.bincount(cell[own], minlength=C)
    starts = np.cumsum(ccount) - ccount
    L0 = np.bincount(cell, weights=lo, minlength=C).astype(np.int64)   # the increments count from here
    L, U = L0.copy(), L0 + ccount                                       # the totals the MILP allows
    if lam is not None and budget is not None:
        # reduced-cost fixing on the cells: Φ_c(M) = ω_c F_c(M) + ℓ_c M is the cell's Lagrangian, and
        # Φ_c(M) − min Φ_c = min over the cell's allocations with total M of Σ r_i; a design within the budget has
        # this at most ``budget``, so M_c stays in an interval (Φ_c convex) far narrower than the strata's ranges
        # summed (each stratum may take its whole range only when the others stay at their minimum)
        mult = np.r_[1.0, np.asarray(lam, dtype=float)]
        om, el = cells.kappa @ mult, cells.lin @ mult
        seg_c = cell[owner]
        e = om[seg_c] * d + el[seg_c]
        P = np.concatenate([[0.0], np.cumsum(e)])
        # per cell: prefix sums P_c(s) = P[starts + s] − P[starts], s = 0..ccount
        s_lo, s_hi = np.zeros(C, dtype=np.int64), ccount.copy()
        for c_ in np.flatnonzero(ccount > 0):
            Pc = P[starts[c_]:starts[c_] + ccount[c_] + 1] - P[starts[c_]]
            R = Pc - Pc.min()
            slack = budget * (1 + 1e-9) + 1e-12 * float(np.max(np.abs(Pc)))
            keep = np.flatnonzero(R <= slack)
            s_lo[c_], s_hi[c_] = keep[0], keep[-1]
        L, U = L0 + s_lo, L0 + s_hi
    F_L = np.bincount(cell, weights=base, minlength=C)
    a_tot = np.bincount(cell, weights=anchor, minlength=C)
    a0 = np.clip(np.floor(a_tot), L, np.maximum(U - 1, L)).astype(np.int64)
    free = U > L
    s_a = a0 - L0                                             # index of the anchor's increment in its cell
    d_a = np.where(free, d[np.minimum(starts + s_a, max(d.size - 1, 0))] if d.size else 0.0, 0.0)
    # F_c(a0) = F_L + Σ of the first s_a increments
    csum = np.concatenate([[0.0], np.cumsum(d)])
    F_a = F_L + (csum[starts + s_a] - csum[starts])
    # remainders r(v) = F(v) − F(a0) − d_a (v − a0) at every segment start v, summed from the anchor outwards
    seg_cell = cell[owner] if owner.size else np.zeros(0, dtype=np.int64)
    pos = np.arange(owner.size) - starts[seg_cell]           # segment index within its cell: v = L0 + pos
    diff = d - d_a[seg_cell]                                  # ≥ 0 above the anchor, ≤ 0 below (sorted)
    cdiff = np.concatenate([[0.0], np.cumsum(diff)])
    # r(v) = Σ_{t=a}^{v−1} diff_t (v ≥ a) or −Σ_{t=v}^{a−1} diff_t (v < a): both cdiff[start+pos] − cdiff[start+s_a]
    r_v = cdiff[starts[seg_cell] + pos] - cdiff[starts[seg_cell] + s_a[seg_cell]]
    s_v = diff
    v_c = (L0[seg_cell] + pos).astype(float)
    rows_all = [prog.objective, *prog.rows]
    allow = prog.allowance() if prog.m else np.zeros(0)
    units = np.array([obj_scale] + (list(prog.row_scale(anchor)) if prog.m else []), dtype=float)
    # Incremental form: per cell a column δ_cv ∈ [0, 1] for each unit segment [v, v + 1] of its range, with
    # M_c = L_c + Σ_v δ_cv, and each row's remainder κ_lc·r(M_c) = κ_lc·(r(L_c) + Σ_v s_v δ_cv). Filling the
    # segments in order gives r exactly at every integer M_c and is optimal for the objective and for every ≤ row
    # at once (r is convex: its slopes s_v increase), so the MILP's optimum and bound are those of the epigraph
    # form z_lc ≥ κ_lc (r_v + s_v (M_c − v)) for every segment, one row per segment and row. That form's LPs had
    # a row per segment (8 136 rows on 40 cells, case (g) at k = 1 000); these have one per row and cell, and
    # HiGHS proved that case's last core in 1.1 s instead of 10.4 s, the same optimum. Each row in its own units:
    # divided by its magnitude at the anchor.
    seg = (np.flatnonzero(free[seg_cell] & (v_c >= L[seg_cell]) & (v_c < U[seg_cell])) if owner.size
           else np.zeros(0, dtype=np.int64))
    sc = seg_cell[seg] if seg.size else np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]]) if sc.size else np.zeros(0, dtype=np.int64)
    r_L = np.zeros(C)                       # each free cell's remainder at its least total L_c
    r_L[sc[first]] = r_v[seg[first]]
    cols_d = C + np.arange(seg.size)        # the δ columns, cell by cell, each cell's segments in order
    R, Cc, V, rlo, rhi = [], [], [], [], []
    nrow = 0
    c = np.zeros(C + seg.size)
    offset = 0.0
    con_rows, con_units = [], []
    for l, row in enumerate(rows_all):
        unit = float(units[l])
        kap, lin = cells.kappa[:, l], cells.lin[:, l]
        w = np.where(free, kap / unit, 0.0)
        coef_M = (lin + kap * d_a) / unit
        const = float(np.sum(kap * (F_a - d_a * a0))) / unit + float(w @ r_L)
        coef_d = w[sc] * s_v[seg] if seg.size else np.zeros(0)
        if l == 0:
            c[:C] = coef_M
            c[C:] = coef_d
            offset = const - prog.const / unit
            continue
        nz, nzd = np.flatnonzero(coef_M), np.flatnonzero(coef_d)
        R.append(np.full(nz.size + nzd.size, nrow))
        Cc.append(np.concatenate([nz, cols_d[nzd]]))
        V.append(np.concatenate([coef_M[nz], coef_d[nzd]]))
        b = (row.rhs / unit) - const
        a_l = allow[l - 1] / unit
        rhi.append(np.array([b + a_l]))
        rlo.append(np.array([b - a_l if row.sense == "==" else -np.inf]))
        con_rows.append(nrow)
        con_units.append(unit)
        nrow += 1
    # the link M_c − Σ_v δ_cv = L_c of every free cell
    fc = np.flatnonzero(free & (np.bincount(sc, minlength=C) > 0)) if sc.size else np.zeros(0, dtype=np.int64)
    link = np.full(C, -1)
    link[fc] = nrow + np.arange(fc.size)
    R += [link[fc], link[sc]]
    Cc += [fc, cols_d]
    V += [np.ones(fc.size), -np.ones(seg.size)]
    rlo.append(L[fc].astype(float))
    rhi.append(L[fc].astype(float))
    col_lo = np.concatenate([L.astype(float), np.zeros(seg.size)])
    col_hi = np.concatenate([U.astype(float), np.ones(seg.size)])
    if not (np.all(np.isfinite(c)) and all(np.all(np.isfinite(x)) for x in V)):
        raise ValueError("the cell MILP has a non-finite coefficient (a row's scale under- or overflows)")
    milp = SecantMILP(c, offset, col_lo, col_hi, R, Cc, V, rlo, rhi, C, obj_scale,
                      np.array(con_rows, dtype=np.int64), np.array(con_units, dtype=float))
    return CellMILP(milp, cells, lo, owner, starts, L0)
