"""Reproduce Fay, Mair & Sjölund §3.3 (Fig. 2): importance sampling for the Laplace weighted sum.

n = 1000 points from N(0, I/d), d = 10; mechanism ζ + Σ_{i sampled} w_i x_i with ζ ~ Laplace(b) per
coordinate, PDP profile ε(w, x) = w‖x‖₁/b. Compares privacy-constrained sampling (Problem 7, Theorem 10),
the variance-optimal benchmark (q ∝ ‖x‖₂, needs the data, not DP) and uniform sampling at equal
expected size: weights (Fig. 2 left, m = 19), worst-case loss max ψ and MSE over b ∈ [3, 3000]
(Fig. 2 right). The paper does not state ε*; we use the smallest admissible one at b = 3,
ε* = max‖x‖₁/3. MSE is the closed form 2·d·b² + Σ(1/q − 1)‖x‖₂², checked by Monte Carlo.

    python examples/fay_importance.py --out DIR [--quick]
"""

import numpy as np

from dpopt.plots import sample_size as figs
from dpopt.plots import example_args, report_written

NAMES = (("privacy", "privacy-constrained"), ("variance", "variance-optimal"), ("uniform", "uniform"))


def monte_carlo_mse(X, q, b, runs, seed=0):
    """Paper's estimate: average over ``runs`` Poisson samples + Laplace noise of ‖M(D̃) − Σ x‖²."""
    rng = np.random.default_rng(seed)
    truth = X.sum(axis=0)
    err = np.empty(runs)
    for t in range(runs):
        keep = rng.random(q.size) < q
        est = (X[keep] / q[keep, None]).sum(axis=0) + rng.laplace(0.0, b, X.shape[1])
        err[t] = np.sum((est - truth) ** 2)
    return float(err.mean()), float(err.std(ddof=1) / np.sqrt(runs))


def weights(quick):
    d = figs.importance_weights_data(n=200 if quick else 1000, m=19.0)
    wp, wv = d["weights"]["privacy"], d["weights"]["variance"]
    print(f"Fig. 2 left: expected size m = {d['expected_size']:.4g}, eps* = {d['epsilon']:.4f}, calibrated noise scale "
          f"b = {d['noise_scale']:.4g}  [fay_fig2_weights.png]")
    print(f"privacy-constrained vs variance-optimal weights: correlation {np.corrcoef(wp, wv)[0, 1]:.4f}, "
          f"median |w_priv/w_var - 1| = {np.median(np.abs(wp / wv - 1)):.3f}   paper: 'almost identical'")
    runs = 200 if quick else 1000
    print(f"strategy              max psi      MSE (closed form)   MSE (Monte Carlo, {runs} runs, ± 2se)")
    for key, label in NAMES:
        mc, se = monte_carlo_mse(d["points"], d["q"][key], d["noise_scale"], runs)
        print(f"{label:20s}  {d['max_psi'][key]:8.4f}   {d['mse'][key]:16.6g}   {mc:12.6g} ± {2 * se:.3g}")
    mv = d["mse"]["variance"]
    print(f"MSE / variance-optimal: privacy-constrained {d['mse']['privacy'] / mv:.4f}, uniform "
          f"{d['mse']['uniform'] / mv:.4f}   paper: privacy-constrained close to variance-optimal, uniform worse")


def tradeoff(quick):
    d = figs.importance_data(n=200 if quick else 1000, noise_scales=np.geomspace(3, 3000, 4 if quick else 7))
    print(f"\nFig. 2 right: noise scale b in [3, 3000], eps* = {d['epsilon']:.4f}; m_b fixed by the "
          "privacy-constrained distribution  [fay_fig2_mse.png, fay_importance.png]")
    print("      b       m_b    max psi: priv    var-opt    uniform     MSE: priv     var-opt      uniform")
    for i, b in enumerate(d["noise_scale"]):
        print(f"{b:7.4g}  {d['expected_size'][i]:8.4g}  {d['psi_privacy'][i]:13.4f}  {d['psi_variance'][i]:9.4f}  "
              f"{d['psi_uniform'][i]:9.4f}  {d['mse_privacy'][i]:12.5g}  {d['mse_variance'][i]:10.5g}  "
              f"{d['mse_uniform'][i]:11.5g}")
    ok_psi = np.all(d["psi_privacy"] <= d["psi_variance"]) and np.all(d["psi_variance"] <= d["psi_uniform"])
    ok_mse = np.all(d["mse_variance"] <= d["mse_privacy"]) and np.all(d["mse_privacy"] <= d["mse_uniform"])
    print(f"max psi: privacy <= variance-optimal <= uniform at every b: {ok_psi}; "
          f"MSE: variance-optimal <= privacy <= uniform at every b: {ok_mse}")
    print(f"uniform / privacy-constrained max psi: {np.min(d['psi_uniform'] / d['psi_privacy']):.2f} to "
          f"{np.max(d['psi_uniform'] / d['psi_privacy']):.2f}   paper: 'substantial improvements' over uniform")


def main(argv=None):
    out, quick = example_args(__doc__, argv)
    weights(quick)
    tradeoff(quick)
    paths = [figs.figure_importance_weights(out, quick), figs.figure_importance_mse(out, quick),
             figs.figure_importance(out, quick)]
    return report_written(paths)


if __name__ == "__main__":
    main()
