"""Combined constraints as users combine them, against brute force: (g) overlapping domains (every stratum in two
domains, so strata every row weighs alike form cells, docs/constrained.md "Cells"), with and without a cost budget
whose costs are equal within each cell, and (f) two cost budgets plus a "≥ in one stratum" row plus SE targets per
domain. The oracle (tests/test_constrained_exact.py) scans every integer design of the box from the plain formulas.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.backends.exact.constrained.cells import cell_milp, cells_of
from dpopt.backends.exact.constrained import search
from dpopt.backends.exact.constrained.highs_milp import MilpResult, highs_solve
from dpopt.backends.exact.constrained.scip_milp import scip_solve
from dpopt.formulations.separable import program_of
from test_constrained_exact import MECHS, _check, _grid, _oracle, _unit


def _design(rs, k):
    N = rs.integers(8, 30, size=k)
    S2 = rs.uniform(0.05, 4.0, size=k)
    mech = MECHS[int(rs.integers(3))]
    eps = float(rs.choice([0.2, 0.7, 1.5, 4.0]))
    lower = rs.integers(1, 3, size=k)
    upper = np.minimum(N, lower + rs.integers(2, 5, size=k))
    total = int(rs.integers(lower.sum(), upper.sum() + 1))
    d = StratifiedDesign(N, S2, total, eps, mechanism=mech, lower=lower, upper=upper,
                         labels=[f"s{i}" for i in range(k)], fpc=bool(rs.integers(2)))
    return d, mech, eps


def _reference(rs, d):
    """A design of the box with the total (random), the rows' right-hand sides are set around it."""
    grid = _grid(d.lower, d.upper)
    grid = grid[grid.sum(axis=1) == d.total]
    return grid[int(rs.integers(len(grid)))]


def _target(d, rs, idx, ref, kind, lo=0.97, hi=1.04, name=""):
    strata = [d.labels[i] for i in idx]
    d.add_precision_target(1.0, strata=strata, kind="variance")
    v = d.precision_value(d.precision_targets[-1], ref)
    bound = max(v * rs.uniform(lo, hi), 1e-12)
    if kind == "se":
        d.precision_targets[-1] = d._precision_target(float(np.sqrt(bound)), strata, None, "se", None, "mean", name)
    else:
        d.precision_targets[-1] = d._precision_target(float(bound), strata, None, "variance", None, "mean", name)


def _overlapping(rs, cost_budget):
    """(g): two crossing partitions (4 domains), a variance target on each; optionally a cost budget whose costs
    are one per first-partition domain (equal within every cell)."""
    k = int(rs.integers(6, 8))
    d, mech, eps = _design(rs, k)
    # three cells of at least two strata (cells are used when they are at most half the strata); the first
    # partition splits them {0, 1} | {2}, the second {0} | {1, 2}, so every stratum is in two crossing domains
    cell = rs.permutation(np.r_[0, 0, 1, 1, 2, 2, rs.integers(0, 3, size=k - 6)])
    part_a = cell <= 1
    part_b = cell == 0
    ref = _reference(rs, d)
    for part in (part_a, part_b):
        for side in (True, False):
            idx = np.flatnonzero(part == side)
            if idx.size:
                _target(d, rs, idx, ref, "variance")
    if cost_budget:
        c = np.where(part_a, rs.uniform(1, 5), rs.uniform(1, 5))      # equal within every cell
        d.add_cost_budget(c, float(c @ ref) * rs.uniform(0.98, 1.03))
    return d, mech, eps


def _combined(rs):
    """(f): two cost budgets, "≥ v in one stratum", an SE target per domain (two disjoint domains)."""
    k = int(rs.integers(4, 7))
    d, mech, eps = _design(rs, k)
    ref = _reference(rs, d)
    c1 = rs.uniform(1, 5, size=k)
    c2 = np.where(rs.random(k) < 0.5, rs.uniform(0.5, 3, size=k), 0.0)
    d.add_constraint(c1[None, :], [float(c1 @ ref) * rs.uniform(0.99, 1.03)], "<=", "cost budget")
    if np.any(c2 > 0):
        d.add_constraint(c2[None, :], [float(c2 @ ref) * rs.uniform(0.99, 1.03)], "<=", "travel budget")
    h = int(rs.integers(k))
    row = np.zeros(k)
    row[h] = 1.0
    d.add_constraint(row[None, :], [float(min(ref[h], d.lower[h] + 1))], ">=", "at least in one stratum")
    dom = rs.permutation(k) < k // 2
    for side in (True, False):
        _target(d, rs, np.flatnonzero(dom == side), ref, "se")
    return d, mech, eps


@pytest.mark.parametrize("case", ["overlapping", "overlapping+cost", "combined"])
def test_combined_cases_equal_brute_force(case):
    """40 random instances per case (120 in all), each against the brute-force optimum over the box."""
    rs = np.random.default_rng(sum(map(ord, case)) + 20)
    outcomes, by_cells = [], 0
    for _ in range(40):
        if case == "combined":
            d, mech, eps = _combined(rs)
        else:
            d, mech, eps = _overlapping(rs, case.endswith("cost"))
        ref = _oracle(d, mech, eps, "mean")
        outcomes.append(_check(d, ref))
        if ref is not None:
            steps = " ".join(d.solve().details.get("steps", []))
            by_cells += " cells" in steps
    assert outcomes.count("optimal") >= 15
    if case != "combined":
        assert by_cells >= 5          # the cells' MILP is exercised, not only other routes


