"""Monte Carlo checks of released estimates against the closed-form variance of a stratified mean.

OpenDP's noise cannot be seeded, so these tests are statistical: every tolerance is 5 standard errors of
the Monte Carlo itself (a false alarm is a ~1e-6 event per check), never a fixed percentage."""

from __future__ import annotations

import numpy as np


def stratified_variance(N, n, S2, gamma2) -> float:
    """Var of the released stratified mean: sum_h W_h^2 ((1 - f_h) S_h^2 + gamma_h^2) / n_h, with S_h^2 the
    population variance of the clamped values and gamma_h^2 the per-response noise variance (the oracle)."""
    N, n = np.asarray(N, dtype=float), np.asarray(n, dtype=float)
    W, f = N / N.sum(), n / N
    return float(np.sum(W ** 2 * ((1 - f) * np.asarray(S2, float) + np.asarray(gamma2, float)) / n))


def assert_release_spread(estimates, ses, v_true, what=""):
    """The reported SE² is unbiased for ``v_true`` (tolerance: 5 SEs of the mean of R reported SE²) and the
    estimates' empirical variance is ``v_true`` (tolerance: 5 relative SEs sqrt((kurtosis - 1) / R))."""
    est, se2 = np.asarray(estimates, float), np.asarray(ses, float) ** 2
    R = est.size
    tol_se2 = 5 * se2.std(ddof=1) / np.sqrt(R) / v_true
    assert abs(se2.mean() / v_true - 1) < tol_se2, (what, "mean SE^2", se2.mean(), v_true, tol_se2)
    dev = est - est.mean()
    kurtosis = np.mean(dev ** 4) / np.mean(dev ** 2) ** 2
    tol_var = 5 * np.sqrt((kurtosis - 1) / R)
    assert abs(est.var(ddof=1) / v_true - 1) < tol_var, (what, "Var(estimates)", est.var(ddof=1), v_true, tol_var)
