"""Model-file loaders of the sample-size families: ``sample_size`` (the analytic program) and
``sample_size_study`` (a population, generated or read from a CSV column, simulated at several rates)."""

from __future__ import annotations

import numpy as np

from .. import _validate as V
from ..models.sample_size import SampleSizeProgram
from ..models.sample_size_study import SampleSizeStudy
from .modelfile import ModelFileError, register_family, resolve_path, take


# ---------------------------------------------------------------------------------- sample_size


@register_family("sample_size")
def _load_sample_size(data: dict, base) -> SampleSizeProgram:
    """``family = "sample_size"``: N, S2, epsilon, [delta], sensitivity ("mean" or a number), [value_range],
    [mechanism] ("laplace" or "gaussian")."""
    take(data, {"name", "N", "S2", "epsilon", "delta", "sensitivity", "value_range", "mechanism"},
         {"N", "S2", "epsilon"})
    sens = data.get("sensitivity", "mean")
    if not isinstance(sens, (str, int, float)) or isinstance(sens, bool):
        raise ModelFileError("sensitivity must be 'mean' or a positive number in a model file")
    return SampleSizeProgram(N=data["N"], S2=data["S2"], epsilon=data["epsilon"], delta=data.get("delta", 0.0),
                             sensitivity=sens, value_range=data.get("value_range"), name=data.get("name", ""),
                             mechanism=data.get("mechanism", "laplace"))


# ---------------------------------------------------------------------------------- sample_size_study

_POPULATION_KEYS = {"kind", "N", "mu", "sigma", "a", "b", "seed", "values", "csv", "column"}
#: largest generated population (lognormal, beta-mixture): 10⁸ values are 800 MB, and every rate is simulated
MAX_GENERATED_N = 10**8


def _generated_size(table: dict, kind: str) -> int:
    N = table["N"]
    if isinstance(N, bool) or not isinstance(N, int) or N < 1:
        raise ModelFileError(f"[population] N must be a positive integer (the population size), got {N!r}")
    if N > MAX_GENERATED_N:
        raise ModelFileError(f"[population] N = {N} is above {MAX_GENERATED_N:.0e}, the largest {kind} population "
                             "dpopt generates (it is held in memory and simulated at every rate)")
    return N


def read_csv_column(path, column=None, key: str = "[population] csv") -> np.ndarray:
    """The numbers of one CSV column, read with the csv module (quoted fields, commas and '#' inside them).

    ``column``: a header name; without it the file must have one column (a first row that is not a number
    is taken as its header). Errors name ``key``, the row and the column, and never quote the file."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if r and any(f.strip() for f in r)]
    except UnicodeDecodeError:
        raise ModelFileError(f"{key}: not a CSV text file (not UTF-8)") from None
    except csv.Error as exc:
        raise ModelFileError(f"{key}: not a valid CSV file ({exc})") from None
    except OSError as exc:
        raise ModelFileError(f"{key}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if not rows:
        raise ModelFileError(f"{key}: the file is empty")

    from ..frames import parse_number as number     # ASCII decimals only, as for every frame and table

    if column is not None:
        if not isinstance(column, str):
            raise ModelFileError(f"{key}: column must be a header name (a string), got {type(column).__name__}")
        header = [h.strip() for h in rows[0]]
        if column not in header:
            raise ModelFileError(f"{key}: no column {column!r} in the header ({len(header)} column(s))")
        j, body, first = header.index(column), rows[1:], 2
    else:
        if max(len(r) for r in rows) != 1:
            raise ModelFileError(f"{key}: the file has several columns; name one with column = \"...\"")
        j = 0
        body, first = (rows[1:], 2) if number(rows[0][0]) is None else (rows, 1)
    values = []
    for i, r in enumerate(body):
        v = number(r[j]) if j < len(r) else None
        if v is None:
            raise ModelFileError(f"{key}: row {i + first}, column {j + 1} is not a number")
        values.append(v)
    if not values:
        raise ModelFileError(f"{key}: the file has no data rows")
    return np.asarray(values, dtype=float)


def load_population(table: dict, base) -> np.ndarray:
    """A ``[population]`` table: ``kind = "lognormal"`` (N, mu, sigma, seed), ``"beta-mixture"`` (N, a, b,
    seed), ``"values"`` (values = [...]) or ``"csv"`` (csv = a file under the model file's folder, optional
    column; see :func:`dpopt.io.modelfile.resolve_path`)."""
    from ..simulate.sample_size import beta_mixture_population, lognormal_population

    if not isinstance(table, dict):
        raise ModelFileError("[population] must be a table")
    take(table, _POPULATION_KEYS, {"kind"}, where="[population]")
    kind = table["kind"]
    seed = table.get("seed", 0)
    if kind == "lognormal":
        take(table, {"kind", "N", "mu", "sigma", "seed"}, {"N"}, where="[population] (lognormal)")
        return lognormal_population(_generated_size(table, kind), table.get("mu", 5.0), table.get("sigma", 0.5), seed)
    if kind == "beta-mixture":
        take(table, {"kind", "N", "a", "b", "seed"}, {"N"}, where="[population] (beta-mixture)")
        return beta_mixture_population(_generated_size(table, kind), table.get("a", 2.0), table.get("b", 10.0), seed)
    if kind == "values":
        take(table, {"kind", "values"}, {"values"}, where="[population] (values)")
        return V.vector("population.values", table["values"])
    if kind == "csv":
        take(table, {"kind", "csv", "column"}, {"csv"}, where="[population] (csv)")
        path = resolve_path(base, table["csv"], "[population] csv")
        return V.vector("population (csv)", read_csv_column(path, table.get("column")))
    raise ModelFileError(f"[population] kind must be lognormal, beta-mixture, values or csv, got {kind!r}")


@register_family("sample_size_study")
def _load_study(data: dict, base) -> SampleSizeStudy:
    """``family = "sample_size_study"``: epsilon, [statistic, delta, rates, draws, seed, value_range], [population]."""
    take(data, {"name", "epsilon", "statistic", "delta", "rates", "draws", "seed", "value_range", "population"},
         {"epsilon", "population"})
    opts = {k: data[k] for k in ("statistic", "delta", "rates", "draws", "seed", "value_range") if k in data}
    return SampleSizeStudy(load_population(data["population"], base), data["epsilon"], name=data.get("name", ""),
                           **opts)
