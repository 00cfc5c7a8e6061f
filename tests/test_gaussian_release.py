"""Gaussian releases and the ledger in (ε, δ) and ρ-zCDP (issue 22, items 5 and 6; docs/release.md §4, §6).

Oracles, each independent of the code under test:
* composition and amplification: the closed forms of docs/release.md §6 in 50-digit arithmetic (mpmath);
* amplified (ε, δ): OpenDP's ``make_population_amplification`` of an approx-DP measurement (fixed δ);
* every (ε, δ) a Gaussian measurement records: Google's dp-accounting (PLD of the Gaussian privacy loss at the
  σ OpenDP certifies, composed over the stratum's variables);
* released spreads: the closed-form variance of the stratified mean (tests/montecarlo.py), over repeated
  releases with OpenDP's unseedable noise, every tolerance 5 Monte Carlo standard errors.
"""

import copy
import json
import math
import os

import numpy as np
import pytest

from dpopt import StratifiedDesign
from dpopt.sampling import draw_stratified

pytest.importorskip("opendp")
mpmath = pytest.importorskip("mpmath")
pytest.importorskip("dp_accounting")

from dp_accounting.pld import privacy_loss_distribution as pld  # noqa: E402

from dpopt.release import (BudgetExceeded, Cell, Measurement, Part, PrivacyLedger, ReleaseRecord,  # noqa: E402
                           plan_stratified, release_hierarchy, release_stratified)
from dpopt.release import _opendp  # noqa: E402
from montecarlo import assert_release_spread, stratified_variance  # noqa: E402

mpmath.mp.dps = 50

# a small frame of integer responses 0..10 in three strata of different spread
_rng = np.random.default_rng(22)
_LAB = ["a", "b", "c"]
_NH = [200, 300, 100]
FRAME = {"id": [f"u{i:03d}" for i in range(sum(_NH))],
         "s": [lab for lab, k in zip(_LAB, _NH) for _ in range(k)],
         "y": np.concatenate([_rng.integers(0, 4, _NH[0]), _rng.integers(0, 11, _NH[1]),
                              _rng.integers(3, 8, _NH[2])]).tolist()}
CASES = {"gaussian": dict(mechanism="gaussian", delta=1e-6, epsilon=1.0),
         "discrete-gaussian": dict(mechanism="discrete-gaussian", epsilon=0.5),
         "gaussian-zcdp": dict(mechanism="gaussian-zcdp", epsilon=0.5)}


def _design(case, total=150, **extra):
    kw = dict(CASES[case])
    return StratifiedDesign.from_frame(FRAME, "s", "y", total=total, value_range=(0, 10), **kw, **extra)


def _release(model, n, seed, ledger=None, plan=None):
    sample = draw_stratified(FRAME, model, n, strata="s", id="id", seed=seed)
    return release_stratified(model, sample, sample.values(FRAME, "y"), ledger=ledger, plan=plan)


def _gauss(name, eps, delta, rho, scale=1.0):
    return Measurement(name, "gaussian", 1.0, scale, eps, delta, scale ** 2, "approx", rho, _opendp.ANALYTIC, eps * 1.1)


def _zcdp(name, rho):
    return Measurement(name, "gaussian-zcdp", 1.0, 1.0, 0.0, 0.0, 1.0, "zcdp", rho)


def _lap(name, eps):
    return Measurement(name, "laplace", 1.0, 1.0 / eps, eps, 0.0, 2.0 / eps ** 2)


def _record(name, measurements, N=None, n=None):
    """One release of one cell; a sampled cell names its (made-up) key and members, as a release's do."""
    from dpopt.sampling import partition_id
    if N is None:
        return ReleaseRecord(name, "test", [Part("p", [Cell("c", measurements, N, n)])])
    members = f"{abs(hash(name)) % 16 ** 32:032x}"
    return ReleaseRecord(name, "test", [Part("p", [Cell("c", measurements, N, n, members)],
                                             partition=partition_id([members]))],
                         sample={"key": f"{abs(hash(name + 'key')) % 16 ** 32:032x}", "scheme": "srswor",
                                 "fingerprint": ""})


