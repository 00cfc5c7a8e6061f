"""dpopt.numerics.bisect, the one bisection behind the monotone root searches (issue 12), against closed forms."""

import math

import numpy as np
import pytest

from dpopt.numerics import bisect


def test_scalar_root_of_an_increasing_function():
    lo, hi = bisect(lambda x: x * x < 2.0, 0.0, 2.0, xtol=1e-15)
    assert lo <= math.sqrt(2) <= hi and hi - lo <= 1e-15
    assert isinstance(lo, float) and isinstance(hi, float)


def test_decreasing_function_in_log_space():
    # e^{-x} = 1e-30 at x = 30 log 10
    lo, hi = bisect(lambda x: math.exp(-x) > 1e-30, 0.0, 700.0, rtol=1e-15)
    assert lo <= 30 * math.log(10) <= hi and (hi - lo) / hi <= 2e-15


def test_vectorised_brackets():
    targets = np.array([0.5, 3.0, 10.0, 99.0])
    lo, hi = bisect(lambda x: x ** 3 < targets, np.zeros(4), np.full(4, 5.0), xtol=1e-13)
    assert np.all(lo <= np.cbrt(targets)) and np.all(np.cbrt(targets) <= hi) and np.all(hi - lo <= 1e-13)


def test_always_stops():
    calls = []
    bisect(lambda x: calls.append(x) or True, 0.0, 1.0, xtol=0.0, max_iter=37)
    assert len(calls) == 37


# ------------------------------------------------------------------ widen
from dpopt.numerics import NotBracketed, fill_cheapest, water_fill, widen  # noqa: E402


def test_widen_up_by_doubling_and_down_by_constant_steps():
    seen = []
    lo, hi = widen(lambda x: seen.append(x) or x < 1000.0, 0.0, 1.0, limit=math.inf)
    assert (lo, hi) == (512.0, 1024.0) and seen == [2.0 ** k for k in range(11)]
    lo, hi = widen(lambda x: x < -37.0, -8.0, 0.0, up=False, limit=-690.0, step=8.0, grow=0.0)
    assert (lo, hi) == (-40.0, -32.0)


def test_widen_raises_at_its_limit_naming_the_side():
    with pytest.raises(NotBracketed) as info:
        widen(lambda x: True, 0.0, 1.0, limit=50.0)
    assert info.value.side == "upper" and info.value.at == 50.0 and isinstance(info.value, ValueError)
    with pytest.raises(NotBracketed) as info:
        widen(lambda x: False, -1.0, 0.0, up=False, limit=-3.0, step=1.0)
    assert info.value.side == "lower" and info.value.at == -3.0


# ------------------------------------------------------------------ water-filling
def _water_fill_oracle(w, lo, hi, total):
    """Exact: Σ clip(t·w) is piecewise linear in t between the breakpoints lo/w and hi/w."""
    pos = w > 0
    bps = np.unique(np.concatenate([lo[pos] / w[pos], hi[pos] / w[pos]]))
    sums = np.array([np.clip(t * w, lo, hi).sum() for t in bps])
    j = int(np.searchsorted(sums, total))
    t0, t1 = bps[j - 1], bps[j]
    s0, s1 = sums[j - 1], sums[j]
    t = t0 + (t1 - t0) * (total - s0) / (s1 - s0)
    return np.clip(t * w, lo, hi)


def test_water_fill_against_the_exact_piecewise_linear_solution():
    rng = np.random.default_rng(7)
    for _ in range(300):
        k = int(rng.integers(1, 9))
        w = rng.exponential(size=k) * 10.0 ** rng.uniform(-6, 6)
        lo = rng.uniform(0, 5, k) * rng.integers(0, 2, k)
        hi = lo + rng.uniform(0.1, 20, k)
        total = float(rng.uniform(lo.sum(), hi.sum()))
        x = water_fill(w, lo, hi, total)
        assert np.all(x >= lo) and np.all(x <= hi) and x.sum() <= total
        assert x.sum() == pytest.approx(total, rel=1e-13)
        np.testing.assert_allclose(x, _water_fill_oracle(w, lo, hi, total), rtol=1e-9, atol=1e-12 * total)


def test_water_fill_small_scales_keep_full_relative_precision():
    # epsilons of 1e-9: a bisection stopping at an absolute tolerance would be off in the 7th digit
    x = water_fill([1.0, 8.0], [0.0, 0.0], [1.0, 1.0], 9e-9)
    np.testing.assert_allclose(x, [1e-9, 8e-9], rtol=1e-14)


def test_water_fill_zero_weights_fill_last_and_equally():
    np.testing.assert_allclose(water_fill([1.0, 0.0], [0, 0], [5, 10], 8.0), [5.0, 3.0])
    np.testing.assert_allclose(water_fill([1.0, 0.0, 0.0], [0, 1, 0], [5, 10, 2], 8.0), [5.0, 1.5, 1.5])
    np.testing.assert_allclose(water_fill([2.0, 0.0], [0, 1], [5, 10], 4.0), [3.0, 1.0])   # zero weight at lower
    np.testing.assert_allclose(water_fill([0.0, 0.0], [0, 0], [5, 10], 4.0), [2.0, 2.0])


def test_water_fill_refuses_an_unreachable_total():
    with pytest.raises(ValueError, match="total"):
        water_fill([1.0, 1.0], [0, 0], [1, 1], 3.0)
    with pytest.raises(ValueError, match="weights"):
        water_fill([1.0, -1.0], [0, 0], [1, 1], 1.0)


# ------------------------------------------------------------------ continuous knapsack
def test_fill_cheapest_against_an_lp():
    from scipy.optimize import linprog

    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(1, 10))
        c = rng.normal(size=k)
        lo = rng.uniform(-2, 2, k)
        hi = lo + rng.uniform(0, 5, k)
        total = float(rng.uniform(lo.sum(), hi.sum()))
        y = fill_cheapest(c, lo, hi, total)
        assert np.all(y >= lo) and np.all(y <= hi) and y.sum() == pytest.approx(total, abs=1e-12)
        lp = linprog(c, A_eq=np.ones((1, k)), b_eq=[total], bounds=list(zip(lo, hi)), method="highs")
        assert c @ y == pytest.approx(lp.fun, abs=1e-9)
