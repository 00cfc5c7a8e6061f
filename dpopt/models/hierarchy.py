"""Hierarchical DP release: the budget-allocation programs of Ko, Ziani & Fioretto (docs/hierarchy.md).

A :class:`Hierarchy` is a tree of regions with counts, levels ℓ = 1..L (root level first). Every node of
level ℓ is released as ``max(0, N_j + Lap(Δ/ε_ℓ))``; levels compose sequentially (Σ ε_ℓ ≤ ε_total),
nodes of one level in parallel. With ``x = ε N/Δ`` the truncated release has

    Bias = (Δ/2ε) e^{−x},   MSE(ε, N) = (Δ/ε)² (2 − (1+x) e^{−x}),   Δ²/ε² ≤ MSE < 2Δ²/ε².

:class:`HierarchyBudget` declares program (6) (``epsilon_total=``: minimise the weighted MSE
Σ_ℓ w_ℓ Σ_{j∈R_ℓ} MSE(ε_ℓ, N_j) subject to Σ ε_ℓ ≤ ε_total, ε_ℓ ≥ ε_min) or program (7)
(``mse_target=τ``: minimise Σ ε_ℓ subject to the weighted MSE ≤ τ). Solving is the business of the
backends (``solve(backend="exact"|"cvxpy"|"pyomo"|"scipy")``).

**Privacy note (paper §3.2).** The optimiser reads the counts. To keep the release ε_total-DP the counts
given to :class:`HierarchyBudget` must be public or previously released data (e.g. the last census or an
earlier DP release), *not* the confidential counts that will then be released with the chosen budgets.
"""

from __future__ import annotations

import csv
import math
import numbers
import warnings
from pathlib import Path
from typing import Iterable

import numpy as np

from .. import _validate as V
from ..result import Certificate, Solution, Status
from .base import Model, honest_status

OBJECTIVES = ("truncated-laplace-mse", "laplace-variance")
EPS_MAX = 700.0          # largest budget of one level (docs/privacy.md: ε ranges over [1e-6, 700])
DEFAULT_EPS_MIN = 1e-6


