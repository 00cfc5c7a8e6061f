"""Issue 18 §1: nothing a model file's ``[solve] solver_options`` says may make a solver write or read a file.

The file-touching parameters are enumerated from the solvers themselves (every HiGHS option of string type
or with "file" in its name, every SCIP parameter of string type); each must be refused by name from a model
file, while the allow-list (dpopt/io/solver_options.py) is accepted and is valid for the solver. A seeded,
bounded fuzz over option names and values checks the loader against the allow-list."""

import random
import re
import time
from pathlib import Path

import pytest

from dpopt.cli import main
from dpopt.io import modelfile
from dpopt.io.solver_options import BOOL, INT, MODEL_FILE_SOLVER_OPTIONS, REAL, markdown_table

ROOT = Path(__file__).resolve().parents[1]
BASE = {"family": "stratified", "epsilon": 1.0, "total": 40, "strata": {"N": [30, 40, 50], "sigma2": [1.0, 2.0, 3.0]}}


def _load(solver_options, solver="highs", backend="pyomo"):
    solve = {"backend": backend, "solver_options": solver_options}
    if solver is not None:
        solve["solver"] = solver
    return modelfile.from_dict({**BASE, "solve": solve}, source="m.toml")


def _highs_options(tmp_path):
    """{name: HighsOptionType name} of every HiGHS option (written by HiGHS itself, plus the Python
    attributes of its options object)."""
    import highspy
    from dpopt.backends._highs import new_highs
    h = new_highs()
    dump = tmp_path / "highs_options.txt"
    assert h.writeOptions(str(dump)) == highspy.HighsStatus.kOk
    names = set(re.findall(r"^(\w+)\s*=", dump.read_text(), flags=re.M))
    names |= {n for n in dir(h.getOptions()) if not n.startswith("_")}
    out = {}
    for n in names:
        status, kind = h.getOptionType(n)
        if status == highspy.HighsStatus.kOk:
            out[n] = kind.name
    assert len(out) > 80 and "log_file" in out
    return out


def _scip_params():
    import pyscipopt
    params = pyscipopt.Model().getParams()
    assert len(params) > 1000
    return params


def _file_touching_highs(opts):
    return sorted(n for n, kind in opts.items() if kind == "kString" or "file" in n)


def test_file_touching_highs_options_are_refused_by_name(tmp_path):
    opts = _highs_options(tmp_path)
    risky = _file_touching_highs(opts)
    assert {"log_file", "solution_file", "write_model_file", "read_solution_file", "write_solution_to_file",
            "read_basis_file", "write_basis_file", "mip_improving_solution_file"} <= set(risky)
    allowed = MODEL_FILE_SOLVER_OPTIONS["highs"]
    target = str(tmp_path / "written_by_highs")
    for name in risky:
        if name in allowed:           # a few choice options (presolve, solver, ...): never a free string
            assert isinstance(allowed[name], tuple) and "file" not in name, name
            values = [target, "", "x" * 200]
        else:
            values = [target, True, 1]
        for solver in ("highs", None):
            for value in values:
                with pytest.raises(modelfile.ModelFileError, match=re.escape(repr(name))):
                    _load({name: value}, solver=solver)
    assert not Path(target).exists()


def test_string_scip_parameters_are_refused_by_name():
    params = _scip_params()
    risky = sorted(n for n, v in params.items() if isinstance(v, str))
    assert {"visual/vbcfilename", "visual/bakfilename", "concurrent/paramsetprefix", "nlpi/ipopt/hsllib"} <= set(risky)
    for name in risky:
        assert name not in MODEL_FILE_SOLVER_OPTIONS["scip"]
        for solver in ("scip", None):
            with pytest.raises(modelfile.ModelFileError, match=re.escape(repr(name))):
                _load({name: "/tmp/dpopt-vbc"}, solver=solver)


def test_the_allow_list_is_valid_for_each_solver(tmp_path):
    """Every allowed name exists in its solver with the listed kind, and the solver accepts a typical value."""
    from dpopt.backends.pyomo._solver import check_solver_options
    highs = _highs_options(tmp_path)
    kinds = {REAL: "kDouble", INT: "kInt", BOOL: "kBool"}
    for name, kind in MODEL_FILE_SOLVER_OPTIONS["highs"].items():
        assert highs.get(name) == kinds.get(kind, "kString"), name
        if isinstance(kind, tuple):       # every listed choice is one HiGHS takes
            for choice in kind:
                check_solver_options("highs", {name: choice})
    scip = _scip_params()
    for name, kind in MODEL_FILE_SOLVER_OPTIONS["scip"].items():
        assert type(scip.get(name)).__name__ == {REAL: "float", INT: "int", BOOL: "bool"}[kind], name
        assert _load({name: scip[name]}, solver="scip")[1]["solver_options"] == {name: scip[name]}
        check_solver_options("scip", {name: scip[name]})
    for solver, opts in MODEL_FILE_SOLVER_OPTIONS.items():
        for name, kind in opts.items():
            assert "file" not in name and not name.endswith("lib") and (kind in (REAL, INT, BOOL) or isinstance(kind, tuple))
            assert _load({name: _typical(kind)}, solver=solver)[1]["solver_options"] == {name: _typical(kind)}


def _typical(kind):
    return {REAL: 1.0, INT: 1, BOOL: True}.get(kind) if not isinstance(kind, tuple) else kind[0]


