"""StratifiedDesign numerics (mpmath oracles), closed-form relaxations and baselines."""

import mpmath as mp
import numpy as np
import pytest

import dpopt

mp.mp.dps = 60


def f_exact(x, N, s2, a, eps, mech, sens):
    """f_i(x) at 60 digits, from docs/stratified.md."""
    x = x if isinstance(x, mp.mpf) else mp.mpf(float(x))
    N, s2, a, sens = (mp.mpf(float(v)) for v in (N, s2, a, sens))
    c = mp.expm1(mp.mpf(eps))
    e_i = mp.log(1 + c * N / x)
    if mech == "laplace":
        g2 = 2 * mp.mpf(sens) ** 2 / e_i ** 2
    else:
        p = mp.exp(-e_i / sens)
        g2 = 2 * p / (1 - p) ** 2 + (mp.mpf(1) / 12 if mech == "tulap" else 0)
    return a * a / x * (s2 + g2)


CASES = [(eps, N, x) for eps in (1e-6, 1e-2, 1.0, 30.0, 700.0) for (N, x) in ((50, 7.3), (10 ** 9, 123.0), (10 ** 9, 9.9e8))]


@pytest.mark.parametrize("mech,sens", [("laplace", 1.0), ("laplace", 2.5), ("dlap", 1.0), ("dlap", 3.0), ("tulap", 1.0)])
@pytest.mark.parametrize("eps,N,x", CASES)
def test_derivatives_match_high_precision(mech, sens, eps, N, x):
    s2, a = 0.3, 2.0
    model = dpopt.StratifiedDesign(N=[N], sigma2=[s2], total=1, epsilon=eps, mechanism=mech,
                                   objective=[a], sensitivity=sens)
    f = lambda t: f_exact(t, N, s2, a, eps, mech, sens)  # noqa: E731
    for order in (0, 1, 2):
        exact = float(mp.diff(f, mp.mpf(x), order))
        got = float(model.terms(np.array([x]))[0] if order == 0 else model.terms_derivative(np.array([x]), order)[0])
        assert got == pytest.approx(exact, rel=2e-9), (order, got, exact)
    # convexity (paper Thm 4.1) survives in floating point: the paper's eq. (11) does not
    assert model.terms_derivative(np.array([x]), 2)[0] > 0


@pytest.mark.parametrize("mech,sens", [("laplace", 1.0), ("dlap", 2.0), ("tulap", 1.0)])
@pytest.mark.parametrize("eps", [1e-6, 0.05, 1.0, 40.0, 700.0])
def test_increments_match_high_precision(mech, sens, eps):
    N = np.array([3, 1000, 10 ** 9])
    m = np.array([1, 17, 5 * 10 ** 8])
    model = dpopt.StratifiedDesign(N=N, sigma2=[0.0, 0.1, 2.0], total=3, epsilon=eps, mechanism=mech,
                                   objective="a-optimal", sensitivity=sens)
    got = model.increments(m)
    for i in range(3):
        exact = f_exact(m[i] + 1, N[i], model.sigma2[i], 1, eps, mech, sens) - f_exact(m[i], N[i], model.sigma2[i], 1, eps, mech, sens)
        assert got[i] == pytest.approx(float(exact), rel=1e-9, abs=1e-300)


def test_dlap_increments_are_linear_noise():
    """The DLap noise term times 1/n is linear in n (docs/stratified.md): a σ²=0 stratum's increments are
    2α²/(N²c²)."""
    eps, N = 0.7, 40
    model = dpopt.StratifiedDesign(N=[N], sigma2=[0.0], total=1, epsilon=eps, mechanism="dlap", objective=[3.0])
    c = np.expm1(eps)
    assert np.allclose(model.increments(np.arange(1, N)), 2 * 9.0 / (N * N * c * c), rtol=1e-10)


@pytest.mark.parametrize("mech", ["dlap", "tulap"])
@pytest.mark.parametrize("eps", [0.01, 1.0, 20.0])
def test_relaxation_closed_form_dlap_tulap(mech, eps):
    """Paper Props 4.2/4.4: for the mean, x_i ∝ τ_i N_i when no bound binds."""
    N = np.array([20000, 30000, 50000, 80000])
    s2 = np.array([0.4, 1.0, 2.5, 0.7])
    eta = 900
    model = dpopt.StratifiedDesign(N=N, sigma2=s2, total=eta, epsilon=eps, mechanism=mech)
    tau = np.sqrt(s2 + (1 / 12 if mech == "tulap" else 0.0))
    expect = eta * tau * N / np.sum(tau * N)
    r = model.relax()
    assert r.status == dpopt.Status.OPTIMAL
    assert np.allclose(r.x, expect, rtol=1e-8)


