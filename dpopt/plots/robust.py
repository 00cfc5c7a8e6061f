"""Figure of a robust design (docs/robust.md): the regret g(n; S²_s)/g*_s of each design in every scenario,
for the nominal, robust, proportional and Neyman designs. matplotlib is imported only when drawing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import pyplot, save


def regret_data(robust, designs: dict) -> dict:
    """{design name: regrets per scenario} for integer designs ``designs`` ({name: n}) of ``robust`` (a
    RobustDesign with a fixed total), plus ``"scenarios"``: their names."""
    out = {name: robust.regrets(n) for name, n in designs.items()}
    out["scenarios"] = list(robust.names)
    return out


def figure_regret(out_dir, robust, designs: dict, name: str = "robust_regret.png", truth=None) -> Path:
    """Regret per scenario (scenarios sorted by the nominal design's regret when it is given) of each design;
    ``truth`` ({design name: regret under the true S²}) is marked on the right."""
    data = regret_data(robust, designs)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    first = next(iter(designs))
    order = np.argsort(data[first])
    x = np.arange(len(order))
    for label, marker in zip(designs, ["o", "s", "^", "v", "D", "x"]):
        ax.plot(x, np.asarray(data[label])[order], marker=marker, ms=3, lw=1, label=label)
        if truth is not None and label in truth:
            ax.scatter([len(order) + 1], [truth[label]], marker=marker, s=30)
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xlabel(f"scenario (sorted by the {first} design's regret)" + ("; right: the true S²" if truth else ""))
    ax.set_ylabel("regret g(n; S²_s) / g*_s")
    ax.set_title("Regret of each design in every variance scenario")
    ax.legend(fontsize=8)
    return save(fig, out_dir, name)
