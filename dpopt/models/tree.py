"""The tree of a hierarchical release: regions with counts, level by level (root level first), built from
levels, a nested dict, a table (CSV rows) or a data frame. The budget model over it is
:class:`dpopt.models.hierarchy.HierarchyBudget` (docs/hierarchy.md)."""

from __future__ import annotations

import csv
import math
import numbers
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Iterable

import numpy as np

from .. import _validate as V
from .. import frames as F
from ..frames import is_missing, parse_number   # one reading of missing values and numbers


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
            path, on_path, cur = [], set(), nid      # the set keeps a deep chain linear (a list was quadratic)
            while cur is not None and cur not in depth:
                if cur in on_path:
                    raise ValueError(f"cycle in the parent links through node {cur!r}")
                path.append(cur)
                on_path.add(cur)
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
        """Counts by nested geography columns of a frame (pandas, polars, a mapping of columns or a CSV path).

        ``levels`` lists the columns from the coarsest down (e.g. ``["state", "county", "tract"]``). Each row is
        one unit, or carries its count in ``count``. A node is identified by its whole path, so two counties of
        the same name in different states are different nodes; its label is its own value (the path joined
        with "/" when the value repeats within the level). ``root`` adds a root node over the first level
        (None: the first level is the top). Rows whose value of a column nests under two different parents
        cannot happen by construction (the path is the node); NaN or empty values raise naming the column.
        """
        fr = F.Frame(frame, "frame")
        if isinstance(levels, str) or not isinstance(levels, Sequence) or not levels:
            raise TypeError(f"levels must be a non-empty list of column names (coarsest first), got {levels!r}")
        if len(set(levels)) != len(levels):
            raise ValueError(f"levels names a column twice: {list(levels)!r}")
        cols = [fr.labels(c, "level") for c in levels]
        weights = np.ones(fr.nrows) if count is None else fr.numeric(count, "count")
        if np.any(weights < 0):
            i = int(np.argmax(weights < 0))
            raise ValueError(f"frame count column {count!r} must be >= 0; row {i} has {weights[i]:g}")
        if fr.nrows == 0:
            raise ValueError("frame has no rows")
        counts, parents, ids = [], [None], []
        if root is not None:
            counts.append([float(math.fsum(weights))])
            ids.append([str(root)])
        paths_prev = None
        for depth, (names, codes) in enumerate(cols):
            # node = path of codes down to this level
            key = np.column_stack([c for _, c in cols[:depth + 1]])
            paths, inverse = np.unique(key, axis=0, return_inverse=True)
            inverse = inverse.ravel()
            sums = np.bincount(inverse, weights=weights, minlength=len(paths))
            own = [names[p[-1]] for p in paths]
            repeated = {v for v in own if own.count(v) > 1}
            label = ["/".join(cols[d][0][p[d]] for d in range(depth + 1)) if own[j] in repeated else own[j]
                     for j, p in enumerate(paths)]
            if depth == 0:
                par = np.zeros(len(paths), dtype=np.int64) if root is not None else None
            else:
                lookup = {tuple(p): j for j, p in enumerate(paths_prev)}
                par = np.array([lookup[tuple(p[:-1])] for p in paths], dtype=np.int64)
            counts.append(sums.astype(float))
            ids.append(label)
            if depth > 0 or root is not None:
                parents.append(par)
            paths_prev = paths
        return cls(counts, parents, ids, **kw)

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
        if is_missing(p):                  # None, NaN, pandas NA/NaT, blank: a root
            return None
        s = str(p).strip()
        return None if s.lower() in ("none", "nan", "null") else s

    def rec(nid, par, cnt, lvl, where):
        if is_missing(nid):
            raise ValueError(f"{where}: empty or missing node id ({nid!r})")
        c = parse_number(cnt)
        if c is None:
            raise ValueError(f"{where}: count {cnt!r} of node {nid!r} is not a number (decimal ASCII digits)")
        lv = None
        if level_col is not None:
            lv = parse_number(lvl, integer=True)
            if lv is None:
                raise ValueError(f"{where}: level {lvl!r} of node {nid!r} is not an integer")
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
