"""Figures for sample size versus privacy (Hu, Drechsler & Kim Figs. 3–5, 8, 13) and importance sampling.

Each ``*_data`` function returns the numbers (tests can check them); each ``figure_*`` function draws
them and writes a PNG. matplotlib is imported only when drawing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.importance import ImportanceSampling, amplified_loss, uniform_probabilities
from ..models.sample_size import (SampleSizeProgram, amplified_nominal_epsilon, epsilon_for_noise_ratio,
                                  q_bound)
from . import pyplot as _pyplot




def _save(fig, out_dir, name) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def amplification_data(eps=(0.1, 0.5, 1.0), rates=None):
    """ε_n over the sampling rate for several targets ε (paper Fig. 3)."""
    rates = np.geomspace(1e-3, 1, 200) if rates is None else np.asarray(rates, dtype=float)
    return {"rate": rates, **{float(e): amplified_nominal_epsilon(e, rates) for e in eps}}


def q_bound_data(eps=(0.1, 0.5, 1.0, 3.0), rates=None):
    """q = 1 − ε²/ε_n² over the sampling rate (paper Fig. 4)."""
    rates = np.linspace(0.005, 1, 200) if rates is None else np.asarray(rates, dtype=float)
    return {"rate": rates, **{float(e): q_bound(e, rates) for e in eps}}


def noise_ratio_threshold_data(rates=None, ratio=1 - 1e-3):
    """The ε below which the mean's noise ratio r exceeds ``ratio`` (r = 1 itself has no finite ε)."""
    rates = np.geomspace(1e-4, 0.9, 40) if rates is None else np.asarray(rates, dtype=float)
    eps = np.array([epsilon_for_noise_ratio(r, ratio) for r in rates])
    return {"rate": rates, "epsilon": eps, "epsilon_n": amplified_nominal_epsilon(eps, rates), "ratio": ratio}


def variance_curve_data(N=10001, S2=1.0, sensitivities=(0.003, 0.01, 0.03), epsilon=1.0, points=200):
    """V_n / V_N over the sampling rate for constant sensitivities, with the exact optimum of each."""
    out = {}
    for d in sensitivities:
        m = SampleSizeProgram(N, S2, epsilon, sensitivity=d)
        c = m.curve(points=points)
        sol = m.solve()
        out[float(d)] = {"rate": c["rate"], "relative": c["variance"] / m.V_N, "n_star": int(sol.n[0]),
                         "gain": float(sol.gain)}
    return out


def importance_data(n=1000, d=10, noise_scales=None, epsilon=None, seed=0):
    """Worst-case loss ψ of privacy-constrained vs uniform sampling at equal expected size (Fay Fig. 2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0, np.sqrt(1 / d), (n, d))
    s = np.abs(X).sum(axis=1)
    scales = np.geomspace(3, 3000, 12) if noise_scales is None else np.asarray(noise_scales, dtype=float)
    eps_star = float(s.max() / scales.min()) if epsilon is None else float(epsilon)
    rows = []
    for b in scales:
        m = ImportanceSampling(eps_star, slopes=s / b)
        q = m.solve().x
        uni = uniform_probabilities(n, float(q.sum()))
        rows.append((b, float(q.sum()), float(np.max(amplified_loss(q, slopes=s / b))),
                     float(np.max(amplified_loss(uni, slopes=s / b)))))
    arr = np.array(rows)
    return {"noise_scale": arr[:, 0], "expected_size": arr[:, 1], "psi_privacy": arr[:, 2],
            "psi_uniform": arr[:, 3], "epsilon": eps_star}


def figure_amplification(out_dir, quick=False) -> Path:
    data = amplification_data(rates=np.geomspace(1e-3, 1, 20 if quick else 200))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for e in (0.1, 0.5, 1.0):
        ax.semilogx(data["rate"], data[e], label=f"ε = {e:g}")
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel("ε_n")
    ax.set_title("Amplified nominal budget (Hu et al. Fig. 3)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "hu_fig3_amplification.png")


def figure_q_bound(out_dir, quick=False) -> Path:
    data = q_bound_data(rates=np.linspace(0.005, 1, 20 if quick else 200))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for e in (0.1, 0.5, 1.0, 3.0):
        ax.plot(data["rate"], data[e], label=f"ε = {e:g}")
    ax.axhline(0.6, color="grey", ls=":", lw=1)
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel("q = 1 − ε²/ε_n²")
    ax.set_title("Upper bound on the sampling variance / V_N (Hu et al. Fig. 4)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "hu_fig4_q_bound.png")


def figure_noise_ratio_threshold(out_dir, quick=False) -> Path:
    data = noise_ratio_threshold_data(rates=np.geomspace(1e-4, 0.9, 8 if quick else 40))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(data["rate"], data["epsilon"], label="ε")
    ax.loglog(data["rate"], data["epsilon_n"], label="ε_n")
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel(f"value giving r = {data['ratio']:g}")
    ax.set_title("Mean: noise ratio threshold (r = 1 has no finite ε)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "hu_fig5_noise_ratio.png")


def figure_variance_curve(out_dir, quick=False) -> Path:
    data = variance_curve_data(points=40 if quick else 200)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for d, c in data.items():
        line, = ax.semilogx(c["rate"], c["relative"], label=f"Δ = {d:g}")
        ax.axvline(c["n_star"] / 10001, color=line.get_color(), ls=":", lw=1)
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel("V_n / V_N")
    ax.set_title("Constant sensitivity: V_n over the rate (dotted: exact n*)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "hu_variance_curve.png")


def figure_importance(out_dir, quick=False) -> Path:
    data = importance_data(noise_scales=np.geomspace(3, 3000, 5 if quick else 12))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(data["expected_size"], data["psi_privacy"], marker="o", label="privacy-constrained")
    ax.loglog(data["expected_size"], data["psi_uniform"], marker="s", label="uniform")
    ax.set_xlabel("expected sample size")
    ax.set_ylabel("max_i ψ_i")
    ax.set_title("Laplace weighted sum: worst-case loss at equal size (Fay et al.)")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "fay_importance.png")


FIGURES = {
    "hu-fig3": figure_amplification,
    "hu-fig4": figure_q_bound,
    "hu-fig5": figure_noise_ratio_threshold,
    "hu-variance-curve": figure_variance_curve,
    "fay-importance": figure_importance,
}
