"""Robust designs over variance scenarios (docs/robust.md) against brute force: every integer design of small
instances enumerated, each scenario's own optimum g*_s found by the same enumeration, the worst regret (or
variance, or the cheapest design meeting the target in every scenario) computed from the terms written out here;
with every constraint kind. Plus the invariances (one scenario, scenarios a common factor apart) and the
scenario generators against their closed-form expectations (5 Monte Carlo standard errors)."""

import itertools
import math

import numpy as np
import pytest

import dpopt
from dpopt.models.robust import RobustDesign, scenarios_from_pilot, scenarios_from_release


def _term(s2, N, n, eps, share=1.0):
    """(σ² + 2/ε_n²)/n, ε_n = share·log(1 + (e^ε − 1)N/n): Laplace at Δ = 1 (docs/stratified.md), written out."""
    e = share * math.log1p(math.expm1(eps) * N / n)
    return (s2 + 2.0 / e ** 2) / n


def _g(S, N, n, eps, alpha2):
    J = S.shape[1]
    return sum(alpha2[i] * sum(_term(S[i, j], N[i], n[i], eps, 1.0 / J) for j in range(J)) for i in range(len(N)))


def _designs(N, lo, hi):
    return [np.array(n) for n in itertools.product(*[range(int(lo[i]), int(hi[i]) + 1) for i in range(len(N))])]


KINDS = ["total", "cost", "at least", "precision", "two variables", "absolute", "min-cost"]


def _instance(kind, seed):
    rng = np.random.default_rng(1000 + seed)
    J = 2 if kind == "two variables" else 1
    k = 2 if kind in ("two variables", "min-cost") else 3
    N = rng.integers(3, 7, k)
    total = int(rng.integers(k + 1, N.sum()))
    eps = float(rng.choice([0.5, 1.0, 4.0]))
    S = int(rng.integers(2, 4))
    scen = [rng.uniform(0.1, 10, (k, J)) for _ in range(S)]
    d = dpopt.StratifiedDesign(N, scen[0], total, eps, variables=None if J == 1 else ["a", "b"])
    alpha2 = d.alpha2
    ok = lambda n, Ss: int(n.sum()) == total
    if kind == "cost":
        c = rng.uniform(1, 3, k)
        b = float(c @ np.full(k, total / k)) * 1.03
        d.add_cost_budget(c, b)
        ok = lambda n, Ss, c=c, b=b: int(n.sum()) == total and c @ n <= b * (1 + 1e-9)
    elif kind == "at least":
        d.add_constraint({d.labels[1]: 1}, 2, ">=")
        ok = lambda n, Ss: int(n.sum()) == total and n[1] >= 2
    elif kind == "precision":
        w = np.zeros(k)
        w[:2] = (N[:2] / N[:2].sum()) ** 2
        mid = np.maximum(1, np.round(N * total / N.sum())).astype(int)
        bound = max(float(sum(w[i] * _term(Sx[i, 0], N[i], mid[i], eps) for i in range(k))) for Sx in scen) * 1.05
        d.add_precision_target(bound, strata=[0, 1])
        ok = lambda n, Ss, w=w, b=bound: int(n.sum()) == total and all(
            sum(w[i] * _term(Sx[i, 0], N[i], n[i], eps) for i in range(k)) <= b * (1 + 1e-9) for Sx in Ss)
    if kind == "min-cost":
        c = rng.uniform(1, 3, k)
        # a target between the best and the worst design's worst variance
        vals = [max(_g(Sx, N, n, eps, alpha2) for Sx in scen) for n in _designs(N, d.lower, d.upper)]
        V0 = float(np.quantile(vals, 0.3))
        model = RobustDesign(d.min_cost(c, variance_target=V0), scen)
        return model, ("min-cost", N, d, eps, scen, alpha2, c, V0)
    model = RobustDesign(d, scen, objective="absolute" if kind == "absolute" else "regret")
    return model, (kind, N, d, eps, scen, alpha2, ok, None)


def _brute(kind, N, d, eps, scen, alpha2, ok_or_cost, V0):
    designs = _designs(N, d.lower, d.upper)
    if kind == "min-cost":
        c = ok_or_cost
        feas = [n for n in designs if all(_g(Sx, N, n, eps, alpha2) <= V0 * (1 + 1e-9) for Sx in scen)]
        return min((float(c @ n) for n in feas), default=math.inf)
    ok = ok_or_cost
    if kind == "absolute":
        opt = np.ones(len(scen))
    else:   # each scenario's own optimum, its constraints judged in that scenario alone
        opt = np.array([min((_g(Sx, N, n, eps, alpha2) for n in designs if ok(n, [Sx])), default=math.inf)
                        for Sx in scen])
    feas = [n for n in designs if ok(n, scen)]
    return min((max(_g(Sx, N, n, eps, alpha2) / o for Sx, o in zip(scen, opt)) for n in feas), default=math.inf)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("kind", KINDS)
