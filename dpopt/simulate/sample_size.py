"""Monte Carlo of released statistics over repeated simple random samples (Hu, Drechsler & Kim §4).

For each target ε and sampling rate n/N, ``draws`` SRS samples without replacement are drawn from the
population; the statistic of each sample is released with the nominal budget
(ε_n, δ_n) = (log1p((N/n)·expm1(ε)), N·δ/n) and compared with the population value:

* ``statistic="mean"``: sample mean + Laplace(R/(n·ε_n)) (global sensitivity R/n);
* ``statistic="median"``: sample median + Laplace(2·SS/ε_n), SS the smooth sensitivity of the median
  (paper eq. 4) with β = ε_n / (2·log(2/δ_n)).

The population release (rate 1) uses (ε, δ) directly. Two MSE estimates are returned: ``mse`` with
the noise drawn, and ``mse_rb`` (Rao–Blackwellised: squared sampling error + the exact noise variance
of each draw), which has much smaller Monte Carlo error and is used for ``gain``. The median used is
the order statistic y_(⌈n/2⌉) (the median for odd n).

The smooth sensitivity of all draws is computed at once by a monotone-argmax divide and conquer
(O(n log n) per sample, vectorised over draws); :func:`smooth_sensitivity_median` exposes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _validate as V
from ..privacy.amplification import nominal_epsilon
from ..privacy.mechanisms import laplace_variance
from ..progress import progress_bar

STATISTICS = ("mean", "median")
#: largest |value| of a population: squared errors and noise variances (up to (2·range/ε)², ε ≥ 1e-6)
#: then stay inside double precision
VALUE_MAX = 1e100


def check_population(population, name: str = "population") -> np.ndarray:
    """Sorted finite values, at least 2, |value| ≤ VALUE_MAX (raises ValueError/TypeError naming ``name``)."""
    pop = np.sort(V.vector(name, population))
    if pop.size < 2:
        raise ValueError(f"{name} must hold at least 2 values, got {pop.size}")
    big = float(np.max(np.abs(pop)))
    if big > VALUE_MAX:
        raise ValueError(f"{name} values must lie within ±{VALUE_MAX:g} (squared errors would overflow "
                         f"double precision), got |value| up to {big:g}; rescale the data")
    spread = float(pop[-1] - pop[0])
    if 0 < spread < 1 / VALUE_MAX:
        raise ValueError(f"{name} values span {spread:g} < {1 / VALUE_MAX:g} (their squared errors would "
                         "underflow double precision); rescale the data")
    return pop


def check_value_range(value) -> float:
    """The known range R of the values, in [1e-100, 2e100] (outside it the MSEs leave double precision)."""
    R = V.positive("value_range", value)
    if not 1 / VALUE_MAX <= R <= 2 * VALUE_MAX:
        raise ValueError(f"value_range must be in [{1 / VALUE_MAX:g}, {2 * VALUE_MAX:g}], got {R:g}")
    return R


# ---------------------------------------------------------------------------------- populations
def _seed(seed):
    """A seed for numpy's default_rng: None, an integer >= 0, or a Generator/SeedSequence."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return seed
    return V.integer("seed", seed, minimum=0)


def lognormal_population(N: int = 10001, mu: float = 5.0, sigma: float = 0.5, seed=0) -> np.ndarray:
    """The paper's §4.3 population: N draws from log-normal(μ, σ)."""
    N = V.integer("N", N, minimum=1, maximum=10**8)
    mu, sigma = V.real("mu", mu), V.positive("sigma", sigma)
    with np.errstate(over="ignore"):
        pop = np.random.default_rng(_seed(seed)).lognormal(mu, sigma, N)
    if not np.all(np.isfinite(pop)) or np.max(pop) > VALUE_MAX:
        raise ValueError(f"mu = {mu:g} and sigma = {sigma:g} give values beyond {VALUE_MAX:g}; use smaller ones")
    return pop


