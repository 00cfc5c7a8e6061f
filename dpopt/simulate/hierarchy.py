"""Release simulation for hierarchies (docs/hierarchy.md): Laplace noise, truncation at 0, top-down consistency.

``release`` draws one release with numpy's floating-point Laplace sampler, for Monte Carlo only: a real
release goes through OpenDP (:func:`dpopt.release.release_hierarchy`). ``simulate_hierarchy`` repeats it (seeded,
in batches, optional progress bar on stderr) and estimates per level the sums over nodes of bias² and
variance, with standard errors, so they can be compared with the closed forms (no closed form exists after
the consistency step).
"""

from __future__ import annotations


import numpy as np

from .. import _validate as V
from ..models.tree import Hierarchy
from ..progress import progress_bar


#: values per array of one simulated batch by default (8e6 doubles = 64 MB; a batch holds a few such arrays
#: per level, so 10^6 leaves stay far below 2 GB where 2 000 trials at once needed ~15 GiB per array)
BATCH_ELEMENTS = 8_000_000


def _project_sorted(x: np.ndarray, starts: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Projection of contiguous segments of ``x`` (segment j starts at ``starts[j]``, all non-empty) onto
    {v ≥ 0, Σ v = target[j]}: v = max(0, x − θ_j), θ_j by Michelot's active-set iteration, θ ← (Σ_active x −
    target)/|active| with active = {x > θ}, started from all of the segment. θ only increases and a
    segment's active set only shrinks, and it is never empty while target > 0 (Σ_active (x − θ) = target),
    so the iteration is exact once no active set changes: at most (largest segment) passes, each O(len(x))
    without a sort (a sort-based projection costs 15–30× a Laplace draw of the same size)."""
    counts = np.diff(np.append(starts, x.size))
    seg = np.repeat(np.arange(starts.size), counts)
    active_n = counts.astype(np.int64)
    theta = (np.add.reduceat(x, starts) - target) / active_n
    for _ in range(int(counts.max(initial=0)) + 1):
        active = x > theta[seg]
        n_new = np.add.reduceat(active.astype(np.int64), starts)
        if np.array_equal(n_new, active_n):
            break
        active_n = np.maximum(n_new, 1)
        theta = (np.add.reduceat(np.where(active, x, 0.0), starts) - target) / active_n
    out = np.maximum(0.0, x - theta[seg])
    zero = target <= 0
    if np.any(zero):
        out[zero[seg]] = 0.0
    return out


def _project_groups(vals: np.ndarray, group: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group of ``vals`` onto {v ≥ 0, Σ v = target[g]}: v = max(0, x − θ_g).

    ``group`` holds group ids 0..G−1 (any order; groups with no member are skipped)."""
    vals = np.asarray(vals, dtype=float)
    group = np.asarray(group, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    g = group[order]
    present, starts = np.unique(g, return_index=True)
    out = np.empty_like(vals)
    out[order] = _project_sorted(vals[order], starts, np.asarray(target, dtype=float)[present])
    return out


def round_consistent(levels: list[np.ndarray], parents: list) -> list[np.ndarray]:
    """Non-negative integers that still add up, from consistent non-negative counts (every parent's children
    sum to it): the top level is rounded to the nearest integer; then, top-down, each parent's integer value
    is shared among its children by largest remainder on the children's values rescaled to that integer
    (floors, then one more unit to the largest fractional parts). Every child moves by less than 1 from its
    rescaled value, so a node's rounding error is below 1 plus its share of its parent's; the sums hold
    exactly. Post-processing of a release: no privacy cost. ``levels`` are 1-D arrays (one release)."""
    out = [np.round(np.asarray(levels[0], dtype=float))]
    for l in range(1, len(levels)):
        v = np.asarray(levels[l], dtype=float)
        par = np.asarray(parents[l], dtype=np.int64)
        G = out[l - 1].size
        real_sum = np.bincount(par, weights=v, minlength=G)
        target = out[l - 1]
        factor = np.divide(target, real_sum, out=np.zeros(G), where=real_sum > 0)
        t = v * factor[par]
        # a parent whose children are all 0 but which rounded up to ≥ 1 shares its units equally
        empty = (real_sum <= 0) & (target > 0)
        if np.any(empty):
            sizes = np.bincount(par, minlength=G)
            t = np.where(empty[par], target[par] / np.maximum(sizes[par], 1), t)
        base = np.floor(t)
        # Σ t = target up to rounding, so 0 ≤ short ≤ the number of children
        short = np.clip(np.round(target - np.bincount(par, weights=base, minlength=G)), 0, None).astype(np.int64)
        frac = t - base
        order = np.lexsort((-frac, par))                         # per parent, largest remainder first
        starts = np.searchsorted(par[order], np.arange(G))
        rank = np.empty(v.size, dtype=np.int64)
        rank[order] = np.arange(v.size) - starts[par[order]]
        n = base + (rank < short[par])
        out.append(n)
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
            # children ordered by parent once: every trial's row is then a run of contiguous groups
            par = hierarchy.parents[l]
            order = np.argsort(par, kind="stable")
            parents, first = np.unique(par[order], return_index=True)
            P = out[l - 1][:, parents]                       # (T, groups) final values of parents with children
            starts = (np.arange(T)[:, None] * N.size + first[None, :]).ravel()
            projected = _project_sorted(noisy[:, order].ravel(), starts, P.ravel()).reshape(T, N.size)
            noisy = np.empty_like(projected)
            noisy[:, order] = projected
        out.append(noisy)
    return [o[0] for o in out] if trials is None else out


def simulate_hierarchy(hierarchy: Hierarchy, epsilon_per_level, trials: int = 10000, seed=0, consistency: bool = False,
                sensitivity: float = 1.0, batch: int | None = None, progress: bool = False) -> dict:
    """Seeded Monte Carlo of the release, ``batch`` trials at a time (default: as many as keep one array of
    a batch within :data:`BATCH_ELEMENTS` values, at most 2 000; the result does not depend on it beyond
    the random stream). Per level (sums over the level's nodes):

    ``bias2`` — Σ_j (mean_j − N_j)² − var_j/T (unbiased for Σ bias²), ``variance`` — Σ_j sample variance,
    ``mse`` — their sum, with standard errors ``bias2_se``, ``variance_se``; per node ``bias`` and its
    ``bias_se``, and ``var_node`` with ``var_node_se`` (from the sample fourth moment)."""
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    L = hierarchy.n_levels
    T = V.integer("trials", trials, minimum=2, maximum=10**8)
    if batch is None:
        batch = max(1, min(2000, BATCH_ELEMENTS // max(int(max(c.size for c in hierarchy.counts)), 1)))
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
    with progress_bar(T, "monte carlo", progress) as bar:   # closed on an interrupt too
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
            bar.update(b)
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

