"""Benchmark: exact HierarchyBudget solve versus one objective evaluation, 3-level tree, 10^6 leaves.

Acceptance (issue 4): exact solve time ÷ one objective evaluation ≤ 100, measured in one run.
Two trees: (a) census-like integer leaf counts (Poisson, mean 3 — truncation matters), which the solver
regroups into a histogram; (b) real-valued, all-distinct leaf counts (no regrouping possible).
The objective evaluation is ``model.objective_value(eps)``: one vectorised pass over all 10^6+ nodes.
Each solve uses a fresh model (regrouping is included in the solve time). Times are medians of repeats.
Also shown: the other backends on a small tree (they are not meant for 10^6 leaves).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from dpopt.datasets import toy_hierarchy
from dpopt.models.hierarchy import Hierarchy, HierarchyBudget


def tree(n_leaves=1_000_000, n_mid=1000, real=False, seed=0):
    rng = np.random.default_rng(seed)
    par3 = np.sort(rng.integers(0, n_mid, size=n_leaves))
    par3[:n_mid] = np.arange(n_mid)
    leaves = rng.gamma(2.0, 1.5, size=n_leaves) if real else rng.poisson(3.0, size=n_leaves).astype(float)
    mid = np.bincount(par3, weights=leaves, minlength=n_mid)
    return Hierarchy.from_levels([[mid.sum()], mid, leaves], [None, np.zeros(n_mid, dtype=np.int64), par3],
                                 rtol=1e-6)


def median_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(repeats=5):
    print(f"{'tree':34s} {'eval [ms]':>10s} {'solve [ms]':>11s} {'ratio':>7s} {'passes':>7s}  status")
    for label, real in (("10^6 leaves, Poisson(3) integers", False), ("10^6 leaves, distinct real counts", True)):
        h = tree(real=real)
        for E in (0.1, 1.0):
            m0 = HierarchyBudget(h, E)
            eps = m0.uniform_split()
            t_eval = median_time(lambda: m0.objective_value(eps), repeats)
            sols = []
            t_solve = median_time(lambda: sols.append(HierarchyBudget(h, E).solve()), repeats)
            s = sols[-1]
            ratio = t_solve / t_eval
            print(f"{label + f', E={E:g}':34s} {1e3 * t_eval:10.2f} {1e3 * t_solve:11.2f} {ratio:7.1f} "
                  f"{s.level_passes:7d}  {s.status.value} (gap {s.certificate.gap:.1e})")
    print()
    print("other backends, toy tree (ms):")
    m = HierarchyBudget(toy_hierarchy(), 1.0)
    for be in ("exact", "scipy", "pyomo", "cvxpy"):
        t0 = time.perf_counter()
        s = m.solve(backend=be)
        print(f"  {be:6s} {1e3 * (time.perf_counter() - t0):9.1f}  {s.status.value:8s} eps={np.round(s.epsilon, 6)}")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Exact HierarchyBudget solve versus one objective evaluation.")
    ap.add_argument("--repeats", type=int, default=5, help="timed repetitions per figure (median reported)")
    ap.add_argument("--quick", action="store_true", help="one repetition")
    a = ap.parse_args()
    main(1 if a.quick else a.repeats)
