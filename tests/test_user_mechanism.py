"""Issue 19, item 1: a user mechanism written outside the package (tests/user_mechanisms/gaussian_value_only.py,
a Gaussian mechanism implementing only its variance) works everywhere a value suffices — exact, enumerate,
algorithm1, the Pyomo secant MILP — and agrees with brute force over every design; the routes that need
more (the Pyomo MINLP, the cvxpy DNLP, the release) refuse it with "unsupported, because …"; adding its Pyomo
form by subclassing, outside dpopt, makes the Pyomo MINLP accept it and agree with brute force."""

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.privacy import ApproxDP, MechanismUnsupported, PureDP, Unsupported

_spec = importlib.util.spec_from_file_location(
    "gaussian_value_only", Path(__file__).parent / "user_mechanisms" / "gaussian_value_only.py")
user = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(user)

N = np.array([40, 90, 25])
S2 = np.array([4.0, 1.0, 9.0])
TOTAL = 30
LO, HI = 2, 20
DELTA_Y = 10.0      # the sensitivity: the width of value_range (the release clamps responses to it)


def _design(mech, eps):
    return dpopt.StratifiedDesign(N, S2, TOTAL, eps, mechanism=mech, lower=[LO] * 3, upper=[HI] * 3,
                                  value_range=(0.0, DELTA_Y))


def _brute_force(eps):
    """min over every design of Σ N²(S² + σ²(ε_nom))/n, ε_nom = log1p(expm1(ε)·N/n), σ² = 2 ln(1.25/δ)Δ²/ε_nom²:
    the formulas written here, independent of dpopt."""
    best, arg = math.inf, None
    for n in itertools.product(range(LO, HI + 1), repeat=3):
        if sum(n) != TOTAL:
            continue
        n = np.array(n, dtype=float)
        e_nom = np.log1p(np.expm1(eps) * N / n)
        f = float(np.sum(N ** 2 * (S2 + 2.0 * math.log(1.25 / user.DELTA) * DELTA_Y ** 2 / e_nom ** 2) / n))
        if f < best:
            best, arg = f, n.astype(int)
    return best, arg


def _solved(sol, best):
    assert sol.status.value == "optimal", sol.message
    assert sol.objective == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("eps", [0.05, 1.0, 8.0])
def test_value_only_solves_where_a_value_suffices(eps):
    best, arg = _brute_force(eps)
    d = _design(user.GaussianValueOnly(), eps)
    assert d.objective_value(arg) == pytest.approx(best, rel=1e-12)      # the model reads the same formula
    for backend, opts in (("exact", {}), ("enumerate", {}), ("algorithm1", {}),
                          ("pyomo", {"solver": "highs", "formulation": "milp"})):
        _solved(d.solve(backend=backend, **opts), best)
    if "secant" in dpopt.registry.available_backends():    # the secant route, when registered on its own
        _solved(d.solve(backend="secant"), best)


def test_value_only_refused_elsewhere_with_the_reason():
    m = user.GaussianValueOnly()
    assert isinstance(m.guarantee, ApproxDP) and m.guarantee.delta == user.DELTA
    for cap in ("pyomo_variance", "cvxpy_variance", "growth_coefficients", "opendp_measurement"):
        why = m.support(cap)
        assert isinstance(why, Unsupported) and not why
        assert str(why).startswith(f"{cap} unsupported, because mechanism 'gaussian' does not define {cap}")
    d = _design(m, 1.0)
    sol = d.solve(backend="pyomo", solver="scip")
    assert sol.status == "unsupported" and "pyomo_variance unsupported, because" in sol.message
    sol = d.relax(backend="cvxpy", method="dnlp")
    assert sol.status == "unsupported" and "cvxpy_variance unsupported, because" in sol.message
    pytest.importorskip("opendp")
    from dpopt.release.stratified import plan_stratified, release_stratified
    from dpopt.sampling import draw_stratified

    n = d.solve(backend="exact").n
    with pytest.raises(MechanismUnsupported, match="opendp_measurement unsupported, because"):
        plan_stratified(d, n)
    frame = {"stratum": [lab for lab, size in zip(d.labels, N) for _ in range(size)]}
    sample = draw_stratified(frame, d, n, strata="stratum", seed="user mechanism")
    with pytest.raises(ValueError, match="cannot be released: opendp_measurement unsupported, because"):
        release_stratified(d, sample, np.ones(sample.size))


def test_an_opendp_measurement_alone_does_not_release_approximate_dp():
    """The ledger accounts (ε, δ), so the capability is there; but the release certifies (ε, δ) only for dpopt's
    Gaussian mechanisms (the analytic curve at OpenDP's ρ): a user's (ε, δ) mechanism is refused, saying why."""
    from dpopt.release._opendp import releasable

    class WithMeasurement(user.GaussianValueOnly):
        def opendp_measurement(self, dp, scale):     # pragma: no cover - never reached
            raise AssertionError

    assert WithMeasurement().support("opendp_measurement")
    with pytest.raises(ValueError, match="cannot be released: .*certifies"):
        releasable(WithMeasurement())
    assert isinstance(dpopt.privacy.get_mechanism("laplace").guarantee, PureDP)


@pytest.mark.parametrize("eps", [0.05, 1.0, 8.0])
def test_adding_the_pyomo_form_outside_dpopt_is_accepted_by_scip(eps):
    best, _ = _brute_force(eps)
    d = _design(user.GaussianWithPyomo(), eps)
    assert d.mechanism.support("pyomo_variance")
    _solved(d.solve(backend="pyomo", solver="scip"), best)
