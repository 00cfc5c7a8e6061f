"""``monte-carlo`` backend for SampleSizeStudy: repeated SRS draws at each rate of the grid.

The MSE per rate is the Rao–Blackwellised estimate of :func:`dpopt.simulate.sample_size.simulate_sample_size`
(squared sampling error plus the exact noise variance of each draw) with its standard error; the
population release (rate 1) has an exact MSE. The answer is the grid point of least estimated MSE,
status ``feasible``: it is an estimate on a grid, not a proven optimum.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _validate as V
from ...models.sample_size_study import SampleSizeStudy
from ...registry import register
from ...result import Solution, Status
from ...simulate.sample_size import simulate_sample_size


@register("monte-carlo", SampleSizeStudy, "solve",
          "Monte Carlo over SRS draws on a grid of rates (an estimate with standard errors, never 'optimal')")
def solve_study(model: SampleSizeStudy, draws: int | None = None, seed: int | None = None,
                progress: bool = False) -> Solution:
    """Options: ``draws`` (SRS samples per rate, ≥ 2; default the model's), ``seed`` (integer ≥ 0),
    ``progress`` (a progress bar on stderr)."""
    draws = None if draws is None else V.count("draws", draws, minimum=2, maximum=10**9)
    seed = None if seed is None else V.count("seed", seed, minimum=0)
    progress = V.option(V.flag, "progress", progress)
    res = simulate_sample_size(model.population, [model.epsilon], model.rates, statistic=model.statistic,
                               delta=model.delta, draws=model.draws if draws is None else draws,
                               value_range=model.value_range, seed=model.seed if seed is None else seed,
                               progress=progress)
    mse, se = res.mse_rb[0], res.se_rb[0]
    pop = float(res.mse_population[0])
    j = int(np.argmin(mse))
    helps = bool(mse[j] < pop)
    n_best = int(res.n[j]) if helps else model.N
    best = float(mse[j]) if helps else pop
    z = (pop - float(mse[j])) / float(se[j]) if se[j] > 0 else math.inf
    # "rate" is the grid rate the user asked for; the sample drawn is round(rate·N), whose own fraction
    # (what the amplification uses) is "sample_fraction"
    details = {"rate": float(res.rates[j]) if helps else 1.0, "sample_fraction": n_best / model.N,
               "rates": res.rates, "n_grid": res.n, "mse": mse, "se": se,
               "mse_population": pop, "gain": pop / mse, "best_gain": pop / best, "helps": helps,
               "z_score": z, "draws": res.draws, "epsilon_n": None, "delta": res.delta}
    if helps:
        from ...privacy.amplification import nominal_epsilon
        details["epsilon_n"] = float(nominal_epsilon(model.epsilon, n_best / model.N))
    msg = (f"Monte Carlo estimate ({res.draws} draws per rate): least estimated MSE on a grid of "
           f"{len(res.rates)} rates and the population release; not a proven optimum")
    if helps and z < 2:
        msg += f"; the gain over the population release is within {z:.1f} standard errors (not significant)"
    return Solution(status=Status.FEASIBLE, objective=best, n=n_best, variance=best,
                    backend="monte-carlo", solver="simulate_sample_size", model="SampleSizeStudy",
                    message=msg, details=details)
