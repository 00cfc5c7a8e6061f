"""Issue 21: one value range (sensitivity, clamping) per study variable, in the API, model files and the CLI.

Oracles are written here from the formulas (docs/stratified.md), never from dpopt's helpers."""

import csv
import json
import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.io import modelfile
from dpopt.io.writer import to_toml
from montecarlo import assert_release_spread, stratified_variance
from test_stratified_exact import compositions

RANGES = [(0.0, 3000.0), (0.0, 20.0)]


def oracle_g(N, S2, eps, n, ranges, shares, weights, mech="laplace"):
    """Σ_i α_i² Σ_j w_j (σ_ij² + γ_j²(ε_i))/n_i, α = N (the population-mean objective), ε_i = log1p(expm1(ε)N_i/n_i), variable j privatised
    at s_j ε_i with Δ_j = hi_j − lo_j (Laplace 2Δ²/E², DLap 2p/(1−p)², p = exp(−E/Δ))."""
    g = 0.0
    for Ni, row, ni in zip(N, S2, n):
        e_i = math.log1p(math.expm1(eps) * Ni / ni)
        a2 = float(Ni) ** 2
        for (lo, hi), s, w, s2 in zip(ranges, shares, weights, row):
            d, E = hi - lo, s * e_i
            if mech == "laplace":
                g2 = 2 * d ** 2 / E ** 2
            else:
                p = math.exp(-E / d)
                g2 = 2 * p / (1 - p) ** 2
            g += w * a2 * (s2 + g2) / ni
    return g


def _two(N=(40, 60, 90), S2=((9e5, 16.0), (4e5, 9.0), (1e6, 25.0)), total=60, eps=1.0, **kw):
    kw.setdefault("value_range", RANGES)
    return StratifiedDesign(list(N), [list(r) for r in S2], total, eps, variables=["wage", "educ"], **kw)


# ---------------------------------------------------------------------------------- the API
def test_per_variable_ranges_and_sensitivities():
    d = _two()
    assert d.value_ranges.tolist() == [[0, 3000], [0, 20]] and d.sensitivities.tolist() == [3000, 20]
    assert d.sensitivity_of("educ") == 20 and d.sensitivity_of(0) == 3000 and d.value_range_of("educ") == (0, 20)
    with pytest.raises(ValueError, match="one sensitivity per variable"):
        d.sensitivity
    with pytest.raises(ValueError, match="one value_range per variable"):
        d.value_range
    # the same ranges as a mapping by name; sensitivities alone (no range) per variable
    m = _two(value_range={"educ": [0, 20], "wage": (0, 3000)})
    assert m.value_ranges.tolist() == d.value_ranges.tolist()
    s = _two(value_range=None, sensitivity=[3000, 20])
    assert s.value_ranges is None and s.value_range is None and s.sensitivities.tolist() == [3000, 20]
    assert s.objective_value([15, 20, 25]) == pytest.approx(d.objective_value([15, 20, 25]), rel=1e-14)
    # one pair (or one number) for all: the old API, and the old attributes
    one = _two(value_range=(0, 20))
    assert one.value_range == (0.0, 20.0) and one.sensitivity == 20.0 and one.sensitivities.tolist() == [20, 20]
    single = StratifiedDesign([10, 20], [1.0, 2.0], 10, 1.0, value_range=(2, 7))
    assert single.value_range == (2.0, 7.0) and single.sensitivity == 5.0
    assert StratifiedDesign([10, 20], [1.0, 2.0], 10, 1.0, sensitivity=3).sensitivity == 3.0
    assert StratifiedDesign([10, 20], [1.0, 2.0], 10, 1.0).sensitivity == 1.0