# =================================================================================== the tree
class Hierarchy:
    """A tree of regions with non-negative counts, stored level by level (root level first).

    ``counts[ℓ]`` is a float array of the counts of level ℓ (0-based here), ``parents[ℓ]`` an int array
    giving, for each node of level ℓ ≥ 1, the index of its parent in level ℓ−1 (``parents[0]`` is None).
    ``ids[ℓ]`` are node labels. Every node above the bottom level must have at least one child (a leaf
    above the bottom would be a skipped level), and children must sum to their parent unless
    ``allow_inconsistent=True`` (then a warning is issued and :attr:`inconsistencies` lists them).
    """

    def __init__(self, counts, parents, ids=None, *, allow_inconsistent: bool = False, rtol: float = 1e-9,
                 name: str = ""):
        if isinstance(counts, (str, bytes)) or not isinstance(counts, Iterable):
            raise TypeError("counts must be a list of per-level sequences of counts (root level first)")
        counts = list(counts)
        if not counts:
            raise ValueError("counts must have at least one level")
        self.counts: list[np.ndarray] = []
        for l, c in enumerate(counts):
            arr = V._as_float_array(f"counts of level {l + 1}", c)
            if arr.ndim == 0:
                arr = arr.reshape(1)
            if arr.ndim != 1:
                raise ValueError(f"counts of level {l + 1} must be one-dimensional, got shape {arr.shape}")
            if arr.size == 0:
                raise ValueError(f"level {l + 1} is empty: every level must have at least one node")
            if not np.all(np.isfinite(arr)):
                j = int(np.argmax(~np.isfinite(arr)))
                raise ValueError(f"counts must be finite; level {l + 1} node {j} has {arr[j]}")
            if np.any(arr < 0):
                j = int(np.argmax(arr < 0))
                raise ValueError(f"counts must be >= 0; level {l + 1} node {j} has {arr[j]:g}")
            self.counts.append(arr)
        L = len(self.counts)
        parents = [None] * L if parents is None and L == 1 else parents
        if parents is None or isinstance(parents, (str, bytes, dict)) or not isinstance(parents, Iterable):
            raise TypeError("parents must be a list with one entry per level (None for the root level)")
        parents = list(parents)
        if len(parents) != L:
            raise ValueError(f"parents has {len(parents)} entries, expected {L} (one per level, None first)")
        if parents[0] is not None:
            raise ValueError("parents[0] must be None (the root level has no parents)")
        self.parents: list[np.ndarray | None] = [None]
        for l in range(1, L):
            p = parents[l]
            if p is None:
                raise ValueError(f"parents of level {l + 1} are missing (only the root level may have None)")
            pa = V._as_float_array(f"parents of level {l + 1}", p)
            if pa.ndim != 1 or pa.size != self.counts[l].size:
                raise ValueError(f"parents of level {l + 1} must have one entry per node "
                                 f"({self.counts[l].size}), got shape {pa.shape}")
            if np.any(pa != np.round(pa)):
                raise ValueError(f"parents of level {l + 1} must be integer indices into level {l}")
            pa = pa.astype(np.int64)
            bad = (pa < 0) | (pa >= self.counts[l - 1].size)
            if np.any(bad):
                j = int(np.argmax(bad))
                raise ValueError(f"unknown parent: level {l + 1} node {j} names parent index {pa[j]}, but "
                                 f"level {l} has nodes 0..{self.counts[l - 1].size - 1}")
            self.parents.append(pa)
        if ids is None:
            self.ids = [[f"L{l + 1}-{j}" for j in range(c.size)] for l, c in enumerate(self.counts)]
        else:
            ids = [list(map(str, level)) for level in ids]
            if len(ids) != L or any(len(i) != c.size for i, c in zip(ids, self.counts)):
                raise ValueError("ids must give one label per node of every level")
            self.ids = ids
        self.name = str(name)
        # every node above the bottom level needs a child (no skipped levels)
        for l in range(L - 1):
            nchild = np.bincount(self.parents[l + 1], minlength=self.counts[l].size)
            if np.any(nchild == 0):
                j = int(np.argmax(nchild == 0))
                raise ValueError(f"skipped level: node {self.ids[l][j]!r} of level {l + 1} has no children but "
                                 f"the hierarchy has {L} levels (every leaf must be on the bottom level)")
        self.inconsistencies: list[tuple[int, str, float, float]] = []
        for l in range(L - 1):
            sums = np.bincount(self.parents[l + 1], weights=self.counts[l + 1], minlength=self.counts[l].size)
            scale = np.maximum(np.abs(self.counts[l]), 1.0)
            bad = np.flatnonzero(np.abs(sums - self.counts[l]) > rtol * scale)
            for j in bad:
                self.inconsistencies.append((l + 1, self.ids[l][j], float(self.counts[l][j]), float(sums[j])))
        if self.inconsistencies:
            lvl, nid, c, s = self.inconsistencies[0]
            msg = (f"{len(self.inconsistencies)} node(s) whose children do not sum to their count; first: "
                   f"level {lvl} node {nid!r} has count {c:g} but its children sum to {s:g}")
            if not allow_inconsistent:
                raise ValueError(msg + " (pass allow_inconsistent=True to accept this)")
            warnings.warn(msg + " (accepted because allow_inconsistent=True)", stacklevel=2)
        self.consistent = not self.inconsistencies

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_levels(cls, counts, parents=None, ids=None, **kw) -> "Hierarchy":
        """``counts=[[…] per level, root first]``, ``parents=[None, [parent index per node of level 2], …]``."""
        return cls(counts, parents, ids, **kw)

    @classmethod
    def from_nested(cls, tree: dict, **kw) -> "Hierarchy":
        """From a nested dict. Two spellings are accepted:

        * ``{"name": "VA", "count": 450, "children": [{"name": ..., "count": ..., "children": [...]}, ...]}``
          (a list of such dicts at the top is a forest);
        * ``{"VA": {"count": 450, "children": {"T100": {"count": 300, "children": {...}}, ...}}}``.
        """
        roots = _nested_roots(tree)
        levels_c: list[list[float]] = []
        levels_p: list[list[int]] = []
        levels_i: list[list[str]] = []
        seen: set[int] = set()
        stack = [(r, 0, -1) for r in roots]
        # breadth-first so that indices of level ℓ are assigned before level ℓ+1 refers to them
        from collections import deque
        queue = deque(stack)
        while queue:
            (label, node), depth, parent = queue.popleft()
            if id(node) in seen:
                raise ValueError(f"cycle: node {label!r} appears twice in the nested tree")
            seen.add(id(node))
            if not isinstance(node, dict) or "count" not in node:
                raise ValueError(f"node {label!r} must be a dict with a 'count' (and optional 'children')")
            unknown = set(node) - {"count", "children", "name"}
            if unknown:
                raise ValueError(f"node {label!r} has unknown key(s) {sorted(unknown)}; allowed: count, children, name")
            while len(levels_c) <= depth:
                levels_c.append([]), levels_p.append([]), levels_i.append([])
            count = node["count"]
            if isinstance(count, bool) or not isinstance(count, numbers.Real):
                raise TypeError(f"count of node {label!r} must be a number, got {type(count).__name__}")
            levels_c[depth].append(float(count))
            levels_p[depth].append(parent)
            levels_i[depth].append(str(label))
            me = len(levels_c[depth]) - 1
            for child in _nested_children(node.get("children"), label):
                queue.append((child, depth + 1, me))
        parents = [None] + [np.asarray(p, dtype=np.int64) for p in levels_p[1:]]
        return cls(levels_c, parents, levels_i, **kw)

    @classmethod
    def from_table(cls, rows, *, id_col: str = "id", parent_col: str = "parent", count_col: str = "count",
                   level_col: str | None = None, **kw) -> "Hierarchy":
        """From rows of (node id, parent id, count): a CSV path, a pandas DataFrame, a list of dicts or
        a list of 3-tuples. Roots have an empty/None parent. If ``level_col`` is given, each node's
        parent must be on the level just above it (else: skipped level)."""
        records = _table_records(rows, id_col, parent_col, count_col, level_col)
        byid: dict[str, tuple[str | None, float, int | None]] = {}
        for nid, par, cnt, lvl in records:
            if nid in byid:
                raise ValueError(f"duplicate node id {nid!r} in the table")
            byid[nid] = (par, cnt, lvl)
        for nid, (par, _, _) in byid.items():
            if par is not None and par not in byid:
                raise ValueError(f"unknown parent: node {nid!r} names parent {par!r}, which is not in the table")
            if par == nid:
                raise ValueError(f"cycle: node {nid!r} is its own parent")
        # depth by walking up (detect cycles)
        depth: dict[str, int] = {}
        for nid in byid:
            path, cur = [], nid
            while cur is not None and cur not in depth:
                if cur in path:
                    raise ValueError(f"cycle in the parent links through node {cur!r}")
                path.append(cur)
                cur = byid[cur][0]
            d = -1 if cur is None else depth[cur]
            for p in reversed(path):
                d += 1
                depth[p] = d
        if level_col is not None:
            for nid, (par, _, lvl) in byid.items():
                if par is None:
                    continue
                plvl = byid[par][2]
                if lvl != plvl + 1:
                    raise ValueError(f"skipped level: node {nid!r} is on level {lvl} but its parent {par!r} "
                                     f"is on level {plvl}")
        L = max(depth.values()) + 1
        order: list[list[str]] = [[] for _ in range(L)]
        for nid in byid:                   # keep table order within a level
            order[depth[nid]].append(nid)
        index = [{nid: j for j, nid in enumerate(lv)} for lv in order]
        counts = [[byid[n][1] for n in lv] for lv in order]
        parents = [None] + [np.asarray([index[l - 1][byid[n][0]] for n in order[l]], dtype=np.int64)
                            for l in range(1, L)]
        return cls(counts, parents, order, **kw)

    @classmethod
    def from_frame(cls, frame, levels, *, count: str | None = None, root: str | None = "Total", **kw) -> "Hierarchy":
        """Counts by nested geography columns of a frame (coarsest first; each row one unit or a ``count``
        column); see :func:`dpopt.frames.hierarchy_from_frame`."""
        from ..frames import hierarchy_from_frame
        return hierarchy_from_frame(frame, levels, count=count, root=root, **kw)

    # ------------------------------------------------------------------ info
    @property
    def n_levels(self) -> int:
        return len(self.counts)

    @property
    def sizes(self) -> list[int]:
        """|R_ℓ| per level."""
        return [int(c.size) for c in self.counts]

    @property
    def total(self) -> float:
        return float(self.counts[0].sum())

    def __repr__(self) -> str:
        nm = f", name={self.name!r}" if self.name else ""
        return f"Hierarchy(levels={self.n_levels}, sizes={self.sizes}, total={self.total:g}{nm})"


