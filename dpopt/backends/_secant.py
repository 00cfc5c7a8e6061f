"""Pyomo and cvxpy translations of the one solver-independent secant MILP (docs/constrained.md).

Constrained, multi-variable, precision-target and min-cost stratified models are written once by
:func:`dpopt.formulations.separable.secant_milp` (k integer columns, one epigraph column per stratum and
nonlinear row, secant cuts on integer segments); this module drives that MILP and checks and packages the
answer, and :mod:`.pyomo.secant` and :mod:`.cvxpy.secant` hand it to SCIP or HiGHS, so that solver comparisons
run every tool on one formulation. Unlike ``exact`` they get no Lagrangian help: this is the generic MILP
solvers' own performance, on their strongest form of the model.

The cuts are generated lazily (:func:`solve_outer`, docs/constrained.md#the-secant-milp): the whole box
has Σ (hi − lo) segments per nonlinear row (10⁵ and more at survey sizes), which costs the solvers more to read
than to solve. A few secants per stratum give a relaxation; at its optimum n, each stratum whose secants are
not exact at n_h gets the segments at n_h − 1 and n_h, and the MILP is solved again. When none is missing the
relaxation's value at n is the true one, so n is feasible and the relaxation's bound is the problem's.
"""

from __future__ import annotations


import math
import time

import numpy as np

from .. import _validate as V
from ..options import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT, time_limit_or_default  # noqa: F401
from ..formulations.separable import program_of, ranges, secant_milp, segments_missing
from ..formulations.solution import solution_from
from ..result import Solution, Status
from ._highs_run import HARD_DEADLINE_GRACE     # the repair of a point may use the grace, never more

#: secants written per stratum before the first solve (a geometric grid over its range, plus its anchor)
INITIAL_SEGMENTS = 12
#: rounds of the outer loop; each adds ≥ 1 segment, so the loop ends anyway, this bounds the solver calls
MAX_ROUNDS = 200
_PYOMO_SOLVERS = ("scip", "highs")        # dpopt names; _pyomo.SOLVERS maps them to Pyomo's factories
_CVXPY_SOLVERS = {"scip": "SCIP", "highs": "HIGHS"}


def _ranges(prog):
    """Sum-tightened bounds (:func:`dpopt.formulations.ranges`, the public home)."""
    return ranges(prog)


def _prepare(model, options, solvers):
    if options.get("formulation") not in (None, "secant"):
        raise V.InvalidOption(f"formulation {options.get('formulation')!r} cannot model "
                              f"{', '.join(model.extended_features())}; use formulation='secant' or omit it")
    solver = str(options.get("solver", "highs")).strip().lower()
    if solver not in solvers:
        return None, Solution(status=Status.UNSUPPORTED, message=f"the secant MILP of a constrained design runs on "
                              f"{', '.join(sorted(solvers))}, not {options.get('solver')!r}")
    # (the names are matched against this fixed list only; nothing the caller wrote reaches a solver factory)
    time_limit = time_limit_or_default(options.get("time_limit"))
    gap = options.get("rel_gap")
    gap = DEFAULT_REL_GAP if gap is None else V.option(V.real, "rel_gap", gap)
    if not 0 <= gap < 1:
        raise V.InvalidOption(f"rel_gap must be in [0, 1), got {gap:g}")
    prog = program_of(model)
    lo, hi = _ranges(prog)
    if np.any(lo > hi):
        return None, Solution(status=Status.INFEASIBLE, message="the bounds and the total leave no design")
    x0 = np.sqrt(lo * hi)
    scale = max(abs(prog.evaluate(x0)[0]), 1e-300) * 1e-6
    solver_options = options.get("solver_options") or {}
    if not isinstance(solver_options, dict):
        raise V.InvalidOption(f"solver_options must be a mapping of the solver's own options, got "
                              f"{type(solver_options).__name__}")
    from .pyomo._solver import check_solver_options     # the Pyomo routes' check: unknown names are refused
    check_solver_options(solver, solver_options)
    return dict(prog=prog, lo=lo, hi=hi, anchor=x0, scale=scale, solver=solver, time_limit=time_limit, gap=gap,
                verbose=bool(options.get("verbose", False)), solver_options=dict(solver_options)), None


