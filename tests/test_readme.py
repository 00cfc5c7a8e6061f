"""The README's model-file snippets are real model files: each one loads and solves as written."""

import re
import tomllib
from pathlib import Path

import pytest

from dpopt.io import modelfile
from dpopt.registry import option_parameter

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```toml\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_has_a_snippet_per_family():
    families = {tomllib.loads(b)["family"] for b in BLOCKS}
    assert families == set(modelfile.families())


@pytest.mark.parametrize("block", BLOCKS, ids=[tomllib.loads(b)["family"] for b in BLOCKS])
def test_readme_snippet_solves(block):
    model, options = modelfile.from_dict(tomllib.loads(block), base=ROOT / "models", source="README")
    options = dict(options)
    backend = options.pop("backend", None) or model.default_backend
    if option_parameter(model, backend, "solve", "time_limit") is not None:
        options["time_limit"] = 60.0
    sol = model.solve(backend=backend, **options)
    assert sol.status.value in ("optimal", "feasible"), sol.message


PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"python-{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_runs(block):
    exec(compile(block, "README.md", "exec"), {})