def _nested_roots(tree):
    if isinstance(tree, list):
        out = []
        for t in tree:
            out.extend(_nested_roots(t))
        return out
    if not isinstance(tree, dict):
        raise TypeError(f"a nested hierarchy must be a dict or a list of dicts, got {type(tree).__name__}")
    if "count" in tree:
        return [(str(tree.get("name", "root")), tree)]
    return [(str(k), v) for k, v in tree.items()]


def _nested_children(children, label):
    if children is None:
        return []
    if isinstance(children, dict):
        return [(str(k), v) for k, v in children.items()]
    if isinstance(children, list):
        out = []
        for j, c in enumerate(children):
            if not isinstance(c, dict):
                raise ValueError(f"child {j} of node {label!r} must be a dict")
            out.append((str(c.get("name", f"{label}/{j}")), c))
        return out
    raise ValueError(f"children of node {label!r} must be a list or a dict")


def _table_records(rows, id_col, parent_col, count_col, level_col):
    def norm_parent(p):
        if p is None:
            return None
        if isinstance(p, float) and math.isnan(p):
            return None
        s = str(p).strip()
        return None if s == "" or s.lower() in ("none", "nan", "null") else s

    def rec(nid, par, cnt, lvl, where):
        if nid is None or str(nid).strip() == "":
            raise ValueError(f"{where}: empty node id")
        try:
            c = float(cnt)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: count {cnt!r} of node {nid!r} is not a number") from None
        lv = None
        if level_col is not None:
            try:
                lv = int(lvl)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: level {lvl!r} of node {nid!r} is not an integer") from None
        return (str(nid).strip(), norm_parent(par), c, lv)

    if isinstance(rows, (str, Path)):
        path = Path(rows)
        try:
            with path.open(newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh)
                need = [id_col, parent_col, count_col] + ([level_col] if level_col else [])
                missing = [c for c in need if c not in (reader.fieldnames or [])]
                if missing:
                    # (the header is not quoted back: the file may be anything, e.g. a system file)
                    raise ValueError(f"{path}: not a tree table: the header lacks column(s) "
                                     f"{', '.join(map(repr, missing))} (its first line has "
                                     f"{len(reader.fieldnames or [])} field(s))")
                out = []
                for i, r in enumerate(reader):
                    if None in r or any(r[c] is None for c in need):
                        raise ValueError(f"{path} row {i + 2}: its number of fields differs from the header's")
                    out.append(rec(r[id_col], r[parent_col], r[count_col], r.get(level_col) if level_col else None,
                                   f"{path} row {i + 2}"))
        except csv.Error as exc:
            raise ValueError(f"tree table {path}: not a valid CSV file ({exc})") from None
        except UnicodeDecodeError:
            raise ValueError(f"tree table {path}: not a UTF-8 text (CSV) file") from None
        except OSError as exc:
            raise ValueError(f"tree table {path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
        if not out:
            raise ValueError(f"tree table {path}: the table has no rows (a header only)")
        return out
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):   # pandas DataFrame
        rows = rows.to_dict("records")
    if isinstance(rows, (dict, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a CSV path, a pandas DataFrame, or a list of dicts or tuples, "
                        f"got {type(rows).__name__}")
    out = []
    for i, r in enumerate(rows):
        if isinstance(r, dict):
            for c in (id_col, parent_col, count_col) + ((level_col,) if level_col else ()):
                if c not in r:
                    raise ValueError(f"row {i}: missing column {c!r}")
            out.append(rec(r[id_col], r[parent_col], r[count_col], r.get(level_col) if level_col else None,
                           f"row {i}"))
        else:
            if isinstance(r, (str, bytes)) or not hasattr(r, "__iter__"):
                raise TypeError(f"row {i}: expected a dict or an (id, parent, count[, level]) tuple, "
                                f"got {type(r).__name__}")
            r = tuple(r)
            if len(r) not in (3, 4):
                raise ValueError(f"row {i}: expected (id, parent, count[, level]), got {len(r)} fields")
            out.append(rec(r[0], r[1], r[2], r[3] if len(r) == 4 else None, f"row {i}"))
    if not out:
        raise ValueError("the table has no rows")
    return out


# =================================================================================== closed forms
def truncated_laplace_moments(epsilon, N, sensitivity: float = 1.0) -> dict:
    """Bias, variance and MSE of ``max(0, N + Lap(Δ/ε))`` (paper Props 1–2, eq. (3)), elementwise.

    ε finite and > 0, counts N finite and ≥ 0, sensitivity Δ > 0 (raises ValueError/TypeError naming them)."""
    eps = V._as_float_array("epsilon", epsilon)
    if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    N = V._as_float_array("N", N)
    if not np.all(np.isfinite(N)) or np.any(N < 0):
        raise ValueError(f"N (counts) must be finite and >= 0, got {N!r}")
    d = V.positive("sensitivity", sensitivity)
    try:
        np.broadcast_shapes(eps.shape, N.shape)
    except ValueError:
        raise ValueError(f"epsilon (shape {eps.shape}) and N (shape {N.shape}) must broadcast together") from None
    with np.errstate(over="ignore", under="ignore"):
        x = eps * N / d
        e = np.exp(-x)
        xe = np.where(x > 800.0, 0.0, (1.0 + np.minimum(x, 800.0)) * e)     # (1 + x)e^{-x} → 0 (no inf·0)
        s2 = (d / eps) ** 2
    if not np.all(np.isfinite(s2)):
        raise ValueError("epsilon is too small for this sensitivity: (sensitivity/epsilon)² overflows")
    mse = s2 * (2.0 - xe)
    bias = 0.5 * (d / eps) * e
    var = s2 * (2.0 - xe - 0.25 * e * e)
    return {"bias": bias, "bias2": bias ** 2, "variance": var, "mse": mse}


# =================================================================================== the model
class HierarchyBudget(Model):
    """Budget allocation across the levels of a hierarchical release (docs/hierarchy.md; Ko, Ziani & Fioretto).

    Parameters
    ----------
    hierarchy : :class:`Hierarchy` — counts must be **public or previously released** (paper §3.2).
    epsilon_total : program (6): total budget, ``L·epsilon_min ≤ epsilon_total ≤ 700·L``.
    mse_target : program (7) instead: minimise Σ ε_ℓ s.t. weighted MSE ≤ τ (give exactly one of the two).
    weights : w_ℓ > 0 per level (default 1 each: the objective is then the total MSE over all nodes).
    sensitivity : Δ > 0 of one count (default 1; add/remove one person).
    epsilon_min : lower bound on every ε_ℓ (> 0; default 1e-6). Each ε_ℓ is also ≤ 700.
    objective : ``"truncated-laplace-mse"`` (released counts truncated at 0) or ``"laplace-variance"``
        (no truncation: MSE = 2Δ²/ε², closed form ε_ℓ ∝ (w_ℓ |R_ℓ|)^{1/3}).
    """

    def __init__(self, hierarchy: Hierarchy, epsilon_total=None, *, mse_target=None, weights=None,
                 sensitivity=1.0, epsilon_min=DEFAULT_EPS_MIN, objective: str = "truncated-laplace-mse",
                 name: str = ""):
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
        self.hierarchy = hierarchy
        L = hierarchy.n_levels
        self.objective_kind = V.choice("objective", objective, OBJECTIVES)
        self.sensitivity = V.positive("sensitivity", sensitivity, upper=1e100)
        if self.sensitivity < 1e-100:
            raise ValueError(f"sensitivity must be in [1e-100, 1e100], got {self.sensitivity:g}")
        self.epsilon_min = V.epsilon("epsilon_min", epsilon_min)
        self.epsilon_max = EPS_MAX
        self.weights = np.ones(L) if weights is None else V.positive_vector("weights", weights, length=L)
        if (epsilon_total is None) == (mse_target is None):
            raise ValueError("give exactly one of epsilon_total (program 6) or mse_target (program 7)")
        self.name = str(name)
        self._z = [c / self.sensitivity for c in hierarchy.counts]     # N/Δ per level
        self._compressed = None
        if epsilon_total is not None:
            self.program = "budget"
            self.epsilon_total = V.positive("epsilon_total", epsilon_total)
            lo, hi = L * self.epsilon_min, L * EPS_MAX
            if not lo * (1 - 1e-12) <= self.epsilon_total <= hi:
                raise ValueError(f"epsilon_total must be in [L*epsilon_min, 700*L] = [{lo:g}, {hi:g}] "
                                 f"for L={L} levels, got {self.epsilon_total:g}")
            self.mse_target = None
        else:
            self.program = "target"
            self.epsilon_total = None
            self.mse_target = V.positive("mse_target", mse_target)
            with np.errstate(over="ignore"):
                best = self.objective_value(np.full(L, EPS_MAX))
            if self.mse_target < best:
                raise ValueError(f"mse_target {self.mse_target:g} is unattainable: the weighted MSE is at least "
                                 f"{best:.6g} even with epsilon = 700 on every level (raise mse_target or lower "
                                 f"the weights or the sensitivity)")
        lo, hi = self.level_bounds()
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            worst = self.objective_value(lo)      # the largest MSE: every level at its floor
            least = self.level_breakdown(hi)["weighted"]
        if not math.isfinite(worst):
            raise ValueError("the weighted MSE overflows double precision at epsilon_min (weights × "
                             "(sensitivity/epsilon_min)² × nodes): rescale the weights or the sensitivity, or "
                             "raise epsilon_min")
        if np.any(least < 1e-280):
            raise ValueError("a level's weighted MSE underflows double precision (weights × (sensitivity/epsilon)² "
                             "below 1e-280): rescale the weights or the sensitivity")

    # ------------------------------------------------------------------ basics
    @property
    def n_levels(self) -> int:
        return self.hierarchy.n_levels

    @property
    def sizes(self) -> np.ndarray:
        return np.asarray(self.hierarchy.sizes, dtype=float)

    def __repr__(self) -> str:
        prog = (f"epsilon_total={self.epsilon_total:g}" if self.program == "budget"
                else f"mse_target={self.mse_target:g}")
        return (f"HierarchyBudget(levels={self.n_levels}, sizes={self.hierarchy.sizes}, {prog}, "
                f"objective={self.objective_kind!r})")

    def level_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Box of each ε_ℓ: [epsilon_min, min(700, epsilon_total − (L−1)·epsilon_min)]."""
        L = self.n_levels
        hi = EPS_MAX
        if self.program == "budget":
            hi = min(hi, self.epsilon_total - (L - 1) * self.epsilon_min)
        return np.full(L, self.epsilon_min), np.full(L, max(hi, self.epsilon_min))

    def _check_eps(self, eps) -> np.ndarray:
        e = V.positive_vector("epsilon per level", eps, length=self.n_levels)
        return e

    # ------------------------------------------------------------------ per-level math
    def compressed_levels(self):
        """Per level ``(z, m)``: distinct values of N/Δ with multiplicities (``m=None``: no compression).

        Integer counts are compressed with a histogram (O(n)) when the largest count is small enough;
        otherwise the raw counts are kept. Used by the solvers (values are exact, only regrouped)."""
        if self._compressed is None:
            out = []
            for c, z in zip(self.hierarchy.counts, self._z):
                n = c.size
                cmax = float(c.max())
                if n > 64 and cmax <= 4 * n + 100_000 and np.all(c == np.floor(c)):
                    h = np.bincount(c.astype(np.int64))
                    vals = np.flatnonzero(h)
                    out.append((vals / self.sensitivity, h[vals].astype(float)))
                else:
                    out.append((z, None))
            self._compressed = out
        return self._compressed

    def level_terms(self, eps, level: int, order: int = 2, z=None, m=None):
        """(F, F', F'') of the unweighted level sum Σ_j MSE(ε, N_j) at scalar ε (order 0: F only)."""
        e = float(eps)
        d2 = self.sensitivity ** 2
        if z is None:
            z, m = self._z[level], None
        n = float(z.size if m is None else m.sum())
        if self.objective_kind == "laplace-variance":
            F = 2 * d2 * n / e ** 2
            return (F, -4 * d2 * n / e ** 3, 12 * d2 * n / e ** 4) if order else (F,)
        x = e * z
        ex = np.exp(-x)
        xe = x * ex
        dot = (lambda a: float(np.sum(a))) if m is None else (lambda a: float(m @ a))
        A, B = dot(ex), dot(xe)
        F = d2 / e ** 2 * (2 * n - A - B)
        if not order:
            return (F,)
        x2e = x * xe
        C = dot(x2e)
        D = dot(x * x2e)
        F1 = -d2 / e ** 3 * (4 * n - 2 * A - 2 * B - C)
        F2 = d2 / e ** 4 * (12 * n - 6 * A - 6 * B - 3 * C - D)
        return F, F1, F2

    def level_breakdown(self, eps) -> dict:
        """Per level: MSE, bias² and variance sums over the level's nodes (closed forms)."""
        e = self._check_eps(eps)
        mse, b2 = [], []
        for l in range(self.n_levels):
            if self.objective_kind == "laplace-variance":
                mse.append(2 * (self.sensitivity / e[l]) ** 2 * self._z[l].size)
                b2.append(0.0)
            else:
                mom = truncated_laplace_moments(e[l], self.hierarchy.counts[l], self.sensitivity)
                mse.append(float(mom["mse"].sum()))
                b2.append(float(mom["bias2"].sum()))
        mse, b2 = np.array(mse), np.array(b2)
        return {"mse": mse, "bias2": b2, "variance": mse - b2, "weighted": self.weights * mse}

    def node_mse(self, eps, level: int) -> np.ndarray:
        """MSE of every node of ``level`` (0-based, 0 ≤ level < n_levels) at budget ε."""
        e = V.positive("epsilon", eps, upper=EPS_MAX)
        level = V.integer("level", level, minimum=0, maximum=self.n_levels - 1)
        if self.objective_kind == "laplace-variance":
            return np.full(self._z[level].size, 2 * (self.sensitivity / e) ** 2)
        return truncated_laplace_moments(e, self.hierarchy.counts[level], self.sensitivity)["mse"]

    def objective_value(self, eps) -> float:
        """Weighted MSE Σ_ℓ w_ℓ Σ_j MSE(ε_ℓ, N_j) (one vectorised pass over all nodes)."""
        e = self._check_eps(eps)
        return float(sum(self.weights[l] * self.level_terms(e[l], l, 0)[0] for l in range(self.n_levels)))

    def gradient(self, eps) -> np.ndarray:
        e = self._check_eps(eps)
        return np.array([self.weights[l] * self.level_terms(e[l], l, 1)[1] for l in range(self.n_levels)])

    def hessian_diagonal(self, eps) -> np.ndarray:
        e = self._check_eps(eps)
        return np.array([self.weights[l] * self.level_terms(e[l], l, 2)[2] for l in range(self.n_levels)])

    # ------------------------------------------------------------------ baselines and certificates
    def uniform_split(self) -> np.ndarray:
        """Uniform baseline: ε_total/L per level (program 6), or the smallest uniform ε meeting τ (program 7)."""
        L = self.n_levels
        if self.program == "budget":
            return np.full(L, self.epsilon_total / L)
        lo, hi = self.epsilon_min, EPS_MAX
        if self.objective_value(np.full(L, lo)) <= self.mse_target:
            return np.full(L, lo)
        for _ in range(200):                    # bisection in log ε: G(u·1) decreasing in u
            mid = math.sqrt(lo * hi)
            if self.objective_value(np.full(L, mid)) <= self.mse_target:
                hi = mid
            else:
                lo = mid
            if hi / lo - 1 < 1e-15:
                break
        return np.full(L, hi)

    def laplace_variance_split(self) -> np.ndarray:
        """Closed form of the untruncated problem (6): ε_ℓ ∝ (w_ℓ |R_ℓ|)^{1/3}, clipped to the box by
        water-filling (exact for ``objective="laplace-variance"``, program 6)."""
        a = (self.weights * self.sizes) ** (1 / 3)
        lo, hi = self.level_bounds()
        E = self.epsilon_total
        if E is None:
            raise ValueError("laplace_variance_split is for program (6) (epsilon_total)")
        f = lambda t: np.clip(t * a, lo, hi)  # noqa: E731
        t_lo, t_hi = 0.0, E / a.min()
        for _ in range(200):
            t = 0.5 * (t_lo + t_hi)
            if f(t).sum() < E:
                t_lo = t
            else:
                t_hi = t
        return f(0.5 * (t_lo + t_hi))

    def certificate(self, eps, tol: float = 1e-7) -> Certificate:
        """Gap certificate from one supporting hyperplane of the convex objective at ``eps``.

        Program (6): ``LB = F(ε̂) + min_{ε feasible} ∇F(ε̂)·(ε − ε̂)`` (a fractional knapsack);
        program (7): ``F(ε) ≥ F(ε̂) + ∇F(ε̂)(ε − ε̂)`` relaxes the MSE constraint to one linear
        inequality whose LP over the box is solved in closed form. Valid for any ε̂; tight at the optimum.
        """
        e = self._check_eps(eps)
        L = self.n_levels
        lo, hi = self.level_bounds()
        if np.any(e < lo * (1 - 1e-12)) or np.any(e > hi * (1 + 1e-12)):
            return Certificate("gap", False, message="point outside the bounds epsilon_min ≤ ε ≤ max")
        terms = [self.level_terms(e[l], l, 1) for l in range(L)]
        F = np.array([t[0] for t in terms]) * self.weights
        g = np.array([t[1] for t in terms]) * self.weights   # all < 0
        if self.program == "budget":
            total = math.fsum(e)
            if total > self.epsilon_total * (1 + 1e-12):
                return Certificate("gap", False, message=f"budget violated: sum(eps) = {total!r}")
            obj = float(F.sum())
            room = self.epsilon_total - float(lo.sum())
            best = lo.copy()
            for l in np.argsort(g):                # most negative slope first
                take_ = min(room, hi[l] - lo[l])
                best[l] += take_
                room -= take_
            lb = obj + float(np.dot(g, best - e))
        else:
            G = float(F.sum())
            if G > self.mse_target * (1 + 1e-12):
                return Certificate("gap", False, message=f"MSE target violated: {G!r} > {self.mse_target!r}")
            obj = math.fsum(e)
            a = -g                                  # a·ε ≥ b is implied by feasibility
            b = G - self.mse_target + float(np.dot(a, e))
            need = b - float(np.dot(a, lo))
            lb = float(lo.sum())
            for l in np.argsort(-a):
                if need <= 0:
                    break
                step = min(need / a[l], hi[l] - lo[l])
                lb += step
                need -= step * a[l]
        gap = max(obj - lb, 0.0) / max(abs(obj), np.finfo(float).tiny)
        return Certificate("gap", bool(gap <= tol), lower_bound=lb, gap=gap, tolerance=tol,
                           message="supporting-hyperplane bound")

    def make_feasible(self, eps) -> np.ndarray:
        """Repair the last ulps of a solver's point (privacy must never be exceeded).

        Program (6): clip to the box and make the exact Σε ≤ ε_total (scaling down, then ulp steps).
        Program (7): clip and scale ε up by the smallest factor (1 + 2^k·1e-16) meeting the MSE target."""
        lo, hi = self.level_bounds()
        e = np.clip(np.asarray(eps, dtype=float), lo, hi)
        if self.program == "budget":
            E = self.epsilon_total
            tot = math.fsum(e)
            if tot > E:
                e = np.maximum(e * (E / tot), lo)
            for _ in range(10000):
                if math.fsum(list(e) + [-E]) <= 0:   # the exact Σε ≤ E (math.fsum(e) <= E can round an excess away)
                    break
                e = np.maximum(np.nextafter(e, 0.0), lo)
        else:
            step = 1e-16
            base = e
            while self.objective_value(e) > self.mse_target and step < 1e6:
                step *= 2.0
                e = np.minimum(base * (1.0 + step), hi)
        return e

    # ------------------------------------------------------------------ solution builder for backends
    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: ``x`` are the budgets per level (also the documented ``epsilon``
        field); per-level MSE/bias²/variance, totals, uniform baseline, ratio. Without a certificate the
        model's own KKT certificate is attached."""
        if n is not None or x is None:
            raise TypeError("a hierarchy's answer is real budgets per level: make_solution(x=eps)")
        details_in = dict(details or {})
        e = np.asarray(x, dtype=float)
        br = self.level_breakdown(e)
        u = self.uniform_split()
        bu = self.level_breakdown(u)
        wmse = float(np.sum(br["weighted"]))
        wmse_u = float(np.sum(bu["weighted"]))
        details = {"epsilon_total_used": math.fsum(e), "mse_per_level": br["mse"],
                   "bias2_per_level": br["bias2"], "variance_per_level": br["variance"],
                   "weighted_mse": wmse, "total_mse": float(br["mse"].sum()),
                   "uniform_epsilon": u, "uniform_mse_per_level": bu["mse"], "uniform_weighted_mse": wmse_u,
                   "program": self.program}
        if self.program == "budget":
            objective = wmse
            details["ratio_uniform"] = wmse_u / wmse if wmse > 0 else float("nan")
        else:
            objective = math.fsum(e)
            details["mse_target"] = self.mse_target
            details["ratio_uniform"] = float(u.sum()) / objective
        details.update(details_in)
        cert = self.certificate(e) if certificate is None else certificate
        return honest_status(Solution(status=status, objective=objective, x=e, epsilon=e, certificate=cert,
                                      model=type(self).__name__, details=details, backend=backend,
                                      solver=solver, message=message), rel_gap)


# =================================================================================== real data
def __getattr__(name: str):
    # the papers' trees moved to dpopt.datasets (no import at module level: datasets imports this module)
    if name in ("toy_hierarchy", "load_gapminder"):
        from .. import datasets
        return getattr(datasets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
