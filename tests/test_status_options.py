"""Statuses and options (issue 18 section 4): an answer whose own certificate holds is ``optimal`` whatever gap
the solver stopped at; a row over fixed strata is no solver error; HiGHS's ``threads`` works after other HiGHS
solves; ``time_limit`` has one validator with one cap; bad option values are refused naming the option, on
every backend and family (seeded fuzz); the plain exact route says when it ran past ``time_limit``."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt import Status, registry
from dpopt import _validate as V
from dpopt.models.hierarchy import Hierarchy
from dpopt.result import PROVEN_GAP, gap_proves

from bounded import run_bounded

ROOT = Path(__file__).resolve().parent.parent


def _installed(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


needs_scip = pytest.mark.skipif(not _installed("pyscipopt"), reason="PySCIPOpt not installed")
needs_highs = pytest.mark.skipif(not _installed("highspy"), reason="highspy not installed")


# ---------------------------------------------------------------------------------- small models per family
def _stratified(**kw):
    return dpopt.StratifiedDesign(N=[40, 30, 20], sigma2=[1.0, 4.0, 0.5], total=18, epsilon=1.0, **kw)


def _constrained():
    m = _stratified()
    m.add_constraint([1, 1, 0], 12, "<=")
    return m


def _min_cost():
    return dpopt.MinCostDesign(_stratified(), cost=[1.0, 2.0, 3.0], variance_target=400.0)


def _sample_size():
    return dpopt.SampleSizeProgram(N=300, S2=2.0, epsilon=1.0, sensitivity=0.5)


def _hierarchy():
    tree = Hierarchy([[60.0], [25.0, 35.0], [5.0, 20.0, 15.0, 20.0]], [None, [0, 0], [0, 0, 1, 1]])
    return dpopt.HierarchyBudget(tree, 1.0)


def _importance():
    return dpopt.ImportanceSampling(1.0, slopes=[0.1, 0.5, 1.0])


def _study():
    return dpopt.SampleSizeStudy(population=list(np.linspace(0.0, 1.0, 60)), epsilon=1.0, rates=[0.2, 0.5],
                                 statistic="mean", draws=10, seed=1)


FAMILIES = {"stratified": _stratified, "constrained": _constrained, "min_cost": _min_cost,
            "sample_size": _sample_size, "hierarchy": _hierarchy, "importance": _importance, "study": _study}


# ---------------------------------------------------------------------------------- 1. rel_gap and certificates
GAPS = [1e-3, 1e-6, 1e-9, 1e-12]
PYOMO_CASES = [(fam, solver) for fam in ("stratified", "constrained", "min_cost") for solver in ("scip", "highs")] \
    + [("sample_size", "scip"), ("hierarchy", "scip")]


@pytest.mark.parametrize("family,solver", PYOMO_CASES, ids=[f"{f}-{s}" for f, s in PYOMO_CASES])
def test_explicit_rel_gap_keeps_a_certified_optimum_optimal(family, solver):
    """Any explicit rel_gap turned a certified optimum into 'feasible' (stratified: the exchange certificate
    held; sample size: 'FAILS (relative gap 2.4e-16)'). The status is the certificate's."""
    pytest.importorskip("pyscipopt" if solver == "scip" else "highspy")
    model = FAMILIES[family]()
    ref = model.solve(backend="exact")
    assert ref.status == Status.OPTIMAL
    # the hierarchy's own certificate (a Lagrangian bound of the continuous program) proves SCIP's point to
    # ~1.5e-8 only: below that its 'feasible' is the certificate's honest verdict (checked below)
    for gap in (GAPS[:2] if family == "hierarchy" else GAPS):
        sol = model.solve(backend="pyomo", solver=solver, rel_gap=gap, time_limit=60)
        where = f"{family}/{solver}/rel_gap={gap:g}: {sol.message}"
        assert sol.status == Status.OPTIMAL, where
        assert sol.certificate is not None and sol.certificate.optimal, where
        assert "FAILS" not in str(sol.certificate), where
        assert sol.objective == pytest.approx(ref.objective, rel=max(gap, 1e-9) + 1e-9), where
    if family == "hierarchy":
        sol = model.solve(backend="pyomo", solver=solver, rel_gap=1e-9, time_limit=10)
        assert (sol.status == Status.OPTIMAL) == sol.certificate.optimal, sol.message


def test_gap_rule_is_one_definition():
    assert gap_proves(0.0) and gap_proves(2.4e-16) and gap_proves(PROVEN_GAP) and not gap_proves(2e-9)
    assert gap_proves(1.001e-9, 1e-9)            # HiGHS stopped at 1e-9 on its scaled objective
    assert gap_proves(1e-3, 1e-3) and not gap_proves(1.1e-3, 1e-3)
    assert not gap_proves(math.nan) and not gap_proves(math.inf, 0.5) and not gap_proves("x")