@pytest.mark.parametrize("eps", [1e-4, 0.3, 5.0, 200.0])
def test_relaxation_closed_form_pure_laplace(eps):
    """Pure Laplace noise (σ² = 0) gives proportional allocation x ∝ N."""
    N = np.array([5000, 12000, 40000])
    model = dpopt.StratifiedDesign(N=N, sigma2=[0, 0, 0], total=600, epsilon=eps, mechanism="laplace")
    r = model.relax()
    assert np.allclose(r.x, 600 * N / N.sum(), rtol=1e-8)
    assert np.array_equal(model.solve().n, [53, 126, 421]) or model.solve().certificate.optimal


@pytest.mark.parametrize("eps", [1e-6, 1e-3, 1.0, 100.0, 700.0])
@pytest.mark.parametrize("mech", ["laplace", "dlap", "tulap"])
def test_extreme_inputs_solve_and_certify(eps, mech):
    model = dpopt.StratifiedDesign(N=[10 ** 9, 5, 1000, 10 ** 6], sigma2=[0, 1, 3, 0.5], total=300,
                                   epsilon=eps, mechanism=mech)
    s = model.solve()
    assert s.status == dpopt.Status.OPTIMAL and s.certificate.optimal
    assert np.isfinite(s.objective) and s.n.sum() == 300
    r = model.relax()
    assert r.status == dpopt.Status.OPTIMAL and r.objective <= s.objective * (1 + 1e-12)


def test_baselines_largest_remainder():
    model = dpopt.StratifiedDesign(N=[100, 200, 300], sigma2=[1.0, 4.0, 0.25], total=10, epsilon=1.0,
                                   objective="a-optimal", lower=[1, 1, 1], upper=[100, 3, 300])
    # proportional: 10*(1/6, 2/6, 3/6) = 1.67, 3.33, 5 -> floors 1,3,5 (+1 to largest remainder: stratum 1)
    assert list(model.baseline("proportional")) == [2, 3, 5]
    # equal: 3.33 each; upper 3 binds on stratum 2 -> (3.5, 3, 3.5) -> 3,3,3 + 1 to the first tie
    eq = model.baseline("equal")
    assert eq.sum() == 10 and eq[1] == 3 and sorted(eq[[0, 2]]) == [3, 4]
    # Neyman with alpha = 1: ∝ sigma = (1, 2, 0.5): 2.86, 5.71 -> capped at 3, rest ∝ (1, 0.5) of 7
    ney = model.baseline("neyman")
    assert list(ney) == [5, 3, 2]
    with pytest.raises(ValueError, match="baseline"):
        model.baseline("optimal")


def test_breakdown_and_budgets():
    model = dpopt.StratifiedDesign(N=[1000, 2000], sigma2=[1.0, 2.0], total=100, epsilon=0.5)
    n = np.array([40, 60])
    br = model.variance_breakdown(n)
    assert br["total"] == pytest.approx(model.objective_value(n))
    assert np.allclose(br["sampling"], model.alpha ** 2 * model.sigma2 / n)
    assert br["variance_of_mean"] == pytest.approx(br["total"] / 3000 ** 2)
    nb = model.nominal_budgets(n)
    assert np.allclose(nb["epsilon"], dpopt.privacy.nominal_epsilon(0.5, n / model.N))
    assert np.allclose(dpopt.privacy.central_epsilon(nb["epsilon"], nb["rate"]), 0.5)
    assert np.allclose(br["noise"], model.alpha ** 2 * 2 * nb["scale"] ** 2 / n)


def test_fpc_subtracts_constant_only():
    kw = dict(N=[50, 80, 120], sigma2=[1.0, 3.0, 0.5], total=60, epsilon=0.8)
    a, b = dpopt.StratifiedDesign(**kw), dpopt.StratifiedDesign(**kw, fpc=True)
    sa, sb = a.solve(), b.solve()
    assert np.array_equal(sa.n, sb.n)
    assert sa.objective - sb.objective == pytest.approx(np.sum(a.alpha2 * a.sigma2 / a.N))