def _fits(kind, value):
    if isinstance(kind, tuple):
        return isinstance(value, str) and value in kind
    if isinstance(value, bool):
        return kind == BOOL
    return (kind == INT and isinstance(value, int)) or (kind == REAL and isinstance(value, (int, float))
                                                         and abs(value) != float("inf") and value == value)


def test_seeded_fuzz_of_model_file_solver_options(tmp_path):
    """Random names (the solvers' own, the allow-lists', random text) and values: a model file accepts exactly
    what the allow-list of its solver (or of any solver, when it names none) accepts. Bounded to ~3 s."""
    rng = random.Random(18_1)
    names = sorted(set(_highs_options(tmp_path)) | set(_scip_params())
                   | {n for opts in MODEL_FILE_SOLVER_OPTIONS.values() for n in opts}
                   | {"output_file", "option_file_name", "write_data_filename", "log_csv_filename", "", " ",
                      "../x", "/etc/passwd", "limits/time ", "LOG_FILE", "time_limit\x00"})
    values = [1, 0, -1, 2**70, 1.5, 1e-9, float("inf"), float("nan"), True, False, "on", "off", "choose",
              "simplex", "adaptive", "/tmp/dpopt-fuzz", "", [1], {"a": 1}, None]
    solvers = [None, *MODEL_FILE_SOLVER_OPTIONS]
    deadline = time.monotonic() + 3.0
    cases = 0
    while time.monotonic() < deadline and cases < 20_000:
        solver = rng.choice(solvers)
        name = rng.choice(names) if rng.random() < 0.9 else "".join(rng.choice("ab/_-.x ") for _ in range(8))
        value = rng.choice(values)
        lists = [MODEL_FILE_SOLVER_OPTIONS[solver]] if solver else list(MODEL_FILE_SOLVER_OPTIONS.values())
        kinds = [opts[name] for opts in lists if name in opts]
        expect_ok = any(_fits(k, value) for k in kinds)
        try:
            _load({name: value}, solver=solver)
            ok = True
        except modelfile.ModelFileError as exc:
            ok = False
            assert "solver_options" in str(exc) and "m.toml" in str(exc), exc
        assert ok == expect_ok, (solver, name, value)
        cases += 1
    assert cases > 500
    assert not Path("/tmp/dpopt-fuzz").exists()


@pytest.mark.parametrize("options, solver", [
    ('{ write_solution_to_file = true, solution_file = "%s" }', "highs"),
    ('{ log_file = "%s" }', "highs"),
    ('{ write_model_file = "%s" }', "highs"),
    ('{ read_solution_file = "%s" }', "highs"),
    ('{ "visual/vbcfilename" = "%s" }', "scip"),
])
def test_cli_solve_refuses_file_touching_options_and_writes_nothing(tmp_path, capsys, options, solver):
    target = tmp_path / "outside" / "written.txt"
    target.parent.mkdir()
    if "read_solution_file" in options:
        target.write_text("Model status\n")
    f = tmp_path / "m.toml"
    f.write_text('family = "stratified"\nepsilon = 1.0\ntotal = 40\n[strata]\nN = [30, 40, 50]\n'
                 f'sigma2 = [1.0, 2.0, 3.0]\n[solve]\nbackend = "pyomo"\nsolver = "{solver}"\n'
                 f'solver_options = {options % target}\n')
    before = sorted(p.name for p in target.parent.iterdir())
    assert main(["solve", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "solver_options" in err[0] and "cannot be set from a model file" in err[0], err
    assert sorted(p.name for p in target.parent.iterdir()) == before
    if "log_file" not in options and solver == "highs":
        return
    # the same file with an allowed option instead solves. HiGHS runs in a child process: its thread pool,
    # made at the first solve of a process, refuses a later solve's different threads option
    # (test_pyomo_options sets threads = 1)
    safe = f.read_text().replace(f"solver_options = {options % target}",
                                 "solver_options = { " + ('"limits/memory" = 4000.0' if solver == "scip"
                                                          else "mip_rel_gap = 0.0, threads = 1") + " }")
    f.write_text(safe)
    if solver == "scip":
        assert main(["solve", str(f)]) == 0
    else:
        import os
        import subprocess
        import sys
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        run = subprocess.run([sys.executable, "-m", "dpopt.cli", "solve", str(f)], capture_output=True, text=True,
                             env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]


def test_readme_lists_the_model_file_solver_options():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = "<!-- README model-file solver options: generated from dpopt/io/solver_options.py -->"
    i, j = text.index(start) + len(start), text.index("<!-- end of README model-file solver options -->")
    assert text[i:j].strip() == markdown_table(), "README's model-file solver options table is out of date"


@pytest.mark.parametrize("backend", ["pyomo"])
@pytest.mark.parametrize("solver, bad", [("highs", {"nonsense": 1}), ("highs", {"limits/time": 5.0}),
                                         ("scip", {"nonsense": 1}), ("scip", {"limits/time": "x"})])
def test_secant_route_refuses_nonsense_solver_options(backend, solver, bad):
    """The secant MILP (constrained designs) checks solver_options like every other Pyomo route."""
    from dpopt import StratifiedDesign
    from dpopt._validate import InvalidOption
    d = StratifiedDesign(N=[30, 40, 50], sigma2=[1.0, 2.0, 3.0], total=40, epsilon=1.0).add_constraint(
        [[1, 1, 0]], [30], "<=")
    with pytest.raises(InvalidOption, match=re.escape(repr(next(iter(bad))))):
        d.solve(backend=backend, solver=solver, solver_options=bad, time_limit=20)