@needs_highs
def test_secant_answer_at_gap_just_above_the_asked_one_is_optimal():
    """cvxpy at defaults said 'feasible' at the optimum when HiGHS's gap on its scaled objective was 1.001e-9
    (the old test: gap <= 1e-9 * 1.0001)."""
    import time as _t

    from dpopt.backends import _secant
    model = _constrained()
    ref = model.solve(backend="exact")
    prep, early = _secant._prepare(model, {}, _secant._CVXPY_SOLVERS)
    assert early is None
    bound = ref.objective * (1 - 1.001e-9)
    sol = _secant._finish(model, prep, "optimal", np.asarray(ref.n), bound, "highs", _t.perf_counter(), "test")
    assert sol.status == Status.OPTIMAL and sol.certificate.optimal
    far = _secant._finish(model, prep, "optimal", np.asarray(ref.n), ref.objective * (1 - 1e-6), "highs",
                          _t.perf_counter(), "test")
    assert far.status == Status.FEASIBLE and not far.certificate.optimal
    # end to end: cvxpy's secant route at its defaults
    got = model.solve(backend="cvxpy", time_limit=60)
    assert got.status == Status.OPTIMAL and got.objective == pytest.approx(ref.objective, rel=2e-9)


# ---------------------------------------------------------------------------------- 2. rows over fixed strata
@pytest.mark.parametrize("solver", ["scip", "highs"])
@pytest.mark.parametrize("family", ["stratified", "min_cost"])
@pytest.mark.parametrize("target", [10.0, 1e-6], ids=["holds", "violated"])
def test_row_over_strata_fixed_by_bounds_is_not_a_solver_error(solver, family, target):
    pytest.importorskip("pyscipopt" if solver == "scip" else "highspy")
    base = _stratified(lower=[5, 2, 2], upper=[5, 30, 20])
    model = base if family == "stratified" else dpopt.MinCostDesign(base, cost=[1.0, 2.0, 3.0],
                                                                   variance_target=700.0)
    model.add_precision_target(target, strata=[0])
    ref = model.solve(backend="exact")
    sol = model.solve(backend="pyomo", solver=solver, time_limit=60)
    assert sol.status == ref.status, sol.message
    assert "trivial Boolean" not in sol.message
    if ref.status == Status.OPTIMAL:
        assert sol.objective == pytest.approx(ref.objective, rel=1e-9)


@pytest.mark.parametrize("opts", [{"solver": "scip", "formulation": "minlp"},
                                  {"solver": "highs", "formulation": "milp"}], ids=["minlp", "milp"])
@pytest.mark.parametrize("rhs,expected", [(5, Status.OPTIMAL), (-5, Status.INFEASIBLE)])
def test_row_without_coefficients_is_decided_as_a_constant(opts, rhs, expected):
    pytest.importorskip("pyscipopt" if opts["solver"] == "scip" else "highspy")
    model = _stratified()
    model.add_constraint([0, 0, 0], rhs, "<=")
    sol = model.solve(backend="pyomo", time_limit=60, **opts)
    assert sol.status == expected, sol.message


# ---------------------------------------------------------------------------------- 3. HiGHS threads
_THREADS = r"""
import sys, dpopt
from dpopt import _validate as V
m = dpopt.StratifiedDesign(N=[40, 30, 20], sigma2=[1.0, 4.0, 0.5], total=18, epsilon=1.0)
mc = dpopt.MinCostDesign(dpopt.StratifiedDesign(N=[40, 30, 20], sigma2=[1.0, 4.0, 0.5], total=18, epsilon=1.0),
                         cost=[1.0, 2.0, 3.0], variance_target=400.0)
out = [m.solve(backend="pyomo", solver="highs").status.value]          # HiGHS's scheduler starts here
for t in (1, 2, 1, 0):
    out.append(m.solve(backend="pyomo", solver="highs", solver_options={"threads": t}).status.value)
    out.append(mc.solve(backend="pyomo", solver="highs", solver_options={"threads": t}).status.value)
out.append(m.solve(backend="pyomo", solver="highs").status.value)
for bad in (10**6, -1, True, "1", 1.5):
    try:
        m.solve(backend="pyomo", solver="highs", solver_options={"threads": bad})
        out.append("accepted %r" % (bad,))
    except V.InvalidOption as exc:
        out.append("refused" if "threads" in str(exc) else "refused without naming threads: %s" % exc)
print(" ".join(out))
"""


