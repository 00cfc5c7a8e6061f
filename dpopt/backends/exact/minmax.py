"""Certified integer min-max designs (docs/robust.md, "The min-max engine").

Solves a :class:`~dpopt.models.minmax.MinMaxDesign`, min_n max_r ρ_r(n) with ρ_r = (R_r(n) − d_r)/c_r, by a
search on the level t whose every step is the constrained exact route (:mod:`.constrained`) on a compiled
program of :mod:`dpopt.formulations.minmax`:

1. **Weighted programs** Q(μ) (μ ≥ 0, Σ μ = 1): their certified lower bound is a lower bound of the min-max
   (Σ μ_r ρ_r ≤ max_r ρ_r), their design an upper bound. The first μ is uniform; later ones are the multipliers
   of the level rows of the last level program, μ_r ∝ μ_r + λ_r·c_r (the min-max's dual weights at the
   continuous optimum, so the bound approaches it).
2. **Level programs** P(t, μ): the rows ρ_r ≤ t. A design found there has worst ratio ≤ t (the upper bound
   ``ub`` drops to its worst ratio); a proof that P(t) has no design (the constrained route's infeasibility
   proof: continuous dual, unreachable row or every core infeasible) raises the lower bound ``lb`` to t.
   t is the midpoint of [lb, ub]; once the gap is below 5 %, every other level is just below ub (ub minus
   rel_gap·ub/2 or the feasibility tolerance), so a proof there ends the search.

The answer's certificate is a gap certificate on the worst ratio: ``lower_bound`` the best proven bound;
``optimal`` when (ub − lb) ≤ rel_gap·ub and every bound rests on discretely convex terms. A level step that
ends neither in a design nor in a proof (time, a core HiGHS could not settle) stops the search with the status
``feasible`` (or ``time_limit``) and the proven gap.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _log
from ...feasibility import FEASIBILITY_TOL, Row
from ...formulations.minmax import minmax_program
from ...formulations.separable import SeparableProgram
from ...models.minmax import MinMaxDesign
from ...models.stratified import largest_remainder
from ...registry import register
from ...result import Certificate, Solution, Status
from .constrained.checks import check_options, convexity, row_minima, unreachable_rows
from .constrained.cores import DEFAULT_MAX_STATES
from .constrained.deadline import Deadline
from .constrained.dual import solve_dual
from .constrained.block import solve_block
from .constrained.checks import feasible as domains_feasible
from .constrained.solve import Joined, _join, _parts, _solve_parts
from .domains import domain_structure, solve_domains

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"
KELLEY_STEPS = 150         # cutting planes for the dual weights at most
MAX_STEPS = 80            # level and weighted programs solved at most (each step halves the gap or proves it)
LEVEL_GAP = 0.5          # relative gap of a level program's tie-break objective (any design will do)
_UNSETTLED = 4            # levels ending in neither a design nor a proof before the search stops
_CLOSE = 0.05             # relative gap below which every other level is put just under the upper bound


def _by_domains(prog, deadline):
    """The constrained route's domain shortcut (:mod:`..domains`, nested marginal allocation, exact with an
    exchange certificate) when the program has its structure — level rows on disjoint domains, each the
    objective's weights times a constant, and the total (multi-domain controlled precision under the
    population-mean weights): ("infeasible", reason, None), ("done", "", Joined) or None (the general route).
    When the objective alone breaks the structure (weights μ_r = 0 leave a domain out of it) the sum of the rows
    takes its place: the design and an infeasibility proof still hold, the bound (on another objective) is
    dropped."""
    groups = domain_structure(prog)
    replaced = groups is None
    if replaced:
        # the level program's objective is only a tie-break (any design of the level will do): with some weights
        # μ_r = 0 it no longer covers every domain, so try the plain sum of the nonlinear rows instead
        W = [r.W for r in prog.rows if r.W is not None]
        if not W or any(r.a is not None and np.any(r.a != 0) for r in prog.rows if r.W is not None):
            return None
        prog = SeparableProgram(prog.model, prog.lower, prog.upper,
                                Row("sum of the level rows", "objective", np.sum(W, axis=0), None), prog.rows, 0.0)
        groups = domain_structure(prog)
        if groups is None:
            return None
    res = solve_domains(prog, groups, deadline)
    if res is None:
        return None
    if isinstance(res[0], str):
        return "infeasible", f"domain route: {res[1]}", None
    n, slack, note, _binding = res
    if not domains_feasible(prog, n):
        return None
    obj = prog.evaluate(n.astype(float))[0]
    # a bound on a replaced objective bounds nothing the caller asked: only the design (or the proof) counts
    lb = -math.inf if replaced else obj - max(0.0, -slack)
    return "done", "", Joined(n=n, x=n.astype(float), lam=np.zeros(prog.m), ub=obj, lb=lb, lagrangian=lb, q=lb,
                              steps=(note,), found=True, timed_out=False, enumerated=False)


def _run(prog, convex, deadline, rel_gap, share: int = 1, max_states=DEFAULT_MAX_STATES, minima=None):
    """The constrained exact route on one compiled program, given the solve's ``deadline`` and taking
    1/``share`` of the time left once its row checks are done: ("infeasible", reason, None), ("done", "",
    Joined), or ("stopped", "time limit", None) when the solve's limit passed before the blocks began (the row
    checks take 0.3-0.4 s with 51 rows at k = 1 000; a level begun after the limit had run its blocks 0.8 s past
    it on a loaded machine). ``minima``: the rows' minima (.checks.row_minima), when known."""
    if convex:
        why = unreachable_rows(prog, minima=minima)
        if why:
            return "infeasible", why, None
    if deadline.passed():
        return "stopped", "time limit", None
    deadline = deadline.share(share)
    if convex:
        fast = _by_domains(prog, deadline)
        if fast is not None:
            return fast
    parts = _parts(prog)
    gap_b = rel_gap * (0.5 if len(parts) > 1 else 1.0)

    def run(sub, dl, resume=None):
        return solve_block(sub, convex, dl, gap_b, 1, 400_000, False, max_states, resume=resume)

    results = _solve_parts(parts, run, deadline, gap_b)
    if isinstance(results, str):
        return "infeasible", results, None
    return "done", "", _join(prog, parts, results)


