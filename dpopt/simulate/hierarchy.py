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


#: values held per simulated batch by default, summed over the levels (8e6 doubles = 64 MB per array; a batch
#: holds a few such arrays, so 10^6 leaves stay well below 2 GB where 2 000 trials at once needed ~15 GiB per
#: array). The batch changes neither the random stream nor the estimates (one generator per level).
BATCH_ELEMENTS = 8_000_000


class _Layout:
    """The children of one level grouped by parent, from the tree's structure alone (computed once per tree
    level, not per trial): ``order`` puts children in parent order (None when they already are; ``inverse``
    puts them back, so both moves are a contiguous ``np.take``), groups
    ``present`` (parent ids with a child) start at ``first`` with ``counts`` members, and ``seg`` gives each
    child (in that order) its group's position."""

    __slots__ = ("order", "inverse", "present", "counts", "first", "seg", "longest")

    def __init__(self, parent: np.ndarray, n_parents: int):
        parent = np.asarray(parent, dtype=np.int64)
        self.order = self.inverse = None
        if not bool(np.all(parent[1:] >= parent[:-1])):
            self.order = np.argsort(parent, kind="stable")
            self.inverse = np.empty_like(self.order)
            self.inverse[self.order] = np.arange(parent.size)
        sizes = np.bincount(parent, minlength=n_parents)
        self.present = np.flatnonzero(sizes)
        self.counts = sizes[self.present]
        self.first = np.cumsum(self.counts) - self.counts
        self.seg = np.repeat(np.arange(self.present.size), self.counts)
        self.longest = int(self.counts.max(initial=0))


def _project_rows(x: np.ndarray, lay: _Layout, target: np.ndarray) -> np.ndarray:
    """Projection of each group of each row of ``x`` (shape (T, n), children in ``lay``'s order) onto
    {v ≥ 0, Σ v = target[t, g]} (``target`` shape (T, groups present)): v = max(0, x − θ), θ per row and
    group by Michelot's active-set iteration, θ ← (Σ_active x − target)/|active| with active = {x > θ},
    started from the whole group. θ only increases and an active set only shrinks, and it is never empty
    while target > 0 (Σ_active (x − θ) = target), so the iteration is exact once no active set changes: at
    most (largest group + 1) passes, each O(T·n) without a sort (a sort-based projection costs 15–30× a
    Laplace draw of the same size)."""
    first, seg = lay.first, lay.seg
    active_n = np.broadcast_to(lay.counts, target.shape)
    theta = (np.add.reduceat(x, first, axis=1) - target) / active_n
    th = np.empty_like(x)                                    # θ per child, and two work arrays reused by every pass
    active = np.empty(x.shape, dtype=bool)
    xa = np.empty_like(x)
    for _ in range(lay.longest + 1):
        np.take(theta, seg, axis=1, out=th)
        np.greater(x, th, out=active)
        n_new = np.add.reduceat(active, first, axis=1, dtype=np.int64)
        if np.array_equal(n_new, active_n):
            break
        active_n = np.maximum(n_new, 1)
        np.multiply(x, active, out=xa)
        theta = (np.add.reduceat(xa, first, axis=1) - target) / active_n
    del active, xa
    np.take(theta, seg, axis=1, out=th)
    out = np.subtract(x, th, out=th)
    np.maximum(out, 0.0, out=out)
    zero = target <= 0
    if np.any(zero):
        out[zero[:, seg]] = 0.0
    return out