@needs_highs
def test_highs_threads_after_an_earlier_highs_solve():
    """threads=1 returned 'error: termination unknown' after any earlier HiGHS solve in the process (HiGHS's
    scheduler is process-wide); a fresh interpreter, since the test process may have used HiGHS already."""
    res = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=240,
                         cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    words = res.stdout.split()
    assert words == ["optimal"] * 10 + ["refused"] * 5, res.stdout


# ---------------------------------------------------------------------------------- 4. time_limit, one validator
def _handlers():
    registry.available_backends()
    out = []
    for (backend, cls, task), fn in sorted(registry._HANDLERS.items(), key=lambda kv: (kv[0][0], kv[0][1].__name__,
                                                                                        kv[0][2])):
        fam = next((f for f, mk in FAMILIES.items() if type(mk()) is cls and f != "constrained"), None)
        if fam is not None:
            out.append((backend, fam, task, fn))
    return out


HANDLERS = _handlers()
TIME_CASES = [(b, f, t) for b, f, t, fn in HANDLERS if "time_limit" in inspect.signature(fn).parameters]
BAD_TIME = {"huge-int": 10 ** 400, "1e308": 1e308, "above-cap": V.MAX_TIME_LIMIT * 1.5, "nan": math.nan,
            "inf": math.inf, "negative": -1.0, "zero": 0, "true": True, "string": "10", "2**70": 2 ** 70,
            "list": [1.0], "complex": 1j}


@pytest.mark.parametrize("backend,family,task", TIME_CASES, ids=[f"{b}-{f}-{t}" for b, f, t in TIME_CASES])
def test_time_limit_is_refused_naming_it_on_every_backend(backend, family, task):
    """time_limit=10**400 raised OverflowError on every backend; 1e308 passed validation and failed in SCIP."""
    model = FAMILIES[family]()
    for label, value in BAD_TIME.items():
        with pytest.raises(V.InvalidOption, match="time_limit") as info:
            getattr(model, task)(backend=backend, time_limit=value)
        assert "1e+07" in str(info.value) or label in ("true", "string", "list", "complex"), (label, info.value)


def test_time_limit_cap_is_one_number():
    assert V.time_limit(V.MAX_TIME_LIMIT) == V.MAX_TIME_LIMIT == 1e7
    assert V.time_limit(np.float64(2.5)) == 2.5 and V.time_limit(3) == 3.0 and V.time_limit(None) is None
    for bad in (np.nextafter(1e7, 2e7), 10 ** 400, np.bool_(True), np.array(math.nan)):
        with pytest.raises(V.InvalidOption, match="time_limit"):
            V.time_limit(bad)


@needs_scip
def test_time_limit_at_the_cap_reaches_scip():
    sol = _stratified().solve(backend="pyomo", solver="scip", time_limit=V.MAX_TIME_LIMIT)
    assert sol.status == Status.OPTIMAL and sol.details["time_limit"] == V.MAX_TIME_LIMIT


def test_solver_time_limit_in_solver_options_is_refused():
    with pytest.raises(V.InvalidOption, match="time_limit"):
        _stratified().solve(backend="pyomo", solver="scip", solver_options={"limits/time": 1e20})


# ---------------------------------------------------------------------------------- 5. own options: tol & co
def test_string_tol_is_refused_not_an_error_status():
    """tol='1e-10' gave status 'error' (exact relax) instead of a refusal naming the option."""
    for backend in ("exact", "scipy"):
        with pytest.raises(V.InvalidOption, match="tol"):
            _stratified().relax(backend=backend, tol="1e-10")
    with pytest.raises(V.InvalidOption, match="max_iter"):
        _stratified().relax(backend="exact", max_iter="5")


# numeric options of every handler, with the words their refusal must use
NUMERIC = {"time_limit", "rel_gap", "tol", "rtol", "ftol", "xatol", "max_iter", "max_candidates", "max_milp_vars",
           "max_terms", "scan_limit", "max_rounds", "segments", "draws", "initial_cuts", "window",
           "max_milp_columns", "max_states", "leaf", "seed"}
FUZZ_VALUES = {"huge-int": 10 ** 400, "2**70": 2 ** 70, "1e308": 1e308, "string": "1e-10", "empty": "",
               "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "true": True, "false": False, "negative": -1,
               "negative-float": -0.5, "zero": 0, "list": [1], "none-string": "None", "subnormal": 5e-324,
               "dict": {}}
FUZZ_STATUSES = {s.value for s in Status}


