"""Reproduce Chen, Pasupathy & Awan, Figures 7–8: solve time versus η (k = 10) and versus k (η = 1000),
exact marginal allocation versus the paper's Algorithm 1 (corrected λ) versus SCIP's MINLP (through Pyomo).

    python examples/chen_timing.py --out DIR [--quick]

Setting of §5.4: N_i = 10000 + 1000(k + 1 − i), σ_i² = 0.08^(1 + i/10), Laplace, ε = 1. Every route is
checked against exact: a route's point is drawn as × when it is not proven optimal (refused, time limit).
The paper reports ~155 s for its Algorithm 1 at k = 12, η = 10⁵; `benchmarks/bench_backends.py` measures
the full grid with 60 s caps.
"""

import argparse
from pathlib import Path

from dpopt.plots import stratified as figs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="figures")
    ap.add_argument("--quick", action="store_true", help="tiny grids and 2 s caps (for tests)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cap = 2.0 if args.quick else 20.0
    paths = []
    for axis, draw in (("eta", figs.figure_timing_eta), ("k", figs.figure_timing_k)):
        data = figs.timing_data(figs.timing_cases(axis, args.quick), time_limit=cap)
        exact = {(k, eta): obj for k, eta, _, _, obj in data["exact"]}
        print(f"\n{'k':>3} {'eta':>8} | " + " | ".join(f"{r:>26}" for r in data))
        for k, eta in figs.timing_cases(axis, args.quick):
            cells = []
            for rows in data.values():
                row = next((r for r in rows if r[:2] == (k, eta)), None)
                if row is None:
                    cells.append(f"{'not run (earlier limit)':>26}")
                    continue
                agree = row[3] == "optimal" and abs(row[4] - exact[k, eta]) <= 1e-9 * exact[k, eta]
                cells.append(f"{row[2]:9.4f} s {row[3]:>11}{' =' if agree else '  '}")
            print(f"{k:>3} {eta:>8} | " + " | ".join(cells))
        paths.append(draw(out, args.quick, data=data))
    print("(= : optimal and equal to exact's objective to 1e-9; algorithm1 refuses where its corrected search "
          "cube exceeds its candidate limit)")
    for p in paths:
        print("wrote", p)
    return paths


if __name__ == "__main__":
    main()
