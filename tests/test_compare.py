"""dpopt.compare and the `dpopt compare` CLI."""

import json

import numpy as np
import pytest

import dpopt
from dpopt.cli import main
from dpopt.compare import compare
from dpopt.models.stratified import StratifiedDesign

TOML = """
family = "stratified"
epsilon = 1.0
total = 30
mechanism = "tulap"
objective = "a-optimal"
[strata]
N = [40, 30, 20]
sigma2 = [3.0, 1.0, 0.5]
"""


def test_compare_rows_agree(capsys):
    m = StratifiedDesign(N=[40, 30, 20], sigma2=[3.0, 1.0, 0.5], total=30, epsilon=1.0, mechanism="tulap",
                         objective="a-optimal")
    res = compare(m, time_limit=20, progress=True)
    err = capsys.readouterr().err
    assert "exact" in err and "pyomo:highs" in err                      # progress lines
    assert res.names[0] == "exact"
    assert {"exact", "algorithm1", "enumerate", "pyomo:scip", "pyomo:highs", "cvxpy"} <= set(res.names)
    # brute force over the 2-D simplex slice is the independent oracle
    best = min((np.array([a, b, 30 - a - b]) for a in range(1, 29) for b in range(1, 30 - a)
                if 1 <= 30 - a - b <= 20), key=lambda n: m.objective_value(n))
    for s in res:
        assert s.status == dpopt.Status.OPTIMAL, (s.backend, s.message)
        assert s.objective == pytest.approx(m.objective_value(best), rel=1e-7)
    d = res.to_dict()
    json.dumps(d)
    assert all(r["certificate"] == "holds" for r in d["results"])
    assert all(r["gap_to_best"] == pytest.approx(0.0, abs=1e-7) for r in d["results"])
    txt = res.table()
    assert "rel. gap to best" in txt and "pyomo:scip" in txt


def test_compare_relax_and_unsupported_rows():
    m = StratifiedDesign(N=[40, 30], sigma2=[3.0, 1.0], total=30, epsilon=1.0, mechanism="laplace")
    res = compare(m, backends="exact cvxpy scipy", relax=True, progress=False)
    vals = [s.objective for s in res]
    assert max(vals) == pytest.approx(min(vals), rel=1e-6)
    res = compare(m, backends=["cvxpy"], progress=False)
    assert res[0].status == dpopt.Status.UNSUPPORTED and res.best is None
    with pytest.raises(ValueError, match="unknown backend"):
        compare(m, backends=["nope"])


def test_cli_compare(tmp_path, capsys):
    f = tmp_path / "m.toml"
    f.write_text(TOML)
    assert main(["compare", str(f), "--backends", "exact", "pyomo:highs", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    objs = [r["objective"] for r in out["results"]]
    assert [r["backend"] for r in out["results"]] == ["exact", "pyomo:highs"]
    assert objs[0] == pytest.approx(objs[1], rel=1e-12)
    assert main(["compare", str(f), "--backends", "exact", "--time-limit", "5"]) == 0
    assert "exact" in capsys.readouterr().out
