"""Sample size versus privacy for statistics without a closed-form variance (Hu, Drechsler & Kim §4.3).

The median released with smooth sensitivity (paper eq. 4) is data-dependent: its MSE at a sampling rate
has no formula, so dpopt offers it through simulation (docs/sample_size.md). :class:`SampleSizeStudy`
declares the question "which sampling rate of this population minimises the MSE of the released statistic at target (ε, δ)?"
over a grid of rates; its default backend ``monte-carlo`` answers it by repeated SRS draws (see
:mod:`dpopt.simulate.sample_size`). The answer is an *estimate* on a grid, with Monte Carlo standard
errors, so it is never reported as proven optimal.

The population must be public or previously released data (or a synthetic stand-in), exactly as the
counts of the hierarchy model: the design may not peek at the confidential values it protects.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as V
from ..result import Solution
from .base import Model

STATISTICS = ("mean", "median")


class SampleSizeStudy(Model):
    """MSE of a DP statistic released from an SRS, versus the sampling rate, by Monte Carlo.

    population : 1-D values (≥ 2); epsilon : target ε > 0; rates : sampling rates in (0, 1)
    statistic : ``"median"`` (smooth sensitivity, δ > 0) or ``"mean"`` (Laplace, sensitivity R/n)
    delta : target δ (default 1/(2N) for the median, as in the paper; 0 for the mean)
    draws : samples per rate; seed : random seed; value_range : R for the mean (default max − min)
    """

    default_backend = "monte-carlo"

    def __init__(self, population, epsilon, rates=(0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
                 statistic: str = "median", delta=None, draws: int = 1000, seed: int = 0,
                 value_range=None, name: str = ""):
        from ..simulate.sample_size import check_population, check_value_range

        self.population = check_population(population)
        self.N = int(self.population.size)
        self.epsilon = V.epsilon("epsilon", epsilon)
        self.rates = np.unique(V.positive_vector("rates", rates, scalar_ok=True))
        if np.any(self.rates >= 1):
            raise ValueError(f"rates must be in (0, 1) (rate 1, the population release, is always compared), "
                             f"got {rates!r}")
        self.statistic = V.choice("statistic", statistic, STATISTICS)
        if delta is None:
            self.delta = 1.0 / (2 * self.N) if self.statistic == "median" else 0.0
        else:
            self.delta = V.probability("delta", delta)
        if self.statistic == "median" and self.delta <= 0:
            raise ValueError("delta must be > 0 for the smooth-sensitivity median")
        self.draws = V.integer("draws", draws, minimum=2, maximum=10**8)
        self.seed = V.integer("seed", seed, minimum=0)
        self.value_range = None if value_range is None else check_value_range(value_range)
        if self.value_range is not None and self.statistic != "mean":
            raise ValueError("value_range is only used with statistic='mean'")
        if self.population[0] == self.population[-1] and self.value_range is None:
            raise ValueError("population is constant (every value equal): the statistic's sensitivity is 0 and "
                             "every release is exact, so there is nothing to study"
                             + (" (give value_range, the known range of the values, to study the mean)"
                                if self.statistic == "mean" else ""))
        self.name = str(name)

    def __repr__(self) -> str:
        return (f"SampleSizeStudy(N={self.N}, statistic={self.statistic!r}, epsilon={self.epsilon:g}, "
                f"delta={self.delta:g}, rates={len(self.rates)}, draws={self.draws})")

    def report(self, solution: Solution) -> str:
        from ..report import header, table
        lines = header(self, solution)
        d = solution.details
        if "mse" not in d:
            return "\n".join(lines)
        rows = [[r, n, m, s, g] for r, n, m, s, g in zip(d["rates"], d["n_grid"], d["mse"], d["se"], d["gain"])]
        rows.append([1.0, self.N, d["mse_population"], 0.0, 1.0])
        lines += ["", table(["rate", "n", "MSE", "MC s.e.", "gain"], rows, ["g", "d", ".6g", ".2g", ".4g"]), ""]
        lines.append(f"best rate           : {d['rate']:g} (n = {solution.n})")
        lines.append(f"sampling helps      : {'yes' if d['helps'] else 'no (release the population statistic)'}"
                     + ("" if not d["helps"] else f"; gain {d['best_gain']:.4g}, "
                        f"{d['z_score']:.1f} standard errors from no gain"))
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- model files
from ..modelfile import ModelFileError, register_family, resolve_path, take  # noqa: E402

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

    def number(text):
        try:
            return float(text)
        except ValueError:
            return None

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
    column; see :func:`dpopt.modelfile.resolve_path`)."""
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