def test_robust_equals_brute_force(kind, seed):
    model, args = _instance(kind, seed)
    best = _brute(*args)
    try:
        sol = model.solve(time_limit=30, rel_gap=1e-6)
    except ValueError:
        raise
    if not math.isfinite(best):
        assert sol.status in ("infeasible", "error"), sol.message
        return
    assert sol.status == "optimal", sol.message
    assert sol.objective == pytest.approx(best, rel=2e-6)
    if kind != "min-cost":
        assert sol.certificate.lower_bound <= best * (1 + 1e-12)


def test_one_scenario_is_the_plain_design():
    d = dpopt.StratifiedDesign([60, 120, 35, 200, 80], [4.0, 1.0, 9.0, 2.5, 6.0], 90, 1.0)
    d.add_cost_budget([1, 2, 1, 1, 3], 140)
    plain = d.solve()
    sol = RobustDesign(d, [d.sigma2]).solve(rel_gap=1e-9)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(1.0, abs=1e-9)
    assert d.objective_value(sol.n) == pytest.approx(plain.objective, rel=1e-9)


def test_common_factor_scenarios_are_the_plain_design():
    """Classical regime (ε = 700: the noise is ~1e-10 of the sampling variance): g(n; cS²) = c·g(n; S²), so every
    regret is the same function and the robust design is the plain one."""
    s2 = np.array([4.0, 1.0, 9.0, 2.5, 6.0]) * 1e4
    d = dpopt.StratifiedDesign([60, 120, 35, 200, 80], s2, 90, 700.0)
    plain = d.solve()
    sol = RobustDesign(d, [s2, 3 * s2, 0.2 * s2]).solve(rel_gap=1e-9)
    assert sol.status == "optimal"
    assert d.objective_value(sol.n) == pytest.approx(plain.objective, rel=1e-8)
    assert sol.details["scenario_regret"] == pytest.approx(np.ones(3), rel=1e-8)


def test_pilot_bootstrap_scenarios():
    rng = np.random.default_rng(5)
    y = np.concatenate([rng.normal(0, 1, 12), rng.normal(0, 3, 8)])
    strata = ["a"] * 12 + ["b"] * 8
    sc = scenarios_from_pilot(y, strata, ["a", "b"], draws=4000, seed=1)
    assert np.allclose(sc[0][:, 0], [np.var(y[:12], ddof=1), np.var(y[12:], ddof=1)])
    again = scenarios_from_pilot(y, strata, ["a", "b"], draws=4000, seed=1)
    assert all(np.array_equal(u, v) for u, v in zip(sc, again))
    boot = np.array([s[:, 0] for s in sc[1:]])
    # E[bootstrap variance] = (m−1)/m · s² (the resample's population is the pilot)
    for h, m in enumerate([12, 8]):
        want = (m - 1) / m * sc[0][h, 0]
        se = boot[:, h].std(ddof=1) / math.sqrt(boot.shape[0])
        assert abs(boot[:, h].mean() - want) <= 5 * se
    with pytest.raises(ValueError, match="at least 2"):
        scenarios_from_pilot(y[:13], strata[:13], ["a", "b"])


def test_release_scenarios():
    rel = np.array([50.0, 80.0, 120.0])
    b = np.array([2.0, 5.0, 1.0])
    sc = scenarios_from_release(rel, b, draws=4000, seed=2)
    assert np.allclose(sc[0][:, 0], rel)
    draws = np.array([s[:, 0] for s in sc[1:]])
    # Laplace(b): mean 0, variance 2b²
    assert np.all(np.abs(draws.mean(axis=0) - rel) <= 5 * np.sqrt(2) * b / math.sqrt(draws.shape[0]))
    assert draws.std(axis=0, ddof=1) == pytest.approx(np.sqrt(2) * b, rel=0.1)
    with pytest.raises(ValueError, match="noise_scale"):
        scenarios_from_release(rel, [-1.0, 1.0, 1.0])


def test_bad_input_names_the_field():
    d = dpopt.StratifiedDesign([10, 20], [1.0, 2.0], 10, 1.0)
    with pytest.raises(ValueError, match="objective"):
        RobustDesign(d, [d.sigma2], objective="worst")
    with pytest.raises(ValueError, match="scenario 1 sigma2"):
        RobustDesign(d, [d.sigma2, [1.0, -2.0]])
    with pytest.raises(ValueError, match="at least one"):
        RobustDesign(d, [])


