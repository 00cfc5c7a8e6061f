"""Reproduce Ko, Ziani & Fioretto: privacy budget per level of a geographic hierarchy (truncated Laplace).

Prints the optimal split of the toy tree (Fig. 1 / Table 1) next to the paper's values (docs/hierarchy.md), the
budget per level versus ε_total (Theorem 3: ε_1 ≤ ε_2 ≤ ε_3), optimal versus uniform MSE per level,
the bias²/variance comparison of the paper's Fig. 3 (Census data is not public here: Gapminder 2007
populations stand in), and the Monte Carlo check of the closed-form MSE; writes the figures.

    python examples/ko_hierarchy.py --out DIR [--quick]
"""

import numpy as np

import dpopt
from dpopt.plots import hierarchy as figs
from dpopt.plots import example_args, report_written

PAPER_TOY = (0.2519, 0.3174, 0.4307)   # Ko et al.'s toy tree, ε_total = 1, equal weights (docs/hierarchy.md)
PAPER_FIG3 = {"bias2": 10.0, "variance": 4.0}   # paper §4.1 (Wyoming): uniform / optimised, "10 times", "four times"


def toy_table():
    model = dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0)
    sol = model.solve()
    print("Toy tree (VA 450; tracts 300, 150; blocks 120, 80, 100 | 90, 60), eps_total = 1, equal weights")
    print("level  nodes  eps optimal    paper   eps uniform   MSE optimal  MSE uniform")
    for l in range(3):
        print(f"{l + 1:5d}  {model.hierarchy.sizes[l]:5d}  {sol.epsilon[l]:11.4f}  {PAPER_TOY[l]:7.4f}  "
              f"{sol.uniform_epsilon[l]:11.4f}  {sol.mse_per_level[l]:11.3f}  {sol.uniform_mse_per_level[l]:11.3f}")
    print(f"total MSE: optimal {sol.objective:.4f}, uniform {sol.uniform_weighted_mse:.4f} "
          f"(uniform/optimal = {sol.ratio_uniform:.4f}); certificate gap {sol.certificate.gap:.1e}")
    back = dpopt.HierarchyBudget(dpopt.toy_hierarchy(), mse_target=sol.objective).solve()
    print(f"program (7) with tau = that MSE: eps = {np.round(back.epsilon, 4)}, total {back.objective:.6f} (expect 1)")


def budget_path(quick):
    E = np.logspace(-2, 1, 4 if quick else 7)
    d = figs.budget_path_data(dpopt.toy_hierarchy(), E)
    print("\nBudget per level versus eps_total (toy tree)  [ko_budget_per_level.png]")
    print("eps_total     eps_1     eps_2     eps_3   share_3  Thm 3   uniform/optimal MSE")
    for e, row in zip(d["epsilon_total"], d["epsilon"]):
        model = dpopt.HierarchyBudget(dpopt.toy_hierarchy(), float(e))
        ratio = model.objective_value(model.uniform_split()) / model.objective_value(row)
        mono = "yes" if np.all(np.diff(row) >= -1e-12) else "NO"
        print(f"{e:9.4g}  {row[0]:8.4g}  {row[1]:8.4g}  {row[2]:8.4g}  {row[2] / e:7.3f}  {mono:5s}  {ratio:8.4f}")


def mse_levels(quick):
    h = dpopt.toy_hierarchy() if quick else dpopt.load_gapminder(2007)
    d = figs.mse_comparison_data(h, 1.0)
    print(f"\nMSE per level, {h.name}, eps_total = 1  [ko_mse_per_level.png]")
    print("level  nodes   eps optimal   MSE optimal   MSE uniform   uniform/optimal")
    for l in range(len(d["optimal"])):
        print(f"{l + 1:5d}  {h.sizes[l]:5d}  {d['epsilon'][l]:12.5f}  {d['optimal'][l]:12.5g}  {d['uniform'][l]:12.5g}  "
              f"{d['uniform'][l] / d['optimal'][l]:10.3f}")
    a = np.cbrt(np.asarray(h.sizes, dtype=float))
    print(f"  (large counts, no truncation bias: closed form eps ∝ |R_l|^(1/3) = {np.round(a / a.sum(), 5)})")


