"""Every stratified model as one separable convex program over integer sample sizes.

    minimise   Σ_i Σ_j W0_ij t_ij(n_i) + a0·n − const
    subject to Σ_i Σ_j W_l,ij t_ij(n_i) + a_l·n  ≤ rhs_l   (convex rows: precision targets, variance bounds,
                                                            linear ≤ rows)
               a_l·n = rhs_l                               (linear equalities: the fixed total)
               lower ≤ n ≤ upper, n integer,

where t_ij(x) = (σ_ij² + γ_j²(x))/x is the unit term of variable j in stratum i (the model's
``unit_terms``/``unit_increments``/``unit_derivatives``) and every W ≥ 0. Each row is discretely convex
in every n_i when the terms are (proven for the built-in pure-DP mechanisms at any budget share; checked
otherwise), so the Lagrangian and secant relaxations below are exact lower bounds (docs/constrained.md).

:func:`program_of` builds it from a StratifiedDesign or MinCostDesign; :func:`secant_milp` writes its
integer restriction to given per-stratum ranges as a MILP with k integer columns, one epigraph column per
(stratum, nonlinear row) and one secant cut per integer segment, in plain sparse arrays that the HiGHS and
Pyomo translations share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import feasibility as _feas
from ..feasibility import FEASIBILITY_TOL, SENSES, Row, used_columns  # noqa: F401  (one test, one tolerance)
from ..models.stratified import MinCostDesign, StratifiedDesign

#: Assumed relative error of one evaluated unit term, increment or product with a multiplier: a few dozen
#: ulps (log1p/expm1/logaddexp and the mechanism's variance are each correct to a few ulps). Lower bounds
#: subtract this times the magnitude of the numbers summed (plus the summation's own error) so that a bound
#: computed in floating point is never above the exact one.
EVAL_RTOL = 64 * np.finfo(float).eps


def safe_lower(parts, magnitude: float | None = None, extra_ops: int = 0) -> float:
    """A float provably ≤ Σ parts (each part exact within EVAL_RTOL·|part| and ``magnitude`` the total size
    of what went into the parts when larger than Σ|parts|): ``math.fsum`` (correctly rounded) minus
    (EVAL_RTOL + (extra_ops + 2)·u)·max(magnitude, Σ|parts|), u the unit roundoff."""
    parts = np.asarray(parts, dtype=float).ravel()
    if not np.all(np.isfinite(parts)):
        return -math.inf if np.any(np.isnan(parts)) or np.any(parts == -math.inf) else math.inf
    total = math.fsum(parts.tolist())
    mag = max(float(np.sum(np.abs(parts))), 0.0 if magnitude is None else float(magnitude))
    u = np.finfo(float).eps / 2
    return total - (EVAL_RTOL + (extra_ops + 2) * u) * mag - 2 * u * abs(total)


@dataclass
class SeparableProgram:
    """A separable convex integer program over the model's unit terms (see the module docstring)."""

    model: object                  # supplies J and unit_terms / unit_increments / unit_derivatives
    lower: np.ndarray
    upper: np.ndarray
    objective: Row
    rows: list[Row]
    const: float = 0.0             # subtracted from the objective (finite-population constant)
    columns: np.ndarray = field(default=None)   # variables j used by some row
    strata: np.ndarray | None = None            # the model's strata this program covers (None: all, in order)

    def __post_init__(self):
        self.columns = used_columns([self.objective, *self.rows], self.model.J)
        self.lower = np.asarray(self.lower, dtype=np.int64)
        self.upper = np.asarray(self.upper, dtype=np.int64)

    @property
    def k(self) -> int:
        return int(self.lower.size)

    @property
    def m(self) -> int:
        return len(self.rows)

    def total_row(self) -> int | None:
        """The position of the fixed total Σ n = η among the rows (kind "total", always an equality with unit
        coefficients), or None without one."""
        return next((l for l, r in enumerate(self.rows) if r.kind == "total"), None)

    def bound_derivatives(self):
        """:meth:`derivative_matrices` at the lower and at the upper bounds, computed once per pair of bounds: the
        dual's inner problems test both ends of every stratum at each multiplier (case (d), k = 1 000: ~140
        times per solve). The arrays are shared: read them, never write."""
        key = (self.lower.tobytes(), self.upper.tobytes())
        cache = getattr(self, "_bound_derivs", None)
        if cache is None or cache[0] != key:
            cache = (key, self.derivative_matrices(self.lower.astype(float)),
                     self.derivative_matrices(self.upper.astype(float)))
            self._bound_derivs = cache
        return cache[1], cache[2]

    def _g(self, idx):
        """The model's stratum indices for this program's ``idx`` (None: every stratum of the program)."""
        if self.strata is None:
            return idx
        return self.strata if idx is None else self.strata[idx]

    def subprogram(self, strata, rows) -> "SeparableProgram":
        """The program on a subset of its strata (positions ``strata``) with the given rows, which must
        involve no other stratum: a block of a block-separable program, solved on its own (no constant)."""
        strata = np.asarray(strata, dtype=np.int64)

        def cut(r: Row) -> Row:
            return Row(r.name, r.kind, None if r.W is None else r.W[strata], None if r.a is None else r.a[strata],
                       r.rhs, r.sense, r.target)

        return SeparableProgram(self.model, self.lower[strata], self.upper[strata], cut(self.objective),
                                [cut(r) for r in rows], 0.0, strata=self._g(strata))

    def components(self):
        """Blocks of strata linked by rows: [(positions, row indices)] in order of each block's first stratum, rows
        with no stratum left out; strata in no row form no block (each is then optimised alone).

        Rows are merged by union-find as they share strata (a stratum remembers the last row that touched it): no
        graph library, whose import alone cost more than the rest of a k = 1 000 solve's set-up."""
        parent = list(range(self.m))

        def root(l):
            while parent[l] != l:         # path halving: bounded by the number of rows
                parent[l] = parent[parent[l]]
                l = parent[l]
            return l

        owner = np.full(self.k, -1, dtype=np.int64)
        touched_any = []
        for l, r in enumerate(self.rows):
            t = np.zeros(self.k, dtype=bool)
            if r.W is not None:
                t |= np.any(r.W != 0, axis=1)
            if r.a is not None:
                t |= r.a != 0
            t = np.flatnonzero(t)
            touched_any.append(t.size > 0)
            for p in np.unique(owner[t]).tolist():
                if p >= 0:
                    parent[root(p)] = root(l)
            owner[t] = l
        roots = np.array([root(l) for l in range(self.m)], dtype=np.int64)
        label = np.full(self.k, -1, dtype=np.int64)
        label[owner >= 0] = roots[owner[owner >= 0]]
        out = []
        for c in np.unique(label[label >= 0]).tolist():
            pos = np.flatnonzero(label == c)
            out.append((pos, [l for l in range(self.m) if roots[l] == c and touched_any[l]]))
        out.sort(key=lambda block: int(block[0][0]))
        return out

    # ------------------------------------------------------------------ unit term matrices (k×J)
    def _stack(self, fn, x, idx):
        out = np.zeros((np.size(x), self.model.J))
        for j in self.columns:
            out[:, j] = fn(x, j, idx)
        return out

    def _twin(self):
        """Per used column j, the first used column with the same budget share and sensitivity (the same noise
        γ_j²), or j itself. Twins differ only in σ²: t_j(x) = t_r(x) + (σ_j² − σ_r²)/x exactly, so their
        terms, increments and derivatives are the representative's plus that linear-in-σ² part (columns of
        variance scenarios, docs/robust.md, share their noise)."""
        if getattr(self, "_twins", None) is None:
            m = self.model
            seen, twin = {}, {}
            for j in self.columns:
                key = (float(m.shares[j]), float(m.sensitivity_of(j)))
                twin[int(j)] = seen.setdefault(key, int(j))
            self._twins = twin
        return self._twins

    def _twin_pairs(self):
        """(columns, their representatives) for the used columns that have a twin other than themselves."""
        pairs = [(j, r) for j, r in self._twin().items() if r != j]
        return (np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64))

    def unit_matrix(self, x, idx=None) -> np.ndarray:
        idx = self._g(idx)
        sl = slice(None) if idx is None else idx
        x = np.asarray(x, dtype=float)
        out = np.zeros((x.size, self.model.J))
        S2 = self.model.sigma2_matrix
        for j, r in self._twin().items():
            if r == j:
                out[:, j] = (S2[sl, j] + self._noise(x, j, idx)) / x
        js, rs = self._twin_pairs()
        if js.size:
            out[:, js] = out[:, rs] + (S2[sl][:, js] - S2[sl][:, rs]) / x[:, None]
        return out

    def _noise(self, x, j, idx):
        m = self.model
        logN = m.log_N if idx is None else m.log_N[idx]
        L = np.logaddexp(0.0, m.log_c + logN - np.log(x))
        return np.asarray(m.noise_mechanism(j).variance(m.shares[j] * L, m.sensitivity_of(j)), dtype=float)

    def increment_matrix(self, mm, idx=None) -> np.ndarray:
        v = np.asarray(mm, dtype=float)
        idx = self._g(idx)
        sl = slice(None) if idx is None else idx
        out = np.zeros((v.size, self.model.J))
        S2 = self.model.sigma2_matrix
        for j, r in self._twin().items():
            if r == j:
                out[:, j] = self.model.unit_increments(v, j, idx)
        js, rs = self._twin_pairs()
        if js.size:     # t_j(v+1) − t_j(v) = the twin's + (σ_j² − σ_r²)(1/(v+1) − 1/v)
            out[:, js] = out[:, rs] - (S2[sl][:, js] - S2[sl][:, rs]) / (v * (v + 1.0))[:, None]
        return out

    def derivative_matrices(self, x, idx=None):
        x = np.asarray(x, dtype=float)
        idx = self._g(idx)
        sl = slice(None) if idx is None else idx
        d1 = np.zeros((x.size, self.model.J))
        d2 = np.zeros((x.size, self.model.J))
        S2 = self.model.sigma2_matrix
        for j, r in self._twin().items():
            if r == j:
                d1[:, j], d2[:, j] = self.model.unit_derivatives(x, j, idx, True)
        js, rs = self._twin_pairs()
        if js.size:     # d/dx (σ_j² − σ_r²)/x = −(σ_j² − σ_r²)/x², second 2(σ_j² − σ_r²)/x³
            d = S2[sl][:, js] - S2[sl][:, rs]
            d1[:, js] = d1[:, rs] - d / (x ** 2)[:, None]
            d2[:, js] = d2[:, rs] + 2.0 * d / (x ** 3)[:, None]
        return d1, d2

    # ------------------------------------------------------------------ rows
    #: per-stratum contribution of a row given the unit-term matrix T at x (:func:`dpopt.feasibility.row_terms`)
    row_terms = staticmethod(_feas.row_terms)

    def evaluate(self, x):
        """(objective value, row left-hand sides) at a real or integer point."""
        x = np.asarray(x, dtype=float)
        T = self.unit_matrix(x)
        obj = float(np.sum(self.row_terms(self.objective, T, x))) - self.const
        lhs = np.array([np.sum(self.row_terms(r, T, x)) for r in self.rows])
        return obj, lhs

    def row_scale(self, x) -> np.ndarray:
        """Magnitude of each row at x (for relative tolerances): max(|rhs|, Σ|terms|)."""
        x = np.asarray(x, dtype=float)
        return _feas.row_scales(self.rows, self.unit_matrix(x), x)

    def violation(self, x) -> np.ndarray:
        """Relative violation per row (≤ 0 satisfied; equalities |.|)."""
        x = np.asarray(x, dtype=float)
        return _feas.violations(self.rows, self.unit_matrix(x), x)

    def feasible(self, n, tol: float = FEASIBILITY_TOL) -> bool:
        """THE feasibility test (:func:`dpopt.feasibility.feasible`, tolerance FEASIBILITY_TOL) on this program's
        rows: finite, within the bounds and every row's relative violation (:meth:`violation`) ≤ ``tol``.
        Integer designs are always judged at the default."""
        return _feas.feasible(n, self.lower, self.upper, self.rows, self.unit_matrix, tol)

    def allowance(self) -> np.ndarray:
        """Per row, an upper bound on FEASIBILITY_TOL · scale_l(n) over every design the test accepts: the most
        a feasible design can exceed rhs_l by. Bounds and infeasibility proofs are computed against
        rhs_l + allowance_l (|row − rhs| ≤ allowance_l for equalities), so they hold for every design
        :meth:`feasible` accepts, not only for those with no violation at all.

        Rows whose terms cannot be negative (precision targets, variance bounds, cost budgets): a feasible
        design has row ≤ rhs + τ·max(rhs, row), so row ≤ rhs/(1 − τ) and the allowance is τ·|rhs|/(1 − τ).
        Other rows: τ·max(|rhs|, Σ_i max over the box of |term_il|) (a unit term is convex and positive, so
        its largest value is at an end of the box).

        Integral rows (:attr:`~dpopt.feasibility.Row.integral`, e.g. the fixed total): the test computes
        Σ a_i n_i exactly below 2^53, so a feasible design exceeds rhs by a whole number, at most the bound's
        floor (0 unless τ·scale ≥ 1). Why: the total's allowance, τ·Σ_i upper_i times its multiplier, was
        0.11 of case (e)'s objective at k = 20 000 (1.2e-8 relative), which every bound gave away and every
        core enumerated on top of the budget."""
        tau = FEASIBILITY_TOL
        lo, hi = self.lower.astype(float), self.upper.astype(float)
        out = np.zeros(self.m)
        T_lo = T_hi = None
        for l, r in enumerate(self.rows):
            nonneg = r.a is None or bool(np.all(r.a >= 0))
            if nonneg and r.sense == "<=" and r.rhs >= 0:
                mag = abs(r.rhs) / (1 - tau)
            else:
                mag = 0.0
                if r.W is not None:
                    if T_lo is None:
                        T_lo, T_hi = self.unit_matrix(lo), self.unit_matrix(hi)
                    mag += float(np.sum(np.maximum(np.sum(r.W * T_lo, axis=1), np.sum(r.W * T_hi, axis=1))))
                if r.a is not None:
                    mag += float(np.sum(np.abs(r.a) * hi))
                mag = max(abs(r.rhs), mag)
            out[l] = tau * mag * (1 + 4 * np.finfo(float).eps)
            if r.integral and mag < 2.0 ** 52:
                out[l] = math.floor(out[l])
        return out

    # ------------------------------------------------------------------ Lagrangian pieces
    def combine(self, lam: np.ndarray):
        """(Ω, ℓ): the Lagrangian's unit-term weights W0 + Σ λ_l W_l and linear part a0 + Σ λ_l a_l."""
        Om = np.zeros((self.k, self.model.J)) if self.objective.W is None else self.objective.W.copy()
        ell = np.zeros(self.k) if self.objective.a is None else self.objective.a.astype(float).copy()
        for l, r in enumerate(self.rows):
            if lam[l] == 0:
                continue
            if r.W is not None:
                Om += lam[l] * r.W
            if r.a is not None:
                ell += lam[l] * r.a
        return Om, ell

    def rhs(self) -> np.ndarray:
        return np.array([r.rhs for r in self.rows], dtype=float)

    def inequality(self) -> np.ndarray:
        return np.array([r.sense == "<=" for r in self.rows], dtype=bool)


