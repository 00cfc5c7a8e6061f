"""Acceptance test (c) of issue 19: a backend written outside the package on the compiled program
(tests/extension_backend/scipy_milp_backend.py: scipy's ``milp`` on the secant MILP) needs no private name,
appears in ``dpopt compare`` (function and CLI), and its certificate is built by the shared
:func:`dpopt.formulations.solution_from`; its answers equal brute force (from the formulas of docs/)."""

from __future__ import annotations

import ast
import importlib
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign, Status, registry
from dpopt.compare import default_rows

EXT = Path(__file__).parent / "extension_backend"
ROOT = Path(__file__).resolve().parents[1]

N = np.array([20, 30, 25, 16])
S2 = np.array([[1.0, 0.3], [3.0, 2.0], [0.5, 1.5], [2.0, 0.7]])
SHARES = np.array([0.4, 0.6])
COST = np.array([1.0, 2.0, 1.5, 1.0])
EPS, TOTAL, LO, HI = 0.8, 24, 2, 12


@pytest.fixture
def scipy_milp():
    registry.available_backends()                       # the built-in backends first
    saved = (dict(registry._HANDLERS), dict(registry._BACKENDS))    # (the test restores the registry)
    sys.path.insert(0, str(EXT))
    try:
        sys.modules.pop("scipy_milp_backend", None)
        yield importlib.import_module("scipy_milp_backend")
    finally:
        sys.path.remove(str(EXT))
        sys.modules.pop("scipy_milp_backend", None)
        registry._HANDLERS.clear(), registry._HANDLERS.update(saved[0])
        registry._BACKENDS.clear(), registry._BACKENDS.update(saved[1])


def _brute(budget, se0):
    grid = np.array([g for g in itertools.product(range(LO, HI + 1), repeat=4) if sum(g) == TOTAL], dtype=float)
    L = np.log1p(np.expm1(EPS) * N[None, :] / grid)
    T = (S2[None, :, :] + 2.0 / (SHARES[None, None, :] * L[:, :, None]) ** 2) / grid[:, :, None]   # Laplace
    f = np.sum(T, axis=(1, 2))                                                  # a-optimal, w = 1
    beta2 = np.zeros(4)
    beta2[[0, 1]] = (N[[0, 1]] / N[[0, 1]].sum()) ** 2
    ok = (grid @ COST <= budget * (1 + 1e-12)) & (T[:, :, 0] @ beta2 <= se0 ** 2 * (1 + 1e-9))
    return float(f[ok].min()), f


def _model(budget=34.5, se0=0.69):
    d = StratifiedDesign(N, S2, TOTAL, EPS, objective="a-optimal", lower=[LO] * 4, upper=[HI] * 4, shares=SHARES)
    return d.add_cost_budget(COST, budget).add_precision_target(se0, strata=[0, 1], variable=0, kind="se")


def test_extension_uses_no_private_name():
    tree = ast.parse((EXT / "scipy_milp_backend.py").read_text())
    names = [a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
             and node.module.startswith("dpopt") for a in node.names]
    mods = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    assert names and not [n for n in names if n.startswith("_")]
    mods = [m for m in mods if m != "__future__"]
    assert not [m for m in mods if any(p.startswith("_") for p in m.split("."))]
    attrs = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    assert not [a for a in attrs if a.startswith("_") and not a.startswith("__")]


def test_extension_in_compare_with_shared_certificate(scipy_milp, monkeypatch):
    calls = []
    real = scipy_milp.solution_from
    monkeypatch.setattr(scipy_milp, "solution_from", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = _model()
    best, f = _brute(34.5, 0.69)
    assert best > f.min()                                   # the rows bind
    assert "scipy-milp" in dpopt.available_backends() and "scipy-milp" in default_rows(model)
    res = dpopt.compare(model, backends=["exact", "scipy-milp"], progress=False)
    exact, ext = res
    assert ext.backend == "scipy-milp" and calls == [1]
    assert ext.status == Status.OPTIMAL, ext.message
    assert ext.certificate.kind == "gap" and ext.certificate.optimal and ext.certificate.lower_bound <= best * (1 + 1e-9)
    assert ext.objective == pytest.approx(best, rel=1e-9) and model.is_feasible(ext.n)
    assert exact.objective == pytest.approx(best, rel=1e-9)
    assert "scipy-milp" in res.table()
    # a min-cost design through the same backend
    mc = _model().min_cost(COST, se=None, variance_target=float(f.min()) * 1.2)
    sol = mc.solve(backend="scipy-milp")
    ref = mc.solve(backend="exact")
    assert sol.status == Status.OPTIMAL and sol.objective == pytest.approx(ref.objective, rel=1e-9)


def test_extension_in_the_cli_compare(tmp_path):
    spec = tmp_path / "m.toml"
    spec.write_text('family = "stratified"\nepsilon = 1.0\ntotal = 40\nmechanism = "tulap"\nobjective = "mean"\n'
                    'cost_budget = 90.0\n[strata]\nN = [70, 80, 90, 100]\nsigma2 = [0.5, 0.2, 0.1, 0.05]\n'
                    'cost = [1.0, 2.0, 3.0, 4.0]\n')
    code = ("import sys, scipy_milp_backend; from dpopt.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", code, "compare", str(spec), "--backends", "exact", "scipy-milp",
                          "--json"], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": f"{EXT}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    rows = {r["backend"]: r for r in json.loads(out.stdout)["results"]}
    assert rows["scipy-milp"]["status"] == "optimal"
    assert rows["scipy-milp"]["objective"] == pytest.approx(rows["exact"]["objective"], rel=1e-9)
    assert rows["scipy-milp"]["solution"]["certificate"]["kind"] == "gap"
