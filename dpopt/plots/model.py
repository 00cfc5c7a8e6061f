"""Figures of the user's own model file (``dpopt plot MODEL.toml``).

For a stratified (or min-cost) design, a hierarchy budget or a sample-size program, three PNGs:
``<stem>_design.png`` (the design or budget per stratum/level), ``<stem>_breakdown.png`` (sampling versus
noise, or bias² versus variance, per stratum/level) and ``<stem>_path.png`` (the objective and the design
as the privacy budget varies, each point solved by the model's default backend).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import pyplot as _pyplot
from . import save as _save


def _load(path):
    from ..io import modelfile

    path = Path(path)
    data = modelfile.read(path)
    model, options = modelfile.from_dict(dict(data), base=path.parent, source=str(path))
    return data, model, options


def _variant(data, path, **changes):
    from ..io import modelfile
    d = dict(data)
    d.update(changes)
    return modelfile.from_dict(d, base=Path(path).parent, source=str(path))[0]


def _grid(center: float, quick: bool) -> np.ndarray:
    return center * np.geomspace(0.1, 10.0, 5 if quick else 13)


def plot_model_file(path, out_dir, quick: bool = False) -> list[Path]:
    """Draw the three figures of a model file into ``out_dir``; returns the paths written."""
    from ..models.hierarchy import HierarchyBudget
    from ..models.sample_size import SampleSizeProgram
    from ..models.stratified import MinCostDesign, StratifiedDesign

    data, model, options = _load(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(path).stem
    backend = options.get("backend")
    if isinstance(model, MinCostDesign):
        return _stratified(model.design, data, path, out, stem, quick, backend, solve_model=model)
    if isinstance(model, StratifiedDesign):
        return _stratified(model, data, path, out, stem, quick, backend)
    if isinstance(model, HierarchyBudget):
        return _hierarchy(model, data, path, out, stem, quick, backend)
    if isinstance(model, SampleSizeProgram):
        return _sample_size(model, data, path, out, stem, quick, backend)
    raise ValueError(f"{path}: dpopt plot MODEL.toml draws stratified, stratified_min_cost, hierarchy and "
                     f"sample_size models, not {type(model).__name__}")


def _solved(model, backend):
    sol = model.solve(backend=backend) if backend else model.solve()
    if not sol.ok:
        raise ValueError(f"the model has no solution to plot ({sol.status}: {sol.message})")
    return sol


def _baseline(design, name):
    try:
        return np.asarray(design.baseline(name), dtype=float)
    except (ValueError, TypeError):     # e.g. no Neyman design for a model that has none
        return None


def _label_size(k: int) -> float:
    return 9.0 if k <= 30 else 7.0 if k <= 80 else 5.0


def _stratified(design, data, path, out, stem, quick, backend, solve_model=None):
    """Horizontal bars, one row per stratum sorted by allocation (legible at 50+ strata), with the
    proportional and Neyman designs beside it; the breakdown in units of the variance of the mean."""
    plt = _pyplot()
    sol = _solved(solve_model or design, backend)
    n = np.asarray(sol.n if sol.n is not None else sol.x, dtype=float)
    k = design.k
    order = np.argsort(n, kind="stable")               # largest at the top of a horizontal bar chart
    labels = [str(design.labels[i]) for i in order]
    y = np.arange(k)
    height = max(4.0, 0.2 * k + 1.5)
    fs = _label_size(k)
    nb = design.nominal_budgets(n)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    a1.barh(y, n[order], color="tab:blue", label=f"this design ({sol.status})")
    for name, mark, color in (("proportional", "|", "k"), ("neyman", "x", "tab:green")):
        base = _baseline(design, name)
        if base is not None:
            a1.plot(base[order], y, ls="none", marker=mark, color=color, ms=6, label=name)
    a1.set_yticks(y, labels, fontsize=fs)
    a1.set_ylim(-0.7, k - 0.3)
    a1.set_xlabel("sample size n_h")
    a1.set_title(f"design (total {int(round(n.sum()))})")
    a1.legend(loc="lower right", fontsize=8)
    a1.grid(axis="x", alpha=0.3)
    a2.barh(y, nb["epsilon"][order], color="tab:orange")
    a2.axvline(design.epsilon, color="k", lw=1, ls="--", label=f"central epsilon {design.epsilon:g}")
    a2.set_xscale("log")
    from matplotlib.ticker import ScalarFormatter
    a2.xaxis.set_major_formatter(ScalarFormatter())     # 2, 3, 4 rather than 2×10^0
    a2.xaxis.set_minor_formatter(ScalarFormatter())
    a2.set_xlabel("nominal epsilon per sampled response")
    a2.set_title("budget each sampled response gets")
    a2.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    paths = [_save(fig, out, f"{stem}_design.png")]
    paths.append(_breakdown_figure(plt, design, n, order, labels, out, stem))
    show = np.argsort(-n)[:8]
    names = list(design.labels)
    paths.append(_path_figure(plt, data, path, backend, "epsilon", design.epsilon, quick, design.k, out, stem,
                              xlabel="central epsilon", title="objective versus epsilon", ylabel="objective",
                              series=[(int(i), names[i]) for i in show], point_axis="semilogx",
                              point_label="n_h",
                              point_title="design path" + (" (8 largest strata)" if design.k > 8 else "")))
    return paths


def _breakdown_figure(plt, design, n, order, labels, out, stem):
    """Each stratum's share of the variance of the estimated mean (sampling and DP noise), and the SE of
    the mean under this design, proportional and Neyman allocation. Other objectives: the objective terms."""
    k = design.k
    b = design.variance_breakdown(n)
    mean = design.objective_kind == "mean" and design.J == 1 and b["total"] > 0
    unit = b["variance_of_mean"] / b["total"] if mean else 1.0
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, max(4.0, 0.2 * k + 1.5)),
                                 gridspec_kw={"width_ratios": [3, 1]})
    y = np.arange(k)
    samp, noise = b["sampling"][order] * unit, b["noise"][order] * unit
    a1.barh(y, samp, color="tab:blue", label="sampling")
    a1.barh(y, noise, left=samp, color="tab:red", label="DP noise")
    a1.set_yticks(y, labels, fontsize=_label_size(k))
    a1.set_ylim(-0.7, k - 0.3)
    a1.set_xlabel("contribution to Var(estimated mean)" if mean else "objective term")
    a1.set_title(f"sampling versus noise per stratum (noise share {b['noise_total'] / b['total']:.0%})")
    a1.legend(loc="lower right", fontsize=8)
    a1.grid(axis="x", alpha=0.3)
    names, values = [], []
    for name, pt in (("this", n), ("proportional", _baseline(design, "proportional")),
                     ("Neyman", _baseline(design, "neyman"))):
        if pt is not None:
            v = float(design.objective_value(pt))
            # a baseline that breaks the model's rows (targets, budget) is no rival: say so under its bar
            names.append(name if name == "this" or design.is_feasible(pt) else f"{name}\n(misses targets\nor rows)")
            values.append(np.sqrt(v * unit) if mean else v)
    a2.bar(names, values, color=["tab:blue", "0.6", "tab:green"][:len(names)])
    a2.set_ylabel("SE of the estimated mean" if mean else "objective g(n)")
    a2.set_title("designs compared")
    for i, v in enumerate(values):
        a2.annotate(f"{v:.4g}", (i, v), ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    return _save(fig, out, f"{stem}_breakdown.png")


def _path_figure(plt, data, path, backend, key, center, quick, size, out, stem, *, xlabel, title, ylabel, series,
                 point_axis, point_label, point_title):
    """``<stem>_path.png``: the model file re-solved with ``key`` on a grid around ``center``; the objective
    (left) and the chosen entries ``series`` = [(index, label)] of the solution (right) along the grid."""
    grid = _grid(center, quick)
    obj, points = [], []
    for g in grid:
        r = _variant(data, path, **{key: float(g)})
        s = r.solve(backend=backend) if backend else r.solve()
        obj.append(s.objective if s.ok else np.nan)
        pt = s.n if s.n is not None else s.x
        points.append(np.asarray(pt, dtype=float) if pt is not None else np.full(size, np.nan))
    points = np.array(points)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.loglog(grid, obj, "o-")
    a1.axvline(center, color="k", lw=1, ls="--")
    a1.set_xlabel(xlabel)
    a1.set_ylabel(ylabel)
    a1.set_title(title)
    for i, label in series:
        getattr(a2, point_axis)(grid, points[:, i], "o-", label=label)
    a2.axvline(center, color="k", lw=1, ls="--")
    a2.set_xlabel(xlabel)
    a2.set_ylabel(point_label)
    a2.set_title(point_title)
    a2.legend(fontsize=8)
    return _save(fig, out, f"{stem}_path.png")


def _hierarchy(model, data, path, out, stem, quick, backend):
    plt = _pyplot()
    sol = _solved(model, backend)
    e = np.asarray(sol.x, dtype=float)
    L = model.n_levels
    x = np.arange(1, L + 1)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(x, e, color="tab:orange", label="optimal")
    ax.plot(x, sol.uniform_epsilon, "ko--", label="uniform split")
    ax.set_xticks(x, [f"level {l}\n({s} nodes)" for l, s in zip(x, model.hierarchy.sizes)])
    ax.set_ylabel("epsilon per level")
    ax.set_title(f"budget per level ({sol.status}, total {e.sum():.4g})")
    ax.legend()
    paths = [_save(fig, out, f"{stem}_design.png")]
    br = model.level_breakdown(e)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(x, br["variance"], label="variance", color="tab:blue")
    ax.bar(x, br["bias2"], bottom=br["variance"], label="bias^2 (truncation)", color="tab:red")
    ax.set_xticks(x, [f"level {l}" for l in x])
    ax.set_yscale("log")
    ax.set_ylabel("sum of node MSE")
    ax.set_title("MSE per level: variance versus truncation bias")
    ax.legend()
    paths.append(_save(fig, out, f"{stem}_breakdown.png"))
    key = "epsilon_total" if model.program == "budget" else "mse_target"
    center = model.epsilon_total if model.program == "budget" else model.mse_target
    paths.append(_path_figure(plt, data, path, backend, key, center, quick, L, out, stem, xlabel=key,
                              title=f"objective versus {key}",
                              ylabel="weighted MSE" if key == "epsilon_total" else "total epsilon",
                              series=[(l, f"level {l + 1}") for l in range(L)], point_axis="loglog",
                              point_label="epsilon per level", point_title="budget path"))
    return paths


def _sample_size(model, data, path, out, stem, quick, backend):
    plt = _pyplot()
    sol = _solved(model, backend)
    nstar = int(sol.n_star)
    c = model.curve(points=60 if quick else 200)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(c["n"], c["variance"], label="V_n")
    ax.axvline(nstar, color="k", lw=1, ls="--", label=f"n* = {nstar}")
    ax.set_xlabel("sample size n")
    ax.set_ylabel("variance of the released mean")
    ax.set_title(f"design ({sol.status}); gain V_N/V_n* = {sol.gain:.3g}")
    ax.legend()
    paths = [_save(fig, out, f"{stem}_design.png")]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(c["n"], c["sampling"], label="sampling")
    ax.loglog(c["n"], c["noise"], label="DP noise")
    ax.axvline(nstar, color="k", lw=1, ls="--")
    ax.set_xlabel("sample size n")
    ax.set_ylabel("variance part")
    ax.set_title("sampling versus noise")
    ax.legend()
    paths.append(_save(fig, out, f"{stem}_breakdown.png"))
    eps = _grid(model.epsilon, quick)
    ns, vs = [], []
    for e in eps:
        r = _variant(data, path, epsilon=float(e))
        s = r.solve(backend=backend) if backend else r.solve()
        ns.append(float(s.n_star) if s.ok else np.nan)
        vs.append(s.objective if s.ok else np.nan)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.loglog(eps, vs, "o-")
    a1.axvline(model.epsilon, color="k", lw=1, ls="--")
    a1.set_xlabel("central epsilon")
    a1.set_ylabel("V_n*")
    a1.set_title("objective versus epsilon")
    a2.semilogx(eps, ns, "o-")
    a2.axvline(model.epsilon, color="k", lw=1, ls="--")
    a2.set_xlabel("central epsilon")
    a2.set_ylabel("n*")
    a2.set_title("design path")
    paths.append(_save(fig, out, f"{stem}_path.png"))
    return paths