# ---------------------------------------------------------------------------------- builders
def program_of(model) -> SeparableProgram:
    """The separable program of a StratifiedDesign or MinCostDesign (all rows, nothing dropped): the rows the
    model declares (``model.program_rows()``) over the design's unit terms and bounds."""
    if isinstance(model, MinCostDesign):
        design = model.design
    elif isinstance(model, StratifiedDesign):
        design = model
    else:
        raise TypeError(f"no separable program for {type(model).__name__}")
    objective, rows, const = model.program_rows()
    return SeparableProgram(design, design.lower, design.upper, objective, rows, const)


def ranges(model_or_program) -> tuple[np.ndarray, np.ndarray]:
    """Per-stratum integer ranges ``(lo, hi)`` of a model (or its :class:`SeparableProgram`), tightened by the
    fixed total when there is one: with Σ n = η, n_i ≤ η − Σ_{j≠i} lo_j and n_i ≥ η − Σ_{j≠i} hi_j. Any
    feasible design lies in them; ``lo > hi`` somewhere means the bounds and the total leave no design."""
    prog = model_or_program if isinstance(model_or_program, SeparableProgram) else program_of(model_or_program)
    lo, hi = prog.lower.copy(), prog.upper.copy()
    t = prog.total_row()
    if t is not None:
        eta = int(round(prog.rows[t].rhs))
        hi = np.minimum(hi, eta - (lo.sum() - lo))
        lo = np.maximum(lo, eta - (hi.sum() - hi))
    return lo, hi


