"""Issue 14 items 7, 11 and 12 (CLI): every failure is one ``dpopt: error:`` line with exit code 2 naming the
file or the key; an interrupt is one line, and the process then ends by SIGINT (status 130 in a shell;
``main()`` returns 130); ``dpopt solve`` takes ``--solver`` and the
``backend:solver`` spelling of compare and says which external solver runs for how long."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"
STRATIFIED = 'family = "stratified"\nepsilon = 1.0\ntotal = 40\n[strata]\nN = [30, 40, 50]\nsigma2 = [1.0, 2.0, 3.0]\n'


def _one_error_line(capsys, *needles):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpopt: error:"), err
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


# ------------------------------------------------------------------------------ item 11
def test_deeply_nested_arrays(tmp_path, capsys):
    f = tmp_path / "deep.toml"
    f.write_text(STRATIFIED.replace("N = [30, 40, 50]", "N = " + "[" * 3000 + "1" + "]" * 3000))
    assert main(["solve", str(f)]) == 2
    _one_error_line(capsys, str(f), "nested")
    g = tmp_path / "deep_mid.toml"    # parses, but is no vector
    g.write_text(STRATIFIED.replace("N = [30, 40, 50]", "N = " + "[" * 200 + "1" + "]" * 200))
    assert main(["solve", str(g)]) == 2
    _one_error_line(capsys, str(g))


def test_binary_and_non_utf8_model_files(tmp_path, capsys):
    for name, data in (("bin.toml", bytes(range(256))), ("latin1.toml", 'name = "Zürich"\n'.encode("latin-1")),
                       ("nul.toml", b"\x00\x00\x00")):
        f = tmp_path / name
        f.write_bytes(data)
        assert main(["solve", str(f)]) == 2
        line = _one_error_line(capsys, str(f))
        assert "TOML" in line


def test_directory_and_missing_model_file(tmp_path, capsys):
    assert main(["solve", str(tmp_path)]) == 2
    _one_error_line(capsys, str(tmp_path), "directory")
    assert main(["solve", str(tmp_path / "nope.toml")]) == 2
    _one_error_line(capsys, "nope.toml", "no such file")
    assert main(["compare", str(tmp_path / "nope.toml")]) == 2
    _one_error_line(capsys, "nope.toml")


@pytest.mark.parametrize("family", ['["stratified"]', "3", "{ a = 1 }", "true"])
def test_family_that_is_not_a_string(tmp_path, capsys, family):
    f = tmp_path / "m.toml"
    f.write_text(STRATIFIED.replace('family = "stratified"', f"family = {family}"))
    assert main(["solve", str(f)]) == 2
    _one_error_line(capsys, str(f), "family must be a string", "stratified")


@pytest.mark.parametrize("N", ["1000000000000", "100000001", "0", "-3", "2.5", '"10"'])
def test_huge_or_bad_generated_population(tmp_path, capsys, N):
    f = tmp_path / "study.toml"
    f.write_text(f'family = "sample_size_study"\nepsilon = 1.0\n[population]\nkind = "lognormal"\nN = {N}\n')
    assert main(["solve", str(f)]) == 2
    _one_error_line(capsys, str(f), "[population] N")


def test_plot_out_that_is_a_file_or_impossible(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    existing = tmp_path / "taken"
    existing.write_text("x")
    assert main(["plot", "chen-fig5", "--out", str(existing), "--quick"]) == 2
    _one_error_line(capsys, "--out", "not a directory")
    assert existing.read_text() == "x"
    assert main(["plot", "chen-fig5", "--out", str(existing / "sub"), "--quick"]) == 2
    _one_error_line(capsys, "--out")


def test_memory_and_recursion_errors_become_one_line(monkeypatch, tmp_path, capsys):
    """Whatever a backend runs out of, the command ends with one line."""
    f = tmp_path / "m.toml"
    f.write_text(STRATIFIED)
    for exc in (MemoryError, RecursionError):
        def boom(*a, **k):
            raise exc()
        monkeypatch.setattr(dpopt.StratifiedDesign, "solve", boom)
        assert main(["solve", str(f)]) == 2
        _one_error_line(capsys, str(f))


# ------------------------------------------------------------------------------ item 12 (CLI)
def test_every_model_file_error_names_the_file(tmp_path, capsys):
    bad = {
        "unknown_key.toml": STRATIFIED + "bogus = 1\n",
        "strata_key.toml": STRATIFIED.replace("sigma2 = [1.0, 2.0, 3.0]", "sigma2 = [1.0, 2.0, 3.0]\nfoo = 1"),
        "bad_tree.toml": 'family = "hierarchy"\nepsilon_total = 1.0\n[tree]\ncounts = 3\n',
        "two_sources.toml": 'family = "hierarchy"\nepsilon_total = 1.0\ndataset = "toy"\ntree_csv = "x.csv"\n',
        "population.toml": 'family = "sample_size_study"\nepsilon = 1.0\npopulation = 3\n',
        "kind.toml": 'family = "sample_size_study"\nepsilon = 1.0\n[population]\nkind = "poisson"\n',
        "constraint_table.toml": STRATIFIED + "[constraint]\ncoefficients = [1, 1, 0]\nrhs = 10\n",
        "solve_table.toml": STRATIFIED.replace('family = "stratified"\n', 'family = "stratified"\nsolve = 3\n'),
    }
    for name, text in bad.items():
        f = tmp_path / name
        f.write_text(text)
        assert main(["solve", str(f)]) == 2, name
        _one_error_line(capsys, f"dpopt: error: {f}:")


def test_constraint_written_as_a_table_says_to_use_an_array_of_tables(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text(STRATIFIED + "[constraint]\ncoefficients = [1, 1, 0]\nrhs = 10\n")
    assert main(["solve", str(f)]) == 2
    _one_error_line(capsys, "[[constraint]]")


@pytest.mark.parametrize("argv_tail,file_solver", [(["--backend", "pyomo", "--solver", "scipp"], None),
                                                   (["--backend", "pyomo:scipp"], None),
                                                   ([], "scipp"), (["--backend", "exact", "--solver", "scip"], None)])
def test_misspelt_or_misplaced_solver_is_a_one_line_error(tmp_path, capsys, argv_tail, file_solver):
    f = tmp_path / "m.toml"
    f.write_text(STRATIFIED + (f'[solve]\nbackend = "pyomo"\nsolver = "{file_solver}"\n' if file_solver else ""))
    assert main(["solve", str(f), *argv_tail]) == 2
    _one_error_line(capsys, "solver")


def test_solver_flag_and_backend_solver_spelling(tmp_path, capsys):
    pytest.importorskip("highspy")
    f = tmp_path / "m.toml"
    f.write_text(STRATIFIED)
    ref = dpopt.io.modelfile.load(f)[0].solve(backend="exact")
    for argv in (["--backend", "pyomo:highs"], ["--backend", "pyomo", "--solver", "HiGHS"]):
        assert main(["solve", str(f), *argv, "--json"]) == 0
        out = capsys.readouterr()
        import json
        sol = json.loads(out.out)
        assert sol["solver"] == "highs" and sol["status"] == "optimal"
        assert sol["objective"] == pytest.approx(ref.objective, rel=1e-9)
        # an external solver runs: one progress line names it and its (default, finite) time limit
        assert "highs" in out.err and "time limit 300 s" in out.err and "default" in out.err
    assert main(["solve", str(f), "--backend", "pyomo:highs", "--time-limit", "12"]) == 0
    assert "time limit 12 s" in capsys.readouterr().err


# ------------------------------------------------------------------------------ item 7: interrupts
def _school_tree_csv(path: Path, seed=0, counties=58, districts=1000, schools=10000):
    rng = np.random.default_rng(seed)
    enrol = np.maximum(1, np.round(rng.lognormal(6.0, 0.9, schools))).astype(int)
    dpar = rng.integers(0, districts, schools)
    dpar[:districts] = np.arange(districts)
    cpar = rng.integers(0, counties, districts)
    cpar[:counties] = np.arange(counties)
    d = np.bincount(dpar, weights=enrol, minlength=districts).astype(int)
    c = np.bincount(cpar, weights=d, minlength=counties).astype(int)
    lines = ["id,parent,count", f"state,,{c.sum()}"]
    lines += [f"c{i},state,{v}" for i, v in enumerate(c)]
    lines += [f"d{i},c{p},{v}" for i, (p, v) in enumerate(zip(cpar, d))]
    lines += [f"s{i},d{p},{v}" for i, (p, v) in enumerate(zip(dpar, enrol))]
    path.write_text("\n".join(lines) + "\n")


def _interrupt(argv, wait_for: str, tmp_path, delay=1.5, timeout=120):
    """Run ``python -m dpopt.cli argv``; once stderr shows ``wait_for``, wait ``delay`` s and send SIGINT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a test run started in the background (`pytest &`, some CI runners) has SIGINT ignored, and an ignored
    # signal stays ignored across exec: give the child the disposition of a terminal session, as a user has
    proc = subprocess.Popen([sys.executable, "-m", "dpopt.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err_lines = []
    seen = threading.Event()

    def pump():
        buf = ""
        while True:
            ch = proc.stderr.read(1)
            if not ch:
                break
            buf += ch
            if wait_for in buf:
                seen.set()
            if ch == "\n":
                err_lines.append(buf)
                buf = ""
        if buf:
            err_lines.append(buf)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    assert seen.wait(timeout), f"never saw {wait_for!r}: {err_lines}"
    time.sleep(delay)
    assert proc.poll() is None, "finished before the interrupt: the test needs a longer solve"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout)
    t.join(10)
    out = proc.stdout.read()
    return proc.returncode, out, "".join(err_lines)


_STOPPED_IN = {
    # where the interrupt lands: plain code, or code CPython runs from a string (a dataclass or namedtuple
    # being built while a solver's modules are imported), which marks the interrupt unhandled for the whole
    # process even after the CLI has caught it
    "plain code": "raise KeyboardInterrupt",
    "code run from a string": "exec('raise KeyboardInterrupt')",
}


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform.startswith("win"), reason="POSIX signals")
@pytest.mark.parametrize("where", sorted(_STOPPED_IN))
@pytest.mark.parametrize("how", ["-m", "console script"])
def test_an_interrupted_command_ends_by_sigint_after_one_line(tmp_path, where, how):
    """The process ends the same way wherever the interrupt lands: one line, cleanup, then death by SIGINT,
    which is what a shell's script loop needs to stop. (With ``sys.exit(130)`` it ended with 130 when the
    interrupt landed in plain code but by SIGINT under ``-m`` when it landed in code run from a string.)"""
    (tmp_path / "stub_cli.py").write_text(
        "import atexit, sys\n"
        "import dpopt.cli as cli\n"
        "atexit.register(lambda: print('cleaned up', file=sys.stderr))\n"
        "def stopped(args):\n"
        f"    {_STOPPED_IN[where]}\n"
        "cli._solve = stopped\n"
        + ("cli.run()\n" if how == "-m" else
           "from importlib.metadata import entry_points\n"
           "(ep,) = [e for e in entry_points(group='console_scripts') if e.name == 'dpopt']\n"
           "sys.exit(ep.load()())\n"))
    model = MODELS / "chen_s54_k10_eta1e4.toml"
    argv = [sys.executable, "-m", "stub_cli"] if how == "-m" else [sys.executable, str(tmp_path / "stub_cli.py")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(dpopt.__file__).parents[1])])}
    proc = subprocess.run([*argv, "solve", str(model)], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == -signal.SIGINT, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.strip().splitlines() == ["dpopt: interrupted", "cleaned up"], proc.stderr[-2000:]
    assert proc.stdout == ""


def test_main_returns_130_when_interrupted(monkeypatch, capsys):
    """From Python, main() reports an interrupt as a status and does not end the process."""
    import dpopt.cli as cli

    def stopped(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_solve", stopped)
    assert cli.main(["solve", str(MODELS / "chen_s54_k10_eta1e4.toml")]) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "dpopt: interrupted"


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform.startswith("win"), reason="POSIX signals")
def test_sigint_during_a_highs_milp_stops_with_one_line(tmp_path):
    pytest.importorskip("highspy")
    code, out, err = _interrupt(["solve", str(MODELS / "chen_s54_k10_eta1e4.toml"), "--backend", "pyomo:highs"],
                                "solving with pyomo", tmp_path, delay=1.0)
    assert code == -signal.SIGINT, (code, err[-2000:], out[-2000:])
    assert err.strip().splitlines()[-1] == "dpopt: interrupted"
    assert "Traceback" not in err and out == ""


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform.startswith("win"), reason="POSIX signals")
def test_sigint_during_compare_stops_the_command(tmp_path):
    """SCIP catches SIGINT itself and returned 'userinterrupt': the row became 'error', the table was
    printed and the exit code was 0."""
    pytest.importorskip("pyscipopt")
    _school_tree_csv(tmp_path / "schools.csv")
    (tmp_path / "schools.toml").write_text('family = "hierarchy"\nepsilon_total = 0.01\ntree_csv = "schools.csv"\n')
    code, out, err = _interrupt(["compare", "schools.toml", "--backends", "exact", "pyomo"], "pyomo ...", tmp_path,
                                delay=4.0)          # past the model build: inside SCIP
    assert code == -signal.SIGINT, (code, err[-2000:], out[-2000:])
    assert err.strip().splitlines()[-1].endswith("dpopt: interrupted")
    assert "Traceback" not in err and out == ""
