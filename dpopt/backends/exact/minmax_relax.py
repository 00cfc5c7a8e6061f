"""The continuous relaxation of a min-max design (docs/robust.md, "The min-max engine"; docs/controlled_precision.md).

The integer level search of :mod:`.minmax` over real designs: the same level programs P(t, μ) and weighted
programs Q(μ) of :mod:`dpopt.formulations.minmax`, each answered by the continuous Lagrangian dual of the
constrained route (:func:`.constrained.dual.solve_dual`) instead of the integer route. A level whose dual proves
it empty (weak duality, or a row unreachable over the box) raises the lower bound to t; a real point meeting the
other rows (relative violation of the other rows ≤ 1e-8, the continuous relaxation's own test, :func:`.constrained.solve.relax_constrained`)
lowers the upper bound to its worst ratio (computed, so only the other rows are tested); the dual value of Q(μ) is a lower bound for every μ (convex terms).
``optimal`` when the gap is at most ``rel_gap``. This is the min-max counterpart of ``relax()`` (stratallo's
``dopt`` answers the same continuous problem for controlled precision).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _log
from ...formulations.minmax import minmax_program
from ...models.minmax import MinMaxDesign
from ...registry import register
from ...result import Certificate, Solution, Status
from .constrained.checks import check_options, unreachable_rows
from .constrained.deadline import Deadline
from .constrained.dual import solve_dual

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"
MAX_STEPS = 100          # level programs at most (each halves the gap, or proves the level above ub)
POLISH_GAP = 1e-4        # the level search hands over to the Newton polish on μ below this relative gap
POLISH_STEPS = 6        # Newton steps on the weights at the end
MAX_MISSES = 12         # levels the dual may leave unsettled before the search stops
ROW_TOL = 1e-8           # relative row violation a real point may have (as relax_constrained)


def relax_minmax(model: MinMaxDesign, rel_gap: float | None = None, time_limit: float | None = None,
                 verbose: bool = False) -> Solution:
    """Continuous min-max: the real design with the smallest worst ratio and a proven lower bound (module
    docstring). ``rel_gap`` defaults to the min-max family's (:data:`dpopt.options.FAMILY_REL_GAP`)."""
    from ...options import default_rel_gap
    rel_gap = default_rel_gap("exact", "MinMaxDesign") if rel_gap is None else rel_gap
    rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
    deadline = Deadline(time_limit)
    mp = minmax_program(model)
    m = mp.m
    state = {"lb": -math.inf, "ub": math.inf, "x": None, "guess": math.nan}
    steps: list[str] = []

    n_other = len(mp.constraints)

    def point(prog, res):
        """Offer the dual's point when it meets the other rows (its worst ratio is computed, so the level rows
        need not hold)."""
        x = res.x
        if x is None or not np.all(np.isfinite(x)):
            return False
        x = _onto_total(x, mp)
        if n_other and float(np.max(prog.violation(x)[:n_other])) > ROW_TOL:
            return False
        w = float(np.max(mp.ratios(x)))
        if w < state["ub"]:
            state["ub"], state["x"] = w, np.asarray(x, dtype=float)
        return True

    def weighted(mu, share=8):
        """Q(μ): its dual value is a lower bound; its point (when it meets the other rows) an upper bound.
        Returns the point's ratios, or None."""
        prog = mp.weighted(mu)
        if unreachable_rows(prog, integer=False):
            return None
        res = solve_dual(prog, deadline.share(share), time_share=1.0)
        if res.infeasible:
            return None
        state["lb"] = max(state["lb"], float(res.q))
        steps.append(f"weighted ratios: bound {res.q:.12g}")
        if point(prog, res):
            return mp.ratios(res.x)
        state["guess"] = float(np.max(mp.ratios(res.x))) if np.all(np.isfinite(res.x)) else math.nan
        return np.full(m, np.nan)

    def polish(mu):
        """Newton's method on the weights μ until the ratios of Q(μ)'s point are equal on the domains that carry
        weight (the continuous optimum's condition): the bounds converge fast but the points only linearly in μ,
        so the best point is sought at the μ where they meet. Finite-difference Jacobian; bounded iterations;
        it only offers points (every bound it finds is a bound as well)."""
        idx = np.flatnonzero(mu > 1e-9 * mu.max())
        if idx.size < 2:
            return
        free, last = idx[:-1], idx[-1]
        for _ in range(POLISH_STEPS):
            if deadline.passed():
                return
            r = weighted(mu, 64)
            if r is None or not np.all(np.isfinite(r[idx])):
                return
            F = r[free] - r[last]
            if state["x"] is not None and state["ub"] - state["lb"] <= rel_gap * abs(state["ub"]):
                return
            h = 1e-6 * max(float(mu[idx].min()), 1e-12)
            Jac = np.empty((free.size, free.size))
            for c, j in enumerate(free):
                mu2 = mu.copy()
                mu2[j] += h
                mu2[last] -= h
                r2 = weighted(mu2, 64)
                if r2 is None or not np.all(np.isfinite(r2[idx])):
                    return
                Jac[:, c] = ((r2[free] - r2[last]) - F) / h
            try:
                step = np.linalg.solve(Jac, -F)
            except np.linalg.LinAlgError:
                return
            new = mu.copy()
            new[free] += step
            new[last] -= step.sum()
            if not np.all(np.isfinite(new)) or np.any(new[idx] <= 0):
                return
            mu = new

    mu = np.full(m, 1.0 / m)
    if weighted(mu) is None:
        return Solution(status=Status.INFEASIBLE, message="infeasible: no real design meets the other rows")
    stopped = ""
    failed = -math.inf            # the highest level at which the dual reached neither a point nor a proof
    misses = stalls = 0
    for it in range(MAX_STEPS):
        lb, ub = state["lb"], state["ub"]
        if state["x"] is not None and ub - lb <= max(rel_gap, POLISH_GAP) * abs(ub):
            break                 # the rest is the Newton polish's (or done)
        if deadline.passed():
            stopped = "time limit"
            break
        if math.isfinite(ub) and failed > lb:
            t = 0.5 * (failed + ub)             # above a level the dual could not settle
        elif math.isfinite(ub) and math.isfinite(lb):
            # the weighted bounds converge much faster than the points (their error is second order in μ), so
            # the level is put nearer lb than the midpoint
            t = lb + 0.25 * (ub - lb)
        elif math.isfinite(ub):
            t = ub * (1 - 1e-3) if ub > 0 else ub - 1e-3
        elif math.isfinite(state["guess"]) and state["guess"] > max(lb, 0.0):
            t = state["guess"]                   # the worst ratio of a point that missed the other rows narrowly
            state["guess"] = math.nan
        elif lb > 0:
            t = 8.0 * lb                         # no point yet: search upwards from the bound
        else:
            t = 1.0 if lb < 1.0 else 8.0 * lb
        prog = mp.level(t, mu)
        why = unreachable_rows(prog, integer=False)
        if why:
            state["lb"] = max(state["lb"], t)
            steps.append(f"level {t:.12g}: a row is unreachable ({why})")
            continue
        res = solve_dual(prog, deadline.share(max(MAX_STEPS - it, 1) // 4 + 1), time_share=1.0)
        if res.infeasible:
            state["lb"] = max(state["lb"], t)
            steps.append(f"level {t:.12g}: proven empty (dual)")
            continue
        if not point(prog, res):
            misses += 1
            failed = max(failed, t)
            steps.append(f"level {t:.12g}: the dual neither proved it empty nor reached a point meeting every row")
            if misses >= MAX_MISSES:
                stopped = f"{misses} levels neither proven empty nor met by a point"
                break
            continue
        steps.append(f"level {t:.12g}: point worst {state['ub']:.12g}")
        if state["ub"] >= ub * (1 - 1e-12) and ub > 0:
            stalls += 1
            if stalls >= MAX_MISSES // 4:
                stopped = "the levels stopped lowering the best point"
                break
        lam = np.maximum(np.asarray(res.lam, dtype=float)[-m:], 0.0)
        new = mu + lam * mp.scales
        if np.all(np.isfinite(new)) and new.sum() > 0:
            mu = new / new.sum()
            weighted(mu)
    if state["x"] is not None and state["ub"] - state["lb"] > rel_gap * abs(state["ub"]):
        polish(mu)
    if state["x"] is not None and state["ub"] - state["lb"] > rel_gap * abs(state["ub"]):
        # one row alone binds at the best point (e.g. a domain held at the floor its noise sets): its own
        # weighted program is the min-max there
        r0 = mp.ratios(state["x"])
        alone = np.flatnonzero(r0 >= r0.max() - 1e-3 * abs(r0.max()))
        if alone.size == 1:
            weighted(np.eye(m)[alone[0]], 16)
    x, lb, ub = state["x"], state["lb"], state["ub"]
    if x is None:
        sol = Solution(status=Status.TIME_LIMIT if deadline.passed() else Status.ERROR,
                       message=f"no real design found ({stopped or 'search ended'})")
        sol.details["steps"] = _log.steps(steps, "exact")
        return sol
    gap = max((ub - lb) / abs(ub), 0.0) if ub else (0.0 if lb >= ub else math.inf)
    proven = gap <= rel_gap
    cert = Certificate("gap", proven, lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message="continuous level search: levels proven empty by the Lagrangian dual and dual "
                               "bounds of weighted ratios")
    status = (Status.OPTIMAL if proven else Status.TIME_LIMIT if deadline.passed() else Status.FEASIBLE)
    msg = (f"continuous min-max, relative gap {gap:.2e}" + (f" ({stopped})" if stopped else ""))
    sol = model.make_solution(x=x, status=status, certificate=cert, message=msg)
    sol.details["steps"] = _log.steps(steps, "exact")
    sol.details.update(lower_bound=lb, level_steps=len(steps))
    return sol


def _onto_total(x, mp):
    """A dual's point that has not converged misses the fixed total Σ x = η by a little: move it onto the total,
    the residual spread over the strata in proportion to their room towards the bound on the residual's side.
    Its worst ratio is computed afterwards, so this only makes more points usable as upper bounds (the other rows
    are tested after the move)."""
    lo, hi = mp.lower.astype(float), mp.upper.astype(float)
    for row in mp.constraints:
        if row.sense == "==" and row.W is None and row.a is not None and np.all(row.a == 1.0):
            r = float(row.rhs) - float(np.sum(x))
            room = (hi - x) if r > 0 else (x - lo)
            total_room = float(np.sum(room))
            if r != 0 and total_room >= abs(r):
                x = np.clip(x + r * room / total_room, lo, hi)
    return x


register("exact", MinMaxDesign, "relax", _DESCRIPTION)(relax_minmax)