def fig3(quick):
    if quick:
        d = figs.bias_variance_data(figs._small_tree(), 1.0, trials=2000)
    else:
        d = figs.bias_variance_data(trials=50000)
    print(f"\nPaper Fig. 3 analogue: {d['name']}, eps_total = {d['epsilon_total']:g}, {d['trials']} releases  "
          "[ko_fig3_bias_variance.png]")
    print(f"eps optimal = {np.round(d['optimal']['epsilon'], 6)}, uniform = {np.round(d['uniform']['epsilon'], 6)}")
    print("split     consistency                bias^2 (sum) ± 2se          variance (sum) ± 2se")
    tot = {}
    for alloc in ("uniform", "optimal"):
        cf = d[alloc]["closed_form"]
        tot[alloc, "closed_form"] = (float(np.sum(cf["bias2"])), float(np.sum(cf["variance"])))
        print(f"{alloc:8s}  {'none, closed form':22s}  {tot[alloc, 'closed_form'][0]:11.5g}"
              f"{'':15s}{tot[alloc, 'closed_form'][1]:11.5g}")
        for mode, label in (("plain", "none, simulated"), ("consistent", "top-down, simulated")):
            r = d[alloc][mode]
            b2, var = float(np.sum(r["bias2"])), float(np.sum(r["variance"]))
            sb, sv = (2 * float(np.sqrt(np.sum(r[k] ** 2))) for k in ("bias2_se", "variance_se"))
            tot[alloc, mode] = (b2, var)
            print(f"{alloc:8s}  {label:22s}  {b2:11.5g} ± {sb:<11.3g}  {var:11.5g} ± {sv:.3g}")
    for i, key in enumerate(("bias2", "variance")):
        r = [tot["uniform", m][i] / tot["optimal", m][i] for m in ("closed_form", "consistent")]
        print(f"uniform/optimal {key:8s}: {r[0]:6.2f} (no consistency, closed form), {r[1]:6.2f} (top-down, simulated)"
              f"   paper (Wyoming blocks): ~{PAPER_FIG3[key]:g}x")
    for alloc in ("optimal", "uniform"):
        (b0, v0), (b1, v1) = tot[alloc, "plain"], tot[alloc, "consistent"]
        print(f"consistency effect ({alloc}): bias^2 x{b1 / b0:.3f}, variance x{v1 / v0:.3f}   "
              "paper (Wyoming): both slightly reduced")
    return d


def simulation(quick):
    trials = 2000 if quick else 50000
    d = figs.simulation_data(figs._small_tree(), 1.0, trials=trials)
    cf, sim = d["closed_form"], d["plain"]
    print(f"\nSimulated (no consistency, {trials} releases) versus closed-form MSE, small tree 12; 7, 5; 3, 4 | 0, 5  "
          "[ko_simulated_vs_closed_form.png]")
    print("level   closed form   simulated   z (bias^2)  z (variance)")
    for l in range(len(cf["mse"])):
        zb = (sim["bias2"][l] - cf["bias2"][l]) / sim["bias2_se"][l]
        zv = (sim["variance"][l] - cf["variance"][l]) / sim["variance_se"][l]
        print(f"{l + 1:5d}  {cf['mse'][l]:12.5f}  {sim['mse'][l]:10.5f}  {zb:10.2f}  {zv:11.2f}")


def main(argv=None):
    out, quick = example_args(__doc__, argv)
    toy_table()
    budget_path(quick)
    mse_levels(quick)
    f3 = fig3(quick)
    simulation(quick)
    paths = [figs.figure_budget_path(out, quick), figs.figure_mse_levels(out, quick),
             figs.figure_bias_variance(out, quick, data=f3), figs.figure_simulation(out, quick)]
    return report_written(paths)


if __name__ == "__main__":
    main()