def _fuzz_handler(backend, family, task, seed):
    """Each numeric option of one handler with a seeded sample of bad values: a refusal naming the option
    (ValueError/TypeError) or a Solution with a valid status; anything else is a failure."""
    fn = dict(((b, f, t), h) for b, f, t, h in HANDLERS)[(backend, family, task)]
    names = [p for p in inspect.signature(fn).parameters if p in NUMERIC]
    rng = np.random.default_rng(seed)
    labels = list(FUZZ_VALUES)
    failures, seen = [], 0
    for name in names:
        for label in rng.choice(labels, size=min(8, len(labels)), replace=False):
            value = FUZZ_VALUES[str(label)]
            opts = {name: value}
            if name != "time_limit" and "time_limit" in inspect.signature(fn).parameters:
                opts["time_limit"] = 2.0       # rel_gap=0 may be unprovable: the limit keeps the fuzz short
            where = f"{backend}/{family}/{task} {name}={label}"
            try:
                sol = getattr(FAMILIES[family](), task)(backend=backend, **opts)
            except (ValueError, TypeError) as exc:
                if name not in str(exc) and not (name == "time_limit" and "time" in str(exc)):
                    failures.append(f"{where}: refusal does not name {name}: {exc}")
                seen += 1
                continue
            except Exception as exc:  # noqa: BLE001 - the failure under test
                failures.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            if not isinstance(sol, dpopt.Solution) or sol.status.value not in FUZZ_STATUSES:
                failures.append(f"{where}: not a Solution status: {sol!r}")
            elif sol.status == Status.ERROR:
                failures.append(f"{where}: status error (an option value reached a solver): {sol.message}")
            seen += 1
    assert not failures, "\n".join(failures)
    return seen


_HANDLER_OF = {(b, f, t): fn for b, f, t, fn in HANDLERS}
# (a handler registered for both tasks, e.g. the hierarchy's, is fuzzed once)
FUZZ_CASES = [(b, f, t) for b, f, t, fn in HANDLERS
              if any(p in NUMERIC for p in inspect.signature(fn).parameters)
              and not (t == "relax" and _HANDLER_OF.get((b, f, "solve")) is fn)]


@pytest.mark.parametrize("backend,family,task", FUZZ_CASES, ids=[f"{b}-{f}-{t}" for b, f, t in FUZZ_CASES])
def test_option_values_fuzz(backend, family, task):
    """Seeded bounded fuzz over option values on every backend and family (each group in a child process)."""
    assert run_bounded(_fuzz_handler, backend, family, task, 18, timeout=120) >= 1


@needs_highs
def test_solver_options_threads_fuzz_is_refused_or_solved():
    m = _stratified()
    for value in (10 ** 400, 1e308, "2", math.nan, True, -3, 2 ** 70):
        with pytest.raises(V.InvalidOption, match="threads"):
            m.solve(backend="pyomo", solver="highs", solver_options={"threads": value})


# ---------------------------------------------------------------------------------- 6. exact's plain route
def test_exact_plain_route_reports_running_past_time_limit():
    """exact on the plain problem ignored time_limit silently (k = 200 000, time_limit=1e-4 ran 0.2 s and said
    'optimal'): it is bounded by its own size, and now says when it ran past the limit, with the elapsed time."""
    rng = np.random.default_rng(0)
    k = 20_000
    N = rng.integers(50, 500, k)
    model = dpopt.StratifiedDesign(N=N, sigma2=rng.uniform(0.5, 5, k), total=int(N.sum() * 0.3), epsilon=1.0)
    for task in ("solve", "relax"):
        t0 = time.perf_counter()
        sol = getattr(model, task)(backend="exact", time_limit=1e-6)
        assert time.perf_counter() - t0 < 30
        assert sol.status == Status.OPTIMAL and sol.certificate.optimal
        assert sol.details["time_limit_exceeded"] is True and sol.details["time_limit"] == 1e-6
        assert "past time_limit" in sol.message and f"{sol.wall_time:.3g} s" in sol.message
        quick = getattr(_stratified(), task)(backend="exact", time_limit=60)
        assert quick.details["time_limit_exceeded"] is False and "past time_limit" not in quick.message


def _highs_min_cost_status():
    return _min_cost().solve(backend="pyomo", solver="highs", time_limit=20).status.value


@needs_highs
def test_highs_solve_in_a_forked_child_after_a_parent_solve():
    """HiGHS's scheduler threads do not survive fork: a child's HiGHS solve after the parent's hung (seen in
    this file's fuzz); the fork hook of dpopt.backends._highs resets it in the child."""
    assert _highs_min_cost_status() == "optimal"
    assert run_bounded(_highs_min_cost_status, timeout=60) == "optimal"