# ---------------------------------------------------------------------------------- secant MILP
def _segment_starts(lo, hi, free, segments):
    """(owner, v): for each written segment, its stratum's position in ``free`` and its start v (float)."""
    if segments is None:
        sizes = (hi[free] - lo[free]).astype(np.int64)
        owner = np.repeat(np.arange(free.size), sizes)
        starts = np.cumsum(sizes) - sizes
        return owner, (lo[free][owner] + np.arange(owner.size) - starts[owner]).astype(float)
    picks = [np.unique(np.clip(np.fromiter(segments[h], dtype=np.int64), lo[h], hi[h] - 1)) for h in free]
    sizes = np.array([p.size for p in picks], dtype=np.int64)
    owner = np.repeat(np.arange(free.size), sizes)
    v = np.concatenate(picks).astype(float) if picks else np.zeros(0)
    return owner, v


def segments_missing(segments: list, n: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """Strata whose written secants are not exact at the integer n_h: neither the segment starting at n_h
    nor the one at n_h − 1 is in the set ``segments[h]`` (a stratum fixed by its bounds is always exact)."""
    out = []
    for h in np.flatnonzero(lo < hi):
        a, b = min(int(n[h]), int(hi[h]) - 1), max(int(n[h]) - 1, int(lo[h]))
        if a not in segments[h] and b not in segments[h]:
            out.append(int(h))
    return out


@dataclass
class SecantMILP:
    """``min c·v + offset`` s.t. ``row_lo ≤ A v ≤ row_hi``, ``col_lo ≤ v ≤ col_hi``, v[:k] integer.

    Columns: n (k), then one epigraph column per (stratum, nonlinear row incl. the objective). ``A`` is
    given as COO triplets. ``obj_scale`` divides the objective (reported values are multiplied back).
    """

    c: np.ndarray
    offset: float
    col_lo: np.ndarray
    col_hi: np.ndarray
    rows: list
    cols: list
    vals: list
    row_lo: list
    row_hi: list
    k: int
    obj_scale: float
    con_rows: np.ndarray = None     # MILP row of each program row (prog.rows order)
    con_units: np.ndarray = None    # program row = MILP row × con_units (to turn row duals into multipliers)

    @property
    def ncol(self) -> int:
        return int(self.c.size)

    @property
    def nrow(self) -> int:
        return int(sum(np.size(r) for r in self.row_lo))

    def to_coo(self):
        """``(R, C, V, row_lo, row_hi)``: the constraint matrix as COO triplets (int64 rows and columns, float
        values) and the row ranges (±inf where a side is open). The one unpacking of the MILP that every writer
        (HiGHS, Pyomo, cvxpy, scipy) reads; entries a solver would drop are taken out soundly
        (:func:`without_tiny_entries`)."""
        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype) if len(parts) else np.zeros(0, dtype=dtype)
        return without_tiny_entries(cat(self.rows, np.int64), cat(self.cols, np.int64), cat(self.vals, float),
                                    cat(self.row_lo, float), cat(self.row_hi, float),
                                    np.asarray(self.col_lo, float), np.asarray(self.col_hi, float))

    def to_scipy(self) -> dict:
        """Keyword arguments of :func:`scipy.optimize.milp`: ``c``, ``integrality`` (the first k columns),
        ``bounds`` and ``constraints`` (one ``LinearConstraint`` over a CSR matrix). The MILP's objective is
        ``c·v + offset`` (``self.offset``) and is reported times ``obj_scale``."""
        from scipy.optimize import Bounds, LinearConstraint
        from scipy.sparse import csr_matrix

        R, C, V, lo, hi = self.to_coo()
        A = csr_matrix((V, (R, C)), shape=(lo.size, self.ncol))
        integrality = np.zeros(self.ncol, dtype=np.uint8)
        integrality[:self.k] = 1
        return dict(c=np.asarray(self.c, dtype=float), integrality=integrality,
                    bounds=Bounds(self.col_lo, self.col_hi), constraints=[LinearConstraint(A, lo, hi)])