def _project_groups(vals: np.ndarray, group: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Euclidean projection of each group of ``vals`` onto {v ≥ 0, Σ v = target[g]}: v = max(0, x − θ_g).

    ``group`` holds group ids 0..G−1 (any order; groups with no member are skipped)."""
    vals = np.asarray(vals, dtype=float)
    target = np.asarray(target, dtype=float)
    lay = _Layout(group, target.size)
    x = vals if lay.order is None else vals[lay.order]
    v = _project_rows(x[None, :], lay, target[lay.present][None, :])[0]
    return v if lay.order is None else v[lay.inverse]


def _largest_remainder(frac: np.ndarray, par: np.ndarray, units: np.ndarray) -> np.ndarray:
    """:func:`_largest_remainder_sorted`'s chosen set, sorting only the children near each parent's cut.

    ``frac`` in [0, 1) is cut into B bins per parent (about 4 per child on average); one bincount gives each
    parent's children per bin, and a running sum the bin c_g where its ``units[g]``-th largest part
    lies. Children in higher bins are chosen, those in lower ones are not; only bin c_g's members (about one
    per parent when the parts are spread) go to the exact sorted selection for the units still owed. Bins are
    monotone in frac, so the set is the definition's; with many equal parts (a bin holding a whole parent) it
    costs what the sort alone does (measured on a 10^6-leaf release: the argsort was 73 % of round_consistent)."""
    n, G = frac.size, units.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    B = int(min(2**16, max(1, -(-4 * n // G))))            # G·B ≤ 4n + G counts
    b = np.minimum((frac * B).astype(np.int64), B - 1)
    cell = par * B + b
    upto = np.bincount(cell, minlength=G * B).reshape(G, B)
    np.cumsum(upto, axis=1, out=upto)                       # upto[g, j]: children of g in bins ≤ j
    total = upto[:, -1]
    units = np.minimum(units, total)
    # the cut: the highest bin j with (children in bins ≥ j) ≥ units, i.e. upto[g, j − 1] ≤ total − units
    # (B when units[g] = 0: every bin lies below it)
    cut = np.sum(upto <= (total - units)[:, None], axis=1)
    above = total - upto[np.arange(G), np.minimum(cut, B - 1)]   # children in bins above the cut
    cut_of = cut[par]
    chosen = b > cut_of
    near = np.flatnonzero(b == cut_of)
    if near.size:
        # near is increasing, so "lower index first" among them is the global order
        chosen[near] = _largest_remainder_sorted(frac[near], par[near], units - above)
    return chosen


def _largest_remainder_sorted(frac: np.ndarray, par: np.ndarray, units: np.ndarray) -> np.ndarray:
    """True for the ``units[g]`` children of each parent g with the largest ``frac`` (ties: lower index
    first), i.e. the first ``units[g]`` of the parent's children ordered by (−frac, index).

    One unstable SIMD argsort of the key 2·par − frac (a parent's keys lie in [2g − 1, 2g], so parents stay
    apart, and rounding the key keeps it monotone in −frac); only where a run of equal keys straddles a
    parent's cut are its members put in exact (−frac, index) order, so the chosen set is exactly the
    definition's (with a lexsort of (par, −frac) round_consistent cost ~13× a Laplace draw of the same size;
    with this, ~3×; the sort is then most of the time: :func:`_largest_remainder` calls this only on the few
    children near each parent's cut)."""
    n = frac.size
    G = units.size
    key = 2.0 * par - frac
    order = np.argsort(key)
    ks = key[order]
    sizes = np.bincount(par, minlength=G)
    starts = np.cumsum(sizes) - sizes
    cut = starts + np.minimum(units, sizes)                # first sorted position not given a unit
    inner = np.flatnonzero((cut > starts) & (cut < starts + sizes))
    c = cut[inner]
    c = c[ks[c - 1] == ks[c]]
    if c.size:
        lo = np.searchsorted(ks, ks[c], "left")
        hi = np.searchsorted(ks, ks[c], "right")
        length = hi - lo
        pos = np.repeat(lo - (np.cumsum(length) - length), length) + np.arange(int(length.sum()))
        sub = order[pos]
        order[pos] = sub[np.lexsort((sub, -frac[sub], ks[pos]))]
    chosen = np.empty(n, dtype=bool)
    chosen[order] = np.arange(n) < cut[par[order]]
    return chosen


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
        out.append(base + _largest_remainder(t - base, par, short))
    return out


def _check_release(hierarchy, epsilon_per_level, consistency, sensitivity):
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    eps = V.positive_vector("epsilon_per_level", epsilon_per_level, length=hierarchy.n_levels)
    d = V.positive("sensitivity", sensitivity)
    consistency = V.flag("consistency", consistency)
    with np.errstate(over="ignore"):
        if not np.all(np.isfinite(d / eps)):
            raise ValueError("epsilon_per_level is too small for this sensitivity: the noise scale overflows")
    return eps, d, consistency


def _layouts(hierarchy: Hierarchy) -> list:
    return [None] + [_Layout(hierarchy.parents[l], hierarchy.counts[l - 1].size)
                     for l in range(1, hierarchy.n_levels)]


def _make_consistent(levels: list[np.ndarray], layouts) -> list[np.ndarray]:
    """The consistency step on truncated noisy levels (each shape (T, n_l)): top-down, every parent's children
    projected onto {v ≥ 0, Σ v = the parent's final value}. Level 0 is kept; lower levels' arrays are reused."""
    out = [levels[0]]
    for l in range(1, len(levels)):
        lay, noisy = layouts[l], levels[l]
        x = noisy if lay.order is None else np.take(noisy, lay.order, axis=1, out=np.empty_like(noisy))
        v = _project_rows(x, lay, np.ascontiguousarray(out[l - 1][:, lay.present]))
        if lay.order is not None:
            np.take(v, lay.inverse, axis=1, out=x)           # back to the tree's order, into the spare array
            v = x
        out.append(v)
    return out