# ---------------------------------------------------------------------------------- the ledger, every mode
def test_approx_ledger_composes_and_amplifies_against_the_closed_form():
    """(ε, δ): a cell's nominal ε and δ add up; a sampled cell is log1p(q·expm1(Σε)), q·Σδ; releases add up."""
    led = PrivacyLedger(10.0, 1e-5)
    cell_meas = [_gauss("x", 1.3, 2e-6, 0.2), _gauss("y", 0.4, 1e-6, 0.05)]
    led.charge(_record("sampled", cell_meas, N=1000, n=100))
    led.charge(_record("whole", [_lap("z", 0.7)]))
    q = mpmath.mpf(100) / 1000
    want_e = mpmath.log1p(q * mpmath.expm1(mpmath.mpf(1.3) + mpmath.mpf(0.4))) + mpmath.mpf(0.7)
    want_d = q * (mpmath.mpf(2e-6) + mpmath.mpf(1e-6))
    eps, delta = led.compose(led.records)
    assert want_e <= eps <= want_e * (1 + 1e-12) and abs(delta - want_d) <= 1e-15 * want_d
    # OpenDP's population amplification of an (ε, δ) measurement agrees (it accepts approx-DP with a fixed δ)
    theirs = _opendp.amplified_approx_by_opendp(_opendp.require_opendp(), 1.7, 3e-6, 100, 1000)
    assert abs(theirs[0] - float(led.records[0].epsilon)) <= 1e-9 and abs(theirs[1] - float(want_d)) <= 1e-18


@pytest.mark.parametrize("accounting", ["pure", "approx-epsilon", "approx-delta", "zcdp"])
def test_every_accounting_mode_refuses_overspend_before_recording(accounting):
    if accounting == "pure":
        led, rec = PrivacyLedger(1.0), _record("r", [_lap("a", 0.6)])
    elif accounting == "approx-epsilon":
        led, rec = PrivacyLedger(1.0, 1e-5), _record("r", [_gauss("a", 0.6, 1e-6, 0.05)])
    elif accounting == "approx-delta":
        led, rec = PrivacyLedger(10.0, 1e-5), _record("r", [_gauss("a", 0.6, 6e-6, 0.05)])
    else:
        led, rec = PrivacyLedger(rho_total=1.0), _record("r", [_zcdp("a", 0.6)])
    led.charge(rec)
    with pytest.raises(BudgetExceeded, match="refused"):
        led.charge(copy.deepcopy(rec))
    assert len(led.records) == 1


def test_zcdp_ledger_adds_rho_without_amplification_and_counts_pure_as_eps_squared_over_two():
    led = PrivacyLedger(rho_total=1.0, delta_report=1e-10)
    led.charge(_record("sampled", [_zcdp("a", 0.25), _zcdp("b", 0.125)], N=1000, n=10))    # no amplification
    led.charge(_record("laplace", [_lap("c", 0.5)]))
    assert led.rho_spent == pytest.approx(0.25 + 0.125 + 0.5 ** 2 / 2, rel=1e-14)
    assert led.rho_spent >= 0.25 + 0.125 + 0.125
    rep = led.report()
    # a Laplace measurement is in: the general conversion (CKS, OpenDP's), ε as a bisection of its closed form
    rho = mpmath.mpf(led.rho_spent)

    def log_delta(e):      # inf over α > 1 (CKS 2020, Prop. 12): a coarse grid of α − 1, refined 100-fold
        def h(t):
            a = 1 + mpmath.mpf(10) ** t
            return (a - 1) * (a * rho - e) + a * mpmath.log1p(-1 / a) - mpmath.log(a - 1)
        k = min(range(-400, 121), key=lambda k: h(mpmath.mpf(k) / 40))
        return min(h(mpmath.mpf(k) / 40 + mpmath.mpf(i) / 4000) for i in range(-100, 101))
    assert rep["conversion"] == "cks" and log_delta(rep["epsilon"] * (1 + 1e-4)) <= math.log(1e-10) + 1e-3
    assert log_delta(rep["epsilon"] * (1 - 1e-4)) >= math.log(1e-10) - 1e-3


def test_ledgers_refuse_a_guarantee_they_do_not_account():
    with pytest.raises(ValueError, match="accounts pure epsilon only"):
        PrivacyLedger(1.0).charge(_record("r", [_gauss("a", 0.1, 1e-7, 0.01)]))
    with pytest.raises(ValueError, match="rho-zCDP without an allotted delta"):
        PrivacyLedger(1.0, 1e-6).charge(_record("r", [_zcdp("a", 0.1)]))
    with pytest.raises(ValueError, match="rho_total"):
        PrivacyLedger(1.0, rho_total=1.0)
    with pytest.raises(ValueError, match="delta_total must be in"):
        PrivacyLedger(1.0, 1.0, accounting="approx")


