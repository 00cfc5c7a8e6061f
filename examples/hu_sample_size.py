"""Reproduce Hu, Drechsler & Kim: can sampling before a DP release improve accuracy (Figs. 3–5, 8, 13)?

Prints the amplification numbers the paper quotes (ε_n = 5.15 for a 1% sample at ε = 1; sampling
rates 16.77% and 61.4% for q = 0.6), the r = 1 analysis of the mean (no finite ε exists for a rate
below 1; the paper's Fig. 5 values are floating-point artefacts, shown here), the "no gain" result
for the mean, the exact optimal sample size for a constant sensitivity, and the simulated MSE of the
smooth-sensitivity median over the sampling rate (Figs. 8 and 13 / Table 1); writes the figures.

    python examples/hu_sample_size.py --out DIR [--quick]
"""

import math
from pathlib import Path

import numpy as np

import dpopt
from dpopt.privacy import nominal_epsilon
from dpopt.models.sample_size import (epsilon_for_noise_ratio, noise_ratio, q_bound,
                                      rate_for_q_bound)
from dpopt.plots import sample_size as figs
from dpopt.plots import example_args, report_written

PAPER_EPS_N = 5.15                                  # §3: ε = 1, 1% sample
PAPER_RATE_Q06 = {3.0: 0.1677, 0.1: 0.614}          # §4.1: q = 0.6
PAPER_FIG5_EPS_N = 1.66e-6                          # §4.2: rate 1e-4, "ε_n < 1.66e-6" for r = 1
PAPER_GAINS = {"lognormal": "eps <= 0.1", "mixture": "eps <= 3"}   # Table 1


def amplification():
    print("Fig. 3: amplified nominal budget eps_n = log(1 + (N/n)(e^eps - 1))")
    rates = [0.001, 0.01, 0.1, 0.5, 1.0]
    print("eps \\ rate " + "".join(f"{r:>9g}" for r in rates))
    for e in (0.1, 0.5, 1.0):
        print(f"{e:9g}  " + "".join(f"{float(nominal_epsilon(e, r)):9.4f}" for r in rates))
    print(f"1% sample at eps = 1: eps_n = {float(nominal_epsilon(1.0, 0.01)):.4f}   paper: {PAPER_EPS_N}")


def q_curves():
    print("\nFig. 4: q = 1 - eps^2/eps_n^2 (sampling can only help while the sampling variance is below q*V_N)")
    for e, paper in PAPER_RATE_Q06.items():
        print(f"eps = {e:g}: q = 0.6 at rate {100 * rate_for_q_bound(e, 0.6):.3f}%   paper: {100 * paper:.4g}%")
    print(f"V_N(eps = 0.1) / V_N(eps = 3) = {(3 / 0.1) ** 2:.0f}   paper: 900")
    print("small-eps limit q -> 1 - (n/N)^2 (paper §4.1):")
    for r in (0.1, 0.5, 0.9):
        print(f"  rate {r:g}: q(eps=1e-3) = {float(q_bound(1e-3, r)):.5f}, q(eps=1e-2) = {float(q_bound(1e-2, r)):.5f}, "
              f"1 - rate^2 = {1 - r * r:.5f}")