def solve_minmax(model: MinMaxDesign, rel_gap: float | None = None, time_limit: float | None = None,
                 verbose: bool = False) -> Solution:
    """Certified integer min-max design (see the module docstring). ``rel_gap`` (default 1e-4, see
    :data:`dpopt.options.FAMILY_REL_GAP`) is the relative gap on the worst ratio at which ``optimal`` is
    claimed."""
    from ...options import default_rel_gap
    rel_gap = default_rel_gap("exact", "MinMaxDesign") if rel_gap is None else rel_gap
    rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
    deadline = Deadline(time_limit)
    mp = minmax_program(model)
    convex, why = convexity(model, deadline)
    m = mp.m
    steps: list[str] = []
    state = {"lb": -math.inf, "ub": math.inf, "n": None}
    # the weighted programs' bound must be within a fraction of the target gap; a level program only has to
    # find a design or prove there is none (its objective is a tie-break), so its own gap is loose
    inner_gap = rel_gap * 0.25

    def offer(n):
        if n is None or not model.is_feasible(n):
            return
        w = float(np.max(mp.ratios(n)))
        if w < state["ub"]:
            state["ub"], state["n"] = w, np.asarray(n, dtype=np.int64)

    def raise_lb(v):
        if convex and v > state["lb"]:
            state["lb"] = float(v)

    def weighted(mu, share):
        kind, reason, j = _run(mp.weighted(mu), convex, deadline, inner_gap, share)
        if kind == "infeasible":
            return reason
        if kind == "stopped":
            steps.append("weighted ratios: stopped by the time limit before its blocks")
            return None
        if j.found:
            offer(j.n)
        raise_lb(j.lb)
        steps.append(f"weighted ratios: bound {j.lb:.10g}" + (f", design worst {state['ub']:.10g}"
                                                               if state["n"] is not None else ""))
        return None

    mu, xbar = (_dual_weights(mp, deadline.share(4), steps, tol=rel_gap / 10) if m > 1
                else (np.ones(1), None))
    if xbar is not None:
        offer(_rounded(mp, xbar))
    reason = weighted(mu, 4)
    if reason is not None:
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: no design meets the other rows ({reason})")
    stopped = ""
    last_close = False
    unsettled, floor = 0, -math.inf     # levels that settled nothing, and the highest of them
    # every level has the same rows but for their right-hand sides (t): their minima are computed once
    level_minima = None
    for it in range(MAX_STEPS):
        lb, ub = state["lb"], state["ub"]
        if state["n"] is not None and ub - lb <= rel_gap * abs(ub):
            break
        if deadline.passed():
            stopped = "time limit"
            break
        if state["n"] is None:
            stopped = "no design found for the weighted ratios"
            break
        gap = (ub - lb) / abs(ub) if math.isfinite(lb) else math.inf
        # a design whose rows exceed the level by the feasibility test's tolerance is accepted at that level:
        # a level closer than that to ub proves nothing new
        step = max(rel_gap * abs(ub) / 2, _tolerance(mp, state["n"], ub))
        if ub - step <= lb:
            stopped = "the gap left is within the feasibility test's tolerance"
            break
        # within _CLOSE, every other level is put just below ub (a proof there ends the search; the integer
        # optimum is often the first incumbent), the others at the midpoint
        close = gap <= _CLOSE and not last_close
        low = max(lb, floor)
        t = ub - step if close else (0.5 * (low + ub) if math.isfinite(low) else ub - max(step, 1e-3 * abs(ub)))
        last_close = close
        level = mp.level(t, mu)
        if convex and level_minima is None:
            level_minima = row_minima(level)
        kind, reason, j = _run(level, convex, deadline.without_grace(), LEVEL_GAP, 3, minima=level_minima)
        if kind == "stopped":
            stopped = "time limit"
            break
        if kind == "infeasible":
            if convex:
                state["lb"] = max(state["lb"], t)
            steps.append(f"level {t:.10g}: proven infeasible ({reason})")
            if not convex:
                stopped = "infeasibility claimed without convex terms"
                break
            continue
        if not j.found:
            # neither a design nor a proof (a core HiGHS could not settle): the level proves nothing; look
            # higher, between it and ub, a few times before giving up
            steps.append(f"level {t:.10g}: neither a design nor a proof")
            unsettled += 1
            if unsettled >= _UNSETTLED:
                stopped = f"{unsettled} levels ended in neither a design nor a proof"
                break
            floor = t
            continue
        before = state["ub"]
        offer(j.n)
        steps.append(f"level {t:.10g}: design worst {state['ub']:.10g}")
        lam = np.maximum(np.asarray(j.lam, dtype=float)[-m:], 0.0)
        new = mu + lam * mp.scales
        if np.all(np.isfinite(new)) and new.sum() > 0:
            mu = new / new.sum()
            if weighted(mu, 4) is not None:
                break
        if state["ub"] >= before and kind == "done" and t >= before:
            break       # no progress possible (a safeguard: the level was not below the incumbent)
    return _answer(model, state, steps, convex, why, rel_gap, deadline, stopped)