#: matrix entries at or below this magnitude are taken out of a MILP by :func:`without_tiny_entries` (HiGHS drops
#: entries ≤ 1e-9, its ``small_matrix_value``, and SCIP those below its epsilon 1e-9; twice that, for margin)
SMALL_COEFFICIENT = 2e-9


def without_tiny_entries(R, C, V, rlo, rhi, col_lo, col_hi):
    """The COO rows ``rlo ≤ A v ≤ rhi`` with every entry of magnitude ≤ :data:`SMALL_COEFFICIENT` taken out
    soundly: the range of its term over the column's bounds moves into the row's bounds, so every point feasible
    before stays feasible (a relaxation; bounds and infeasibility proofs on it hold for the MILP as written).

    A solver drops such entries itself, and that may tighten a row: a secant z − s·n ≥ r with s ≈ −6e-10 read as
    z ≥ r lies above the true secant by |s|·n (n ~ 4 000: 2.6e-6 of the row), so the solver's bound could pass
    the true optimum (case (d) at k = 20 000: HiGHS's proven optima of the same cores moved by up to 6.7e-7,
    either way, when it kept those entries). Taken out here, a term loses at most |s|·(hi − lo) of exactness."""
    tiny = np.abs(V) <= SMALL_COEFFICIENT
    if not tiny.any():
        return R, C, V, rlo, rhi
    r, v, j = R[tiny], V[tiny], C[tiny]
    nz = v != 0
    r, v, j = r[nz], v[nz], j[nz]
    with np.errstate(invalid="ignore"):
        t_lo, t_hi = v * col_lo[j], v * col_hi[j]
    # v ≠ 0 and lo < +inf, hi > −inf, so t_max is never −inf nor t_min +inf: the sums below are never nan (an
    # equality row becomes a range, a row with a term unbounded over its column opens on that side)
    t_min, t_max = np.minimum(t_lo, t_hi), np.maximum(t_lo, t_hi)
    rlo = rlo - np.bincount(r, weights=t_max, minlength=rlo.size)
    rhi = rhi - np.bincount(r, weights=t_min, minlength=rhi.size)
    keep = ~tiny
    return R[keep], C[keep], V[keep], rlo, rhi


