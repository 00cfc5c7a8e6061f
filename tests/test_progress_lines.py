"""Progress of a long constrained solve (issue 20): the exact route reports its incumbent and proven bound as it
goes (the ``dpopt.progress`` logger; ``verbose=True`` shows it, the CLI shows it on a terminal). Checked
against brute force on small instances: every bound reported lies at or below the integer optimum and every
incumbent at or above it, and the lines reach stderr through :func:`dpopt.progress.lines_to_stderr`."""

import itertools
import logging
import math
import re

import numpy as np
import pytest

import dpopt
import dpopt.progress as P

LINE = re.compile(r"exact: incumbent (none yet|\S+), bound (none yet|\S+), gap")    # the model's own search (not a stage)


def _instance(seed):
    rng = np.random.default_rng(seed)
    k, eta = 4, 24
    d = dpopt.StratifiedDesign(rng.integers(30, 200, k), rng.uniform(0.5, 5.0, k) ** 2, eta, 1.0)
    cost = rng.uniform(1.0, 4.0, k)
    free = d.solve().n
    d.add_cost_budget(cost, 0.97 * float(cost @ free))         # binds: the plain optimum costs more
    return d


def _brute(d):
    """The integer optimum by enumerating every design with the total (independent of the solver)."""
    lo, hi = np.asarray(d.lower, dtype=int), np.asarray(d.upper, dtype=int)
    best = math.inf
    for head in itertools.product(*[range(lo[i], hi[i] + 1) for i in range(d.k - 1)]):
        last = int(d.total) - sum(head)
        if not lo[-1] <= last <= hi[-1]:
            continue
        n = np.array([*head, last])
        if d.is_feasible(n):
            best = min(best, d.objective_value(n))
    return best


@pytest.mark.parametrize("seed", range(4))
def test_reported_bounds_and_incumbents_bracket_the_brute_force_optimum(seed, monkeypatch, caplog):
    monkeypatch.setattr(P, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(P, "PROGRESS_EVERY", 0.0)
    d = _instance(seed)
    opt = _brute(d)
    with caplog.at_level(logging.INFO, logger="dpopt.progress"):
        s = d.solve(backend="exact", time_limit=30)
    assert s.status.value == "optimal" and s.objective == pytest.approx(opt, rel=1e-9)
    seen = [LINE.search(r.getMessage()) for r in caplog.records if r.name == "dpopt.progress"]
    seen = [m for m in seen if m]
    assert seen, "no progress line"
    for m in seen:
        inc, bnd = m.group(1), m.group(2)
        if inc != "none yet":
            assert float(inc) >= opt * (1 - 1e-9)
        if bnd != "none yet":
            assert float(bnd) <= opt * (1 + 1e-9)


def test_lines_reach_stderr_only_when_asked(monkeypatch, capsys):
    monkeypatch.setattr(P, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(P, "PROGRESS_EVERY", 0.0)
    d = _instance(0)
    d.solve(backend="exact", time_limit=30)
    assert "incumbent" not in capsys.readouterr().err          # a library call is silent by default
    with P.lines_to_stderr(True):
        d.solve(backend="exact", time_limit=30)
    err = capsys.readouterr().err
    assert "dpopt: exact: incumbent" in err and "bound" in err
    d.solve(backend="exact", time_limit=30)
    assert "incumbent" not in capsys.readouterr().err          # removed again after the block