@pytest.mark.parametrize("kw, error, words", [
    ({"value_range": [(0, 3000)]}, ValueError, ["value_range", "1 entries", "2 variable"]),
    ({"value_range": [(0, 3000), (0, 20), (0, 1)]}, ValueError, ["value_range", "3 entries"]),
    ({"value_range": [(0, 3000), (5, 1)]}, ValueError, ["value_range['educ']", "lo < hi"]),
    ({"value_range": {"wage": (0, 3000)}}, ValueError, ["value_range", "'educ'"]),
    ({"value_range": {"wage": (0, 1), "educ": (0, 1), "age": (0, 1)}}, ValueError, ["value_range", "'age'"]),
    ({"value_range": "0 20"}, TypeError, ["value_range"]),
    ({"value_range": [(0, 3000), "ab"]}, TypeError, ["value_range['educ']"]),
    ({"value_range": None, "sensitivity": [1, 2, 3]}, ValueError, ["sensitivity", "3 entries"]),
    ({"value_range": None, "sensitivity": [1, -2]}, ValueError, ["sensitivity", "'educ'", "> 0"]),
    ({"sensitivity": [3000, 21]}, ValueError, ["sensitivity", "'educ'", "contradicts value_range"]),
    ({"value_range": [(0, 3000), (0, 20.5)], "mechanism": "dlap"}, ValueError, ["value_range", "'educ'", "integer"]),
])
def test_bad_ranges_name_the_field_and_the_variable(kw, error, words):
    with pytest.raises(error) as e:
        _two(**kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ---------------------------------------------------------------------------------- the objective
@pytest.mark.parametrize("shares, weights", [(None, None), ([0.7, 0.3], [1.0, 2.0])])
def test_objective_and_noise_are_the_closed_form(shares, weights):
    d = _two(shares=shares, variable_weights=weights)
    s = [0.5, 0.5] if shares is None else shares
    w = [1.0, 1.0] if weights is None else weights
    N, S2, eps = [40, 60, 90], [[9e5, 16.0], [4e5, 9.0], [1e6, 25.0]], 1.0
    for n in ([1, 1, 58], [15, 20, 25], [40, 10, 10], [20.5, 20.5, 19.0]):
        assert d.objective_value(n) == pytest.approx(oracle_g(N, S2, eps, n, RANGES, s, w), rel=1e-12)
        e = [math.log1p(math.expm1(eps) * Ni / ni) for Ni, ni in zip(N, n)]
        gam = d.noise_variance_at(np.asarray(n, dtype=float))
        want = [[2 * (hi - lo) ** 2 / (sj * ei) ** 2 for (lo, hi), sj in zip(RANGES, s)] for ei in e]
        np.testing.assert_allclose(gam, want, rtol=1e-12)
        if all(float(x).is_integer() for x in n):
            nb = d.nominal_budgets([int(x) for x in n])
            np.testing.assert_allclose(nb["scale"], [[3000 / (s[0] * ei), 20 / (s[1] * ei)] for ei in e], rtol=1e-12)
    # derivatives agree with the closed form's finite differences
    x, h = np.array([15.0, 20.0, 25.0]), 1e-4
    for i in range(3):
        up, dn = x.copy(), x.copy()
        up[i] += h
        dn[i] -= h
        fd = (oracle_g(N, S2, eps, up, RANGES, s, w) - oracle_g(N, S2, eps, dn, RANGES, s, w)) / (2 * h)
        assert d.gradient(x)[i] == pytest.approx(fd, rel=1e-6)


def _brute(d, N, S2, eps, total, ranges, shares, mech="laplace"):
    best = min(compositions(total, [1] * len(N), list(N)),
               key=lambda n: oracle_g(N, S2, eps, n, ranges, shares, [1, 1], mech))
    return oracle_g(N, S2, eps, best, ranges, shares, [1, 1], mech), best


@pytest.mark.parametrize("mech, ranges", [("laplace", RANGES), ("dlap", [(0, 3), (0, 1)])])
def test_exact_equals_brute_force(mech, ranges):
    N, S2, eps, total = [7, 12, 9], [[4e5, 1.0], [9e5, 16.0], [1e4, 30.0]], 0.8, 11
    if mech == "dlap":
        S2 = [[0.5, 0.1], [2.0, 0.2], [0.1, 0.25]]
    d = StratifiedDesign(N, S2, total, eps, mechanism=mech, variables=["wage", "educ"], value_range=ranges,
                         shares=[0.6, 0.4])
    g, best = _brute(d, N, S2, eps, total, ranges, [0.6, 0.4], mech)
    sol = d.solve(backend="exact")        # (enumerate models one study variable only)
    assert sol.status == dpopt.Status.OPTIMAL
    assert sol.objective == pytest.approx(g, rel=1e-10)
    assert oracle_g(N, S2, eps, sol.n, ranges, [0.6, 0.4], [1, 1], mech) == pytest.approx(g, rel=1e-10)
    # the one-range design (the bug: education at the wage's sensitivity) is another problem
    wrong = StratifiedDesign(N, S2, total, eps, mechanism=mech, variables=["wage", "educ"], value_range=ranges[0],
                             shares=[0.6, 0.4])
    assert wrong.objective_value(best) != pytest.approx(g, rel=1e-6)


def test_milp_routes_use_each_variables_sensitivity():
    N, S2, eps, total = [7, 12, 9], [[4e5, 1.0], [9e5, 16.0], [1e4, 30.0]], 0.8, 11
    d = StratifiedDesign(N, S2, total, eps, variables=["wage", "educ"], value_range=RANGES, shares=[0.6, 0.4])
    g, _ = _brute(d, N, S2, eps, total, RANGES, [0.6, 0.4])
    s = d.solve(backend="pyomo", solver="highs", time_limit=60)
    assert s.status == dpopt.Status.OPTIMAL
    assert oracle_g(N, S2, eps, s.n, RANGES, [0.6, 0.4], [1, 1]) == pytest.approx(g, rel=1e-9)


def test_pyomo_term_expression_reads_delta_j():
    import pyomo.environ as pe
    from dpopt.backends.pyomo import term_expression
    d = _two()
    m = pe.ConcreteModel()
    m.v = pe.Var(initialize=20.0)
    for j, (lo, hi) in enumerate(RANGES):
        e_i = math.log1p(math.expm1(1.0) * 60 / 20.0)
        want = (d.sigma2_matrix[1, j] + 2 * (hi - lo) ** 2 / (0.5 * e_i) ** 2) / 20.0
        assert pe.value(term_expression(d, 1, m.v, j)) == pytest.approx(want, rel=1e-9)


# ---------------------------------------------------------------------------------- frames, release
def _population(seed=0):
    rng = np.random.default_rng(seed)
    sizes = [300, 400, 300]
    strata = np.repeat(["A", "B", "C"], sizes)
    wage = np.concatenate([rng.gamma(2, 300, sizes[0]), rng.gamma(3, 300, sizes[1]), rng.gamma(4, 300, sizes[2])])
    wage = np.minimum(wage, 2999.0)                                             # none above 3000
    educ = np.concatenate([rng.integers(6, 14, sizes[0]), rng.integers(8, 18, sizes[1]),
                           rng.integers(10, 23, sizes[2])]).astype(float)        # some above 20: clamped
    frame = {"id": [f"p{i}" for i in range(wage.size)], "stratum": strata.tolist(), "wage": wage.tolist(),
             "educ": educ.tolist()}
    return frame, np.column_stack([wage, educ]), strata


def test_from_frame_clamps_each_variable_to_its_own_range():
    frame, Y, strata = _population()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 150, 1.0, value_range=RANGES)
        by_name = StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 150, 1.0,
                                              value_range={"wage": (0, 3000), "educ": (0, 20)})
    for h, lab in enumerate(["A", "B", "C"]):
        rows = Y[strata == lab]
        want = [np.var(np.clip(rows[:, j], lo, hi), ddof=1) for j, (lo, hi) in enumerate(RANGES)]
        np.testing.assert_allclose(d.sigma2_matrix[h], want, rtol=1e-12)
    assert np.array_equal(by_name.sigma2_matrix, d.sigma2_matrix)
    assert d.frame_columns["sigma2_clamped_to"] == [(0.0, 3000.0), (0.0, 20.0)]
    with pytest.warns(UserWarning, match="'educ' has values outside value_range \\(0, 20\\)"):
        StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 150, 1.0, value_range=RANGES)
    with pytest.raises(ValueError, match="value_range"):
        StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 150, 1.0, value_range=[(0, 3000)])


