"""Matrix entries a solver would drop (|v| ≤ SMALL_COEFFICIENT) are taken out of a secant MILP soundly: the rows
are relaxed over the columns' bounds, so a solver's bound on the MILP never passes the true optimum."""

import numpy as np
import pytest

from dpopt.backends.exact.constrained.highs_milp import highs_solve
from dpopt.formulations.separable import SMALL_COEFFICIENT, SecantMILP, without_tiny_entries


def _one_secant(coef: float) -> SecantMILP:
    """min 1e6·z over integer n in [1000, 4000], z ≥ 0, with the secant row z + coef·n ≥ 2e-6: at n = 4000 the
    row allows z = max(0, 2e-6 − 4000·coef), so the optimum is 1e6·that (0 for coef = 5e-10)."""
    return SecantMILP(c=np.array([0.0, 1e6]), offset=0.0, col_lo=np.array([1000.0, 0.0]),
                      col_hi=np.array([4000.0, np.inf]), rows=[np.array([0, 0])], cols=[np.array([0, 1])],
                      vals=[np.array([coef, 1.0])], row_lo=[np.array([2e-6])], row_hi=[np.array([np.inf])],
                      k=1, obj_scale=1.0)


def test_highs_bound_never_passes_the_true_optimum_of_a_tiny_secant():
    coef = 5e-10
    assert coef <= SMALL_COEFFICIENT
    # brute force over n: the least z the row allows, times the objective's 1e6
    truth = min(1e6 * max(0.0, 2e-6 - coef * n) for n in range(1000, 4001))
    assert truth == 0.0
    res = highs_solve(_one_secant(coef), 1e-9, 0.0, 10.0)
    assert res.status == "optimal"
    # dropped by HiGHS itself, the row reads z ≥ 2e-6 and the optimum 2.0: a bound above the truth
    assert res.bound <= truth + 1e-6


def test_an_entry_above_the_threshold_stays_exact():
    coef = 1e-6
    truth = min(1e6 * max(0.0, 2e-6 - coef * n) for n in range(1000, 4001))
    R, C, V, lo, hi = _one_secant(coef).to_coo()
    assert V.size == 2 and lo[0] == 2e-6
    assert highs_solve(_one_secant(coef), 1e-9, 0.0, 10.0).bound == pytest.approx(truth, abs=1e-6)


def test_taken_out_rows_contain_every_point_of_the_rows_as_written():
    rng = np.random.default_rng(3)
    for _ in range(200):
        nrow, ncol = 4, 6
        R = np.repeat(np.arange(nrow), ncol)
        C = np.tile(np.arange(ncol), nrow)
        V = rng.normal(size=R.size) * np.where(rng.random(R.size) < 0.4, 1e-9, 1.0)
        col_lo = rng.integers(-50, 50, ncol).astype(float)
        col_hi = col_lo + rng.integers(0, 100, ncol)
        col_hi[rng.random(ncol) < 0.2] = np.inf          # epigraph-like columns, open above
        width = np.where(np.isfinite(col_hi), col_hi - col_lo, rng.exponential(100.0, ncol))
        x = col_lo + rng.random(ncol) * width
        A = np.zeros((nrow, ncol))
        A[R, C] = V
        act = A @ x
        # rows the point meets as written, some with both sides
        lo = act - rng.uniform(0.0, 1e-6, nrow)
        hi = np.where(rng.random(nrow) < 0.5, act + rng.uniform(0.0, 1e-6, nrow), np.inf)
        R2, C2, V2, lo2, hi2 = without_tiny_entries(R, C, V, lo, hi, col_lo, col_hi)
        assert np.all(np.abs(V2) > SMALL_COEFFICIENT)
        assert not np.any(np.isnan(lo2)) and not np.any(np.isnan(hi2))
        B = np.zeros((nrow, ncol))
        B[R2, C2] = V2
        act2 = B @ x
        scale = 1e-12 * (1.0 + np.abs(act2))
        assert np.all(act2 >= lo2 - scale) and np.all(act2 <= hi2 + scale)
