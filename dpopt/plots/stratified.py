"""Figures for the stratified design (Chen, Pasupathy & Awan, Figures 3–6), computed with the exact backend.

Each ``*_data`` function returns the numbers (so tests can check them); each ``figure_*`` function draws
them and writes a PNG. matplotlib is imported only when drawing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.stratified import StratifiedDesign
from . import pyplot as _pyplot

TABLE1 = dict(N=[7000, 8000, 9000, 10000], sigma2=[0.08, 0.08 ** 2, 0.08 ** 3, 0.08 ** 4], total=200)
SECTION52 = dict(N=[1000, 2000, 3000], sigma2=[0.08, 0.08 ** 1.5, 0.08 ** 2], total=200)




def variance_ratio_data(objective="mean", mechanisms=("laplace", "dlap", "tulap"), eps=None, setting=TABLE1,
                        naive="neyman"):
    """Ratio g(naive design)/g(optimal design) over ε (paper Figures 3 and 4).

    ``naive`` is a :meth:`StratifiedDesign.baseline` name; the paper's Figure 4 (A-optimal) compares with
    the population-mean Neyman design, ``"neyman-mean"``.
    """
    eps = np.logspace(-2, 2, 41) if eps is None else np.asarray(eps, dtype=float)
    out = {"epsilon": eps}
    for mech in mechanisms:
        ratios = []
        for e in eps:
            model = StratifiedDesign(**setting, epsilon=float(e), mechanism=mech, objective=objective)
            ratios.append(model.objective_value(model.baseline(naive)) / model.solve().objective)
        out[mech] = np.array(ratios)
    return out


def design_path_data(eps=None, setting=SECTION52):
    """Optimal integer design versus the no-noise (Neyman) and pure-noise (proportional) designs (Figure 5)."""
    eps = np.logspace(-2, 2, 41) if eps is None else np.asarray(eps, dtype=float)
    designs = []
    for e in eps:
        designs.append(StratifiedDesign(**setting, epsilon=float(e)).solve().n)
    model = StratifiedDesign(**setting, epsilon=1.0)
    return {"epsilon": eps, "optimal": np.array(designs), "neyman": model.baseline("neyman"),
            "proportional": model.baseline("proportional")}


def misspecification_data(factors=(3.0, 1.2, 0.9, 0.3), eps=None, setting=SECTION52, mechanism="laplace"):
    """g(design optimal for σ̂² = factor·σ²) / g(true optimum), both under the true σ² (Figure 6)."""
    eps = np.logspace(-2, 2, 41) if eps is None else np.asarray(eps, dtype=float)
    out = {"epsilon": eps}
    sigma2 = np.asarray(setting["sigma2"], dtype=float)
    for f in factors:
        ratios = []
        for e in eps:
            true = StratifiedDesign(**setting, epsilon=float(e), mechanism=mechanism)
            wrong = StratifiedDesign(**{**setting, "sigma2": f * sigma2}, epsilon=float(e), mechanism=mechanism)
            ratios.append(true.objective_value(wrong.solve().n) / true.solve().objective)
        out[f] = np.array(ratios)
    return out


def figure_variance_ratio(out_dir, objective="mean", quick=False) -> Path:
    eps = np.logspace(-2, 2, 9 if quick else 61)
    # Fig. 4's naive design is the population-mean Neyman allocation (authors' code), not x ∝ σ
    naive = "neyman" if objective == "mean" else "neyman-mean"
    data = variance_ratio_data(objective, eps=eps, naive=naive)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for mech in ("laplace", "dlap", "tulap"):
        ax.semilogx(data["epsilon"], data[mech], marker="o" if quick else None, label=mech)
    ax.set_xlabel("ε")
    ax.set_ylabel("g(Neyman) / g(optimal)" if objective == "mean" else "g(mean-Neyman) / g(optimal)")
    title = "population mean" if objective == "mean" else "A-optimal"
    ax.set_title(f"Variance ratio, {title} (Chen et al. Fig. {3 if objective == 'mean' else 4})")
    ax.legend()
    ax.grid(alpha=0.3)
    path = Path(out_dir) / f"chen_fig{3 if objective == 'mean' else 4}_variance_ratio_{objective}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure_design_path(out_dir, quick=False) -> Path:
    data = design_path_data(eps=np.logspace(-2, 2, 9 if quick else 61))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i in range(data["optimal"].shape[1]):
        line, = ax.semilogx(data["epsilon"], data["optimal"][:, i], label=f"stratum {i + 1}")
        ax.axhline(data["neyman"][i], color=line.get_color(), ls=":", lw=1)
        ax.axhline(data["proportional"][i], color=line.get_color(), ls="--", lw=1)
    ax.set_xlabel("ε")
    ax.set_ylabel("n_i")
    ax.set_title("Optimal design between no-noise (:) and pure-noise (--) (Fig. 5)")
    ax.legend()
    ax.grid(alpha=0.3)
    path = Path(out_dir) / "chen_fig5_design_path.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure_misspecification(out_dir, quick=False) -> Path:
    data = misspecification_data(eps=np.logspace(-2, 2, 9 if quick else 61))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for f in (3.0, 1.2, 0.9, 0.3):
        ax.semilogx(data["epsilon"], data[f], label=f"σ̂² = {f}σ²")
    ax.set_xlabel("ε")
    ax.set_ylabel("g(misspecified design) / g(optimal)")
    ax.set_title("Sensitivity to misspecified σ² (Chen et al. Fig. 6)")
    ax.legend()
    ax.grid(alpha=0.3)
    path = Path(out_dir) / "chen_fig6_misspecification.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: figures offered by ``dpopt plot NAME``: name -> function(out_dir, quick) -> Path
FIGURES = {
    "chen-fig3": lambda out, quick=False: figure_variance_ratio(out, "mean", quick),
    "chen-fig4": lambda out, quick=False: figure_variance_ratio(out, "a-optimal", quick),
    "chen-fig5": figure_design_path,
    "chen-fig6": figure_misspecification,
}