# ---------------------------------------------------------------------------------- files, CLI, report, figure
def _write_frame(path, rng, labels=("a", "b", "c"), sizes=(40, 60, 30), sds=(1.0, 3.0, 2.0)):
    rows = ["state,wage"]
    for lab, n, sd in zip(labels, sizes, sds):
        rows += [f"{lab},{v:.4f}" for v in rng.normal(10, sd, n)]
    path.write_text("\n".join(rows) + "\n")


def test_model_file_scenario_tables_and_pilot(tmp_path):
    from dpopt.io.modelfile import ModelFileError, load

    base = 'family = "stratified_robust"\nepsilon = 1.0\ntotal = 30\n[strata]\nlabel = ["a", "b", "c"]\n' \
           'N = [40, 60, 30]\nsigma2 = [1.0, 9.0, 4.0]\n'
    f = tmp_path / "m.toml"
    f.write_text(base + '[[scenario]]\nname = "low"\nsigma2 = [1.0, 4.0, 4.0]\n[[scenario]]\nsigma2 = [2.0, 9.0, 1.0]\n')
    model, _ = load(f)
    assert isinstance(model, RobustDesign) and model.names == ["low", "s2"]
    assert np.allclose(model.scenarios[1][:, 0], [2.0, 9.0, 1.0])
    # the pilot table: the scenarios are the pilot's S² and its bootstrap, as scenarios_from_pilot gives them
    rng = np.random.default_rng(3)
    _write_frame(tmp_path / "pilot.csv", rng, sizes=(6, 6, 6))
    f.write_text(base + '[pilot]\nfile = "pilot.csv"\nstrata = "state"\ny = "wage"\ndraws = 5\nseed = 4\n')
    model, _ = load(f)
    assert model.S == 6
    import csv
    rows = list(csv.DictReader(open(tmp_path / "pilot.csv")))
    y = np.array([float(r["wage"]) for r in rows])
    want = scenarios_from_pilot(y, [r["state"] for r in rows], ["a", "b", "c"], draws=5, seed=4)
    assert all(np.allclose(u, v) for u, v in zip(model.scenarios, want))
    f.write_text(base)
    with pytest.raises(ModelFileError, match="scenario"):
        load(f)
    f.write_text(base + '[[scenario]]\nsigma2 = [1.0, 2.0]\n')
    with pytest.raises(ModelFileError, match="scenario 0 sigma2"):
        load(f)


def test_cli_design_robust_and_report(tmp_path, capsys):
    from dpopt.cli import main as cli
    from dpopt.io.modelfile import load

    rng = np.random.default_rng(8)
    _write_frame(tmp_path / "frame.csv", rng)
    _write_frame(tmp_path / "pilot.csv", rng, sizes=(5, 5, 5))
    out = tmp_path / "robust.toml"
    code = cli(["design", str(tmp_path / "frame.csv"), "--strata", "state", "--y", "wage", "--total", "40",
                "--epsilon", "1", "--pilot", str(tmp_path / "pilot.csv"), "--robust", "regret", "--draws", "6",
                "--seed", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "worst regret" in text and "price of robustness" in text
    model, _ = load(out)                     # the written file holds the scenarios and reloads
    assert isinstance(model, RobustDesign) and model.S == 7
    sol = model.solve()
    d = sol.details
    # the report's numbers are the model's own evaluations of the design
    assert d["worst_regret"] == pytest.approx(float(np.max(model.variances(sol.n) / model.scenario_optima())))
    nominal = model.design.solve()
    assert d["price_of_robustness"] == pytest.approx(model.design.objective_value(sol.n) / nominal.objective - 1,
                                                     abs=1e-12)
    assert d["worst_regret"] <= d["nominal_worst_regret"] * (1 + 1e-4)
    with pytest.raises(SystemExit):
        cli(["design", str(tmp_path / "frame.csv"), "--strata", "state", "--y", "wage", "--total", "40",
             "--epsilon", "1", "--robust", "worst", "--out", str(tmp_path / "x.toml")])


def test_regret_figure(tmp_path):
    pytest.importorskip("matplotlib")
    from dpopt.plots.robust import figure_regret, regret_data

    d = dpopt.StratifiedDesign([60, 120, 35], [4.0, 1.0, 9.0], 50, 1.0)
    r = RobustDesign(d, [d.sigma2, [8.0, 1.0, 3.0]])
    designs = {"nominal": d.solve().n, "proportional": d.baseline("proportional")}
    data = regret_data(r, designs)
    assert data["nominal"][0] == pytest.approx(1.0)
    path = figure_regret(tmp_path, r, designs)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
