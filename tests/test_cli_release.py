"""dpopt design / dpopt release / dpopt plot MODEL.toml, run in-process as a script would."""

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dpopt.io import modelfile
from dpopt.cli import main
from dpopt.frames import read_csv

ROOT = Path(__file__).resolve().parent.parent


def _write_frame(path, n=1200, seed=0):
    rng = np.random.default_rng(seed)
    regions = ["North", "South", "East", "West"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["person", "region", "income"])
        for i in range(n):
            w.writerow([f"id{i:05d}", regions[i % 4], round(float(min(rng.gamma(2 + i % 4, 8.0), 100.0)), 2)])
    return path


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpopt: error: "), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_design_then_release(tmp_path, capsys):
    pytest.importorskip("opendp")
    frame = _write_frame(tmp_path / "frame.csv")
    model_path = tmp_path / "model.toml"
    rc = main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "200", "--epsilon", "1",
               "--value-range", "0", "100", "--id", "person", "--out", str(model_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "wrote" in out and "North" in out
    model, _ = modelfile.load(model_path)
    assert model.labels == ["East", "North", "South", "West"] and model.N.tolist() == [300] * 4
    assert model.value_range == (0.0, 100.0) and model.variables == ["income"]
    # the file's [release] table names the frame's columns; `dpopt solve` ignores it
    assert main(["solve", str(model_path)]) == 0
    capsys.readouterr()
    rc = main(["release", str(model_path), "--frame", str(frame), "--seed", "8142", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert rc == 0 and "estimate" in printed
    est = json.loads((tmp_path / "out" / "estimate.json").read_text())
    assert est["format"] == "dpopt-stratified-estimate/1" and len(est["variables"]) == 1
    v = est["variables"][0]
    assert v["variable"] == "income" and v["value_range"] == [0.0, 100.0]
    assert est["n"] == 200 and len(v["ci"]) == 2 and v["ci"][0] < v["estimate"] < v["ci"][1]
    assert 0 < est["epsilon_spent"] <= 1.0 and [s["stratum"] for s in est["strata"]] == model.labels
    sample = read_csv(tmp_path / "out" / "sample.csv")
    frame_rows = read_csv(frame)
    assert len(sample["person"]) == 200 and set(sample["person"]) <= set(frame_rows["person"])
    assert sum(float(w) for w in sample["weight"]) == pytest.approx(1200.0)
    audit = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert audit["format"] == "dpopt-privacy-audit/3" and audit["within_budget"] and audit["seeded"]
    assert "8142" not in (tmp_path / "out" / "audit.json").read_text()        # the seed is not written out
    from dpopt.release import PrivacyLedger
    assert PrivacyLedger.from_audit(tmp_path / "out" / "audit.json").epsilon_spent == audit["epsilon_spent"]
    # the same seed draws the same sample
    main(["release", str(model_path), "--frame", str(frame), "--seed", "8142", "--out", str(tmp_path / "again")])
    capsys.readouterr()
    assert read_csv(tmp_path / "again" / "sample.csv")["person"] == sample["person"]
    # a second release charged to the first one's ledger would exceed its total: refused, nothing written
    rc = main(["release", str(model_path), "--frame", str(frame), "--seed", "9", "--out", str(tmp_path / "more"),
               "--ledger", str(tmp_path / "out" / "audit.json")])
    assert rc == 2 and not (tmp_path / "more").exists()
    _one_error_line(capsys, "refused", "epsilon_total 1", "no noise was drawn")


def test_design_with_pilot_and_errors(tmp_path, capsys):
    frame = _write_frame(tmp_path / "frame.csv")
    pilot = tmp_path / "pilot.csv"
    pilot.write_text("region,income\nNorth,1\nNorth,3\nSouth,2\nSouth,8\nEast,0\nEast,4\nWest,5\nWest,9\n")
    model_path = tmp_path / "m.toml"
    assert main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "40", "--epsilon", "0.5",
                 "--pilot", str(pilot), "--out", str(model_path)]) == 0
    capsys.readouterr()
    model, _ = modelfile.load(model_path)
    assert model.sigma2.tolist() == [8.0, 2.0, 18.0, 8.0]       # East, North, South, West from the pilot
    assert "from the pilot" in model_path.read_text()
    cases = [
        (["design", str(frame), "--strata", "state", "--y", "income", "--total", "40", "--epsilon", "1",
          "--out", str(tmp_path / "x.toml")], ["strata column 'state'"]),
        (["design", str(frame), "--strata", "region", "--y", "wage", "--total", "40", "--epsilon", "1",
          "--out", str(tmp_path / "x.toml")], ["y column 'wage'"]),
        (["design", str(tmp_path / "nope.csv"), "--strata", "region", "--y", "income", "--total", "40",
          "--epsilon", "1", "--out", str(tmp_path / "x.toml")], ["no such file"]),
        (["design", str(frame), "--strata", "region", "--y", "income", "--total", "40", "--epsilon", "1",
          "--mechanism", "dlap", "--out", str(tmp_path / "x.toml")], ["non-integer value", "'dlap'"]),
    ]
    for argv, words in cases:
        assert main(argv) == 2
        _one_error_line(capsys, *words)


def test_release_errors(tmp_path, capsys, monkeypatch):
    pytest.importorskip("opendp")
    frame = _write_frame(tmp_path / "frame.csv")
    model_path = tmp_path / "m.toml"
    main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "40", "--epsilon", "1",
          "--out", str(model_path)])
    capsys.readouterr()
    assert main(["release", str(model_path), "--frame", str(frame), "--seed", "1", "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, "value_range")
    other = tmp_path / "other.csv"
    other.write_text("region,income\nNorth,1\n")
    ranged = tmp_path / "r.toml"
    ranged.write_text(model_path.read_text().replace('mechanism = "laplace"',
                                                     'mechanism = "laplace"\nvalue_range = [0.0, 100.0]'))
    assert main(["release", str(ranged), "--frame", str(other), "--seed", "1", "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, "stratum 'East' of the model is not in the frame")
    no_table = tmp_path / "plain.toml"
    no_table.write_text(ranged.read_text().split("[release]")[0])
    assert main(["release", str(no_table), "--frame", str(frame), "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, "[release] must name the frame's 'strata' column")
    hier = ROOT / "models" / "ko_toy_eps1.toml"
    assert main(["release", str(hier), "--frame", str(frame), "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, "needs a stratified model file")
    # without OpenDP: one line with the install hint
    for mod in [m for m in list(sys.modules) if m == "opendp" or m.startswith("opendp.")]:
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    assert main(["release", str(ranged), "--frame", str(frame), "--out", str(tmp_path / "o")]) == 2
    _one_error_line(capsys, 'pip install "dpopt[release]"')


@pytest.mark.parametrize("model_file", ["m.toml", "ko_toy_eps1.toml", "hu_constant_sensitivity.toml"])
def test_plot_model_file(model_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    if model_file == "m.toml":
        frame = _write_frame(tmp_path / "frame.csv", n=400)
        path = tmp_path / "m.toml"
        main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "60", "--epsilon", "1",
              "--out", str(path)])
        capsys.readouterr()
    else:
        path = ROOT / "models" / model_file
    assert main(["plot", str(path), "--out", str(tmp_path / "figs"), "--quick"]) == 0
    written = capsys.readouterr().out.split()
    stem = path.stem
    for part in ("design", "breakdown", "path"):
        png = tmp_path / "figs" / f"{stem}_{part}.png"
        assert str(png) in written and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_plot_model_file_errors(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "missing.toml")]) == 2
    _one_error_line(capsys, "no such file")
    fay = ROOT / "models" / "fay_laplace_sum.toml"
    assert main(["plot", str(fay), "--out", str(tmp_path)]) == 2
    _one_error_line(capsys, "draws stratified", "ImportanceSampling")


def test_design_min_per_stratum_and_domains_and_refusal_before_spending(tmp_path, capsys):
    """dpopt design writes min_per_stratum and a domain column to the model file (they load back); a release
    whose sample would put one unit in a stratum is refused before any budget is spent, naming the fix."""
    pytest.importorskip("opendp")
    rows = [["person", "state", "region", "income"]]
    sizes = {"A": 300, "B": 300, "C": 4, "D": 300}
    region = {"A": "East", "B": "East", "C": "West", "D": "West"}
    i = 0
    for s, size in sizes.items():
        for _ in range(size):
            rows.append([f"p{i}", s, region[s], 10.0 + (i * 7919 % 41) * (3.0 if s == "C" else 1.0)])
            i += 1
    frame = tmp_path / "frame.csv"
    with frame.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    base = ["design", str(frame), "--strata", "state", "--y", "income", "--total", "40", "--epsilon", "1",
            "--value-range", "0", "200", "--id", "person"]
    model_path = tmp_path / "m.toml"
    assert main(base + ["--domains", "region", "--min-per-stratum", "2", "--out", str(model_path)]) == 0
    capsys.readouterr()
    model, _ = modelfile.load(model_path)
    assert model.min_per_stratum == 2 and model.domains == ["East", "East", "West", "West"]
    # without min_per_stratum the tiny stratum C gets one unit: the release refuses before spending
    one = tmp_path / "one.toml"
    assert main(base + ["--out", str(one)]) == 0
    capsys.readouterr()
    m1, _ = modelfile.load(one)
    # the setting makes stratum C (4 people) get one unit: the premise of the test, checked, not assumed
    assert int(m1.solve().n[2]) == 1 and m1.N[2] == 4
    rc = main(["release", str(one), "--frame", str(frame), "--seed", "5", "--out", str(tmp_path / "out")])
    assert rc == 2 and not (tmp_path / "out").exists()
    _one_error_line(capsys, "'C'", "1 sampled unit", "Nothing was spent", "min_per_stratum")


def test_a_planned_series_needs_epsilon_total_and_the_refusal_says_why(tmp_path, capsys):
    """A second release on an overlapping sample (same key, a changed design) is refused with the reason
    (amplification lost, budgets add up); --epsilon-total raises the declared total for a planned series."""
    pytest.importorskip("opendp")
    frame = _write_frame(tmp_path / "frame.csv")
    m40, m41 = tmp_path / "m40.toml", tmp_path / "m41.toml"
    for path, total in ((m40, "40"), (m41, "41")):
        assert main(["design", str(frame), "--strata", "region", "--y", "income", "--total", total, "--epsilon",
                     "1", "--value-range", "0", "100", "--id", "person", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["release", str(m40), "--frame", str(frame), "--seed", "77", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    audit = str(tmp_path / "a" / "audit.json")
    rc = main(["release", str(m41), "--frame", str(frame), "--seed", "77", "--out", str(tmp_path / "b"),
               "--ledger", audit])
    assert rc == 2
    _one_error_line(capsys, "amplification is lost", "--epsilon-total", "no noise was drawn")
    rc = main(["release", str(m41), "--frame", str(frame), "--seed", "77", "--out", str(tmp_path / "b"),
               "--ledger", audit, "--epsilon-total", "0.5"])
    assert rc == 2
    _one_error_line(capsys, "can only be raised")
    assert main(["release", str(m41), "--frame", str(frame), "--seed", "77", "--out", str(tmp_path / "b"),
                 "--ledger", audit, "--epsilon-total", "5"]) == 0
    capsys.readouterr()
    booked = json.loads((tmp_path / "b" / "audit.json").read_text())
    assert booked["epsilon_total"] == 5.0 and 2.0 < booked["epsilon_spent"] <= 5.0


def test_design_covers_costs_budget_and_targets_without_editing_toml(tmp_path, capsys):
    """dpopt design with --domains, --cost/--cost-budget and SE targets per domain and variable writes a model
    file that loads to the same design as the Python API builds, and solves it."""
    import dpopt

    rows = [["person", "state", "region", "cost", "wage", "educ"]]
    rng = np.random.default_rng(3)
    region = {"A": "East", "B": "East", "C": "West", "D": "West"}
    unit_cost = {"A": 10, "B": 12, "C": 30, "D": 25}
    for i in range(800):
        s = "ABCD"[i % 4]
        rows.append([f"p{i}", s, region[s], unit_cost[s], round(float(rng.gamma(2 + i % 4, 100.0)), 1),
                     int(rng.integers(8, 20))])
    frame = tmp_path / "frame.csv"
    with frame.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "m.toml"
    rc = main(["design", str(frame), "--strata", "state", "--y", "wage", "educ", "--total", "120", "--epsilon", "2",
               "--value-range", "0", "3000", "--domains", "region", "--cost", "cost", "--cost-budget", "3000",
               "--se-target", "West:wage=600", "--se-target", ":educ=300", "--id", "person", "--out", str(out)])
    capsys.readouterr()
    assert rc == 0
    model, _ = modelfile.load(out)
    ref = dpopt.StratifiedDesign.from_frame(str(frame), "state", ["wage", "educ"], 120, 2.0, value_range=(0, 3000),
                                            domains="region")
    ref.add_cost_budget([10, 12, 30, 25], 3000).add_precision_target(600, strata="West", variable="wage", kind="se")
    ref.add_precision_target(300, variable="educ", kind="se")
    assert model.domains == ref.domains and np.array_equal(model.cost, ref.cost)
    assert [(t.kind, t.target, t.variable, list(t.strata)) for t in model.precision_targets] == \
           [(t.kind, t.target, t.variable, list(t.strata)) for t in ref.precision_targets]
    a, b = model.solve(), ref.solve()
    assert a.status == b.status and np.array_equal(a.n, b.n)
    bad = ["design", str(frame), "--strata", "state", "--y", "wage", "--total", "120", "--epsilon", "2",
           "--cost", "cost", "--out", str(tmp_path / "x.toml")]
    assert main(bad) == 2
    _one_error_line(capsys, "--cost COL and --cost-budget C go together")
    assert main(bad[:-2] + ["--cost-budget", "10", "--se-target", "West=abc", "--out", str(tmp_path / "y.toml")]) == 2
    _one_error_line(capsys, "'abc' is not a number")