# ---------------------------------------------------------------------------------- the Gaussian plan
def test_gaussian_plan_uses_the_design_sigma_and_dp_accounting_confirms_every_stratum():
    """Every scale is the design's σ (to 1e-8) and the stratum's composed (ε, δ) — two variables, shares 0.7/0.3
    — is confirmed by dp-accounting's PLD of the composed Gaussians; amplified by OpenDP it stays within (ε, δ)."""
    frame2 = dict(FRAME, z=[v % 5 for v in FRAME["y"]])
    model = StratifiedDesign.from_frame(frame2, "s", ["y", "z"], total=150, value_range=[(0, 10), (0, 4)],
                                        mechanism="gaussian", delta=1e-6, epsilon=1.0, shares=[0.7, 0.3])
    n = [49, 76, 25]       # any design n: the plan's scales follow the design's calibration at it
    dp = _opendp.require_opendp()
    for h, p in enumerate(plan_stratified(model, n)):
        assert np.allclose(p.scales, p.sigma_design, rtol=1e-8) and all(s >= sd for s, sd in zip(p.scales,
                                                                                                   p.sigma_design))
        losses = [pld.from_gaussian_mechanism(p.scales[j] / model.sensitivity_of(j), value_discretization_interval=1e-3)
                  for j in range(2)]
        composed = losses[0].compose(losses[1])
        eps_nom, delta_nom = sum(p.nominal_spent), sum(p.nominal_delta)
        assert composed.get_delta_for_epsilon(eps_nom) <= delta_nom
        amp = _opendp.amplified_approx_by_opendp(dp, eps_nom, delta_nom, p.n, p.N)
        assert amp[0] <= 1.0 and amp[1] <= 1e-6 and abs(amp[0] - p.epsilon_central) <= 1e-9
        # OpenDP's own conversion through zCDP needs a larger ε at the same σ: the price of its route
        assert all(o > e for o, e in zip(p.epsilon_opendp, p.nominal_spent))


def test_missing_dp_accounting_refuses_an_approx_release(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_accounting(name, *args, **kwargs):
        if name.startswith("dp_accounting"):
            raise ImportError("no dp_accounting")
        return real(name, *args, **kwargs)
    model = _design("gaussian")
    monkeypatch.setattr(builtins, "__import__", no_accounting)
    with pytest.raises(ImportError, match=r"dpopt\[accounting\]"):
        plan_stratified(model, [50, 50, 50])


# ---------------------------------------------------------------------------------- released spreads
def _population_terms(model, n, plan):
    y = np.asarray(FRAME["y"], float)
    lab = np.asarray(FRAME["s"])
    S2 = [np.var(y[lab == l], ddof=1) for l in _LAB]
    gamma2 = [p.noise_variance[0] for p in plan]
    return float(np.mean(y)), stratified_variance(model.N, n, S2, gamma2)


def _monte_carlo(case, R):
    model = _design(case)
    n = model.solve().n
    plan = plan_stratified(model, n)
    truth, v_true = _population_terms(model, n, plan)
    est, ses, cover = [], [], 0
    for r in range(R):
        rel = _release(model, n, f"{case} secret {r}", plan=plan)
        est.append(rel.estimate)
        ses.append(rel.se)
        cover += rel.ci[0] <= truth <= rel.ci[1]
    assert_release_spread(est, ses, v_true, case)
    assert abs(np.mean(est) - truth) < 5 * math.sqrt(v_true / R)
    cov = cover / R
    assert abs(cov - 0.95) < 5 * math.sqrt(0.95 * 0.05 / R), (case, cov)
    return cov, float(np.var(est, ddof=1) / v_true), float(np.mean(np.square(ses)) / v_true)


@pytest.mark.parametrize("case,R", [("gaussian", 150), ("discrete-gaussian", 300)])
def test_reported_se_matches_the_spread_and_ci_covers(case, R):
    _monte_carlo(case, R)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DPOPT_SLOW"), reason="2 000 releases per mechanism: set DPOPT_SLOW=1")
@pytest.mark.parametrize("case", ["gaussian", "discrete-gaussian", "gaussian-zcdp"])
def test_reported_se_and_coverage_over_2000_releases(case):
    cov, var_ratio, se2_ratio = _monte_carlo(case, 2000)
    print(f"{case}: coverage {cov:.4f}, Var(est)/V {var_ratio:.4f}, mean SE^2/V {se2_ratio:.4f}")


# ---------------------------------------------------------------------------------- audits in the new modes
def _audits():
    a = _design("gaussian")
    z = _design("discrete-gaussian")
    ra = _release(a, a.solve().n, "audit a")
    rz = _release(z, z.solve().n, "audit z", ledger=PrivacyLedger(rho_total=2.0, delta_report=1e-10))
    return [json.loads(json.dumps(r.ledger.audit())) for r in (ra, rz)]


_TAMPER = [  # (path, new value, the field the refusal must name)
    (("accounting",), "pure", None), (("guarantee",), "pure epsilon-DP per person", "guarantee"),
    (("rho_spent",), 0.1, "rho_spent"), (("report", "epsilon"), 0.5, "report.epsilon"),
    (("report", "conversion"), "gaussian-exact", "report.conversion"),
    (("delta_report",), 0.5, "report"),
    (("releases", 0, "rho"), 0.01, "releases[0].rho"),
    (("releases", 0, "parts", 0, "cells", 0, "rho"), 0.01, "releases[0].parts[0].cells[0].rho"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "rho"), 0.01, "measurements[0].rho"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "scale"), 3.0, "measurements[0]"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "guarantee"), "pure", "measurements[0]"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "epsilon"), 0.01, "measurements[0].epsilon"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "delta"), 1e-9, "measurements[0]"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "epsilon_opendp"), 0.5, "epsilon_opendp"),
    (("releases", 0, "parts", 0, "cells", 0, "measurements", 0, "conversion"), "cks", "conversion"),
]


