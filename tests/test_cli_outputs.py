"""Issue 18 §1: outputs never overwrite inputs; a release never overwrites an earlier audit; the audit is
written (atomically) before the estimate."""

import json
from pathlib import Path

import pytest

from dpopt.cli import main
from test_cli_release import _one_error_line, _write_frame


def _design(tmp_path, capsys):
    frame = _write_frame(tmp_path / "frame.csv", n=400)
    model = tmp_path / "model.toml"
    assert main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "60", "--epsilon", "1",
                 "--value-range", "0", "100", "--out", str(model)]) == 0
    capsys.readouterr()
    return frame, model


@pytest.mark.parametrize("which", ["frame", "pilot"])
def test_design_refuses_to_overwrite_its_input(tmp_path, capsys, which):
    frame = _write_frame(tmp_path / "frame.csv", n=400)
    pilot = _write_frame(tmp_path / "pilot.csv", n=80, seed=1)
    before = {p: p.read_bytes() for p in (frame, pilot)}
    target = frame if which == "frame" else pilot
    # spelled differently from the input (./, ..) but the same file
    out = tmp_path / "sub" / ".." / target.name
    (tmp_path / "sub").mkdir()
    rc = main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "60", "--epsilon", "1",
               "--pilot", str(pilot), "--out", str(out)])
    assert rc == 2
    _one_error_line(capsys, "input", which)
    assert {p: p.read_bytes() for p in (frame, pilot)} == before


def test_release_never_overwrites_an_earlier_audit(tmp_path, capsys):
    pytest.importorskip("opendp")
    frame, model = _design(tmp_path, capsys)
    out = tmp_path / "out"
    args = ["release", str(model), "--frame", str(frame), "--seed", "5", "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    first = {name: (out / name).read_bytes() for name in ("audit.json", "estimate.json", "sample.csv")}
    assert main(args) == 2                         # refused before anything is drawn
    _one_error_line(capsys, "earlier release", "audit.json", "--force")
    assert {name: (out / name).read_bytes() for name in first} == first
    assert sorted(p.name for p in out.iterdir()) == sorted(first)
    # --force keeps the earlier files under numbered names
    assert main(args[:-2] + ["--seed", "6", "--out", str(out), "--force"]) == 0
    capsys.readouterr()
    assert (out / "audit.1.json").read_bytes() == first["audit.json"]
    assert (out / "estimate.1.json").read_bytes() == first["estimate.json"]
    assert (out / "sample.1.csv").read_bytes() == first["sample.csv"]
    from dpopt.release.ledger import AUDIT_FORMAT
    assert json.loads((out / "audit.json").read_text())["format"] == AUDIT_FORMAT
    assert main(args + ["--force"]) == 0
    capsys.readouterr()
    assert (out / "audit.2.json").exists() and (out / "audit.1.json").read_bytes() == first["audit.json"]
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_release_outputs_never_overwrite_its_inputs(tmp_path, capsys):
    pytest.importorskip("opendp")
    frame, model = _design(tmp_path, capsys)
    out = tmp_path / "out"
    assert main(["release", str(model), "--frame", str(frame), "--seed", "5", "--out", str(out)]) == 0
    capsys.readouterr()
    audit = (out / "audit.json").read_bytes()
    # charging the earlier audit and writing the new one over it: refused even with --force
    for extra in ([], ["--force"]):
        assert main(["release", str(model), "--frame", str(frame), "--seed", "6", "--out", str(out),
                     "--ledger", str(out / "audit.json")] + extra) == 2
        _one_error_line(capsys, "--ledger input")
        assert (out / "audit.json").read_bytes() == audit
    # a frame that sits where sample.csv would go
    frame_copy = tmp_path / "o2" / "sample.csv"
    frame_copy.parent.mkdir()
    frame_copy.write_bytes(frame.read_bytes())
    assert main(["release", str(model), "--frame", str(frame_copy), "--seed", "6", "--out", str(frame_copy.parent),
                 "--force"]) == 2
    _one_error_line(capsys, "--frame input")
    assert frame_copy.read_bytes() == frame.read_bytes()


def test_release_writes_the_audit_first_and_no_estimate_without_it(tmp_path, capsys, monkeypatch):
    pytest.importorskip("opendp")
    frame, model = _design(tmp_path, capsys)
    out = tmp_path / "out"
    import os

    from dpopt import cli_frames
    written = []
    real = cli_frames.write_new_file_atomically

    def spy(path, text):
        written.append(path.name)
        return real(path, text)

    monkeypatch.setattr(cli_frames, "write_new_file_atomically", spy)
    assert main(["release", str(model), "--frame", str(frame), "--seed", "5", "--out", str(out)]) == 0
    capsys.readouterr()
    assert written[:2] == ["audit.json", "estimate.json"]

    # the audit cannot be written (the link into place fails): no estimate, no sample, no partial audit
    def failing_link(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(cli_frames, "write_new_file_atomically", real)
    monkeypatch.setattr(os, "link", failing_link)
    monkeypatch.setattr(os, "replace", failing_link)
    out2 = tmp_path / "out2"
    assert main(["release", str(model), "--frame", str(frame), "--seed", "5", "--out", str(out2)]) == 2
    capsys.readouterr()
    assert list(out2.iterdir()) == []


# ------------------------------------------------------------------ issue 19 item 7: --json is JSON only
BUNDLED = sorted((Path(__file__).resolve().parent.parent / "models").glob("*.toml"))


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_solve_json_prints_exactly_one_json_document(path):
    """stdout holds one valid JSON document and nothing else (no solver banner, no log line, no note); the
    message is for people: a sentence or two, the step trail is in details['steps'] and the log."""
    import json
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    res = subprocess.run([sys.executable, "-m", "dpopt.cli", "solve", "--json", str(path)], capture_output=True,
                         text=True, timeout=600, env=env)
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)             # raises on anything before, after or between
    assert isinstance(doc, dict) and doc["status"] and "termination" in doc
    assert len(doc["message"]) <= 300 and doc["message"].count("; ") <= 2, doc["message"]
