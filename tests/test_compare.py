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


# ------------------------------------------------------------------ Pyomo runs once where it takes no solver variants
MODELS_DIR = __import__("pathlib").Path(__file__).resolve().parent.parent / "models"


def _hierarchy():
    return dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0)


def _sample_size():
    from dpopt.io import modelfile
    return modelfile.load(MODELS_DIR / "hu_constant_sensitivity.toml")[0]


@pytest.mark.parametrize("make", [_hierarchy, _sample_size], ids=["hierarchy", "sample_size"])
def test_compare_runs_pyomo_once_outside_stratified(make):
    m = make()
    res = compare(m, time_limit=20, progress=False)
    assert "pyomo" in res.names and not any(n.startswith("pyomo:") for n in res.names), res.names
    rows = dict(zip(res.names, res))
    assert all(s.status != dpopt.Status.ERROR for s in res), [(n, s.message) for n, s in rows.items()]
    assert rows["exact"].status == rows["pyomo"].status == dpopt.Status.OPTIMAL, rows["pyomo"].message
    assert rows["pyomo"].objective == pytest.approx(rows["exact"].objective, rel=1e-7)


def test_compare_keeps_pyomo_solver_variants_for_stratified():
    from dpopt.compare import default_rows
    m = StratifiedDesign(N=[40, 30], sigma2=[3.0, 1.0], total=30, epsilon=1.0, mechanism="laplace")
    names = default_rows(m)
    assert names[0] == "exact" and {"pyomo:scip", "pyomo:highs"} <= set(names) and "pyomo" not in names
    assert "pyomo:scip" in default_rows(m, "relax") and "pyomo:highs" not in default_rows(m, "relax")
    assert default_rows(_hierarchy(), "relax").count("pyomo") == 1


def test_compare_passes_time_limit_only_to_named_parameters(monkeypatch):
    """time_limit goes only to handlers that name it (cvxpy's importance handler now names and honours it)."""
    from dpopt import registry
    from dpopt.io import modelfile
    seen = {}
    real = registry.dispatch

    def spy(model, backend, task, options):
        seen[backend] = dict(options)
        return real(model, backend, task, options)

    monkeypatch.setattr(registry, "dispatch", spy)
    m = modelfile.load(MODELS_DIR / "fay_laplace_sum.toml")[0]
    res = compare(m, time_limit=5, progress=False)
    assert seen["cvxpy"]["time_limit"] == 5
    assert all(s.status == dpopt.Status.OPTIMAL for s in res), [(s.backend, s.message) for s in res]
    compare(_hierarchy(), backends="exact", time_limit=5, progress=False)
    assert seen["exact"]["time_limit"] == 5                       # exact (hierarchy) names time_limit


def test_compare_reports_messages_of_non_optimal_rows():
    m = _sample_size()
    res = compare(m, backends="exact pyomo:highs cvxpy", progress=False)
    rows = dict(zip(res.names, res))
    # a solver variant the handler does not take is unsupported (and says so), not an error
    assert rows["pyomo:highs"].status == dpopt.Status.UNSUPPORTED and "solver" in rows["pyomo:highs"].message
    assert rows["cvxpy"].status == dpopt.Status.UNSUPPORTED
    d = res.to_dict()
    json.dumps(d)
    by_name = {r["backend"]: r for r in d["results"]}
    for name in ("pyomo:highs", "cvxpy"):
        assert by_name[name]["message"] == rows[name].message and rows[name].message
    txt = res.table()
    head, _, *lines = txt.splitlines()
    assert head.split()[-1] == "note"
    note = {ln.split()[0]: ln for ln in lines}
    assert rows["cvxpy"].message in note["cvxpy"]                  # short message: whole
    assert "solver" in note["pyomo:highs"]
    assert not note["exact"].rstrip().endswith("...")


def test_compare_table_note_is_short_and_json_message_whole():
    from dpopt.compare import CompareResult
    m = _hierarchy()
    long = "why " * 60
    sols = [dpopt.Solution(dpopt.Status.OPTIMAL, objective=1.0, x=np.ones(2), message="fine"),
            dpopt.Solution(dpopt.Status.ERROR, message=long),
            dpopt.Solution(dpopt.Status.UNSUPPORTED, message="cannot\n do it")]
    res = CompareResult(m, ["a", "b", "c"], sols, "solve")
    lines = res.table().splitlines()
    assert lines[0].split()[-1] == "note"
    col = lines[0].index("note")                                   # the note column is left-aligned
    assert "fine" not in lines[2]                                  # optimal rows carry no note
    assert lines[3][col:].startswith("why why") and lines[3].endswith("...") and len(lines[3][col:]) <= 60
    assert lines[4][col:] == "cannot do it"                        # one line, whitespace collapsed
    assert [r["message"] for r in res.to_dict()["results"]] == ["fine", long, "cannot\n do it"]
    # all rows optimal: no note column
    assert "note" not in CompareResult(m, ["a"], sols[:1], "solve").table()