def beta_mixture_population(N: int = 10001, a: float = 2.0, b: float = 10.0, seed=0) -> np.ndarray:
    """The paper's Appendix B population: (N+1)/2 draws of Beta(a, b)/2 and (N−1)/2 of Beta(a, b)+1,
    rescaled to [0, 1] (the median sits at the top of the first component, in a density gap)."""
    N = V.integer("N", N, minimum=3, maximum=10**8)
    if N % 2 == 0:
        raise ValueError("N must be odd (the paper's construction)")
    a, b = V.positive("a", a), V.positive("b", b)
    rng = np.random.default_rng(_seed(seed))
    y = np.concatenate([rng.beta(a, b, (N + 1) // 2) / 2, rng.beta(a, b, (N - 1) // 2) + 1])
    if not np.all(np.isfinite(y)) or y.max() == y.min():
        raise ValueError(f"a = {a:g} and b = {b:g} give a degenerate Beta sample; use larger values")
    return (y - y.min()) / (y.max() - y.min())


# ---------------------------------------------------------------------------------- smooth sensitivity
def smooth_sensitivity_median(sorted_values, beta, lower, upper) -> np.ndarray:
    """Smooth sensitivity of the median (paper eq. 4, Nissim et al.) of each row of ``sorted_values``.

    ``SS = max_{k≥0} e^{−kβ} max_{t=0..k+1} (y_{m+t} − y_{m+t−k−1})``, m = ⌈n/2⌉ (1-based), with
    y_i = ``lower`` for i < 1 and ``upper`` for i > n. Equivalently the maximum over i ≤ m ≤ j of
    e^{−(j−i−1)β}(y_j − y_i); for fixed j the best i maximises the line P_i·y_j − P_i·y_i with
    slopes P_i = e^{(i−m)β} increasing in i, so the best i is non-decreasing in j and a divide and
    conquer over j (vectorised over rows and levels, in log-space) finds it with O(n log n) work.

    sorted_values : (B, n) or (n,) array, each row sorted ascending; beta : scalar or (B,) > 0.
    """
    Y = V._as_float_array("sorted_values", sorted_values)
    one = Y.ndim == 1
    if Y.ndim not in (1, 2) or Y.shape[-1] == 0 or Y.size == 0:
        raise ValueError(f"sorted_values must be a non-empty (n,) or (B, n) array, got shape {Y.shape}")
    Y = np.atleast_2d(Y)
    B, n = Y.shape
    beta = V._as_float_array("beta", beta)
    try:
        beta = np.broadcast_to(beta, (B,)).astype(float)
    except ValueError:
        raise ValueError(f"beta must be a scalar or one value per row ({B}), got shape {beta.shape}") from None
    if np.any(beta <= 0) or not np.all(np.isfinite(beta)):
        raise ValueError("beta must be finite and > 0")
    lo, hi = V.real("lower", lower), V.real("upper", upper)
    if not np.all(np.isfinite(Y)) or np.any(np.diff(Y, axis=1) < 0):
        raise ValueError("sorted_values must be finite and sorted ascending along each row")
    if np.any(Y[:, 0] < lo) or np.any(Y[:, -1] > hi):
        raise ValueError("values must lie within [lower, upper]")
    Z = np.empty((B, n + 2))
    Z[:, 0], Z[:, -1], Z[:, 1:-1] = lo, hi, Y
    m = (n + 1) // 2
    R = n + 2 - m                       # rows j = m .. n+1
    # segments: (row b, r_lo, r_hi, c_lo, c_hi); columns i = 0 .. m
    sb = np.arange(B)
    rlo = np.zeros(B, dtype=np.int64)
    rhi = np.full(B, R - 1, dtype=np.int64)
    clo = np.zeros(B, dtype=np.int64)
    chi = np.full(B, m, dtype=np.int64)
    env = np.full((B, R), -np.inf)
    while sb.size:
        mid = (rlo + rhi) // 2
        lens = chi - clo + 1
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        fb = np.repeat(sb, lens)
        fcol = np.repeat(clo, lens) + (np.arange(lens.sum()) - np.repeat(starts, lens))
        frow = np.repeat(mid, lens) + m          # j index
        with np.errstate(divide="ignore"):
            vals = (fcol - m) * beta[fb] + np.log(Z[fb, frow] - Z[fb, fcol])
        smax = np.maximum.reduceat(vals, starts)
        big = np.iinfo(np.int64).max
        amax = np.minimum.reduceat(np.where(vals == np.repeat(smax, lens), fcol, big), starts)
        env[sb, mid] = smax
        left = mid > rlo
        right = mid < rhi
        sb, rlo, rhi, clo, chi = (np.concatenate((sb[left], sb[right])),
                                  np.concatenate((rlo[left], mid[right] + 1)),
                                  np.concatenate((mid[left] - 1, rhi[right])),
                                  np.concatenate((clo[left], amax[right])),
                                  np.concatenate((amax[left], chi[right])))
    j = np.arange(m, n + 2)
    total = env - (j - m)[None, :] * beta[:, None] + beta[:, None]
    out = np.exp(np.max(total, axis=1))
    return out[0] if one else out


def smooth_beta(epsilon, delta):
    """β = ε / (2·log(2/δ)) (paper eq. 4), vectorised; needs 0 < δ < 1."""
    e = np.asarray(epsilon, dtype=float)
    d = np.asarray(delta, dtype=float)
    if np.any(d <= 0) or np.any(d >= 1):
        raise ValueError("delta must be in (0, 1) for the smooth-sensitivity median")
    return e / (2.0 * np.log(2.0 / d))


# ---------------------------------------------------------------------------------- simulation
@dataclass
class SimulationResult:
    """MSE of the released statistic versus sampling rate (rows: ε, columns: rates)."""

    statistic: str
    epsilons: np.ndarray
    rates: np.ndarray
    n: np.ndarray
    N: int
    delta: float
    draws: int
    mse: np.ndarray                 # with the noise drawn
    mse_rb: np.ndarray              # Rao–Blackwellised (noise variance integrated exactly)
    se_rb: np.ndarray               # Monte Carlo standard error of mse_rb
    mse_population: np.ndarray      # exact MSE of the population release (noise only), per ε
    mse_population_mc: np.ndarray   # the same, by simulation
    sensitivity_ratio: np.ndarray   # median over draws of Δ_sample/Δ_population (Fig. 6 / 10)
    seed: Any = None
    extra: dict = field(default_factory=dict)

    @property
    def gain(self) -> np.ndarray:
        """MSE_population / MSE_rb(rate): > 1 means sampling improved accuracy."""
        return self.mse_population[:, None] / self.mse_rb

    def best(self) -> list[dict]:
        """Per ε: the best rate and its gain (rate 1 when no sampled rate beats the population)."""
        out = []
        for i, e in enumerate(self.epsilons):
            j = int(np.argmax(self.gain[i]))
            g = float(self.gain[i, j])
            out.append({"epsilon": float(e), "rate": float(self.rates[j]) if g > 1 else 1.0,
                        "gain": max(g, 1.0), "helps": g > 1})
        return out

    def to_dict(self) -> dict:
        d = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        d["gain"] = self.gain.tolist()
        return d


def simulate_sample_size(population, epsilons, rates, statistic: str = "median", delta=None, draws: int = 1000,
                         value_range=None, bounds=None, seed=0, progress: bool = True,
                         max_batch_elements: int = 4_000_000) -> SimulationResult:
    """MSE of the DP release from SRS samples at each (ε, rate), and of the population release.

    population : 1-D values; epsilons : target ε values; rates : sampling rates in (0, 1]
    statistic : ``"mean"`` (Laplace, global sensitivity R/n) or ``"median"`` (smooth sensitivity)
    delta : target δ for the median (default 1/(2N), as in the paper)
    value_range : R for the mean (default max − min of the population)
    bounds : (lower, upper) padding of the smooth sensitivity (default population min and max)
    seed : anything ``numpy.random.default_rng`` accepts; progress : progress bar on stderr
    """
    pop = check_population(population)
    N = pop.size
    stat = V.choice("statistic", statistic, STATISTICS)
    eps = V.vector("epsilons", epsilons, scalar_ok=True)
    for e in eps:
        V.epsilon("epsilons", float(e))
    r = V.positive_vector("rates", rates, scalar_ok=True)
    if np.any(r > 1):
        raise ValueError("rates must be in (0, 1]")
    draws = V.integer("draws", draws, minimum=1)
    progress = V.flag("progress", progress)
    max_batch_elements = V.integer("max_batch_elements", max_batch_elements, minimum=1)
    n = np.clip(np.round(r * N), 1, N).astype(np.int64)
    rng = np.random.default_rng(seed)
    E, Rn = eps.size, r.size
    mse, mse_rb, se_rb, ratio = (np.empty((E, Rn)) for _ in range(4))
    pop_exact, pop_mc = np.empty(E), np.empty(E)
    with progress_bar(E * (Rn + 1), "simulate", progress) as prog:   # closed on an interrupt too
        if stat == "mean":
            R = float(pop[-1] - pop[0]) if value_range is None else check_value_range(value_range)
            if R == 0:
                raise ValueError("population is constant (max = min), so the mean's sensitivity R/n is 0 and every "
                                 "release is exact; give value_range (the known range of the values) to study it")
            theta = float(np.mean(pop))
            d = 0.0 if delta is None else V.probability("delta", delta)
        else:
            theta = float(pop[(N + 1) // 2 - 1])
            d = 1.0 / (2 * N) if delta is None else V.probability("delta", delta)
            if d <= 0:
                raise ValueError("the smooth-sensitivity median needs delta > 0")
            if bounds is None:
                lo, hi = float(pop[0]), float(pop[-1])
            else:
                b = V.vector("bounds", bounds, length=2)
                lo, hi = float(b[0]), float(b[1])
            if lo > pop[0] or hi < pop[-1]:
                raise ValueError("bounds must contain every population value")
            if hi == lo:
                raise ValueError("population is constant and bounds = (min, max) has zero width: the median's smooth "
                                 "sensitivity is 0 and every release is exact; give wider bounds to study it")
            if max(abs(lo), abs(hi)) > VALUE_MAX:
                raise ValueError(f"bounds must lie within ±{VALUE_MAX:g}, got {(lo, hi)}")
        for ie, e in enumerate(eps):
            # population release
            # Laplace noise of scale Δ/ε: Δ = R/N for the mean, twice the smooth sensitivity for the median
            if stat == "mean":
                ss_pop = R / N
                sens_pop = ss_pop
            else:
                ss_pop = float(smooth_sensitivity_median(pop, smooth_beta(e, d), lo, hi))
                sens_pop = 2.0 * ss_pop
            b_pop = sens_pop / e
            pop_exact[ie] = laplace_variance(e, sens_pop)[0]
            pop_mc[ie] = float(np.mean(rng.laplace(0.0, b_pop, draws) ** 2))
            prog.update()
            for jr, nn in enumerate(n):
                nn = int(nn)
                e_n = float(nominal_epsilon(e, nn / N))
                d_n = N * d / nn
                if stat == "median" and d_n >= 1:
                    raise ValueError(f"delta_n = N*delta/n = {d_n:g} >= 1 at n = {nn}; lower delta")
                batch = max(1, min(draws, max_batch_elements // max(nn, 1)))
                err2, noise_var, released2, sens = [], [], [], []
                for start in range(0, draws, batch):
                    B = min(batch, draws - start)
                    if nn == N:
                        Y = np.broadcast_to(pop, (B, N))
                    else:
                        idx = np.sort(np.stack([rng.choice(N, nn, replace=False) for _ in range(B)]), axis=1)
                        Y = pop[idx]
                    if stat == "mean":
                        est = Y.mean(axis=1)
                        s = np.full(B, R / nn)
                        sens_n = s
                    else:
                        est = Y[:, (nn + 1) // 2 - 1]
                        s = smooth_sensitivity_median(Y, smooth_beta(e_n, d_n), lo, hi)
                        sens_n = 2.0 * s
                    noise = rng.laplace(0.0, 1.0, B) * (sens_n / e_n)
                    err2.append((est - theta) ** 2)
                    noise_var.append(laplace_variance(e_n, sens_n)[0])
                    released2.append((est + noise - theta) ** 2)
                    sens.append(s / ss_pop)
                err2, noise_var = np.concatenate(err2), np.concatenate(noise_var)
                rb = err2 + noise_var
                mse[ie, jr] = float(np.mean(np.concatenate(released2)))
                mse_rb[ie, jr] = float(np.mean(rb))
                scale = float(np.max(np.abs(rb))) or 1.0      # rb up to ~1e212: its square would overflow
                se_rb[ie, jr] = float(np.std(rb / scale, ddof=1) * scale / math.sqrt(draws)) if draws > 1 else float("nan")
                ratio[ie, jr] = float(np.median(np.concatenate(sens)))
                prog.update()
    return SimulationResult(statistic=stat, epsilons=eps, rates=r, n=n, N=N, delta=d, draws=draws, mse=mse,
                            mse_rb=mse_rb, se_rb=se_rb, mse_population=pop_exact, mse_population_mc=pop_mc,
                            sensitivity_ratio=ratio, seed=seed)
