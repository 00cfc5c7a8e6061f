"""Sample size families at the edges (issue 14, item 6): the delta-constrained program, degenerate and huge
populations of SampleSizeStudy, and bad options. Oracles: V_n written out here with math.log1p/expm1 and a
brute-force minimum over every feasible n; the closed-form noise variance for a constant population."""

import math

import numpy as np
import pytest

from dpopt import SampleSizeProgram, SampleSizeStudy
from dpopt import _validate as V


def v_n(N, S2, eps, delta_const, n):
    """V_n = (1 - n/N) S2/n + 2 (Delta/eps_n)^2, eps_n = log1p((N/n) expm1(eps)), constant Delta."""
    eps_n = math.log1p(N / n * math.expm1(eps))
    return (1 - n / N) * S2 / n + 2 * (delta_const / eps_n) ** 2


def test_delta_constrained_optimum_is_solved_not_error():
    # was: status error "delta_n > 1 at the optimum" (unconstrained optimum n ~ 687652)
    m = SampleSizeProgram(10**6, 1, 1, delta=0.9, sensitivity=1e-3)
    assert m.n_min == 900000
    # brute force over the feasible n (delta_n = N delta / n <= 1), with an independent V_n
    n = np.arange(900000, 10**6 + 1, 997)
    vals = [v_n(10**6, 1.0, 1.0, 1e-3, int(k)) for k in n]
    assert int(n[int(np.argmin(vals))]) == 900000        # V_n increases on the feasible range
    for backend in ("exact", "scipy"):
        sol = m.solve(backend)
        assert sol.n == 900000 and sol.delta_n <= 1, (backend, sol.message)
        assert sol.objective == pytest.approx(v_n(10**6, 1.0, 1.0, 1e-3, 900000), rel=1e-12)
    assert m.solve().status == "optimal"
    assert m.solve(method="scan", scan_limit=10**7).n == 900000


@pytest.mark.parametrize("delta", [1e-7, 0.3, 0.75])
def test_delta_constraint_brute_force_small(delta):
    m = SampleSizeProgram(4000, 2.0, 0.5, delta=delta, sensitivity=0.7)
    feasible = [k for k in range(1, 4001) if 4000 * delta / k <= 1]
    best = min(feasible, key=lambda k: (v_n(4000, 2.0, 0.5, 0.7, k), k))
    assert m.n_min == feasible[0]
    for method in ("scan", "bnb"):
        assert m.solve(method=method).n == best


def test_time_limit_is_honoured_by_the_scan():
    m = SampleSizeProgram(2_000_000, 1.0, 1.0, sensitivity=lambda n: 1.0 + 0 * np.asarray(n))
    sol = m.solve(method="scan", time_limit=1e-9)
    assert sol.status == "time_limit" and sol.n is not None
    # the point the stopped scan returns is a real design, valued as the independent V_n values it
    assert 1 <= sol.n <= 2_000_000
    assert sol.objective == pytest.approx(v_n(2_000_000, 1.0, 1.0, 1.0, int(sol.n)), rel=1e-12)


def test_constant_population_is_refused_naming_it():
    # was: ZeroDivisionError reported as status error
    for statistic in ("median", "mean"):
        with pytest.raises(ValueError, match="population is constant"):
            SampleSizeStudy(np.full(100, 5.0), 1.0, statistic=statistic, draws=20)


def test_constant_population_with_a_range_has_the_closed_form_mse():
    # sampling error is 0, so the Rao-Blackwellised MSE is exactly the Laplace noise variance 2 (R/(n eps_n))^2
    study = SampleSizeStudy(np.full(100, 5.0), 1.0, statistic="mean", value_range=2.0, rates=[0.1, 0.5], draws=20)
    sol = study.solve()
    for n, mse in zip(sol.n_grid, sol.mse):
        eps_n = math.log1p(100 / n * math.expm1(1.0))
        assert mse == pytest.approx(2 * (2.0 / n / eps_n) ** 2, rel=1e-12)
    assert sol.mse_population == pytest.approx(2 * (2.0 / 100 / 1.0) ** 2, rel=1e-12)
    assert sol.status == "feasible" and not sol.helps


def test_huge_values_are_refused_and_the_edge_is_finite():
    # was: values near 1e300 gave an inf objective labelled feasible
    with pytest.raises(ValueError, match=r"population values must lie within ±1e\+100"):
        SampleSizeStudy(np.linspace(0, 1e300, 100), 1.0, draws=20)
    for statistic in ("median", "mean"):
        sol = SampleSizeStudy(np.linspace(-1e100, 1e100, 101), 1e-6, statistic=statistic, draws=20).solve()
        assert sol.status == "feasible" and math.isfinite(sol.objective) and np.all(np.isfinite(sol.mse))


def test_study_options_raise():
    study = SampleSizeStudy(np.linspace(0, 1, 50), 1.0, draws=20)
    for opts in ({"draws": 0}, {"draws": 1}, {"draws": "x"}, {"draws": 2.5}, {"seed": -1}, {"progress": "no"}):
        with pytest.raises(V.InvalidOption):
            study.solve(**opts)


def test_program_options_raise():
    m = SampleSizeProgram(5000, 1.0, 1.0, sensitivity=1.0)
    for backend, opts in [("exact", {"branching": 2.7}), ("exact", {"branching": 1}), ("exact", {"leaf": 0}),
                          ("exact", {"method": "x"}), ("exact", {"scan_limit": -1}), ("exact", {"time_limit": -1}),
                          ("scipy", {"xatol": math.nan}), ("scipy", {"xatol": 0}), ("scipy", {"segments": 0}),
                          ("scipy", {"segments": "4"})]:
        with pytest.raises(V.InvalidOption):
            m.solve(backend, **opts)


def test_program_inputs_at_the_edges():
    with pytest.raises(ValueError, match=r"N must be <= 2\*\*53"):
        SampleSizeProgram(2**53 + 1, 1.0, 1.0, sensitivity=1.0)
    assert SampleSizeProgram(2**53, 1.0, 1.0, sensitivity=1.0).N == 2**53
    with pytest.raises(ValueError, match="epsilon must be in"):
        SampleSizeProgram(100, 1.0, 701.0, sensitivity=1.0)
    with pytest.raises(TypeError, match="epsilon"):
        SampleSizeProgram(100, 1.0, "1.0", sensitivity=1.0)
    with pytest.raises(TypeError, match="epsilon"):
        SampleSizeProgram(100, 1.0, True, sensitivity=1.0)
    with pytest.raises(ValueError, match="overflows"):
        SampleSizeProgram(100, 1.0, 1e-6, sensitivity=1e300)
    # the supported corners solve, checked by brute force
    for eps in (1e-6, 700.0):
        m = SampleSizeProgram(3000, 1e6, eps, sensitivity=1.0)
        vals = [v_n(3000, 1e6, eps, 1.0, k) for k in range(1, 3001)]
        assert m.solve().n == 1 + int(np.argmin(vals))
