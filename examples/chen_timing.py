"""Reproduce Chen, Pasupathy & Awan, Figures 7–8: solve time versus η (k = 10) and versus k (η = 1000),
exact marginal allocation versus the paper's Algorithm 1 (corrected λ) versus SCIP's MINLP (through Pyomo).

    python examples/chen_timing.py --out DIR [--quick]

Setting of §5.4: N_i = 10000 + 1000(k + 1 − i), σ_i² = 0.08^(1 + i/10), Laplace, ε = 1. Every route is
checked against exact: a route's point is drawn as × when it is not proven optimal (refused, time limit).
The paper reports ~155 s for its Algorithm 1 at k = 12, η = 10⁵; `benchmarks/bench_backends.py` measures
the full grid with 60 s caps.
"""

from dpopt.plots import stratified as figs
from dpopt.plots import example_args, report_written


def main(argv=None):
    out, quick = example_args(__doc__, argv, quick_help="tiny grids and 2 s caps (for tests)")
    cap = 2.0 if quick else 20.0
    paths = []
    for axis, draw in (("eta", figs.figure_timing_eta), ("k", figs.figure_timing_k)):
        data = figs.timing_data(figs.timing_cases(axis, quick), time_limit=cap)
        exact = {(k, eta): obj for k, eta, _, _, obj in data["exact"]}
        print(f"\n{'k':>3} {'eta':>8} | " + " | ".join(f"{r:>26}" for r in data))
        for k, eta in figs.timing_cases(axis, quick):
            cells = []
            for rows in data.values():
                row = next((r for r in rows if r[:2] == (k, eta)), None)
                if row is None:
                    cells.append(f"{'not run (earlier limit)':>26}")
                    continue
                agree = row[3] == "optimal" and abs(row[4] - exact[k, eta]) <= 1e-9 * exact[k, eta]
                cells.append(f"{row[2]:9.4f} s {row[3]:>11}{' =' if agree else '  '}")
            print(f"{k:>3} {eta:>8} | " + " | ".join(cells))
        paths.append(draw(out, quick, data=data))
    print("(= : optimal and equal to exact's objective to 1e-9; algorithm1 refuses where its corrected search "
          "cube exceeds its candidate limit)")
    return report_written(paths)


if __name__ == "__main__":
    main()
