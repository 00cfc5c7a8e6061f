"""Issue 14 items 1 and 4: no string from a model file or an option ever reaches an executable name, and model
files read only files under their own folder. The oracle for "nothing was executed" is a marker file that the
would-be solver program creates when run."""

import os
import stat
import sys

import numpy as np
import pytest

import dpopt
from dpopt import Status
from dpopt.io import modelfile
from dpopt.cli import main

pe = pytest.importorskip("pyomo.environ")

from dpopt.backends.pyomo import _solver as PY  # noqa: E402

HAS_SCIP = pe.SolverFactory("scip_direct").available(exception_flag=False)


@pytest.fixture
def trap(tmp_path, monkeypatch):
    """An executable that would create ``marker`` if anyone ran it, by path and by a name on PATH."""
    marker = tmp_path / "MARKER"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "dpoptevil"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    names = [str(script), f"asl:{script}", "dpoptevil", f"gams:{script}", f" {script} ", str(script).upper(),
             f"./{os.path.relpath(script)}"]
    return marker, names


def _models():
    d = dpopt.StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=40, epsilon=1.0)
    return [(d, "solve"), (d, "relax"), (d.min_cost([1.0, 2.0, 3.0], 2500.0), "solve"),
            (d.add_constraint([[1, 1, 0]], [30], "<="), "solve"),
            (dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0), "solve"),
            (dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 1.0), "relax"),
            (dpopt.SampleSizeProgram(10_000, 1.0, 1.0, value_range=1.0), "solve")]


def test_executable_solver_names_are_never_run_from_python(trap, capfd):
    marker, names = trap
    for model, task in _models():
        for name in names:
            sol = getattr(model, task)(backend="pyomo", solver=name)
            assert sol.status == Status.UNSUPPORTED, (type(model).__name__, name, sol.status, sol.message)
            assert "scip" in sol.message and sol.point is None
            assert not marker.exists(), (type(model).__name__, task, name)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "pyomo" not in err.lower(), err[:2000]


def test_only_allow_listed_factory_names_reach_pyomo(trap, monkeypatch):
    """Whatever the caller writes, SolverFactory only ever sees one of the allow-list's Pyomo names."""
    marker, names = trap
    seen = []
    real = pe.SolverFactory

    def spy(name, *args, **kwargs):
        seen.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(pe, "SolverFactory", spy)
    for model, task in _models():
        for name in names + ["scip", "HiGHS", "ipopt", "", None, 3]:
            getattr(model, task)(backend="pyomo", solver=name, time_limit=30)
    assert seen and set(seen) <= set(PY.SOLVERS.values()), set(seen)
    assert not marker.exists()


def _hierarchy_file(tmp_path, solve_table: str) -> str:
    path = tmp_path / "tree.toml"
    path.write_text(f'family = "hierarchy"\nepsilon_total = 1.0\ndataset = "toy"\n{solve_table}')
    return str(path)