def _finish(model, prep, status_word, n, bound, solver_name, t0, message, termination="", rounds=0, cuts=0):
    """The answer as a Solution: the shared :func:`dpopt.formulations.solution_from` (feasibility test, repair,
    gap certificate, status), marked as the secant MILP's; ``termination`` is the solver's own reason."""
    sol = solution_from(model, n, bound, status_word, rel_gap=prep["gap"], solver=solver_name, message=message,
                        program=prep["prog"], bound_source="secant MILP bound from the solver", t0=t0,
                        deadline=t0 + prep["time_limit"] + HARD_DEADLINE_GRACE)
    if sol.ok:
        sol.message = f"secant MILP, {cuts} secants per nonlinear row in {rounds} rounds: {sol.message}"
        sol.details["formulation"] = "secant"
        sol.details["secant_rounds"] = rounds
    sol.termination = termination
    return sol


def initial_segments(lo, hi, anchor, count: int | None = None) -> list:
    """One set of segment starts per stratum: a geometric grid over [lo, hi − 1] (the curvature of 1/n sits at
    small n) and the segment at the anchor."""
    out = []
    t = np.linspace(0.0, 1.0, INITIAL_SEGMENTS if count is None else count)
    for a, b, x in zip(lo.tolist(), hi.tolist(), np.asarray(anchor, dtype=float).tolist()):
        if a >= b:
            out.append(set())
            continue
        a1 = max(a, 1)
        grid = np.rint(a1 * (max(b - 1, a1) / a1) ** t).astype(np.int64)
        out.append({int(v) for v in np.clip(grid, a, b - 1)} | {min(max(int(x), a), b - 1)})
    return out


def solve_outer(model, prep, solve_milp, t0):
    """The secant MILP with lazily generated cuts (module docstring). ``solve_milp(milp, deadline)`` runs one
    MILP by ``deadline`` (a ``time.perf_counter`` instant) and returns ``(status word, n or None, bound in the
    objective's units, termination, message)``, or a
    Solution to return as it is (a fault). The bound kept is the best of the rounds' (each is a relaxation); a
    loop stopped before its proof answers with the best feasible point of its rounds."""
    prog, lo, hi = prep["prog"], prep["lo"], prep["hi"]
    segs = initial_segments(lo, hi, prep["anchor"])
    best_bound, last = -math.inf, None
    kept = None         # (objective, n, round) of the best round's point that passes the feasibility test
    deadline = t0 + prep["time_limit"]
    rounds = 0
    while rounds < MAX_ROUNDS:
        if time.perf_counter() >= deadline:
            break
        milp = secant_milp(prog, lo, hi, anchor=prep["anchor"], obj_scale=prep["scale"], segments=segs)
        out = solve_milp(milp, deadline)
        rounds += 1
        if isinstance(out, Solution):
            return out
        word, n, bound, termination, message = out
        best_bound = max(best_bound, bound)
        if n is None and last is not None and word == "time_limit":
            n = last[1]      # stopped before this round had a point: the previous round's goes to the test
        last = (word, n, termination, message)
        if n is not None and prog.feasible(n):
            value = prog.evaluate(n)[0]
            if kept is None or value < kept[0]:
                kept = (value, n, rounds)
        if n is None or word != "optimal":
            break            # infeasible relaxation ⇒ infeasible problem; a stopped solve keeps its point
        missing = segments_missing(segs, n, lo, hi)
        if not missing:
            break            # exact at n: n is feasible and the relaxation's bound holds
        for h in missing:
            segs[h].update((int(n[h]) - 1, int(n[h])))
    else:
        last = last and ("time_limit", last[1], last[2], f"{MAX_ROUNDS} rounds of cuts: {last[3]}")
    cuts = int(sum(len(s) for s in segs))
    if last is None:
        return Solution(status=Status.TIME_LIMIT, solver=prep["solver"], wall_time=time.perf_counter() - t0,
                        message="the time limit passed before the secant MILP was solved once")
    word, n, termination, message = last
    if word == "optimal" and segments_missing(segs, n, lo, hi):
        word = "time_limit"     # the time ran out between rounds: n's value in the relaxation was not exact
    if word != "optimal" and kept is not None and kept[1] is not n:
        # a stopped loop answers with the best feasible point of its rounds, not merely the last one (a round
        # cut short by the limit can end on a poor incumbent after an earlier round found a good design); kept
        # is not the last point only when that one is missing, infeasible or no better
        n = kept[1]
        message = f"design of round {kept[2]} of {rounds} (the best feasible one); last round: {message}"
    return _finish(model, prep, word, n, best_bound, prep["solver"], t0, message, termination=termination,
                   rounds=rounds, cuts=cuts)
