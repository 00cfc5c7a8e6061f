"""Exact stratified solver speed, measured side by side in one run.

1. k = 100 000 strata, η = 10 000 000, Laplace: exact solve time ÷ one vectorised
   ``objective_value`` at the same size (target ≤ 100).
2. Paper §5.4 setting, k = 26, η = 100 000 (the paper runs only the first step of Algorithm 1 at k = 14–26,
   its Fig. 8; it states no run time in seconds).

Run: ``python benchmarks/bench_exact.py [--repeat R]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dpopt


def best_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def paper_like(k, total, eps, seed=0, mechanism="laplace"):
    rng = np.random.default_rng(seed)
    N = rng.integers(max(2 * total // k, 2), max(20 * total // k, 4), size=k)
    sigma2 = rng.uniform(0.01, 2.0, size=k)
    return dpopt.StratifiedDesign(N=N, sigma2=sigma2, total=total, epsilon=eps, mechanism=mechanism)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = []
    for k, total in [(100_000, 10_000_000), (26, 100_000), (12, 100_000)]:
        model = paper_like(k, total, eps=1.0)
        n0 = model.baseline("proportional")
        t_obj, _ = best_time(lambda: model.objective_value(n0), max(args.repeat, 5))
        t_solve, sol = best_time(model.solve, args.repeat)
        rows.append((k, total, t_solve, t_obj, t_solve / t_obj, sol.status.value, sol.certificate.optimal,
                     sol.details["fill_rounds"], sol.details["exchange_rounds"]))
    print(f"{'k':>8} {'eta':>10} {'solve s':>10} {'objective s':>12} {'ratio':>8} {'status':>8} cert fill exch")
    for r in rows:
        print(f"{r[0]:>8} {r[1]:>10} {r[2]:>10.4f} {r[3]:>12.6f} {r[4]:>8.1f} {r[5]:>8} {str(r[6]):>4} {r[7]:>4} {r[8]:>4}")
    print("target: ratio <= 100 at k = 100 000")


if __name__ == "__main__":
    main()
