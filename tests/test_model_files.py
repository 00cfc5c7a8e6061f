"""Every bundled model file solves from the CLI; Table 1 files reproduce the ratio their header quotes."""

import json
import re
from pathlib import Path

import pytest

from dpopt import modelfile
from dpopt.cli import main

MODELS = sorted((Path(__file__).resolve().parent.parent / "models").glob("*.toml"))


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_model_file_solves(path, capsys):
    rc = main(["solve", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["status"] in ("optimal", "feasible"), out
    assert path.read_text().lstrip().startswith("#"), "model files start with a comment header saying their source"


@pytest.mark.parametrize("path", [p for p in MODELS if p.name.startswith("chen_table1_")], ids=lambda p: p.name)
def test_table1_files_match_paper(path):
    quoted = float(re.search(r"ratio Neyman/optimal = ([0-9.]+)", path.read_text()).group(1))
    model, _ = modelfile.load(path)
    sol = model.solve()
    assert round(model.objective_value(model.baseline("neyman")) / sol.objective, 3) == pytest.approx(quoted, abs=1e-12)