@pytest.mark.parametrize("solver", [highs_solve, scip_solve], ids=["highs", "scip"])
def test_cell_milp_on_the_whole_box_is_the_brute_force_optimum(solver):
    """The cells' MILP alone (no bound, no search) over every design of the box: the solver's optimum (HiGHS's or
    SCIP's), turned back into a design, is the brute-force optimum, and so is its bound; with reduced-cost fixing
    on the cells (any multipliers, an infinite budget) it is the same."""
    rs = np.random.default_rng(7)
    seen = 0
    for _ in range(30):
        d, mech, eps = _overlapping(rs, bool(rs.integers(2)))
        prog = program_of(d)
        cells = cells_of(prog)
        assert cells is not None and cells.count < d.k
        ref = _oracle(d, mech, eps, "mean")
        lo, hi = prog.lower, prog.upper
        for lam in (None, rs.uniform(0, 2, size=prog.m)):
            mid = (lo + hi) / 2.0
            scale = 1e-6 * abs(prog.evaluate(mid)[0])           # the objective's unit, as the core search sets it
            cm = cell_milp(prog, cells, lo, hi, mid, scale, lam, None if lam is None else np.inf)
            res = solver(cm.milp, 1e-12, 0.0, 30.0)
            if ref is None:
                assert res.n is None or not d.is_feasible(cm.design(res.n))
                continue
            seen += 1
            n = cm.design(res.n)
            assert res.status == "optimal"
            assert d.is_feasible(n)
            assert d.objective_value(n) == pytest.approx(ref[0], rel=1e-9, abs=1e-12)
            assert res.objective == pytest.approx(ref[0], rel=1e-8, abs=1e-12)
            assert res.bound <= ref[0] + 1e-8 * abs(ref[0]) + 1e-12
    assert seen >= 20


def _overlapping_cases(seed, count, cost_budget=None):
    """``count`` overlapping-domain instances (:func:`_overlapping`; a cost budget on a random half unless
    ``cost_budget`` says), each with its brute-force optimum (None: infeasible)."""
    rs = np.random.default_rng(seed)
    for _ in range(count):
        d, mech, eps = _overlapping(rs, bool(rs.integers(2)) if cost_budget is None else cost_budget)
        yield d, _oracle(d, mech, eps, "mean")


@pytest.fixture
def highs_gives_up(monkeypatch):
    """HiGHS answers every core MILP of the search at once with its time limit, no point and no bound, and its
    slice on the cells' MILP is 0 s: SCIP takes every cells' MILP over."""
    def highs_out_of_time(milp, *args, **kwargs):
        return MilpResult("time_limit", None, float("inf"), float("-inf"), "Time limit reached")

    monkeypatch.setattr(search, "highs_solve", highs_out_of_time)
    monkeypatch.setattr(search, "CELL_HIGHS_SLICE", 0.0)


def test_scip_progress_reports_bracket_the_brute_force_optimum():
    """SCIP's progress reports from inside its search (one per node), in the model's units: every bound lies at
    or below the brute-force optimum and every incumbent at or above it."""
    reports = 0
    for d, ref in _overlapping_cases(11, 40):
        if ref is None:
            continue
        prog = program_of(d)
        mid = (prog.lower + prog.upper) / 2.0
        cm = cell_milp(prog, cells_of(prog), prog.lower, prog.upper, mid, 1e-6 * abs(prog.evaluate(mid)[0]))
        seen = []
        res = scip_solve(cm.milp, 1e-12, 0.0, 30.0, report=lambda p, b: seen.append((p, b)))
        assert res.status == "optimal"
        tol = 1e-8 * abs(ref[0]) + 1e-12
        for primal, bound in seen:
            assert bound <= ref[0] + tol
            assert primal >= ref[0] - tol
            assert math.isfinite(primal) or primal == math.inf     # no incumbent yet: inf, not SCIP's 1e20
            assert math.isfinite(bound) or bound == -math.inf
        reports += len(seen)
    assert reports >= 5


def test_cells_solved_by_scip_after_highs_slice_equal_brute_force(highs_gives_up):
    """The cells' MILP handed to SCIP when HiGHS does not close it within its slice (forced: ``highs_gives_up``):
    the search's answers are the brute-force optima, and SCIP's part is in the steps."""
    by_scip = 0
    for d, ref in _overlapping_cases(31, 20):
        sol = d.solve()
        if ref is None:
            assert sol.status == dpopt.Status.INFEASIBLE, (sol.status, sol.message)
            continue
        assert sol.status == dpopt.Status.OPTIMAL, (sol.status, sol.message)
        assert d.is_feasible(sol.n)
        assert sol.objective == pytest.approx(ref[0], rel=1e-9, abs=1e-12)
        assert sol.certificate.lower_bound <= ref[0] * (1 + 1e-9) + 1e-12
        by_scip += "then SCIP" in " ".join(sol.details.get("steps", []))
    assert by_scip >= 5


