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

