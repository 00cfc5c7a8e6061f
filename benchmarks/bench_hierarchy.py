"""Benchmark: exact HierarchyBudget solve versus one objective evaluation, 3-level tree, 10^6 leaves.

Acceptance (issue 4): exact solve time ÷ one objective evaluation ≤ 100, measured in one run.
Two trees: (a) census-like integer leaf counts (Poisson, mean 3 — truncation matters), which the solver
regroups into a histogram; (b) real-valued, all-distinct leaf counts (no regrouping possible).
The objective evaluation is ``model.objective_value(eps)``: one vectorised pass over all 10^6+ nodes.
Each solve uses a fresh model (regrouping is included in the solve time); solve and evaluation alternate
and the ratio is the median (and minimum) of adjacent pairs.
Also: the simulation's consistency step against a plain draw, and its peak memory at 10^6 leaves.
Also shown: the other backends on a small tree (they are not meant for 10^6 leaves).
Also (issue 22): the hierarchy with discrete Gaussian noise (a ρ per level, docs/hierarchy.md) at 10^5 leaves,
as a ratio to the Laplace hierarchy's exact solve on the same tree, measured interleaved in one run; the
noise scales are matched (ρ = ε²/4 gives the untruncated noise variance 2/ε² of Laplace noise).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import numpy as np

from _timing import interleaved
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


def simulation_figures(pairs):
    """The consistency step against a plain draw (interleaved, 4 trials at 10^6 leaves), and the peak
    memory of simulate_hierarchy at its default batch (a child process, so the figure is its own)."""
    from dpopt.simulate.hierarchy import release

    h = tree()
    eps = [0.3, 0.3, 0.4]
    r = interleaved(lambda: release(h, eps, 1, consistency=True, trials=4),
                    lambda: release(h, eps, 1, consistency=False, trials=4), pairs)
    print(f"simulation, 10^6 leaves, 4 trials: consistent release / plain release: median {r['ratio_median']:.2f}, "
          f"min {r['ratio_min']:.2f} (the consistency step alone is that ratio minus 1; target <= 5)")
    code = ("import sys, resource; sys.path.insert(0, %r); from bench_hierarchy import tree; "
            "from dpopt.simulate.hierarchy import simulate_hierarchy; "
            "simulate_hierarchy(tree(), [0.3, 0.3, 0.4], trials=40, consistency=True); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)") % str(__import__("pathlib").Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    peak = int(out.stdout.split()[-1]) / 2 ** 20 if out.returncode == 0 else float("nan")
    print(f"simulate_hierarchy, 10^6 leaves, 40 trials, default batch: peak RSS {peak:.2f} GB (target <= 2)")


def gaussian_figures(pairs):
    """Exact solve with discrete Gaussian noise versus the Laplace solve, 10^5 Poisson(3) leaves, 100 middle nodes."""
    h = tree(n_leaves=100_000, n_mid=100)
    for E in (0.1, 1.0):
        R = E * E / 4.0
        r = interleaved(lambda: HierarchyBudget(h, noise="discrete_gaussian", rho_total=R).solve(),
                        lambda: HierarchyBudget(h, E).solve(), pairs)
        g, lap = r["a"], r["b"]
        print(f"10^5 leaves, rho={R:g} vs eps={E:g}: discrete Gaussian {1e3 * r['a_median']:8.1f} ms "
              f"({g.status.value}, gap {g.certificate.gap:.1e}, {g.level_passes} solve passes + the convexity check), "
              f"Laplace {1e3 * r['b_median']:7.1f} ms ({lap.status.value}): ratio median {r['ratio_median']:.1f}, "
              f"min {r['ratio_min']:.1f}")


def main(repeats=5, only_gaussian=False):
    if only_gaussian:
        gaussian_figures(repeats)
        return
    print(f"{'tree':34s} {'eval [ms]':>10s} {'solve [ms]':>11s} {'ratio med':>10s} {'min':>6s} {'passes':>7s}  status")
    for label, real in (("10^6 leaves, Poisson(3) integers", False), ("10^6 leaves, distinct real counts", True)):
        h = tree(real=real)
        for E in (0.1, 1.0):
            m0 = HierarchyBudget(h, E)
            eps = m0.uniform_split()
            # each solve uses a fresh model (regrouping included); it alternates with one evaluation
            r = interleaved(lambda: HierarchyBudget(h, E).solve(), lambda: m0.objective_value(eps), repeats)
            s = r["a"]
            print(f"{label + f', E={E:g}':34s} {1e3 * r['b_median']:10.2f} {1e3 * r['a_median']:11.2f} "
                  f"{r['ratio_median']:10.1f} {r['ratio_min']:6.1f} {s.level_passes:7d}  {s.status.value} "
                  f"(gap {s.certificate.gap:.1e})")
    print()
    simulation_figures(repeats)
    print()
    gaussian_figures(repeats)
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
    ap.add_argument("--gaussian", action="store_true", help="only the discrete Gaussian figures (10^5 leaves)")
    a = ap.parse_args()
    main(1 if a.quick else a.repeats, only_gaussian=a.gaussian)