def test_released_se_of_education_is_in_years():
    """200 releases, each from its own sample, with one plan: the spread of the education estimate matches its
    reported SE (15 %: the relative SE of an SD from 200 draws is 5 %), and that SE is in years."""
    pytest.importorskip("opendp")
    from dpopt.release import plan_stratified, release_stratified
    from dpopt.sampling import draw_stratified

    frame, Y, _ = _population()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 300, 2.0, value_range=RANGES,
                                        min_per_stratum=2)
    n = d.solve().n
    plan = plan_stratified(d, n)
    assert plan[0].sensitivity == [3000.0, 20.0]
    R = 200
    est, se = np.empty((R, 2)), np.empty((R, 2))
    for r in range(R):
        sample = draw_stratified(frame, d, n, strata="stratum", id="id", seed=r)
        with warnings.catch_warnings():
            warnings.simplefilter("error")           # no useless-SE warning: each variable has its own range
            rel = release_stratified(d, sample, np.column_stack([sample.values(frame, c) for c in ("wage", "educ")]), plan=plan)
        est[r], se[r] = rel.estimates, rel.ses
        if r == 0:
            ms = rel.record.parts[0].cells[0].measurements
            assert [m.sensitivity for m in ms] == [3000.0, 20.0]
            assert rel.to_dict()["variables"][1]["value_range"] == [0.0, 20.0]
            assert rel.clamped[:, 1].sum() > 0 and rel.clamped[:, 0].sum() == 0
    sd = est.std(axis=0, ddof=1)
    _, _, strata = _population()
    for j, (lo, hi) in enumerate(RANGES):        # against the closed form, at 5 Monte Carlo SEs (tests/montecarlo.py)
        S2 = [np.var(np.clip(Y[strata == lab, j], lo, hi), ddof=1) for lab in d.labels]
        assert_release_spread(est[:, j], se[:, j], stratified_variance(d.N, n, S2, [p.noise_variance[j] for p in plan]))
    assert se[:, 1].mean() < 3.0                      # years (the bug gave 61.9 at the wage's Δ = 3000)
    truth = np.mean(np.clip(Y[:, 1], 0, 20))
    assert abs(est[:, 1].mean() - truth) < 4 * sd[1] / math.sqrt(R)


