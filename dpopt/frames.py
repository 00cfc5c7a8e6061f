"""Data frames in and out: stratified designs and hierarchies from a sampling frame, tables back out.

A *frame* is a pandas DataFrame, a polars DataFrame, a mapping ``{column: sequence}`` or (for
:func:`read_csv`) a CSV file. Neither pandas nor polars is required: frames are read column by
column into numpy arrays, and every error names the column (and the stratum or row) at fault.

* :func:`stratified_design_from_frame` (``StratifiedDesign.from_frame``): N_h are the frame's stratum
  counts; S_h² the unbiased (ddof = 1) variances of the study variable(s), from the frame or from a
  pilot sample frame.
* :func:`hierarchy_from_frame` (``Hierarchy.from_frame``): a tree of counts by nested geography
  columns (each row one unit, or a count column).
* :func:`design_table` / :func:`to_pandas`: per-stratum results back as a DataFrame with the labels.

**Privacy note.** A design computed from the confidential values themselves (S_h² from the frame's y)
reads them: the allocation is then a (non-private) function of the data. Give ``pilot=`` a public or
previously released pilot sample, or use published variances, when that matters (docs/release.md).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from . import _validate as V

__all__ = ["Frame", "read_csv", "stratified_design_from_frame", "hierarchy_from_frame", "design_table",
           "to_pandas"]


# ---------------------------------------------------------------------------------- reading frames
# a number written in a file: ASCII digits only (Python's float() also takes '1_000' and other scripts' digits)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)


def is_missing(v) -> bool:
    """None, NaN of any numeric type, pandas ``NA``/``NaT``, numpy ``NaT`` or a blank string."""
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(v, str):
        return v.strip() == ""
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(v))
    try:
        return bool(v != v)                # NaN is the one value unequal to itself
    except (TypeError, ValueError):
        return False


def parse_number(v, integer: bool = False) -> float | int | None:
    """``v`` as a number (a real number, or a decimal string of ASCII digits such as ``"-1.5e3"``), or
    None when it is not one. ``integer``: only integers (``3``, ``"3"``, ``3.0``)."""
    if isinstance(v, (bool, np.bool_)) or is_missing(v):
        return None
    if isinstance(v, str):
        text = v.strip()
        if not (_INTEGER if integer else _NUMBER).fullmatch(text):
            return None
        return int(text) if integer else float(text)
    if isinstance(v, (int, np.integer)):
        return int(v) if integer else float(v)
    if isinstance(v, (float, np.floating)):
        if integer:
            return int(v) if math.isfinite(v) and float(v).is_integer() else None
        return float(v)
    return None


def read_csv(path, *, name: str = "frame") -> dict[str, list[str]]:
    """A CSV file with a header row as ``{column: [str, ...]}`` (no pandas needed). Errors name the file."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise ValueError(f"{name} {path}: the file is empty (a header row is needed)") from None
            header = [h.strip() for h in header]
            if not header or any(h == "" for h in header):
                raise ValueError(f"{name} {path}: the header has an empty column name")
            dup = [h for h in header if header.count(h) > 1]
            if dup:
                raise ValueError(f"{name} {path}: column {dup[0]!r} appears twice in the header")
            cols: dict[str, list[str]] = {h: [] for h in header}
            for line, row in enumerate(reader, start=2):
                if not row or all(v.strip() == "" for v in row):
                    continue
                if len(row) != len(header):
                    raise ValueError(f"{name} {path}: line {line} has {len(row)} fields, the header has {len(header)}")
                for h, v in zip(header, row):
                    cols[h].append(v.strip())
    except csv.Error as exc:            # e.g. a field over csv.field_size_limit() (131 072) or a NUL byte
        raise ValueError(f"{name} {path}: not a valid CSV file near line {reader.line_num} ({exc})") from None
    except FileNotFoundError:
        raise ValueError(f"{name} {path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} {path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise ValueError(f"{name} {path}: cannot read: {exc.strerror or exc}") from None
    return cols


class Frame:
    """Column access to a pandas/polars DataFrame, a mapping of sequences or a CSV path (read as text).

    ``name`` is how errors refer to the frame ("frame", "pilot").
    """

    def __init__(self, data, name: str = "frame"):
        self.name = name
        if isinstance(data, Frame):
            data = data._data
        if isinstance(data, (str, Path)):
            data = read_csv(data, name=name)
        mod = type(data).__module__.split(".")[0]
        if mod in ("pandas", "polars") and hasattr(data, "columns"):
            self.kind = mod
            self.columns = [str(c) for c in data.columns]
            if len(set(self.columns)) != len(self.columns):
                dup = next(c for c in self.columns if self.columns.count(c) > 1)
                raise ValueError(f"{name}: column {dup!r} appears twice")
            self._colmap = {str(c): c for c in data.columns}
            self.nrows = int(data.shape[0])
        elif isinstance(data, Mapping):
            self.kind = "mapping"
            self.columns = [str(c) for c in data]
            self._colmap = {str(c): c for c in data}
            lengths = {c: len(data[c]) if hasattr(data[c], "__len__") and not isinstance(data[c], (str, bytes))
                       else -1 for c in data}
            bad = [c for c, n in lengths.items() if n < 0]
            if bad:
                raise TypeError(f"{name}: column {str(bad[0])!r} must be a sequence of values")
            if len(set(lengths.values())) > 1:
                raise ValueError(f"{name}: columns have different lengths "
                                 f"({', '.join(f'{c}: {n}' for c, n in lengths.items())})")
            self.nrows = next(iter(lengths.values()), 0)
        else:
            raise TypeError(f"{name} must be a pandas or polars DataFrame, a mapping of columns or a CSV path, "
                            f"got {type(data).__name__}")
        self._data = data

    def has(self, column) -> bool:
        return str(column) in self._colmap

    def raw(self, column, role: str = "column") -> np.ndarray:
        """The column as a numpy array (object dtype for text)."""
        col = str(column) if not isinstance(column, str) else column
        if col not in self._colmap:
            shown = ", ".join(repr(c) for c in self.columns[:12]) + (", ..." if len(self.columns) > 12 else "")
            raise ValueError(f"{self.name} has no {role} column {col!r} (columns: {shown})")
        key = self._colmap[col]
        if self.kind == "pandas":
            s = self._data[key]
            if str(s.dtype) == "category":
                return np.asarray(s.astype(object).to_numpy(), dtype=object)
            return s.to_numpy()
        if self.kind == "polars":
            return self._data[key].to_numpy()
        return np.asarray(list(self._data[key]), dtype=object)

    def numeric(self, column, role: str = "column") -> np.ndarray:
        """The column as float64; missing, non-numeric or infinite values raise naming the column and row."""
        arr = self.raw(column, role)
        if arr.dtype.kind in "biuf":
            out = arr.astype(float)
        else:
            out = np.empty(arr.size)
            for i, v in enumerate(arr):
                if is_missing(v):
                    what = "NaN" if isinstance(v, (float, np.floating)) else repr(v)
                    raise ValueError(f"{self.name} {role} column {column!r} has a missing value ({what}) at row {i}")
                x = float(v) if isinstance(v, (bool, np.bool_)) else parse_number(v)
                if x is None:
                    shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
                    raise ValueError(f"{self.name} {role} column {column!r} must be numeric (decimal ASCII "
                                     f"digits); row {i} has {shown}")
                out[i] = x
        bad = ~np.isfinite(out)
        if np.any(bad):
            i = int(np.argmax(bad))
            what = "a missing value (NaN)" if np.isnan(out[i]) else f"a non-finite value ({out[i]})"
            raise ValueError(f"{self.name} {role} column {column!r} has {what} at row {i} "
                             f"({int(bad.sum())} such row(s))")
        return out

    def labels(self, column, role: str = "strata") -> tuple[list[str], np.ndarray]:
        """(sorted distinct labels as strings, code of each row): missing values raise naming the column."""
        arr = self.raw(column, role)
        for i, v in enumerate(arr):
            if is_missing(v):
                raise ValueError(f"{self.name} {role} column {column!r} has a missing value at row {i}")
        values = list(dict.fromkeys(arr.tolist()))         # first-appearance order, then sorted when possible
        try:
            values = sorted(values)
        except TypeError:
            pass
        names = [_label(v) for v in values]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"{self.name} {role} column {column!r}: two different values print as {dup!r}")
        index = {v: j for j, v in enumerate(values)}
        codes = np.fromiter((index[v] for v in arr.tolist()), dtype=np.int64, count=arr.size)
        return names, codes


