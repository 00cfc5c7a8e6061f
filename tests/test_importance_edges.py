"""ImportanceSampling at the edges (issue 14, items 2 and 3): every returned point is checked against the
model's privacy constraint and certified, tiny slopes are solved correctly by cvxpy, and nothing hangs.

Oracle: the optimal q_i* = c_i/s_i*, with s_i* the root of expm1(s)/s = expm1(eps*)/c_i computed by
bisection in 60-digit arithmetic (mpmath), independent of dpopt's Lambert-W/Newton code."""

import math
import warnings

import mpmath as mp
import numpy as np
import pytest

from bounded import run_bounded
from dpopt import _validate as V
from dpopt.models.importance import (ImportanceSampling, amplified_loss, calibrate_epsilon, calibrate_noise_scale,
                                     linear_optimal_weights)

warnings.filterwarnings("ignore", message="Solution may be inaccurate")


def oracle_q(eps, slopes):
    """q_i* by 60-digit bisection of log(expm1(s)/s) = log(expm1(eps)/c) on s in [L, 2L]."""
    out = []
    with mp.workdps(60):
        e = mp.mpf(eps)
        for c in slopes:
            c = mp.mpf(float(c))
            if c == e:
                out.append(1.0)
                continue
            target = mp.log(mp.expm1(e) / c)
            lo, hi = target, 2 * target
            for _ in range(400):
                mid = (lo + hi) / 2
                if mp.log(mp.expm1(mid) / mid) > target:
                    hi = mid
                else:
                    lo = mid
            out.append(float(c / ((lo + hi) / 2)))
    return np.array(out)


def oracle_psi(q, slopes):
    with mp.workdps(60):
        return [float(mp.log1p(mp.mpf(float(qi)) * mp.expm1(mp.mpf(float(c)) / mp.mpf(float(qi)))))
                for qi, c in zip(q, slopes)]


def check_private_and_right(sol, eps, slopes, rtol):
    assert sol.status in ("optimal", "feasible"), sol.message
    psi = oracle_psi(sol.x, slopes)
    assert max(psi) <= eps * (1 + 1e-12), (max(psi), eps)
    ref = oracle_q(eps, slopes)
    assert np.allclose(sol.x, ref, rtol=rtol, atol=0), np.max(np.abs(sol.x / ref - 1))
    # the certificate's bound is a true lower bound of the optimum
    assert sol.certificate.lower_bound <= math.fsum(ref) * (1 + 1e-14)


# ------------------------------------------------------------------ item 2: cvxpy reproducers
def test_cvxpy_large_eps_point_is_private_and_optimal():
    # was: feasible with q = [2.2e-308, 2.2e-308] and max psi = inf
    m = ImportanceSampling(40.0, slopes=[0.4, 20.0])
    sol = m.solve(backend="cvxpy")
    assert sol.status == "optimal"
    check_private_and_right(sol, 40.0, [0.4, 20.0], 1e-7)


def test_cvxpy_tiny_eps_point_is_private():
    # was: optimal with max psi = 1.0047e-06 > eps* = 1e-6
    m = ImportanceSampling(1e-6, slopes=[1e-8, 5e-7])
    sol = m.solve(backend="cvxpy")
    check_private_and_right(sol, 1e-6, [1e-8, 5e-7], 1e-6)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 10.0])
def test_cvxpy_tiny_slopes_right(eps):
    # was: optimal with q off by up to 1e5x for slopes many orders below eps*
    rng = np.random.default_rng(int(eps * 10))
    c = eps * 10.0 ** rng.uniform(-12, 0, 40)
    sol = ImportanceSampling(eps, slopes=c).solve(backend="cvxpy")
    assert sol.status == "optimal"
    check_private_and_right(sol, eps, c, 1e-6)


@pytest.mark.parametrize("eps,c", [(700.0, [1e-300, 1.0, 700.0]), (1e-6, [1e-300, 1e-6, 1e-6 * (1 - 1e-9)]),
                                   (1.0, [1e-300, 1.0])])
@pytest.mark.parametrize("backend", ["exact", "cvxpy"])
def test_range_edges_both_backends(eps, c, backend):
    sol = ImportanceSampling(eps, slopes=c).solve(backend=backend)
    check_private_and_right(sol, eps, c, 1e-12 if backend == "exact" else 1e-6)


def test_a_point_that_breaks_privacy_is_never_returned():
    m = ImportanceSampling(1.0, slopes=[0.01, 0.5])
    ref = oracle_q(1.0, [0.01, 0.5])
    bad = m.make_solution(x=ref * np.array([1 - 1e-3, 1.0]), backend="test")
    assert bad.status == "error" and bad.x is None and "breaks the privacy target" in bad.message
    # private but 1e-3 above the optimum: feasible, with a gap that brackets the truth
    loose = m.make_solution(x=ref * (1 + 1e-3), backend="test")
    assert loose.status == "feasible" and not loose.certificate.optimal
    assert loose.certificate.lower_bound <= ref.sum() <= loose.objective
    assert 1e-4 < loose.certificate.gap < 1e-2
    # rel_gap is honoured: a looser tolerance accepts it
    assert m.make_solution(x=ref * (1 + 1e-3), rel_gap=1e-2).status == "optimal"
    # repair raises exactly the violating records back to private values
    fixed = m.repair(ref * np.array([1 - 1e-3, 1.0]))
    assert fixed[1] == ref[1] and max(oracle_psi(fixed, [0.01, 0.5])) <= 1.0
    assert fixed[0] == pytest.approx(ref[0], rel=1e-12)