def test_useless_warning_is_per_variable_against_its_own_range():
    pytest.importorskip("opendp")
    from dpopt.release import release_stratified
    from dpopt.sampling import draw_stratified

    frame, Y, _ = _population()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # educ gets 0.1 % of the budget: its interval is wider than [0, 20]; wage's is not wider than [0, 3000]
        d = StratifiedDesign.from_frame(frame, "stratum", ["wage", "educ"], 300, 1.0, value_range=RANGES,
                                        min_per_stratum=2, shares=[0.999, 0.001])
    n = d.solve().n
    sample = draw_stratified(frame, d, n, strata="stratum", id="id", seed=1)
    with pytest.warns(UserWarning) as got:
        release_stratified(d, sample, np.column_stack([sample.values(frame, c) for c in ("wage", "educ")]))
    said = [str(w.message) for w in got if "wider than its value range" in str(w.message)]
    assert len(said) == 1 and "'educ'" in said[0] and "[0, 20]" in said[0]


# ---------------------------------------------------------------------------------- model files, CLI
@pytest.mark.parametrize("vr, sens", [(RANGES, None), ((0, 20), None), (None, [3000, 20]), (None, 4.0)])
def test_model_file_round_trip(tmp_path, vr, sens):
    d = _two(value_range=vr, sensitivity=sens)
    path = tmp_path / "m.toml"
    path.write_text(to_toml(d))
    back, _ = modelfile.load(path)
    assert (back.value_ranges is None) == (d.value_ranges is None)
    if vr is not None:
        assert back.value_ranges.tolist() == d.value_ranges.tolist()
    assert back.sensitivities.tolist() == d.sensitivities.tolist()
    assert back.objective_value([15, 20, 25]) == d.objective_value([15, 20, 25])
    assert to_toml(back) == to_toml(d)


def test_model_file_table_by_variable_name(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('family = "stratified"\ntotal = 60\nepsilon = 1.0\nvariables = ["wage", "educ"]\n'
                    '[value_range]\neduc = [0, 20]\nwage = [0, 3000]\n'
                    '[strata]\nN = [40, 60, 90]\nsigma2 = [[9e5, 16.0], [4e5, 9.0], [1e6, 25.0]]\n')
    m, _ = modelfile.load(path)
    assert m.value_ranges.tolist() == [[0, 3000], [0, 20]]
    assert m.objective_value([15, 20, 25]) == pytest.approx(_two().objective_value([15, 20, 25]), rel=1e-15)
    path.write_text(path.read_text().replace("educ = [0, 20]\n", ""))
    with pytest.raises(Exception, match="value_range.*'educ'"):
        modelfile.load(path)


def _frame_csv(path):
    frame, _, _ = _population()
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["person", "stratum", "wage", "educ"])
        for row in zip(frame["id"], frame["stratum"], frame["wage"], frame["educ"]):
            w.writerow(row)
    return path


def test_cli_design_and_release_per_variable_ranges(tmp_path, capsys):
    pytest.importorskip("opendp")
    from dpopt.cli import main

    frame = _frame_csv(tmp_path / "frame.csv")
    out = tmp_path / "m.toml"
    args = ["design", str(frame), "--strata", "stratum", "--y", "wage", "educ", "--total", "300", "--epsilon", "2",
            "--min-per-stratum", "2", "--id", "person"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(args + ["--value-range", "0", "3000", "--value-range", "0", "20", "--out", str(out)])
    capsys.readouterr()
    assert rc == 0
    model, _ = modelfile.load(out)
    assert model.value_ranges.tolist() == [[0, 3000], [0, 20]] and model.sensitivities.tolist() == [3000, 20]
    assert "value_range = [[0.0, 3000.0], [0.0, 20.0]]" in out.read_text().replace("[ ", "[").replace(" ]", "]")
    rc = main(["release", str(out), "--frame", str(frame), "--seed", "3", "--out", str(tmp_path / "o")])
    capsys.readouterr()
    assert rc == 0
    est = json.loads((tmp_path / "o" / "estimate.json").read_text())
    educ = est["variables"][1]
    assert educ["variable"] == "educ" and educ["value_range"] == [0.0, 20.0]
    assert 0 < educ["se"] < 3.0 and 0 <= educ["ci"][0] < educ["estimate"] < educ["ci"][1] <= 20
    # three ranges for two columns: one error line naming the option
    assert main(args + ["--value-range", "0", "1"] * 3 + ["--out", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "--value-range is given 3 times" in err and not (tmp_path / "x.toml").exists()
