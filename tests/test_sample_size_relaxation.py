"""SampleSizeProgram.relax(): the continuous relaxation (real n) is solved and certified by `exact`
(it used to be `unsupported` by every backend). Oracle: a dense log-spaced grid refined by scipy's bounded
scalar minimiser around the best grid points (an independent local method), and the integer optimum."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dpopt import SampleSizeProgram, Status

CASES = [
    dict(N=10_000, S2=4.0, epsilon=1.0, value_range=10.0),
    dict(N=5_000, S2=2.0, epsilon=0.5, sensitivity=1.0),
    dict(N=5_000, S2=2.0, epsilon=0.5, delta=1e-3, sensitivity=1.0),
    dict(N=200_000, S2=50.0, epsilon=0.05, sensitivity=1.0),
    dict(N=10**9, S2=1.0, epsilon=3.0, sensitivity=1.0),
    dict(N=800, S2=9.0, epsilon=2.0, sensitivity=lambda n: 1.0 + 10.0 / n, sensitivity_trend="nonincreasing"),
]


def _oracle(m: SampleSizeProgram) -> float:
    lo, hi = max(1.0, m.N * m.delta), float(m.N)
    grid = np.clip(np.exp(np.linspace(math.log(lo), math.log(hi), 20_001)), lo, hi)
    v = m.variance(grid)
    best = float(v.min())
    for i in np.argsort(v)[:3]:
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        r = minimize_scalar(lambda x: float(m.variance(x)), bounds=(a, b), method="bounded",
                            options={"xatol": 1e-12 * b})
        best = min(best, float(r.fun))
    return best


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_relaxation_is_certified_and_matches_the_oracle(case):
    m = SampleSizeProgram(**case)
    r = m.relax()
    assert r.status == Status.OPTIMAL, r.message
    assert r.n is None and isinstance(r.x, float)
    assert r.objective == pytest.approx(float(m.variance(r.x)), rel=1e-15)
    ref = _oracle(m)
    # the returned point is no worse than the oracle (to the certified tolerance), and the bound is valid
    assert r.objective <= ref * (1 + 2e-9)
    assert r.certificate.lower_bound <= ref * (1 + 1e-12)
    assert r.certificate.gap <= 1e-9
    # a relaxation never exceeds the integer optimum
    s = m.solve()
    assert r.objective <= s.objective * (1 + 1e-12)


def test_relaxation_stopped_early_reports_feasible_with_its_gap():
    m = SampleSizeProgram(5_000, 2.0, 0.5, sensitivity=1.0)
    r = m.relax(max_rounds=1)
    assert r.status == Status.FEASIBLE and r.certificate.gap > 1e-9 and "rounds" in r.message


def test_relaxation_without_a_bound_is_refused_with_the_reason():
    m = SampleSizeProgram(500, 2.0, 0.5, sensitivity=lambda n: 1.0 + 1.0 / n)
    r = m.relax()
    assert r.status == Status.UNSUPPORTED and "sensitivity_trend" in r.message


def test_the_report_shows_a_relaxation():
    m = SampleSizeProgram(5_000, 2.0, 0.5, sensitivity=1.0)
    r = m.relax()
    text = m.report(r)
    assert f"{r.x:.10g}" in text and "certificate" in text
    assert str(m.solve().n) in m.report(m.solve())