def _label(v) -> str:
    """A stratum value as a label: integral floats print without '.0' (pandas turns int columns with
    gaps into floats)."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (np.integer,)):
        return str(int(v))
    return str(v)


# ---------------------------------------------------------------------------------- stratified designs
def stratum_moments(frame, strata, y, *, name: str = "frame", min_units: int = 1, clamp=None):
    """(labels, N_h, S_h² as k×J, values as n×J, codes) of a frame; S_h² uses ddof = 1 (nan below 2 units).

    ``y`` is one column name or a list of them. Strata with fewer than ``min_units`` rows raise. ``clamp``
    (lo, hi): S_h² is the variance of the values clamped to [lo, hi], i.e. of what a release that clamps
    responses to that range privatises (the returned values stay as read).
    """
    fr = frame if isinstance(frame, Frame) else Frame(frame, name)
    ys = [] if isinstance(y, list) and not y else _y_columns(y)
    labels, codes = fr.labels(strata, "strata")
    k = len(labels)
    counts = np.bincount(codes, minlength=k)
    Y = np.column_stack([fr.numeric(c, "y") for c in ys]) if ys else np.empty((fr.nrows, 0))
    S2 = np.full((k, len(ys)), np.nan)
    for h in range(k):
        rows = Y[codes == h]
        if rows.shape[0] < min_units:
            raise ValueError(f"{fr.name}: stratum {labels[h]!r} (strata column {strata!r}) has {rows.shape[0]} "
                             f"unit(s); at least {min_units} are needed to estimate S_h^2")
        if rows.shape[0] >= 2:
            S2[h] = np.var(rows if clamp is None else np.clip(rows, *clamp), axis=0, ddof=1)
    return labels, counts.astype(np.int64), S2, Y, codes


def _y_columns(y) -> list[str]:
    if isinstance(y, str):
        return [y]
    if isinstance(y, Sequence) and y and all(isinstance(c, str) for c in y):
        if len(set(y)) != len(y):
            raise ValueError(f"y names a column twice: {list(y)!r}")
        return list(y)
    raise TypeError(f"y must be a column name or a non-empty list of column names, got {y!r}")


def check_integer_values(values, column: str, mechanism_name: str, where: str = "frame") -> None:
    """Integer-data mechanisms (``integer_data``: DLap, TuLap) privatise integers: refuse non-integer data,
    naming the first offending value."""
    v = np.asarray(values, dtype=float)
    bad = v != np.round(v)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"{where} column {column!r} has non-integer value {float(v.ravel()[i])!r} but mechanism {mechanism_name!r} "
            "privatises integers (its noise is integer-valued with an integer sensitivity). Rescaling data to "
            "integers changes the sensitivity in the same proportion: pass the data in its integer unit with "
            "value_range in that unit, or use mechanism='laplace' for real-valued data")


def _stratum_column(fr, strata, labels, column: str, field: str) -> dict:
    """{stratum label: value} of a frame column that is constant within each stratum (e.g. a region column
    for domains); a stratum whose rows disagree is refused, naming both values."""
    if not fr.has(column):
        raise ValueError(f"{field} = {column!r} is not a column of the frame (give a column name, a list with "
                         "one entry per stratum, or a mapping stratum label -> value)")
    names, codes = fr.labels(strata, "strata")
    vnames, vcodes = fr.labels(column, field)
    out = {}
    for h, lab in enumerate(names):
        seen = np.unique(vcodes[codes == h])
        if seen.size > 1:
            raise ValueError(f"frame column {column!r} is not constant within stratum {lab!r} (it has "
                             f"{vnames[seen[0]]!r} and {vnames[seen[1]]!r}); {field} must give one value per stratum")
        out[lab] = vnames[seen[0]]
    return {lab: out[lab] for lab in labels}


def stratified_design_from_frame(frame, strata: str, y, total, epsilon, *, pilot=None, **options):
    """A :class:`~dpopt.models.stratified.StratifiedDesign` from a sampling frame.

    ``N_h`` are the frame's stratum counts, labelled by the values of ``strata`` (sorted). ``S_h²`` is the
    unbiased variance of ``y`` (one column, or a list of columns for several study variables) in each
    stratum, of the values clamped to ``value_range`` when one is given (the release clamps responses to
    it, so that is the variance of what is released), from the frame itself or from ``pilot`` (a frame with the same ``strata`` and ``y`` columns:
    a pilot sample or public data; every stratum needs at least 2 pilot units). Other keyword options
    (mechanism, objective, value_range, lower, upper, min_per_stratum, shares, ...) go to the design.

    With an integer-data mechanism (``"dlap"``, ``"tulap"``) the y values must be integers (see
    :func:`check_integer_values`).
    """
    from .models.stratified import StratifiedDesign

    ys = _y_columns(y)
    fr = Frame(frame, "frame")
    vr = options.get("value_range")
    # the release clamps every response to value_range, so S_h² is the variance of the clamped values: one
    # outlier in an unclamped pilot can multiply a stratum's S_h² and pull the allocation towards it
    clamp = None if vr is None else tuple(float(v) for v in V.vector("value_range", vr, length=2))
    if pilot is None:
        labels, N, S2, Y, _ = stratum_moments(fr, strata, ys, name="frame", min_units=2, clamp=clamp)
        design_values = Y
        src = "frame"
    else:
        labels, N, _, _, _ = stratum_moments(fr, strata, [], name="frame", min_units=1)
        pf = Frame(pilot, "pilot")
        plabels, pcounts, S2p, Y, _ = stratum_moments(pf, strata, ys, name="pilot", min_units=2, clamp=clamp)
        missing = [lab for lab in labels if lab not in plabels]
        if missing:
            raise ValueError(f"pilot strata column {strata!r} has no units in stratum "
                             f"{missing[0]!r} (every stratum of the frame needs at least 2 pilot units)")
        extra = [lab for lab in plabels if lab not in labels]
        if extra:
            raise ValueError(f"pilot strata column {strata!r} has stratum {extra[0]!r}, which the frame does not have")
        S2 = S2p[[plabels.index(lab) for lab in labels]]
        design_values = Y
        src = "pilot"
    from .privacy.mechanisms import get_mechanism
    mech = get_mechanism(options.get("mechanism", "laplace"))    # raises naming the field, as the design would
    if mech.integer_data:
        for j, c in enumerate(ys):
            check_integer_values(design_values[:, j], c, mech.name, where=src)
    if clamp is not None:
        lo, hi = clamp
        for j, c in enumerate(ys):
            col = design_values[:, j]
            if np.any(col < lo) or np.any(col > hi):
                import warnings
                warnings.warn(f"{src} column {c!r} has values outside value_range ({lo:g}, {hi:g}); the release "
                              "clamps responses to that range, which biases the estimate (S_h^2 is that of the "
                              "clamped values, as released)", stacklevel=3)
    if "labels" in options:
        raise TypeError("labels come from the strata column in from_frame; do not pass labels=")
    if isinstance(options.get("domains"), str):
        options["domains"] = _stratum_column(fr, strata, labels, options["domains"], "domains")
    options.setdefault("variables", ys)
    sigma2 = S2[:, 0] if len(ys) == 1 else S2
    model = StratifiedDesign(N=N, sigma2=sigma2, total=total, epsilon=epsilon, labels=labels, **options)
    # what the frame columns were: the release reads the same columns (dpopt release / release_stratified)
    model.frame_columns = {"strata": str(strata), "y": ys if len(ys) > 1 else ys[0], "sigma2_from": src,
                           "sigma2_clamped_to": clamp}
    return model


# ---------------------------------------------------------------------------------- hierarchies
def hierarchy_from_frame(frame, levels, *, count: str | None = None, root: str | None = "Total", **kw):
    """A :class:`~dpopt.models.tree.Hierarchy` of counts by nested geography columns.

    ``levels`` lists the columns from the coarsest down (e.g. ``["state", "county", "tract"]``). Each row is
    one unit, or carries its count in ``count``. A node is identified by its whole path, so two counties of
    the same name in different states are different nodes; its label is its own value (the path joined
    with "/" when the value repeats within the level). ``root`` adds a root node over the first level
    (None: the first level is the top). Rows whose value of a column nests under two different parents
    cannot happen by construction (the path is the node); NaN or empty values raise naming the column.
    """
    from .models.tree import Hierarchy

    fr = Frame(frame, "frame")
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
    return Hierarchy(counts, parents, ids, **kw)


# ---------------------------------------------------------------------------------- results back out
def to_pandas(columns: dict, index=None):
    """A pandas DataFrame of ``columns`` (pandas is optional: a clear error says how to get it)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("to_frame() needs pandas: pip install pandas") from None
    return pd.DataFrame(columns, index=index)


def design_table(model, n) -> dict:
    """Per stratum of a stratified design at integer design ``n``: label, N, n, rate, S², nominal ε,
    noise standard deviation, and the sampling and noise parts of the objective (a dict of columns;
    ``to_pandas(design_table(...))`` for a DataFrame)."""
    n = np.asarray(n, dtype=np.int64)
    b = model.variance_breakdown(n)
    nb = model.nominal_budgets(n)
    out = {"stratum": list(model.labels), "N": model.N.copy(), "n": n, "rate": nb["rate"],
           "epsilon_nominal": nb["epsilon"]}
    if model.J == 1:
        out["sigma2"] = model.sigma2.copy()
        out["noise_sd"] = nb["noise_sd"]
    else:
        for j, v in enumerate(model.variables):
            out[f"sigma2_{v}"] = model.sigma2_matrix[:, j].copy()
            out[f"noise_sd_{v}"] = nb["noise_sd"][:, j]
    out["sampling"] = b["sampling"]
    out["noise"] = b["noise"]
    return out