def _dual_weights(mp, deadline, steps, max_iter: int = KELLEY_STEPS, tol: float = 1e-9) -> np.ndarray:
    """The min-max's dual weights μ* of the continuous relaxation, by Kelley's cutting planes on the concave
    φ(μ) = min_x Σ_r μ_r ρ_r(x): every relaxed point x_k gives φ(μ) ≤ μ·ρ(x_k), so the LP
    max {θ : θ ≤ μ·ρ(x_k) ∀k, μ ∈ simplex} bounds max φ from above and its μ is the next query; the best μ found
    (largest φ) is returned. The weights only steer the search: every bound rests on the integer weighted
    program solved with them afterwards."""
    from scipy.optimize import linprog

    m = mp.m
    mu = np.full(m, 1.0 / m)
    cuts, points, best, best_mu, xbar = [], [], -math.inf, mu, None
    for it in range(max_iter):
        if deadline.passed():
            break
        res = solve_dual(mp.weighted(mu), deadline, time_share=1.0)
        if res.infeasible or not res.converged or not np.all(np.isfinite(res.x)):
            break
        rho = mp.ratios(res.x)
        phi = float(mu @ rho)       # φ(μ) at the relaxed minimiser (a steering value, not a bound)
        if phi > best:
            best, best_mu = phi, mu
        cuts.append(rho)
        points.append(res.x)
        # max θ s.t. θ − μ·ρ_k ≤ 0, Σμ = 1, μ ≥ 0   (variables μ_1..μ_m, θ; linprog minimises −θ)
        A = np.hstack([-np.array(cuts), np.ones((len(cuts), 1))])
        lp = linprog(np.r_[np.zeros(m), -1.0], A_ub=A, b_ub=np.zeros(len(cuts)),
                     A_eq=np.r_[np.ones(m), 0.0][None, :], b_eq=[1.0],
                     bounds=[(0, None)] * m + [(None, None)], method="highs")
        if lp.status != 0:
            break
        upper = -float(lp.fun)
        # the LP's duals weigh the points: their mixture x̄ has every ratio ≤ upper (convex rows), so it is a
        # near min-max point of the relaxation, to be rounded for an incumbent
        w = np.maximum(-np.asarray(lp.ineqlin.marginals, dtype=float), 0.0)
        if w.sum() > 0:
            xbar = (w / w.sum()) @ np.array(points)
        if upper - best <= tol * max(abs(upper), 1e-300):
            break
        mu = np.maximum(lp.x[:m], 0.0)
        mu = mu / mu.sum()
    steps.append(f"dual weights: {len(cuts)} cutting planes, continuous bound {best:.10g}")
    return best_mu, xbar


