"""Data frames in and out: reading a sampling frame column by column, tables back out.

A *frame* is a pandas DataFrame, a polars DataFrame, a mapping ``{column: sequence}`` or (for
:func:`read_csv`) a CSV file. Neither pandas nor polars is required: frames are read column by
column into numpy arrays, and every error names the column (and the stratum or row) at fault.

* :class:`Frame`, :func:`read_csv`, :func:`parse_number`, :func:`is_missing`: one reading of columns,
  numbers and missing values; :func:`stratum_moments`: N_h and the unbiased (ddof = 1) S_h² of the study
  variable(s) per stratum. The models build on these (``StratifiedDesign.from_frame``,
  ``Hierarchy.from_frame``); this module imports no model.
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

__all__ = ["Frame", "read_csv", "is_missing", "parse_number", "stratum_moments", "check_integer_values",
           "design_table", "to_pandas"]


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
        col = self._data[key]
        if isinstance(col, np.ndarray) and col.ndim == 1:     # numbers as they are, text as Python objects
            return col if col.dtype.kind in "biuf" else col.astype(object)
        return np.asarray(list(col), dtype=object)

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
        if arr.dtype.kind in "biuf":
            return _numeric_labels(self.name, arr, column, role)
        items = arr.tolist()
        first: dict = {}
        seen = np.fromiter((first.setdefault(v, len(first)) for v in items), dtype=np.int64, count=len(items))
        values = list(first)                                # first-appearance order, then sorted when possible
        # every row's value is one of these (itself, or equal to it), so a missing row shows among them
        missing = np.array([is_missing(v) for v in values], dtype=bool)
        if missing.any():
            i = int(np.argmax(missing[seen]))
            raise ValueError(f"{self.name} {role} column {column!r} has a missing value at row {i}")
        try:
            values = sorted(values)
        except TypeError:
            pass
        names = [_label(v) for v in values]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"{self.name} {role} column {column!r}: two different values print as {dup!r}")
        rank = np.empty(len(values), dtype=np.int64)      # first-appearance number -> sorted position
        position = {v: j for j, v in enumerate(values)}
        for a, v in enumerate(first):
            rank[a] = position[v]
        return names, rank[seen]


def _numeric_labels(name: str, arr: np.ndarray, column, role: str) -> tuple[list[str], np.ndarray]:
    """:meth:`Frame.labels` of a numeric column by one numpy sort: the same sorted values (numbers sort alike in
    numpy and Python), names and codes; NaN is the missing value."""
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            raise ValueError(f"{name} {role} column {column!r} has a missing value at row {int(np.argmax(nan))}")
    values, codes = np.unique(arr, return_inverse=True)
    names = [_label(v) for v in values.tolist()]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"{name} {role} column {column!r}: two different values print as {dup!r}")
    return names, codes.reshape(-1).astype(np.int64)


def _label(v) -> str:
    """A stratum value as a label: integral floats print without '.0' (pandas turns int columns with
    gaps into floats)."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (np.integer,)):
        return str(int(v))
    return str(v)


# ---------------------------------------------------------------------------------- strata
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