def r_equals_one(quick):
    print("\nFig. 5: noise ratio of the mean r(eps, n/N) = (n eps_n / (N eps))^2 (eq. 8)")
    print("r < 1 for every eps > 0 when n/N < 1 (r -> 1 only as eps -> 0, 1 - r ~ eps (1 - q)/q): the r = 1")
    print("curve of the paper has no finite solution in exact arithmetic.")
    q = 1e-4
    grid = np.geomspace(1e-12, 1e-8, 20001 if quick else 400001)
    naive = (q * np.log(1 + (1 / q) * (np.exp(grid) - 1)) / grid) ** 2      # the paper's formula, float64
    e_art = float(grid[np.flatnonzero(naive >= 1).max()])
    print(f"rate 1e-4, naive float64 evaluation: r >= 1 up to eps = {e_art:.3g} (log eps = {math.log(e_art):.1f}), "
          f"eps_n = {float(nominal_epsilon(e_art, q)):.3g}   paper: eps_n < {PAPER_FIG5_EPS_N:g}")
    print(f"  exact there: 1 - r = {1 - float(noise_ratio(e_art, q)):.3g} "
          f"(eps (1-q)/q = {e_art * (1 - q) / q:.3g}) -- r < 1; the naive value is rounding error ~1e-16/eps")
    try:
        epsilon_for_noise_ratio(q, 1.0)
    except ValueError as exc:
        print(f"  epsilon_for_noise_ratio({q:g}, 1.0) raises: {str(exc)[:78]}...")
    d = figs.noise_ratio_threshold_data(rates=[1e-4, 1e-3, 1e-2, 0.1, 0.5, 0.9])
    print(f"plotted instead: eps (and eps_n) at which r = {d['ratio']:g}  [hu_fig5_noise_ratio.png]")
    for r, e, en in zip(d["rate"], d["epsilon"], d["epsilon_n"]):
        print(f"  rate {r:<7g} eps = {e:.4g}   eps_n = {en:.4g}")


def no_gain_and_constant():
    m, _ = dpopt.io.modelfile.load(Path(__file__).resolve().parent.parent / "models" / "hu_mean_no_gain.toml")
    sol = m.solve()
    print(f"\n§4.2 mean, global sensitivity R/n (N = {m.N}, eps = {m.epsilon:g}): n* = {sol.n_star} "
          f"(= N: no gain, paper: 'No gains'), V_N/V_n at n = N/10: {m.V_N / float(m.variance(m.N // 10)):.4f}")
    print("\nConstant sensitivity (best case, §4.1): exact integer optimum n*, N = 10001, S^2 = 1, eps = 1  "
          "[hu_variance_curve.png]")
    for d, c in figs.variance_curve_data(points=40).items():
        print(f"  Delta = {d:<6g} n* = {c['n_star']:5d} (rate {c['n_star'] / 10001:.4f})   gain V_N/V_n* = {c['gain']:.4f}")


def median_mse(quick):
    out = {}
    for kind, fig in (("lognormal", 8), ("mixture", 13)):
        if quick:
            d = figs.median_mse_data(kind, N=2001, rates=(0.01, 0.1, 0.5, 0.9), draws=30)
        else:
            d = figs.median_mse_data(kind)
        print(f"\nFig. {fig}: log(MSE) of the smooth-sensitivity median, {kind} population, N = {d['N']}, "
              f"delta = 1/(2N), {d['draws']} draws per cell")
        print("eps \\ rate " + "".join(f"{r:>7g}" for r in d["rate"]) + "   pop.   best gain")
        gains = []
        for i, e in enumerate(d["epsilon"]):
            g = float(np.max(d["gain"][i]))
            gains.append((float(e), g, bool(d["helps"][i])))
            print(f"{e:9g}  " + "".join(f"{v:7.2f}" for v in np.log(d["mse"][i])) +
                  f"  {np.log(d['population'][i]):6.2f}   {g:8.3g}")
        helped = [e for e, g, h in gains if h]
        print(f"sampling helps for eps in {helped}   paper Table 1: gains for {PAPER_GAINS[kind]}")
        out[kind] = d
    return out


def main(argv=None):
    out, quick = example_args(__doc__, argv)
    amplification()
    q_curves()
    r_equals_one(quick)
    no_gain_and_constant()
    med = median_mse(quick)
    paths = [figs.figure_amplification(out, quick), figs.figure_q_bound(out, quick),
             figs.figure_noise_ratio_threshold(out, quick), figs.figure_variance_curve(out, quick),
             figs.figure_median_mse(out, quick, data=med["lognormal"]),
             figs.figure_median_mse_mixture(out, quick, data=med["mixture"])]
    return report_written(paths)


if __name__ == "__main__":
    main()
