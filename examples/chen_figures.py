"""Reproduce Chen, Pasupathy & Awan: Table 1 and Figures 3–6 (variance ratios, design path, misspecification).

    python examples/chen_figures.py --out DIR [--quick]
"""

import dpopt
from dpopt.plots import stratified as figs
from dpopt.plots import example_args, report_written

EPS = [0.1, 10 ** -0.5, 1.0, 10 ** 0.5, 10.0]


def table1():
    rows = {}
    for mech in ("laplace", "tulap"):
        rows[mech] = []
        for e in EPS:
            model = dpopt.datasets.chen_table1(epsilon=e, mechanism=mech)
            rows[mech].append(model.objective_value(model.baseline("neyman")) / model.solve().objective)
    return rows


def main(argv=None):
    out, quick = example_args(__doc__, argv)
    print("Table 1: ratio of the DP objective, Neyman design / optimal design")
    print("eps       " + "  ".join(f"{e:7.4g}" for e in EPS))
    for mech, vals in table1().items():
        print(f"{mech:9s} " + "  ".join(f"{v:7.3f}" for v in vals))
    paths = [figs.figure_variance_ratio(out, "mean", quick), figs.figure_variance_ratio(out, "a-optimal", quick),
             figs.figure_design_path(out, quick), figs.figure_misspecification(out, quick)]
    return report_written(paths)


if __name__ == "__main__":
    main()