def test_scip_on_the_cells_stops_at_the_time_limit_with_point_and_bound(highs_gives_up):
    """A (g)-type design at k = 400 (10 × 4 crossing domains, variance targets 1 % above a reference design's), every
    cells' MILP on SCIP (``highs_gives_up``), a limit of 0.3 s: the solve ends with status time_limit or optimal,
    a design that meets every row when it returns one, and a bound no higher than its objective."""
    rs = np.random.default_rng(2)
    k = 400
    N = np.clip(np.round(rs.lognormal(np.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    S2 = (10.0 ** rs.uniform(-1.0, 3.0, k)) ** 2
    regions = np.array_split(rs.permutation(k), 10)
    ages = np.array_split(rs.permutation(k), 4)
    d = StratifiedDesign(N, S2, 50 * k, 1.0, mechanism="laplace")
    ref = StratifiedDesign(N, S2, 50 * k, 1.0, mechanism="laplace", objective=N * rs.uniform(0.7, 1.4, k)).solve().n
    T = d.unit_terms(ref)
    for part in regions + ages:
        idx = np.sort(part)
        w = (N[idx] / N[idx].sum()) ** 2
        d.add_precision_target(1.01 * float(np.sum(w * T[idx])), strata=idx, kind="variance")
    sol = d.solve(time_limit=0.3)
    assert sol.status in (dpopt.Status.TIME_LIMIT, dpopt.Status.OPTIMAL), (sol.status, sol.message)
    if sol.n is not None:
        assert d.is_feasible(sol.n)
        assert sol.certificate.lower_bound <= sol.objective * (1 + 1e-12)


def test_a_scip_failure_on_the_cells_is_a_status_not_a_crash(highs_gives_up, monkeypatch):
    """HiGHS out of time (``highs_gives_up``) and SCIP failing inside (forced): the solve still returns, with a
    status that claims no more than it proved (a design it returns meets every row; optimal only when its bound
    proves it), and the failure is in the steps."""
    from dpopt.backends.exact.constrained import scip_milp

    def broken(*args, **kwargs):
        raise RuntimeError("SCIP broke")

    monkeypatch.setattr(scip_milp, "_scip_solve", broken)
    failed = 0
    for d, ref in _overlapping_cases(5, 10, cost_budget=False):
        sol = d.solve()
        failed += "SCIP failed: RuntimeError: SCIP broke" in " ".join(sol.details.get("steps", []))
        if sol.n is not None:
            assert d.is_feasible(sol.n)
            assert ref is not None and sol.objective >= ref[0] * (1 - 1e-9) - 1e-12
        if sol.status == dpopt.Status.OPTIMAL:
            assert sol.objective == pytest.approx(ref[0], rel=1e-9, abs=1e-12)
    assert failed >= 3


def test_cells_group_only_strata_every_row_weighs_alike():
    """A cell's strata lie in the same domains (their rows weigh them alike); under the A-optimal objective the
    domain rows weigh (N_i/N_D)² against 1, so strata of different sizes share no cell and no cells are formed."""
    rs = np.random.default_rng(3)
    checked = 0
    for _ in range(10):
        d, _, _ = _overlapping(rs, False)
        cells = cells_of(program_of(d))
        assert cells is not None and cells.count < d.k
        member = np.array([[i in t.strata for t in d.precision_targets] for i in range(d.k)])
        for c in range(cells.count):
            rows = member[cells.cell == c]
            assert np.all(rows == rows[0])
        if len(set(d.N.tolist())) < d.k:
            continue
        a = StratifiedDesign(d.N, d.sigma2_matrix[:, 0], d.total, 1.0, objective="a-optimal", lower=d.lower,
                             upper=d.upper, labels=d.labels)
        for t in d.precision_targets:
            a.add_precision_target(1.0, strata=[d.labels[i] for i in t.strata])
        assert cells_of(program_of(a)) is None
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("seed,eta", [(s, e) for s in range(2) for e in (12, 13, 14, 15)])
def test_a_budget_limited_cell_milp_never_proves_the_model_infeasible(seed, eta):
    """Two rows on one strip of strata make three cells; the cells' MILP at a finite budget holds only cell
    totals within it, so its infeasibility is no proof for the model (a false `infeasible` was returned before)."""
    rs = np.random.default_rng(seed)
    k = 9
    N = rs.integers(20, 60, size=k)
    S2 = rs.uniform(0.5, 4.0, size=k)
    d = StratifiedDesign(N, S2, eta, 1.0, mechanism="laplace", lower=np.ones(k, dtype=int),
                         upper=np.full(k, 2), labels=[f"s{i}" for i in range(k)])
    strip = np.r_[[5.0] * 3, [-4.0] * 3, [0.0] * 3]
    d.add_constraint(strip[None, :], [3.5], "<=", "strip hi")
    d.add_constraint(strip[None, :], [2.5], ">=", "strip lo")
    _check(d, _oracle(d, "laplace", 1.0, "mean"))