def test_executable_solver_name_in_a_model_file_is_never_run_by_the_cli(trap, tmp_path, capsys):
    marker, names = trap
    for name in names:
        f = _hierarchy_file(tmp_path, f'[solve]\nbackend = "pyomo"\nsolver = "{name}"\n')
        assert main(["solve", f]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("dpopt: error:") and "solver" in err[0], err
        assert not marker.exists(), name
    stratified = tmp_path / "design.toml"
    stratified.write_text('family = "stratified"\nepsilon = 1.0\ntotal = 40\n[strata]\nN = [30, 40, 50]\n'
                          f'sigma2 = [1.0, 2.0, 3.0]\n[solve]\nbackend = "pyomo"\nsolver = "{names[0]}"\n')
    assert main(["solve", str(stratified)]) == 2
    assert main(["solve", str(stratified), "--backend", "pyomo", "--solver", names[1]]) == 2
    assert main(["solve", str(stratified), "--backend", f"pyomo:{names[0]}"]) == 2
    # compare reports such a row as unsupported and runs nothing
    res_code = main(["compare", str(stratified), "--backends", "exact", f"pyomo:{names[0]}", f"pyomo:{names[1]}",
                     "--json"])
    out = capsys.readouterr().out
    assert res_code == 0 and out.count('"unsupported"') >= 2
    assert not marker.exists()


# ------------------------------------------------------------------------------ paths (item 4)
TREE_CSV = 'id,parent,count\nroot,,60\n"A, north #1",root,25\n"B #2",root,35\n'


def _tree_model(tmp_path, value: str):
    f = tmp_path / "model" / "tree.toml"
    f.parent.mkdir(exist_ok=True)
    f.write_text(f'family = "hierarchy"\nepsilon_total = 1.0\ntree_csv = "{value}"\n')
    return f


@pytest.mark.parametrize("where", ["absolute", "dotdot", "symlink"])
def test_tree_csv_outside_the_model_folder_is_refused_unless_allowed(tmp_path, where, capsys):
    secret = tmp_path / "secret.csv"
    secret.write_text(TREE_CSV)
    (tmp_path / "model").mkdir()
    if where == "absolute":
        value = str(secret)
    elif where == "dotdot":
        value = "../secret.csv"
    else:
        (tmp_path / "model" / "link.csv").symlink_to(secret)
        value = "link.csv"
    f = _tree_model(tmp_path, value)
    with pytest.raises(modelfile.ModelFileError, match="tree_csv") as info:
        modelfile.load(f)
    assert str(f) in str(info.value) and "outside" in str(info.value)
    model, _ = modelfile.load(f, allow_outside=True)
    assert model.hierarchy.sizes == [1, 2]
    assert main(["solve", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tree_csv" in err[0]
    assert main(["solve", str(f), "--allow-outside-paths"]) == 0


def test_population_csv_outside_the_model_folder_is_refused_unless_allowed(tmp_path):
    (tmp_path / "pop.csv").write_text("income\n1\n2\n3\n4\n")
    (tmp_path / "m").mkdir()
    f = tmp_path / "m" / "study.toml"
    f.write_text('family = "sample_size_study"\nepsilon = 1.0\nstatistic = "mean"\n'
                 '[population]\nkind = "csv"\ncsv = "../pop.csv"\n')
    with pytest.raises(modelfile.ModelFileError, match=r"\[population\] csv") as info:
        modelfile.load(f)
    assert "outside" in str(info.value) and str(f) in str(info.value)
    model, _ = modelfile.load(f, allow_outside=True)
    assert model.population.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.skipif(not os.path.exists("/etc/passwd"), reason="needs a system file to point at")
def test_a_system_file_is_never_echoed(tmp_path, capsys):
    first_line = open("/etc/passwd").readline().strip()
    f = _tree_model(tmp_path, "/etc/passwd")
    for argv in (["solve", str(f)], ["solve", str(f), "--allow-outside-paths"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "tree_csv" in err
        assert first_line not in err and first_line.split(":")[0] + ":x" not in err


@pytest.mark.parametrize("kind", ["missing", "directory", "empty-string", "number"])
def test_missing_or_odd_referenced_file_is_a_one_line_error(tmp_path, kind, capsys):
    value = {"missing": "nope.csv", "directory": ".", "empty-string": "", "number": None}[kind]
    f = tmp_path / "tree.toml"
    line = "tree_csv = 3" if value is None else f'tree_csv = "{value}"'
    f.write_text(f'family = "hierarchy"\nepsilon_total = 1.0\n{line}\n')
    assert main(["solve", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dpopt: error: {f}:") and "tree_csv" in err[0], err


# ------------------------------------------------------------------------------ CSV parsing (item 12)
def test_tree_csv_with_quoted_commas_and_hashes(tmp_path):
    (tmp_path / "tree.csv").write_text(
        'id,parent,count,note\n'
        '"CA","",100,"state, # of schools"\n'
        '"Los Angeles, county #1","CA",60,"x"\n'
        '"San Diego #2","CA",40,"#"\n'
        '"LAUSD, ""big""","Los Angeles, county #1",60,\n'
        '"SD Unified","San Diego #2",40,"a,b"\n')
    f = tmp_path / "tree.toml"
    f.write_text('family = "hierarchy"\nepsilon_total = 1.0\ntree_csv = "tree.csv"\n')
    model, _ = modelfile.load(f)
    h = model.hierarchy
    assert h.sizes == [1, 2, 2]
    assert h.ids[1] == ["Los Angeles, county #1", "San Diego #2"] and h.ids[2][0] == 'LAUSD, "big"'
    np.testing.assert_array_equal(h.counts[2], [60.0, 40.0])


def test_population_csv_with_quoted_commas_and_hashes(tmp_path):
    (tmp_path / "pop.csv").write_text('name,income\n"Smith, J. #1",3.5\n"#2",1.5\n"a,b,c","2.5"\n')
    model, _ = modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0, "statistic": "mean",
                                    "population": {"kind": "csv", "csv": "pop.csv", "column": "income"}},
                                   base=tmp_path)
    assert model.population.tolist() == [1.5, 2.5, 3.5]
    (tmp_path / "one.csv").write_text("value\n1\n2\n3\n")
    model, _ = modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0, "statistic": "mean",
                                    "population": {"kind": "csv", "csv": "one.csv"}}, base=tmp_path)
    assert model.population.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("content,match", [("income\n1\nx\n", "row 3"), ("a,b\n1,2\n", "several columns"),
                                           ("", "empty"), ("income\n", "no data rows")])
def test_population_csv_errors_name_the_key_and_row(tmp_path, content, match):
    (tmp_path / "pop.csv").write_text(content)
    with pytest.raises(modelfile.ModelFileError, match=match) as info:
        modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0, "statistic": "mean",
                             "population": {"kind": "csv", "csv": "pop.csv"}}, base=tmp_path)
    assert "[population] csv" in str(info.value)


def test_tree_csv_errors_do_not_quote_the_header(tmp_path):
    (tmp_path / "t.csv").write_text("secret_a,secret_b\n1,2\n")
    with pytest.raises(ValueError, match="'id'") as info:
        dpopt.Hierarchy.from_table(tmp_path / "t.csv")
    assert "secret" not in str(info.value.args[0]).replace(str(tmp_path), "")
    (tmp_path / "r.csv").write_text("id,parent,count\nroot,,3\nx,root\n")
    with pytest.raises(ValueError, match="row 3"):
        dpopt.Hierarchy.from_table(tmp_path / "r.csv")


if sys.platform.startswith("win"):  # pragma: no cover
    pytestmark = pytest.mark.skip(reason="POSIX executables and symlinks")
