"""Figures for sample size versus privacy (Hu, Drechsler & Kim Figs. 3–5, 8, 13) and importance sampling
(Fay, Mair & Sjölund Fig. 2).

Each ``*_data`` function returns the numbers (tests can check them); each ``figure_*`` function draws
them and writes a PNG. matplotlib is imported only when drawing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.importance import (ImportanceSampling, amplified_loss, calibrate_noise_scale,
                                 uniform_probabilities)
from ..privacy import nominal_epsilon
from ..models.sample_size import (SampleSizeProgram, epsilon_for_noise_ratio,
                                  q_bound)
from ..simulate.sample_size import beta_mixture_population, lognormal_population, simulate_sample_size
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
    return {"rate": rates, **{float(e): nominal_epsilon(e, rates) for e in eps}}


def q_bound_data(eps=(0.1, 0.5, 1.0, 3.0), rates=None):
    """q = 1 − ε²/ε_n² over the sampling rate (paper Fig. 4)."""
    rates = np.linspace(0.005, 1, 200) if rates is None else np.asarray(rates, dtype=float)
    return {"rate": rates, **{float(e): q_bound(e, rates) for e in eps}}


def noise_ratio_threshold_data(rates=None, ratio=1 - 1e-3):
    """The ε below which the mean's noise ratio r exceeds ``ratio`` (r = 1 itself has no finite ε)."""
    rates = np.geomspace(1e-4, 0.9, 40) if rates is None else np.asarray(rates, dtype=float)
    eps = np.array([epsilon_for_noise_ratio(r, ratio) for r in rates])
    return {"rate": rates, "epsilon": eps, "epsilon_n": nominal_epsilon(eps, rates), "ratio": ratio}


def variance_curve_data(N=10001, S2=1.0, sensitivities=(0.003, 0.01, 0.03), epsilon=1.0, points=200):
    """V_n / V_N over the sampling rate for constant sensitivities, with the exact optimum of each."""
    out = {}
    for d in sensitivities:
        m = SampleSizeProgram(N, S2, epsilon, sensitivity=d)
        c = m.curve(points=points)
        sol = m.solve()
        out[float(d)] = {"rate": c["rate"], "relative": c["variance"] / m.V_N, "n_star": sol.n,
                         "gain": float(sol.gain)}
    return out


