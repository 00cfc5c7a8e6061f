"""Figures for the stratified design (Chen, Pasupathy & Awan, Figures 3–6), computed with the exact backend.

Each ``*_data`` function returns the numbers (so tests can check them); each ``figure_*`` function draws
them and writes a PNG. matplotlib is imported only when drawing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..datasets import CHEN_SECTION52 as SECTION52
from ..datasets import CHEN_TABLE1 as TABLE1
from ..datasets import chen_section54 as section54
from ..models.stratified import StratifiedDesign
from . import pyplot as _pyplot
from . import save as _save


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
    return _save(fig, out_dir, f"chen_fig{3 if objective == 'mean' else 4}_variance_ratio_{objective}.png")


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
    return _save(fig, out_dir, "chen_fig5_design_path.png")


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
    return _save(fig, out_dir, "chen_fig6_misspecification.png")


TIMING_ROUTES = {"exact": {"backend": "exact"}, "algorithm1": {"backend": "algorithm1"},
                 "pyomo-scip": {"backend": "pyomo", "solver": "scip"}}


def timing_data(cases, time_limit: float = 20.0, routes=tuple(TIMING_ROUTES)) -> dict:
    """Wall time of each route on §5.4 instances ``cases = [(k, eta), ...]`` (paper Figures 7 and 8).

    Returns ``{route: [(k, eta, seconds, status, objective), ...]}``. A route that hits ``time_limit`` is
    not run on the following (larger) cases of the list; a refusal (``unsupported``) does not stop it.
    """
    import time as _time

    out = {r: [] for r in routes}
    stopped = set()
    for k, eta in cases:
        model = section54(k, eta, scale_to_fit=True)
        for r in routes:
            if r in stopped:
                continue
            opts = dict(TIMING_ROUTES[r])
            backend = opts.pop("backend")
            if backend != "exact":
                opts["time_limit"] = time_limit
            t0 = _time.perf_counter()
            sol = model.solve(backend=backend, **opts)
            dt = _time.perf_counter() - t0
            out[r].append((k, eta, dt, sol.status.value, sol.objective))
            if sol.status.value in ("time_limit", "error"):
                stopped.add(r)
    return out


def _figure_timing(out_dir, data, axis: str, title: str, name: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    col = 1 if axis == "eta" else 0
    for r, rows in data.items():
        ok = [(row[col], row[2]) for row in rows if row[3] == "optimal"]
        bad = [(row[col], row[2]) for row in rows if row[3] != "optimal"]
        line, = ax.plot(*zip(*ok), marker="o", label=r) if ok else ax.plot([], [], marker="o", label=r)
        if bad:
            ax.plot(*zip(*bad), ls="none", marker="x", ms=9, color=line.get_color())
    if axis == "eta":
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("η (total sample size)" if axis == "eta" else "k (strata)")
    ax.set_ylabel("wall time (s); × = not proven optimal")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out_dir, name)


def timing_cases(axis: str, quick: bool = False) -> list:
    """The (k, η) grid of Figure 7 (``axis="eta"``: k = 10; N ×10 at η = 10⁶) or Figure 8 (``axis="k"``: η = 1000)."""
    if axis == "eta":
        return [(10, e) for e in ([30, 100] if quick else [30, 100, 300, 1000, 3000, 10 ** 4, 10 ** 5, 10 ** 6])]
    return [(k, 100 if quick else 1000) for k in ([2, 4] if quick else range(2, 27, 2))]


def figure_timing_eta(out_dir, quick=False, data=None) -> Path:
    data = data or timing_data(timing_cases("eta", quick), time_limit=2.0 if quick else 20.0)
    return _figure_timing(out_dir, data, "eta", "Time versus η, k = 10 (Chen et al. Fig. 7)", "chen_fig7_time_vs_eta.png")


def figure_timing_k(out_dir, quick=False, data=None) -> Path:
    data = data or timing_data(timing_cases("k", quick), time_limit=2.0 if quick else 20.0)
    eta = next(iter(data.values()))[0][1]
    return _figure_timing(out_dir, data, "k", f"Time versus k, η = {eta} (Chen et al. Fig. 8)", "chen_fig8_time_vs_k.png")


#: figures offered by ``dpopt plot NAME``: name -> function(out_dir, quick) -> Path
FIGURES = {
    "chen-fig3": lambda out, quick=False: figure_variance_ratio(out, "mean", quick),
    "chen-fig4": lambda out, quick=False: figure_variance_ratio(out, "a-optimal", quick),
    "chen-fig5": figure_design_path,
    "chen-fig6": figure_misspecification,
    "chen-fig7": figure_timing_eta,
    "chen-fig8": figure_timing_k,
}