def test_random_instances_exact_and_cvxpy_against_mpmath():
    rng = np.random.default_rng(14)
    for _ in range(6):
        eps = float(10.0 ** rng.uniform(-6, math.log10(700)))
        c = eps * 10.0 ** rng.uniform(-8, 0, 12)
        m = ImportanceSampling(eps, slopes=c)
        check_private_and_right(m.solve(), eps, c, 1e-11)
        check_private_and_right(m.solve("cvxpy"), eps, c, 1e-4)


# ------------------------------------------------------------------ item 3: no hangs
def _solve_importance(eps, slopes):
    return ImportanceSampling(eps, slopes=slopes).solve().status.value


def test_eps_above_supported_range_is_refused_not_hung():
    with pytest.raises(ValueError, match=r"epsilon must be in \[1e-06, 700\]"):
        run_bounded(_solve_importance, 800.0, [0.1, 1.0], timeout=60)


def test_model_file_eps_800_is_refused(tmp_path):
    from dpopt.io import modelfile
    p = tmp_path / "m.toml"
    p.write_text('family = "importance_sampling"\nepsilon = 800\nslopes = [0.1, 1.0]\n')
    with pytest.raises(ValueError, match="epsilon"):
        run_bounded(modelfile.load, p, timeout=60)


def test_subnormal_slope_is_refused_not_hung():
    with pytest.raises(ValueError, match=r"slopes must be >= 1e-300.*slopes\[0\]"):
        run_bounded(_solve_importance, 1.0, [5e-324, 1.0], timeout=60)


def _size(eps, slopes):
    return float(np.sum(oracle_q(eps, slopes)))


def test_calibrate_epsilon_far_target_is_found():
    # was: the bracket expansion overshot to eps* = e**700 and hung
    e = run_bounded(calibrate_epsilon, 1e-3, slopes=[0.1, 0.2], timeout=60)
    assert 250 < e < 350
    assert _size(e, [0.1, 0.2]) == pytest.approx(1e-3, rel=1e-9)
    with pytest.raises(ValueError, match="unreachable: even epsilon"):
        run_bounded(calibrate_epsilon, 1e-5, slopes=[0.1, 0.2], timeout=60)


def test_calibrate_noise_scale_far_target_is_found():
    b = run_bounded(calibrate_noise_scale, 1.0, 1e-3, [1.0, 2.0], timeout=60)
    assert _size(1.0, [1.0 / b, 2.0 / b]) == pytest.approx(1e-3, rel=1e-9)


def test_weights_far_from_branch_point_are_bounded_loops():
    # eps* = 700 with the smallest supported slope: the Newton bracket [L, 2L] holds, no doubling loop
    w = run_bounded(linear_optimal_weights, [1e-300, 0.5, 700.0], 700.0, timeout=60)
    q = 1 / w
    assert np.all(amplified_loss(q, slopes=[1e-300, 0.5, 700.0]) <= 700.0 * (1 + 1e-15))
    assert np.allclose(q, oracle_q(700.0, [1e-300, 0.5, 700.0]), rtol=1e-13)


# ------------------------------------------------------------------ options
def test_bad_options_raise_invalid_option():
    m = ImportanceSampling(1.0, slopes=[0.1, 0.5])
    for backend, opts in [("exact", {"method": "x"}), ("exact", {"rel_gap": 1.5}), ("exact", {"rel_gap": math.nan}),
                          ("cvxpy", {"rel_gap": -1}), ("cvxpy", {"solver": "GLPK"}), ("cvxpy", {"solver": 3}),
                          ("cvxpy", {"verbose": "yes"}), ("cvxpy", {"solver_options": [1]}),
                          ("cvxpy", {"time_limit": 0})]:
        with pytest.raises(V.InvalidOption):
            m.solve(backend=backend, **opts)
    with pytest.raises(V.InvalidOption, match="lambert"):
        ImportanceSampling(1.0, profile=lambda w, x: x * w, points=np.array([0.2])).solve(method="lambert")


def test_cvxpy_tiny_time_limit_is_time_limit():
    m = ImportanceSampling(1.0, slopes=np.linspace(0.01, 1.0, 2000))
    sol = m.solve(backend="cvxpy", time_limit=1e-9)
    assert sol.status == "time_limit", sol.message
    if sol.x is not None:      # a point at the limit is still private
        assert np.max(amplified_loss(sol.x, slopes=m.slopes)) <= 1.0 * (1 + 1e-12)