def secant_milp(prog: SeparableProgram, lo: np.ndarray, hi: np.ndarray, anchor: np.ndarray | None = None,
                obj_scale: float = 1.0, row_tighten: float = 0.0, relax_rows: bool = False,
                segments: list | None = None) -> SecantMILP:
    """The program restricted to ``lo ≤ n ≤ hi`` as an exact MILP with integer secant cuts.

    A discretely convex f on the integers [a, b] equals max over segments v = a..b−1 of its secants
    f(v) + (f(v+1) − f(v))(n − v), so ``z ≥ secants`` makes z = f(n) at integer n. To keep solver tolerances
    small against the objective, each stratum's objective part is written as its affine tangent at
    ``anchor`` (exact linear part) plus an epigraph of the remainder; rows likewise. ``obj_scale`` divides
    the objective; ``row_tighten`` (relative) tightens nonlinear ≤ rows so that points the solver accepts
    within its feasibility tolerance satisfy the true rows. ``relax_rows`` writes every row at
    rhs + :meth:`SeparableProgram.allowance` (equalities as rhs ± allowance), so that the MILP's bound and
    infeasibility proof cover every design the feasibility test accepts.

    ``segments`` (one set of integers per stratum) writes only the secants of the segments [v, v + 1] starting
    at those v, clipped to [lo, hi − 1]. Each secant is ≤ f at every integer, so fewer of them make a relaxation
    whose value at n is exact when a segment starting at n or n − 1 is written (:func:`segments_missing`).
    """
    k = prog.k
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    anchor = (lo + hi) / 2.0 if anchor is None else np.clip(np.asarray(anchor, dtype=float), lo, hi)
    c = [np.zeros(k)]
    col_lo, col_hi = [lo.astype(float)], [hi.astype(float)]
    R, C, Vv, rlo, rhi = [], [], [], [], []
    offset = 0.0
    ncol = k
    nrow = 0
    con_rows, con_units = [], []
    allow = prog.allowance() if relax_rows and prog.m else np.zeros(prog.m)
    all_rows = [prog.objective, *prog.rows]
    # every row (and its epigraph columns) in its own units: the objective divided by obj_scale, a constraint
    # by its magnitude at the anchor, max(|rhs|, Σ|terms|) (:meth:`SeparableProgram.row_scale`), so solver
    # tolerances are relative ones. A zero right-hand side alone is no scale: 2e8·n1 − 2e8·n2 ≤ 0 divided by
    # 1e-300 overflowed to inf/nan coefficients, and the solvers then proved a wrong design "optimal".
    units = [obj_scale] + list(prog.row_scale(anchor)) if prog.m else [obj_scale]
    for l, row in enumerate(all_rows):
        unit = float(units[l])
        lin = np.zeros(k) if row.a is None else row.a.astype(float).copy()
        const = 0.0
        epi_cols: list[int] = []
        if row.W is not None:
            idx = np.flatnonzero(np.any(row.W != 0, axis=1))
            fixed = idx[lo[idx] == hi[idx]]
            free = idx[lo[idx] < hi[idx]]
            if fixed.size:
                T = prog.unit_matrix(lo[fixed].astype(float), fixed)
                const += float(np.sum(row.W[fixed] * T))
            if free.size:
                # value and slope of the tangent-like affine part: the secant through the anchor's floor
                a0 = np.clip(np.floor(anchor[free]), lo[free], hi[free] - 1).astype(float)
                f_a0 = np.sum(row.W[free] * prog.unit_matrix(a0, free), axis=1)
                d_a0 = np.sum(row.W[free] * prog.increment_matrix(a0, free), axis=1)
                lin[free] += d_a0
                const += float(np.sum(f_a0 - d_a0 * a0))
                owner, v = _segment_starts(lo, hi, free, segments)   # owner: position in `free` of each
                ii = free[owner]
                f_v = np.sum(row.W[ii] * prog.unit_matrix(v, ii), axis=1)
                d_v = np.sum(row.W[ii] * prog.increment_matrix(v, ii), axis=1)
                # remainder r(n) = f(n) − [f(a0) + d(a0)(n − a0)] ≥ 0 (convex, zero at a0 and a0 + 1)
                r_v = (f_v - (f_a0[owner] + d_a0[owner] * (v - a0[owner]))) / unit
                s_v = (d_v - d_a0[owner]) / unit
                cols = ncol + owner
                epi_cols.extend(range(ncol, ncol + free.size))
                ncol += free.size
                # z − s_v·n ≥ r_v − s_v·v, one row per segment
                rows_idx = np.arange(nrow, nrow + v.size)
                R += [rows_idx, rows_idx]
                C += [cols, ii]
                Vv += [np.ones(v.size), -s_v]
                rlo.append(r_v - s_v * v)
                rhi.append(np.full(v.size, np.inf))
                nrow += v.size
                c.append(np.zeros(free.size))
                col_lo.append(np.zeros(free.size))
                col_hi.append(np.full(free.size, np.inf))
        if l == 0:      # objective: (lin·n + const)/obj_scale + Σ z
            c[0] = c[0] + lin / obj_scale
            if epi_cols:
                c[-1] = c[-1] + 1.0      # the objective's epigraph columns were appended last
            offset += (const - prog.const) / obj_scale
            continue
        # constraint: lin·n + Σ z ≤ rhs − const   (or == for linear equalities)
        nz = np.flatnonzero(lin)
        cols_l = np.concatenate([nz, np.array(epi_cols, dtype=np.int64)])
        vals_l = np.concatenate([lin[nz] / unit, np.ones(len(epi_cols))])
        scale = 1.0 if epi_cols else max(np.max(np.abs(vals_l)) if vals_l.size else 1.0, 1e-300)
        b = (row.rhs - const) / unit
        if row.W is not None and row_tighten:
            b -= row_tighten * max(abs(row.rhs), 1e-300) / unit
        con_rows.append(nrow)
        con_units.append(unit * scale)
        R.append(np.full(cols_l.size, nrow))
        C.append(cols_l)
        Vv.append(vals_l / scale)
        a_l = allow[l - 1] / unit
        rhi.append(np.array([(b + a_l) / scale]))
        rlo.append(np.array([(b - a_l) / scale if row.sense == "==" else -np.inf]))
        nrow += 1
    cvec = np.concatenate(c)
    if not (all(np.all(np.isfinite(v)) for v in [cvec, *Vv])
            and not any(np.any(np.isnan(v)) for v in [*rlo, *rhi])):
        # never hand a solver a row it cannot read: a non-finite coefficient makes its answer meaningless
        raise ValueError("the secant MILP has a non-finite coefficient (a row's scale under- or overflows); "
                         "rescale the model's constraints")
    return SecantMILP(cvec, offset, np.concatenate(col_lo), np.concatenate(col_hi),
                      R, C, Vv, rlo, rhi, k, obj_scale, np.array(con_rows, dtype=np.int64),
                      np.array(con_units, dtype=float))