@pytest.mark.parametrize("mech", ["dlap", "tulap"])
@pytest.mark.parametrize("eps", [1e-6, 1.0, 50.0])
def test_dlap_increments_without_cancellation_at_zero_variance(mech, eps):
    """σ² = 0: f = 2α²/(cN) + 2α²n/(cN)² (+ α²/(12n) for TuLap); at ε = 50 the increment 2α²/(cN)² ≈ 7e-44 sits
    under the round-off (1e-36) of f ≈ 1e-20, and the old difference-based increments failed the certificate.
    Oracle: mpmath at 200 digits; exact must then carry a valid certificate and match enumerate."""
    import mpmath
    mpmath.mp.dps = 200
    m = dpopt.StratifiedDesign(N=[30, 40, 50], sigma2=[0, 0, 0], total=40, epsilon=eps, mechanism=mech)
    c = mpmath.expm1(mpmath.mpf(eps))
    for i, N in enumerate((30, 40, 50)):
        def f(n):
            q = mpmath.mpf(n) / N
            return mpmath.mpf(N) ** 2 * (2 * q * (c + q) / c ** 2 + (mpmath.mpf(1) / 12 if mech == "tulap" else 0)) / n
        for n in (1, 7, 25):
            ref = f(n + 1) - f(n)
            got = m.increments(np.array([float(n)]), np.array([i]))[0]
            assert abs(got - float(ref)) <= 1e-13 * abs(float(ref)), (i, n, got, ref)
    sol = m.solve()
    assert sol.status == dpopt.Status.OPTIMAL and sol.certificate.optimal
    assert sol.objective == pytest.approx(m.solve(backend="enumerate").objective, rel=1e-12)


@pytest.mark.parametrize("mech", ["dlap", "tulap"])
def test_dlap_relaxation_certified_at_zero_variance(mech):
    """The same cancellation in f' made the KKT certificate of the relaxation fail at σ² = 0, ε = 50."""
    m = dpopt.StratifiedDesign(N=[30, 40, 50], sigma2=[0, 0, 0], total=40, epsilon=50.0, mechanism=mech)
    r = m.relax()
    assert r.status == dpopt.Status.OPTIMAL and r.certificate.optimal
    assert r.objective <= m.solve().objective * (1 + 1e-12)


def test_baseline_with_a_zero_variance_stratum_stays_within_bounds():
    # the Neyman weight of a stratum with sigma2 = 0 is 0: once the other strata are full it must take the rest
    # (the old bisection ran t to infinity, 0·inf = nan: [101, 2], sum 103 != 150, above upper = 100)
    model = dpopt.StratifiedDesign(N=[100, 100], sigma2=[1.0, 0.0], total=150, epsilon=1.0, upper=[100, 100])
    assert list(model.baseline("neyman")) == [100, 50]
    from dpopt.models.stratified import largest_remainder
    assert list(largest_remainder([1.0, 0.0, 2.0], 8, [0, 1, 0], [2, 10, 3])) == [2, 3, 3]


def test_dlap_and_tulap_convex_at_every_share_against_increments():
    """DLap and TuLap terms are discretely convex at a budget share below 1 (docs/stratified.md, "A budget share
    below 1"): the claim is checked against the increments themselves, one by one over whole ranges, at shares
    10⁻³ … 0.999, Δ up to 5 and ε from 10⁻⁶ to 700, with N from 2 to 10⁹ (the largest with a capped range)."""
    N = np.array([2, 7, 60, 3000, 30000, 10 ** 9])
    upper = np.minimum(N, 40000)
    rng = np.random.default_rng(3)
    S2 = np.column_stack([10.0 ** rng.uniform(-2, 3, N.size), np.zeros(N.size)])   # σ² = 0: the noise alone
    checked = 0
    for mech, deltas in (("dlap", (1, 2, 5)), ("tulap", (1,))):
        for s in (1e-3, 0.1, 0.37, 0.5, 0.9, 0.999):
            for eps in (1e-6, 0.01, 1.0, 20.0, 700.0):
                for delta in deltas:
                    d = dpopt.StratifiedDesign(N, S2, 2 * N.size, eps, mechanism=mech, variables=["y", "z"],
                                               shares=[s, 1 - s], sensitivity=[delta, delta], upper=upper)
                    assert d.convexity_verified()[0] is True
                    for j in range(2):
                        assert d._first_concave(j) is None, (mech, s, eps, delta, j)
                    checked += 1
    assert checked == 6 * 5 * 4


def test_dlap_share_convexity_proof_in_high_precision():
    """The proof's inequality itself (docs/stratified.md): C(y) = y²/(2 sinh²(s·log1p(y)/2)) has C'' ≥ 0, at 40
    digits by mpmath's differentiation, over y from 10⁻⁸ to 10⁸ and shares 10⁻⁵ … 1 (an oracle independent of
    dpopt's code)."""
    import mpmath as mp

    with mp.workdps(40):
        for s in (1e-5, 1e-3, 0.2, 0.5, 0.8, 0.99, 1.0):
            C = (lambda s: lambda y: y ** 2 / (2 * mp.sinh(s * mp.log1p(y) / 2) ** 2))(mp.mpf(s))
            for e in range(-32, 33, 2):
                y = mp.mpf(10) ** (mp.mpf(e) / 4)
                second = mp.diff(C, y, 2)
                assert second >= -mp.mpf(10) ** -25 * abs(C(y)) / y ** 2, (s, float(y), float(second))
