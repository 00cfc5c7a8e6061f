"""Gaussian stratified design speed against the Laplace design, measured side by side in one run (issue 22).

The same strata (N_i, S_i²), total and central ε = 1 are solved by the exact backend with Laplace noise (pure ε-DP)
and with Gaussian noise under (ε, δ) = (1, 1e-6) (analytic calibration at each amplified (ε_i, δ_i)). The two
solves alternate (``_timing.interleaved``), so the figure is the median (and minimum) of adjacent-pair ratios.
The Gaussian solve includes what its ``optimal`` claim rests on: the per-instance check that every unit term
is discretely convex (Σ(upper − lower) increments; Laplace's convexity is proven, docs/stratified.md), on a
fresh model each time (the check is cached per model).

Target: Gaussian / Laplace ≤ 3 at k = 1 000 and k = 100 000 strata. The last column times the convexity check
alone on one more fresh model (informative, not interleaved).

Run: ``python benchmarks/bench_gaussian.py [--repeat R]``
"""

from __future__ import annotations

import argparse

import numpy as np

import dpopt
from _timing import interleaved, timed


def strata(k, total, seed=0):
    rng = np.random.default_rng(seed)
    N = rng.integers(max(2 * total // k, 2), max(20 * total // k, 4), size=k)
    sigma2 = rng.uniform(0.01, 2.0, size=k)
    return N, sigma2


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="interleaved pairs per figure")
    args = ap.parse_args(argv)
    rows = []
    for k, total in [(1_000, 10_000), (100_000, 400_000)]:
        N, s2 = strata(k, total)
        lap = lambda: dpopt.StratifiedDesign(N, s2, total, 1.0, mechanism="laplace").solve(backend="exact")  # noqa: E731
        gau = lambda: dpopt.StratifiedDesign(N, s2, total, 1.0, mechanism="gaussian",  # noqa: E731
                                             delta=1e-6).solve(backend="exact")
        r = interleaved(gau, lap, args.repeat)
        g, la = r["a"], r["b"]
        # what of the Gaussian solve is the convexity check (one more fresh model, timed alone)
        fresh = dpopt.StratifiedDesign(N, s2, total, 1.0, mechanism="gaussian", delta=1e-6)
        check, _ = timed(fresh.convexity_verified)
        rows.append((k, total, int(np.sum(N)), r["a_median"], r["b_median"], r["ratio_median"], r["ratio_min"],
                     g.status.value, la.status.value, check))
    print(f"{'k':>8} {'eta':>8} {'sum N':>9} {'gauss s':>9} {'laplace s':>10} {'ratio med':>10} {'ratio min':>10} "
          f"{'gauss':>8} {'laplace':>8} {'check s':>8}")
    for r in rows:
        print(f"{r[0]:>8} {r[1]:>8} {r[2]:>9} {r[3]:>9.3f} {r[4]:>10.3f} {r[5]:>10.2f} {r[6]:>10.2f} {r[7]:>8} {r[8]:>8} {r[9]:>8.3f}")
    print("target: Gaussian / Laplace solve time <= 3 (exact backend, interleaved pairs, fresh models)")


if __name__ == "__main__":
    main()