def test_tampered_audits_in_the_new_modes_are_refused_naming_the_field():
    audits = _audits()
    for audit in audits:       # untouched: re-verified, and the same totals
        led = PrivacyLedger.from_audit(copy.deepcopy(audit))
        assert led.accounting == audit["accounting"] and led.compose(led.records)[1] == audit["delta_spent"]
    tried = 0
    for audit in audits:
        for path, new, names in _TAMPER:
            target = bad = copy.deepcopy(audit)
            try:
                for p in path[:-1]:
                    target = target[p]
                old = target[path[-1]]
            except (KeyError, IndexError):
                continue
            if old == new or (old is None and path[-1] in ("epsilon", "epsilon_opendp")):
                continue      # a field this mode does not have (ε of a zCDP measurement is 0, its ε_opendp null)
            target[path[-1]] = new
            tried += 1
            with pytest.raises((ValueError, TypeError)) as exc:
                PrivacyLedger.from_audit(bad)
                print("accepted", audit["accounting"], path, new)
            assert names is None or names in str(exc.value) or path[-1] in str(exc.value), (path, str(exc.value))
            del target[path[-1]]           # a removed field is refused too
            with pytest.raises((ValueError, TypeError)):
                PrivacyLedger.from_audit(bad)
    assert tried >= 20


# ---------------------------------------------------------------------------------- hierarchy under zCDP
def test_hierarchy_discrete_gaussian_per_level_rho():
    """ρ_ℓ per level: OpenDP certifies each level at most ρ_ℓ, the total is Σρ_ℓ (OpenDP's composition agrees),
    a second release beyond the total is refused, and the counts are integers that add up."""
    from dpopt.models.tree import Hierarchy
    h = Hierarchy.from_levels([[54], [42, 12], [30, 12, 7, 0, 5]], [None, [0, 0], [0, 0, 1, 1, 1]])
    rho = [0.05, 0.15, 0.3]
    rel = release_hierarchy(h, rho_per_level=rho, integer=True)
    assert all(r <= w for r, w in zip(rel.rho, rho)) and abs(rel.rho_spent - 0.5) < 1e-12
    assert abs(rel.record.details["composition_opendp_rho"] - rel.rho_spent) < 1e-12
    assert all(np.all(c == np.round(c)) and np.all(c >= 0) for c in rel.counts)
    assert rel.counts[1].sum() == rel.counts[0][0] and rel.counts[2][:2].sum() == rel.counts[1][0]
    with pytest.raises(BudgetExceeded):
        release_hierarchy(h, rho_per_level=rho, ledger=rel.ledger)
    # the ledger's (ε, δ) report is OpenDP's conversion of the composed measurement (discrete: CKS, not the curve)
    dp = _opendp.require_opendp()
    composed = dp.c.make_composition([_opendp.gaussian_measurement(dp, True, s) for s in rel.scales])
    theirs = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(composed), 1e-10).map(1)[0]
    rep = rel.ledger.report(1e-10)
    assert rep["conversion"] == "cks" and abs(rep["epsilon"] - theirs) <= 1e-6 * theirs
    with pytest.raises(ValueError, match="integers"):
        release_hierarchy(Hierarchy.from_levels([[5.5], [5.5]], [None, [0]]), rho_per_level=[0.1, 0.1])


