"""Release simulation for hierarchies (docs/hierarchy.md): Laplace noise, truncation at 0, top-down consistency.

``release`` draws one release with numpy's floating-point Laplace sampler, for Monte Carlo only: a real
release goes through OpenDP (:func:`dpopt.release.release_hierarchy`). ``simulate_hierarchy`` repeats it (seeded,
in batches, optional progress bar on stderr) and estimates per level the sums over nodes of bias² and
variance, with standard errors, so they can be compared with the closed forms (no closed form exists after
the consistency step).
"""

from __future__ import annotations

import sys

import numpy as np

from .. import _validate as V
from .._deprecated import renamed
from ..models.tree import Hierarchy


def _project_groups(vals: np.ndarray, group: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group of ``vals`` onto {v ≥ 0, Σ v = target[g]}: v = max(0, x − θ_g).

    ``group`` holds group ids 0..G−1 (any order); vectorised with one sort."""
    order = np.lexsort((-vals, group))
    x = vals[order]
    g = group[order]
    G = target.size
    starts = np.searchsorted(g, np.arange(G))
    cs = np.cumsum(x)
    base = np.concatenate([[0.0], cs])[starts][g]             # cumsum before the group
    rank = np.arange(x.size) - starts[g] + 1                  # 1..k within the group
    theta_k = (cs - base - target[g]) / rank
    ok = x - theta_k > 0
    # ρ = last rank with x_(ρ) > θ_ρ (the sorted-simplex rule); groups always have ρ ≥ 1 when target > 0
    rho = np.zeros(G, dtype=np.int64)
    np.maximum.at(rho, g[ok], rank[ok])
    rho = np.maximum(rho, 1)
    idx = starts + rho - 1
    theta = theta_k[idx]
    out = np.empty_like(vals)
    out[order] = np.maximum(0.0, x - theta[g])
    zero = target <= 0
    if np.any(zero):
        out[zero[group]] = 0.0
    return out


def release(hierarchy: Hierarchy, epsilon_per_level, rng=None, consistency: bool = True,
            sensitivity: float = 1.0, trials: int | None = None):
    """One (or ``trials``) simulated release(s) for Monte Carlo (numpy noise; a real release uses
    :func:`dpopt.release.release_hierarchy`): ``max(0, N + Lap(Δ/ε_ℓ))`` per node, then optionally the
    top-down projection of every parent's children onto {v ≥ 0, Σ v = parent's released value}.

    Returns a list of arrays per level (shape ``(n_ℓ,)``, or ``(trials, n_ℓ)`` when ``trials`` is given).
    ``rng`` is a numpy Generator or a seed."""
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    L = hierarchy.n_levels
    eps = V.positive_vector("epsilon_per_level", epsilon_per_level, length=L)
    d = V.positive("sensitivity", sensitivity)
    consistency = V.flag("consistency", consistency)
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(d / eps)):
            raise ValueError("epsilon_per_level is too small for this sensitivity: the noise scale overflows")
    rng = np.random.default_rng(rng)
    T = 1 if trials is None else V.integer("trials", trials, minimum=1, maximum=10**8)
    out = []
    for l in range(L):
        N = hierarchy.counts[l]
        noisy = np.maximum(0.0, N[None, :] + rng.laplace(0.0, d / eps[l], size=(T, N.size)))
        if consistency and l > 0:
            par = hierarchy.parents[l]
            P = out[l - 1]                                   # (T, n_{l-1}) final parent values
            group = (np.arange(T)[:, None] * P.shape[1] + par[None, :]).ravel()
            noisy = _project_groups(noisy.ravel(), group, P.ravel()).reshape(T, N.size)
        out.append(noisy)
    return [o[0] for o in out] if trials is None else out


def simulate_hierarchy(hierarchy: Hierarchy, epsilon_per_level, trials: int = 10000, seed=0, consistency: bool = False,
                sensitivity: float = 1.0, batch: int = 2000, progress: bool = False) -> dict:
    """Seeded Monte Carlo of the release. Per level (sums over the level's nodes):

    ``bias2`` — Σ_j (mean_j − N_j)² − var_j/T (unbiased for Σ bias²), ``variance`` — Σ_j sample variance,
    ``mse`` — their sum, with standard errors ``bias2_se``, ``variance_se``; per node ``bias`` and its
    ``bias_se``, and ``var_node`` with ``var_node_se`` (from the sample fourth moment)."""
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    L = hierarchy.n_levels
    T = V.integer("trials", trials, minimum=2, maximum=10**8)
    batch = V.integer("batch", batch, minimum=1, maximum=10**8)
    consistency = V.flag("consistency", consistency)
    progress = V.flag("progress", progress)
    V.positive_vector("epsilon_per_level", epsilon_per_level, length=L)   # fail before any draw
    rng = np.random.default_rng(seed)
    s1 = [np.zeros(c.size) for c in hierarchy.counts]       # sums of (x − N)
    s2 = [np.zeros(c.size) for c in hierarchy.counts]
    s3 = [np.zeros(c.size) for c in hierarchy.counts]
    s4 = [np.zeros(c.size) for c in hierarchy.counts]
    done = 0
    while done < T:
        b = min(batch, T - done)
        rel = release(hierarchy, epsilon_per_level, rng, consistency, sensitivity, trials=b)
        for l in range(L):
            y = rel[l] - hierarchy.counts[l][None, :]
            y2 = y * y
            s1[l] += y.sum(0)
            s2[l] += y2.sum(0)
            s3[l] += (y2 * y).sum(0)
            s4[l] += (y2 * y2).sum(0)
        done += b
        if progress:
            frac = done / T
            bar = "#" * int(30 * frac)
            print(f"\rmonte carlo [{bar:<30s}] {done}/{T}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    out = {"trials": T, "consistency": bool(consistency), "bias": [], "bias_se": [], "var_node": [],
           "var_node_se": [], "bias2": np.zeros(L), "variance": np.zeros(L), "bias2_se": np.zeros(L),
           "variance_se": np.zeros(L)}
    for l in range(L):
        m1 = s1[l] / T
        m2 = s2[l] / T
        m3 = s3[l] / T
        m4 = s4[l] / T
        var = (m2 - m1 ** 2) * T / (T - 1)
        mu4 = m4 - 4 * m1 * m3 + 6 * m1 ** 2 * m2 - 3 * m1 ** 4      # central 4th moment
        var_se = np.sqrt(np.maximum(mu4 - var ** 2, 0.0) / T)
        bias_se = np.sqrt(var / T)
        out["bias"].append(m1)
        out["bias_se"].append(bias_se)
        out["var_node"].append(var)
        out["var_node_se"].append(var_se)
        out["bias2"][l] = float(np.sum(m1 ** 2 - var / T))
        out["bias2_se"][l] = float(np.sqrt(np.sum((2 * m1 * bias_se) ** 2)))
        out["variance"][l] = float(var.sum())
        out["variance_se"][l] = float(np.sqrt(np.sum(var_se ** 2)))
    out["mse"] = out["bias2"] + out["variance"]
    return out


# the old name: dpopt.monte_carlo read like the `monte-carlo` backend, which solves SampleSizeStudy
monte_carlo = renamed(simulate_hierarchy, "dpopt.monte_carlo", "dpopt.simulate_hierarchy")