def _rounded(mp, x):
    """An integer design near the real point x: largest-remainder rounding to the fixed total when there is one
    (within the bounds), else the nearest integers (either may fail the other rows: the caller checks)."""
    total = next((r for r in mp.constraints if r.kind == "total"), None)
    if total is None:
        return np.clip(np.round(x), mp.lower, mp.upper).astype(np.int64)
    return largest_remainder(np.maximum(x, 1e-300), int(round(total.rhs)), mp.lower, mp.upper)


def _tolerance(mp, n, ub) -> float:
    """The most a design's worst ratio may exceed a level t ≈ ub and still pass the feasibility test (twice
    FEASIBILITY_TOL of each level row's magnitude, in ratio units)."""
    R = mp.ratios(n) * mp.scales + mp.offsets
    mag = np.maximum(np.abs(ub * mp.scales + mp.offsets), np.abs(R))
    return float(np.max(4 * FEASIBILITY_TOL * mag / mp.scales))


def _answer(model, state, steps, convex, why, rel_gap, deadline, stopped) -> Solution:
    n, ub, lb = state["n"], state["ub"], state["lb"]
    if n is None:
        status = Status.TIME_LIMIT if deadline.passed() else Status.ERROR
        sol = Solution(status=status, message=f"no design found ({stopped or 'search ended'})")
        sol.details["steps"] = _log.steps(steps, "exact")
        return sol
    gap = max((ub - lb) / abs(ub), 0.0) if ub else (0.0 if lb >= ub else math.inf)
    proven = bool(convex) and gap <= rel_gap
    cert = Certificate("gap", proven, lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message="level search: levels proven infeasible and Lagrangian bounds of weighted ratios "
                               "(constrained exact route)" + ("" if convex else f"; no bound: {why}"))
    if proven:
        status, msg = Status.OPTIMAL, f"proven optimal worst ratio: relative gap {gap:.2e}"
    elif deadline.passed():
        status, msg = Status.TIME_LIMIT, f"stopped at the time limit with relative gap {gap:.2e}"
    else:
        status, msg = Status.FEASIBLE, f"not proven optimal: relative gap {gap:.2e}" + (
            f" ({stopped})" if stopped else "") + ("" if convex else f" (no bound: {why})")
    sol = model.make_solution(n=n, status=status, certificate=cert, message=msg)
    sol.details["steps"] = _log.steps(steps, "exact")
    sol.details.update(lower_bound=lb, integrality_gap=gap, level_steps=len(steps))
    return sol


register("exact", MinMaxDesign, "solve", _DESCRIPTION)(solve_minmax)
