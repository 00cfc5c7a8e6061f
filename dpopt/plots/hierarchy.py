"""Figures for the hierarchy budget program (Ko, Ziani & Fioretto), computed with the exact backend.

``*_data`` functions return the numbers; ``figure_*`` functions draw them into a PNG (matplotlib is
imported only when drawing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets import load_gapminder, toy_hierarchy
from ..models.hierarchy import HierarchyBudget
from ..simulate.hierarchy import simulate_hierarchy
from . import pyplot as _pyplot




def budget_path_data(hierarchy=None, eps_totals=None, **kw) -> dict:
    """Optimal ε per level versus ε_total (program 6, exact backend)."""
    h = hierarchy or toy_hierarchy()
    E = np.logspace(-2, 1, 13) if eps_totals is None else np.asarray(eps_totals, dtype=float)
    rows = [HierarchyBudget(h, float(e), **kw).solve().epsilon for e in E]
    return {"epsilon_total": E, "epsilon": np.array(rows)}


def mse_comparison_data(hierarchy=None, epsilon_total=1.0, **kw) -> dict:
    """Per-level MSE of the optimal and the uniform split."""
    h = hierarchy or toy_hierarchy()
    sol = HierarchyBudget(h, epsilon_total, **kw).solve()
    return {"optimal": sol.mse_per_level, "uniform": sol.uniform_mse_per_level, "epsilon": sol.epsilon}


def simulation_data(hierarchy=None, epsilon_total=1.0, trials=20000, seed=0, **kw) -> dict:
    """Simulated (with and without consistency) versus closed-form bias² and variance per level."""
    h = hierarchy or toy_hierarchy()
    model = HierarchyBudget(h, epsilon_total, **kw)
    eps = model.solve().epsilon
    cf = model.level_breakdown(eps)
    return {"closed_form": cf, "epsilon": eps,
            "plain": simulate_hierarchy(h, eps, trials, seed, consistency=False),
            "consistent": simulate_hierarchy(h, eps, trials, seed, consistency=True)}


def _small_tree():
    """A 3-level tree with a zero count (truncation bias is visible): 12; 7, 5; 3, 4 | 0, 5."""
    from ..models.tree import Hierarchy
    return Hierarchy.from_levels([[12], [7, 5], [3, 4, 0, 5]], [None, [0, 0], [0, 0, 1, 1]],
                                 name="small tree 12; 7, 5; 3, 4 | 0, 5")


def bias_variance_data(hierarchy=None, epsilon_total=0.01, trials=20000, seed=0, **kw) -> dict:
    """Paper Fig. 3: Monte Carlo bias² and variance per level of the optimal and the uniform split,
    without ("plain") and with top-down consistency ("consistent"), plus the closed forms (no consistency).

    Default data: Gapminder 2007 populations in thousands at ε_total = 0.01 (``models/ko_gapminder_2007.toml``),
    standing in for the paper's Census blocks (unavailable)."""
    h = hierarchy or load_gapminder(2007, 1000.0)
    model = HierarchyBudget(h, epsilon_total, **kw)
    name = h.name + (" (thousands)" if hierarchy is None else "")
    out = {"epsilon_total": float(epsilon_total), "name": name, "trials": int(trials)}
    for key, eps in (("optimal", model.solve().epsilon), ("uniform", model.uniform_split())):
        out[key] = {"epsilon": np.asarray(eps, dtype=float), "closed_form": model.level_breakdown(eps),
                    "plain": simulate_hierarchy(h, eps, trials, seed, consistency=False),
                    "consistent": simulate_hierarchy(h, eps, trials, seed, consistency=True)}
    return out


