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