def _draw(hierarchy: Hierarchy, scales, rngs, consistency: bool, T: int, layouts) -> list[np.ndarray]:
    """``T`` releases, level ``l`` drawn from ``rngs[l]`` (shape (T, n_l) per level); the consistency step
    draws nothing, so the noise is the same with or without it."""
    out = []
    for l, N in enumerate(hierarchy.counts):
        noisy = rngs[l].laplace(0.0, scales[l], size=(T, N.size))
        noisy += N
        np.maximum(noisy, 0.0, out=noisy)
        out.append(noisy)
    return _make_consistent(out, layouts) if consistency else out


def release(hierarchy: Hierarchy, epsilon_per_level, rng=None, consistency: bool = True,
            sensitivity: float = 1.0, trials: int | None = None):
    """One (or ``trials``) simulated release(s) for Monte Carlo (numpy noise; a real release uses
    :func:`dpopt.release.release_hierarchy`): ``max(0, N + Lap(Δ/ε_ℓ))`` per node, then optionally the
    top-down projection of every parent's children onto {v ≥ 0, Σ v = parent's released value}.

    Returns a list of arrays per level (shape ``(n_ℓ,)``, or ``(trials, n_ℓ)`` when ``trials`` is given).
    ``rng`` is a numpy Generator or a seed."""
    eps, d, consistency = _check_release(hierarchy, epsilon_per_level, consistency, sensitivity)
    rng = np.random.default_rng(rng)
    T = 1 if trials is None else V.integer("trials", trials, minimum=1, maximum=10**8)
    L = hierarchy.n_levels
    out = _draw(hierarchy, d / eps, [rng] * L, consistency, T, _layouts(hierarchy) if consistency else None)
    return [o[0] for o in out] if trials is None else out


def default_batch(hierarchy: Hierarchy) -> int:
    """simulate_hierarchy's default batch: as many trials (1 to 2 000) as keep a batch within
    :data:`BATCH_ELEMENTS` values summed over all levels (10^6 leaves: 7)."""
    return max(1, min(2000, BATCH_ELEMENTS // int(sum(c.size for c in hierarchy.counts))))


def simulate_hierarchy(hierarchy: Hierarchy, epsilon_per_level, trials: int = 10000, seed=0, consistency: bool = False,
                sensitivity: float = 1.0, batch: int | None = None, progress: bool = False) -> dict:
    """Seeded Monte Carlo of the release, ``batch`` trials at a time (default: as many as keep a batch within
    :data:`BATCH_ELEMENTS` values over all levels, at most 2 000). Each level draws from its own generator
    (spawned from ``seed``), so the estimates do not depend on the batch: chunked trials give the same
    numbers as one big batch, up to the order of floating-point sums. Per level (sums over the level's nodes):

    ``bias2`` — Σ_j (mean_j − N_j)² − var_j/T (unbiased for Σ bias²), ``variance`` — Σ_j sample variance,
    ``mse`` — their sum, with standard errors ``bias2_se``, ``variance_se``; per node ``bias`` and its
    ``bias_se``, and ``var_node`` with ``var_node_se`` (from the sample fourth moment)."""
    eps, d, consistency = _check_release(hierarchy, epsilon_per_level, consistency, sensitivity)  # before any draw
    L = hierarchy.n_levels
    T = V.integer("trials", trials, minimum=2, maximum=10**8)
    if batch is None:
        batch = default_batch(hierarchy)
    batch = V.integer("batch", batch, minimum=1, maximum=10**8)
    progress = V.flag("progress", progress)
    rngs = np.random.default_rng(seed).spawn(L)
    layouts = _layouts(hierarchy) if consistency else None   # the tree's structure, once
    s1 = [np.zeros(c.size) for c in hierarchy.counts]       # sums of (x − N)
    s2 = [np.zeros(c.size) for c in hierarchy.counts]
    s3 = [np.zeros(c.size) for c in hierarchy.counts]
    s4 = [np.zeros(c.size) for c in hierarchy.counts]
    done = 0
    with progress_bar(T, "monte carlo", progress) as bar:   # closed on an interrupt too
        while done < T:
            b = min(batch, T - done)
            rel = _draw(hierarchy, d / eps, rngs, consistency, b, layouts)
            for l in range(L):
                y = rel[l]
                rel[l] = None
                y -= hierarchy.counts[l]                     # in place: x − N, then its powers
                s1[l] += y.sum(0)
                y2 = y * y
                s2[l] += y2.sum(0)
                y *= y2
                s3[l] += y.sum(0)
                y2 *= y2
                s4[l] += y2.sum(0)
                del y, y2
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