# ---------------------------------------------------------------------------------- the sample-size family's mean
def test_gaussian_mean_release_se_and_coverage():
    """release_mean(mechanism='gaussian'): the analytic σ at (ε_n, δ_n), OpenDP's amplification within (ε, δ), and
    over repeated releases the reported SE matches the spread and the CI covers (5 Monte Carlo SEs)."""
    from dpopt import SampleSizeProgram
    from dpopt.release import release_mean
    from dpopt.sampling import draw_srs
    from dpopt.privacy.gaussian import gaussian_sigma

    y = (np.asarray(FRAME["y"], float) / 10.0).tolist()
    frame = {"id": FRAME["id"], "y": y}
    N, n, R = len(y), 60, 200
    model = SampleSizeProgram(N, float(np.var(y, ddof=1)), 1.0, delta=1e-6, value_range=1.0)
    truth = float(np.mean(y))
    est, ses, cover = [], [], 0
    for r in range(R):
        s = draw_srs(frame, n, id="id", seed=f"mean {r}")
        rel = release_mean(model, s, s.values(frame, "y"), (0.0, 1.0), mechanism="gaussian")
        est.append(rel.estimate)
        ses.append(rel.se)
        cover += rel.ci[0] <= truth <= rel.ci[1]
    sigma = float(gaussian_sigma(math.log1p(math.expm1(1.0) * N / n), 1e-6 * N / n, 1.0 / n))
    assert sigma <= rel.scale <= sigma * (1 + 1e-8)
    assert rel.record.details["epsilon_central_opendp"] <= 1.0 and rel.record.details["delta_central_opendp"] <= 1e-6
    v_true = model.S2 * (N - n) / (n * N) + rel.scale ** 2
    # the reported SE is the closed form itself (public S², known σ); the estimates' spread must match it
    assert np.allclose(np.square(ses), v_true, rtol=1e-9)
    dev = np.asarray(est) - np.mean(est)
    kurtosis = np.mean(dev ** 4) / np.mean(dev ** 2) ** 2
    assert abs(np.var(est, ddof=1) / v_true - 1) < 5 * math.sqrt((kurtosis - 1) / R)
    assert abs(cover / R - 0.95) < 5 * math.sqrt(0.95 * 0.05 / R)
    with pytest.raises(ValueError, match="delta in"):
        release_mean(SampleSizeProgram(N, 0.1, 1.0, value_range=1.0), s, s.values(frame, "y"), (0.0, 1.0),
                     mechanism="gaussian")


def test_cli_release_of_a_zcdp_design_charges_rho_and_refuses_overspend(tmp_path, capsys):
    """dpopt design/release with the discrete Gaussian: --epsilon-total is the ρ total, a second release fills
    it, a third is refused (exit code 2, nothing written), and the audit is a zCDP one that re-verifies."""
    from dpopt.cli import main
    frame = tmp_path / "frame.csv"
    frame.write_text("id,s,y\n" + "".join(f"{i},{s},{y}\n" for i, s, y in zip(FRAME["id"], FRAME["s"], FRAME["y"])))
    model = tmp_path / "z.toml"
    assert main(["design", str(frame), "--strata", "s", "--y", "y", "--total", "150", "--epsilon", "0.5",
                 "--mechanism", "discrete-gaussian", "--value-range", "0", "10", "--id", "id",
                 "--out", str(model)]) == 0
    assert main(["release", str(model), "--frame", str(frame), "--seed", "a long secret 1", "--out",
                 str(tmp_path / "r1"), "--epsilon-total", "1.0"]) == 0
    assert main(["release", str(model), "--frame", str(frame), "--seed", "a long secret 2", "--out",
                 str(tmp_path / "r2"), "--ledger", str(tmp_path / "r1" / "audit.json")]) == 0
    audit = json.loads((tmp_path / "r2" / "audit.json").read_text())
    assert audit["accounting"] == "zcdp" and audit["rho_spent"] == pytest.approx(1.0, rel=1e-12)
    assert audit["report"]["conversion"] is None and audit["epsilon_total"] is None
    est = json.loads((tmp_path / "r2" / "estimate.json").read_text())
    assert est["guarantee"] == "zcdp" and est["epsilon_spent"] is None and est["rho_spent"] == pytest.approx(0.5)
    capsys.readouterr()
    assert main(["release", str(model), "--frame", str(frame), "--seed", "a long secret 3", "--out",
                 str(tmp_path / "r3"), "--ledger", str(tmp_path / "r2" / "audit.json")]) == 2
    assert "rho_total" in capsys.readouterr().err and not (tmp_path / "r3" / "audit.json").exists()