def _save(fig, plt, out_dir, name) -> Path:
    path = Path(out_dir) / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure_budget_path(out_dir, quick=False, hierarchy=None) -> Path:
    d = budget_path_data(hierarchy, np.logspace(-2, 1, 5 if quick else 25))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for l in range(d["epsilon"].shape[1]):
        ax.loglog(d["epsilon_total"], d["epsilon"][:, l], marker="o", label=f"level {l + 1}")
    ax.set_xlabel("ε_total")
    ax.set_ylabel("ε_ℓ (optimal, program 6)")
    ax.set_title("Budget per level versus total budget")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, plt, out_dir, "ko_budget_per_level.png")


def figure_mse_levels(out_dir, quick=False, hierarchy=None) -> Path:
    h = hierarchy or (toy_hierarchy() if quick else load_gapminder(2007))
    d = mse_comparison_data(h, 1.0)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    L = len(d["optimal"])
    x = np.arange(1, L + 1)
    ax.bar(x - 0.2, d["optimal"], 0.4, label="optimal")
    ax.bar(x + 0.2, d["uniform"], 0.4, label="uniform")
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xlabel("level")
    ax.set_ylabel("Σ MSE over the level's nodes")
    ax.set_title(f"MSE per level: optimal versus uniform (ε_total = 1; {h.name or 'tree'})", fontsize=10)
    ax.legend()
    return _save(fig, plt, out_dir, "ko_mse_per_level.png")


def figure_simulation(out_dir, quick=False, hierarchy=None) -> Path:
    if hierarchy is None:
        hierarchy = _small_tree()
    d = simulation_data(hierarchy, 1.0, trials=2000 if quick else 50000)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    L = len(d["epsilon"])
    x = np.arange(1, L + 1)
    for ax, key in zip(axes, ("bias2", "variance")):
        ax.plot(x, d["closed_form"][key], "k-", marker="s", label="closed form (no consistency)")
        ax.errorbar(x, d["plain"][key], yerr=2 * d["plain"][f"{key}_se"], fmt="o", label="simulated, no consistency")
        ax.errorbar(x + 0.05, d["consistent"][key], yerr=2 * d["consistent"][f"{key}_se"], fmt="^",
                    label="simulated, top-down consistency")
        ax.set_xticks(x)
        ax.set_xlabel("level")
        ax.set_title(key)
    axes[0].legend(fontsize=7)
    return _save(fig, plt, out_dir, "ko_simulated_vs_closed_form.png")


def figure_bias_variance(out_dir, quick=False, hierarchy=None, data=None) -> Path:
    """Paper Fig. 3 analogue; ``data`` (from :func:`bias_variance_data`) skips the simulation."""
    if data is not None:
        d = data
    elif hierarchy is None and quick:
        d = bias_variance_data(_small_tree(), 1.0, trials=2000)
    else:
        d = bias_variance_data(hierarchy, trials=50000)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    x = np.arange(2)
    for ax, key in zip(axes, ("bias2", "variance")):
        allv = []
        for k, (alloc, colour) in enumerate((("uniform", "C1"), ("optimal", "C0"))):
            vals = [max(float(np.sum(d[alloc][mode][key])), 1e-12) for mode in ("plain", "consistent")]
            allv += vals
            ax.bar(x + (k - 0.5) * 0.38, vals, 0.38, color=colour, label=alloc)
        ax.set_yscale("log")
        ax.set_ylim(min(allv) / 10, max(allv) * 30)
        ax.set_xticks(x)
        ax.set_xticklabels(["no consistency", "top-down consistency"])
        ax.set_title(f"{'Bias²' if key == 'bias2' else 'Variance'} (sum over all nodes)")
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle(f"Optimal vs uniform split, ε_total = {d['epsilon_total']:g} ({d['name'] or 'tree'}; "
                 f"{d['trials']} releases)", fontsize=9)
    return _save(fig, plt, out_dir, "ko_fig3_bias_variance.png")


FIGURES = {
    "ko-budget-path": figure_budget_path,
    "ko-mse-levels": figure_mse_levels,
    "ko-simulation": figure_simulation,
    "ko-fig3": figure_bias_variance,
}