MEDIAN_EPS = (0.01, 0.1, 0.5, 1.0, 3.0, 5.0)                 # Hu et al. Figs. 8 and 13
MEDIAN_RATES = (0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def median_mse_data(population="lognormal", N=10001, eps=MEDIAN_EPS, rates=MEDIAN_RATES, draws=200, seed=0):
    """log MSE of the smooth-sensitivity median released from an SRS, over the sampling rate (Hu et al.
    Fig. 8: ``population="lognormal"``, Lognormal(5, 0.5); Fig. 13: ``"mixture"``, scaled Beta mixture).

    δ = 1/(2N) as in the paper. The MSE is the Rao–Blackwellised Monte Carlo estimate (exact noise
    variance per draw); ``se`` its standard error; ``population`` the exact MSE of the full-data release."""
    make = {"lognormal": lognormal_population, "mixture": beta_mixture_population}[population]
    res = simulate_sample_size(make(N, seed=seed), eps, rates, statistic="median", draws=draws, seed=seed + 1,
                               progress=False)
    return {"population_kind": population, "N": N, "draws": draws, "epsilon": res.epsilons, "rate": res.rates,
            "mse": res.mse_rb, "se": res.se_rb, "population": res.mse_population, "gain": res.gain,
            "helps": np.array([b["helps"] for b in res.best()])}


def _laplace_sum_points(n=1000, d=10, seed=0):
    """Fay et al. §3.3 data: n points from an isotropic normal in d dimensions with variance 1/d."""
    return np.random.default_rng(seed).normal(0, np.sqrt(1 / d), (n, d))


def variance_optimal_probabilities(points, m) -> np.ndarray:
    """Fay et al.'s variance-optimal benchmark q_var: minimise Σ_j Var[M_LWS]_j = const + Σ_i (1/q_i − 1)‖x_i‖₂²
    subject to Σ q_i = m, 0 < q_i ≤ 1. Lagrange: q_i = min(1, ‖x_i‖₂/λ); the capped set and λ are found
    exactly from the sorted norms. It reads the data (an oracle), so it is *not* differentially private."""
    X = np.asarray(points, dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    r = np.linalg.norm(X, axis=1)
    n = r.size
    if not 0 < m <= n:
        raise ValueError(f"expected size m must be in (0, n] = (0, {n}], got {m!r}")
    if np.any(r <= 0):
        raise ValueError("every point needs a non-zero norm (a zero point has no optimal q > 0)")
    if m >= n:
        return np.ones(n)
    rs = np.sort(r)[::-1]
    tail = np.cumsum(rs[::-1])[::-1]                   # tail[k] = Σ_{i ≥ k} rs[i]
    k = np.arange(min(n, int(np.ceil(m))))
    lam = tail[k] / (m - k)                            # λ when the k largest are capped at 1
    kstar = int(np.flatnonzero(rs[k] <= lam)[0])
    return np.minimum(1.0, r / lam[kstar])


def lws_mse(points, q, noise_scale) -> float:
    """Σ_j Var of the Laplace weighted sum ζ + Σ_{i sampled} x_i/q_i (Fay et al. §3.3): 2·d·b² + Σ (1/q_i − 1)‖x_i‖₂²
    (the estimator of Σ x_i is unbiased, so this is its MSE summed over the d coordinates)."""
    X = np.asarray(points, dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    q = np.asarray(q, dtype=float)
    return float(2 * X.shape[1] * noise_scale ** 2 + np.sum((1 / q - 1) * np.sum(X * X, axis=1)))


def importance_data(n=1000, d=10, noise_scales=None, epsilon=None, seed=0):
    """Worst-case loss ψ and MSE of privacy-constrained, variance-optimal and uniform sampling at equal expected
    size (Fay Fig. 2 right). ε* (not stated in the paper) defaults to the smallest admissible value at the
    smallest noise scale, max_i ‖x_i‖₁ / min b; for each b the privacy-constrained distribution fixes m_b."""
    X = _laplace_sum_points(n, d, seed)
    s = np.abs(X).sum(axis=1)
    scales = np.geomspace(3, 3000, 12) if noise_scales is None else np.asarray(noise_scales, dtype=float)
    eps_star = float(s.max() / scales.min()) if epsilon is None else float(epsilon)
    rows = []
    for b in scales:
        m = ImportanceSampling(eps_star, slopes=s / b)
        q = m.solve().x
        uni = uniform_probabilities(n, float(q.sum()))
        var = variance_optimal_probabilities(X, float(q.sum()))
        rows.append((b, float(q.sum()), *(float(np.max(amplified_loss(p, slopes=s / b))) for p in (q, uni, var)),
                     *(lws_mse(X, p, b) for p in (q, uni, var))))
    arr = np.array(rows)
    return {"noise_scale": arr[:, 0], "expected_size": arr[:, 1], "psi_privacy": arr[:, 2],
            "psi_uniform": arr[:, 3], "psi_variance": arr[:, 4], "mse_privacy": arr[:, 5],
            "mse_uniform": arr[:, 6], "mse_variance": arr[:, 7], "epsilon": eps_star}


def importance_weights_data(n=1000, d=10, m=19.0, epsilon=None, noise_scale_min=3.0, seed=0):
    """Importance weights w = 1/q of the three strategies at expected size ``m`` (Fay Fig. 2 left), points
    ordered by ‖x‖₁. ε* as in :func:`importance_data`; the noise scale b is calibrated so that the
    privacy-constrained distribution has expected size m."""
    X = _laplace_sum_points(n, d, seed)
    s = np.abs(X).sum(axis=1)
    eps_star = float(s.max() / noise_scale_min) if epsilon is None else float(epsilon)
    b = calibrate_noise_scale(eps_star, m, s)
    q = {"privacy": ImportanceSampling(eps_star, slopes=np.minimum(s / b, eps_star)).solve().x}
    size = float(q["privacy"].sum())
    q["variance"] = variance_optimal_probabilities(X, size)
    q["uniform"] = uniform_probabilities(n, size)
    order = np.argsort(s, kind="stable")
    return {"l1": s[order], "weights": {k: 1 / v[order] for k, v in q.items()}, "q": q, "points": X,
            "noise_scale": b, "epsilon": eps_star, "expected_size": size,
            "mse": {k: lws_mse(X, v, b) for k, v in q.items()},
            "max_psi": {k: float(np.max(amplified_loss(v, slopes=s / b))) for k, v in q.items()}}


def figure_amplification(out_dir, quick=False) -> Path:
    data = amplification_data(rates=np.geomspace(1e-3, 1, 20 if quick else 200))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for e in (0.1, 0.5, 1.0):
        ax.semilogx(data["rate"], data[e], label=f"ε = {e:g}")
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel("ε_n")
    ax.set_title("Nominal budget (Hu et al. Fig. 3)")
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
        line, = ax.loglog(c["rate"], c["relative"], label=f"Δ = {d:g}")
        ax.axvline(c["n_star"] / 10001, color=line.get_color(), ls=":", lw=1)
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_xlabel("sampling rate n/N")
    ax.set_ylabel("V_n / V_N (log; below 1: sampling helps)")
    ax.set_title("Constant sensitivity: V_n over the rate (dotted: exact n*)", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "hu_variance_curve.png")


def figure_median_mse(out_dir, quick=False, population="lognormal", data=None) -> Path:
    """Hu et al. Fig. 8 (lognormal) / 13 (mixture); ``data`` (from :func:`median_mse_data`) skips the simulation."""
    if data is not None:
        population = data["population_kind"]
    elif quick:
        data = median_mse_data(population, N=2001, rates=(0.01, 0.1, 0.5, 0.9), draws=30)
    else:
        data = median_mse_data(population)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, e in enumerate(data["epsilon"]):
        line, = ax.plot(data["rate"], np.log(data["mse"][i]), marker="o", ms=3, label=f"ε = {e:g}")
        ax.plot([1.0], [np.log(data["population"][i])], "x", ms=9, mew=2, color=line.get_color())
    ax.set_xlabel("sampling rate n/N (crosses: full population)")
    ax.set_ylabel("log(MSE)")
    fig_no, what = (8, "Lognormal(5, 0.5)") if population == "lognormal" else (13, "Beta mixture")
    ax.set_title(f"Smooth-sensitivity median, {what} (Hu et al. Fig. {fig_no})", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    name = "hu_fig8_median_mse_lognormal.png" if population == "lognormal" else "hu_fig13_median_mse_mixture.png"
    return _save(fig, out_dir, name)


def figure_median_mse_mixture(out_dir, quick=False, data=None) -> Path:
    return figure_median_mse(out_dir, quick, population="mixture", data=data)


def figure_importance_weights(out_dir, quick=False) -> Path:
    data = importance_weights_data(n=200 if quick else 1000, m=19.0)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    rank = np.arange(data["l1"].size)
    for key, label, mk in (("uniform", "uniform", "s"), ("privacy", "privacy-constrained", "o"),
                           ("variance", "variance-optimal (not DP)", "^")):
        ax.semilogy(rank, data["weights"][key], mk, ms=2.5, label=label)
    ax.set_xlabel("data point (ordered by ‖x‖₁)")
    ax.set_ylabel("importance weight w = 1/q")
    ax.set_title(f"Laplace weighted sum, E[size] = {data['expected_size']:.3g} (Fay et al. Fig. 2 left)", fontsize=10)
    ax.legend(markerscale=3)
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "fay_fig2_weights.png")


def figure_importance_mse(out_dir, quick=False) -> Path:
    data = importance_data(noise_scales=np.geomspace(3, 3000, 5 if quick else 12))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, mk in (("privacy", "privacy-constrained", "o"), ("uniform", "uniform", "s"),
                           ("variance", "variance-optimal (not DP)", "^")):
        ax.loglog(data[f"psi_{key}"], data[f"mse_{key}"], marker=mk, label=label)
    ax.legend(loc="lower right", fontsize=7, framealpha=0.8)
    ax.set_xlabel("max_i ψ_i (worst-case PDP loss)")
    ax.set_ylabel("MSE of the released sum (Σ over coordinates)")
    ax.set_title(f"Noise scale b in [3, 3000], ε* = {data['epsilon']:.3g} (Fay et al. Fig. 2 right)", fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "fay_fig2_mse.png")


def figure_importance(out_dir, quick=False) -> Path:
    data = importance_data(noise_scales=np.geomspace(3, 3000, 5 if quick else 12))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(data["expected_size"], data["psi_privacy"], marker="o", label="privacy-constrained")
    ax.loglog(data["expected_size"], data["psi_uniform"], marker="s", label="uniform")
    ax.loglog(data["expected_size"], data["psi_variance"], marker="^", label="variance-optimal (not DP)")
    ax.set_xlabel("expected sample size")
    ax.set_ylabel("max_i ψ_i")
    ax.set_title("Laplace weighted sum: worst-case loss at equal size\n(Fay et al.)", fontsize=10)
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out_dir, "fay_importance.png")


FIGURES = {
    "hu-fig3": figure_amplification,
    "hu-fig4": figure_q_bound,
    "hu-fig5": figure_noise_ratio_threshold,
    "hu-variance-curve": figure_variance_curve,
    "hu-fig8": figure_median_mse,
    "hu-fig13": figure_median_mse_mixture,
    "fay-importance": figure_importance,
    "fay-fig2-weights": figure_importance_weights,
    "fay-fig2-mse": figure_importance_mse,
}
