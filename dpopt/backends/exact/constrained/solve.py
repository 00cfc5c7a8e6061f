"""The entry points: :func:`solve_constrained` (options, the infeasibility and domain shortcuts, the program cut
into independent blocks solved by :mod:`.block`, their answers joined and certified) and
:func:`relax_constrained` (the continuous relaxation alone)."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .... import _log
from .... import _validate as V
from ....formulations.separable import EVAL_RTOL, program_of
from ....progress import stage
from ....result import Certificate, Solution, Status
from ..domains import domain_structure, solve_domains
from .block import BlockResult, solve_block
from .checks import DEFAULT_REL_GAP, check_options, convexity, feasible, unreachable_rows
from .cores import DEFAULT_MAX_STATES
from .deadline import Deadline
from .diagnose import explain
from .dual import DualResult, solve_dual
from .inner import inner_continuous, inner_integer, phi


@dataclass(frozen=True)
class Joined:
    """The blocks' answers joined over the whole program (strata in no row at their own minimum)."""
    n: np.ndarray
    x: np.ndarray
    lam: np.ndarray
    ub: float
    lb: float
    lagrangian: float
    q: float
    steps: tuple[str, ...]
    found: bool
    timed_out: bool
    enumerated: bool


def solve_constrained(model, rel_gap: float = DEFAULT_REL_GAP, time_limit: float | None = None,
                      verbose: bool = False, window: int = 1, max_milp_columns: int = 400_000,
                      max_states: int = DEFAULT_MAX_STATES) -> Solution:
    """Certified integer optimum of a constrained stratified or min-cost design (see the package docstring).

    ``window``: half-width of the secant LP that gives the multipliers; ``max_milp_columns``: largest core
    (secant segments) handed to HiGHS; ``max_states``: partial designs a core enumeration may keep before
    the core goes to HiGHS instead (0: never enumerate).
    """
    rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
    # (a window wider than every range is the whole range; the cap keeps its arithmetic inside 64-bit integers)
    window = V.option(V.integer, "window", window, minimum=0, maximum=2**31 - 1)
    max_milp_columns = V.option(V.integer, "max_milp_columns", max_milp_columns, minimum=1)
    max_states = V.option(V.integer, "max_states", max_states, minimum=0)
    deadline = Deadline(time_limit)
    kept = _without_inequality_rows(model, rel_gap, deadline, verbose, window, max_milp_columns, max_states)
    if kept is not None:
        return kept
    prog = program_of(model)
    convex, why = convexity(model, deadline)
    # the integer row minimum is exact only for discretely convex terms: no claim without them
    unreachable = unreachable_rows(prog) if convex else None
    if unreachable:
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {unreachable}")
    if convex:
        groups = domain_structure(prog)
        if groups is not None:
            sol = _solve_by_domains(model, prog, groups, rel_gap, deadline)
            if sol is not None and sol.status == Status.INFEASIBLE:
                return _infeasible(model, sol.message.removeprefix("infeasible: "), deadline)
            if sol is not None:
                return sol
    parts = _parts(prog)
    gap_b = rel_gap * (0.5 if len(parts) > 1 else 1.0)

    def run(sub, dl, resume=None):
        return solve_block(sub, convex, dl, gap_b, window, max_milp_columns, verbose, max_states, resume=resume)

    results = _solve_parts(parts, run, deadline, gap_b)
    if isinstance(results, str):
        return _infeasible(model, results, deadline)
    joined = _join(prog, parts, results)
    if not joined.found:
        return _unfound(joined, deadline)
    return _certified(model, prog, joined, convex, why, rel_gap, deadline)


def _parts(prog):
    """(positions, row indices, subprogram) per block of rows on disjoint sets of strata (e.g. min-cost with one
    target per domain); the program itself when it is one block."""
    k = prog.k
    blocks = prog.components()
    if len(blocks) == 1 and blocks[0][0].size == k and len(blocks[0][1]) == prog.m:
        return [(np.arange(k), list(range(prog.m)), prog)]
    return [(pos, rows, prog.subprogram(pos, [prog.rows[l] for l in rows])) for pos, rows in blocks]


def _solve_parts(parts, run, deadline, gap_b) -> list[BlockResult] | str:
    """Every block's answer (or the reason one is infeasible): each gets an equal share of the time left, so a
    hard block cannot starve the later ones; blocks stopped by their share resume with the time the others
    left."""
    results = []
    for b, (_pos, _rows, sub) in enumerate(parts):
        r = run(sub, deadline.share(len(parts) - b))
        if r.infeasible:
            return r.reason
        results.append(r)
    again = [b for b, r in enumerate(results) if r.timed_out and r.lb > -math.inf
             and not (r.n is not None and r.ub - r.lb <= gap_b * abs(r.ub))]
    for c, b in enumerate(again):
        if deadline.passed():
            break
        r = run(parts[b][2], deadline.share(len(again) - c), resume=results[b])
        if r.infeasible:
            return r.reason
        results[b] = dataclasses.replace(r, steps=results[b].steps + ("resumed",) + r.steps)
    return results


def _join(prog, parts, results: list[BlockResult]) -> Joined:
    """The blocks' designs, bounds and multipliers on the whole program; strata in no row each at its own minimum
    (discretely convex, or linear for a cost objective)."""
    k = prog.k
    n, x, lam = np.zeros(k, dtype=np.int64), np.zeros(k), np.zeros(prog.m)
    # block values carry the program's constant only when the block is the program itself
    ub = lb = lagr = q = 0.0 if parts[0][2] is prog else -prog.const
    steps: list[str] = []
    found, timed_out = True, False
    covered = np.zeros(k, dtype=bool)
    for (pos, rows, _sub), r in zip(parts, results):
        covered[pos] = True
        x[pos], lam[rows] = r.x, r.lam
        q += r.q
        lb += r.lb
        lagr += r.lagrangian
        steps += r.steps
        timed_out |= bool(r.timed_out)
        if r.n is None:
            found = False
        else:
            n[pos] = r.n
            ub += r.ub
    rest = np.flatnonzero(~covered)
    if rest.size:
        sub = prog.subprogram(rest, [])
        Om, ell = sub.combine(np.zeros(0))
        n[rest] = inner_integer(sub, Om, ell)
        x[rest] = inner_continuous(sub, Om, ell)
        f_rest = float(np.sum(phi(sub, Om, ell, n[rest].astype(float))))
        ub += f_rest
        lb += f_rest
        lagr += f_rest
        q += float(np.sum(phi(sub, Om, ell, x[rest])))
    if len(parts) > 1:
        steps.insert(0, f"{len(parts)} independent blocks")
    enumerated = not rest.size and all(r.enumerated for r in results)
    return Joined(n, x, lam, ub, lb, lagr, q, tuple(steps), found, timed_out, enumerated)


def _unfound(j: Joined, deadline) -> Solution:
    """No integer point in some block: a time limit, or an error that says what HiGHS proved."""
    status = Status.TIME_LIMIT if j.timed_out or deadline.passed() else Status.ERROR
    # a sentence for people; the trail goes to the dpopt log and details["steps"] (dpopt/_log.py)
    msg = ("no integer point found before the time limit" if status == Status.TIME_LIMIT
           else "no integer point found")
    if any("infeasible" in s.lower() for s in j.steps) and status != Status.TIME_LIMIT:
        # HiGHS proved a core infeasible, not the whole box: say so without claiming
        msg = "no feasible integer point found near the relaxation (a core was infeasible, not the whole box)"
    sol = Solution(status=status, message=msg + "; the search's steps are in details['steps']")
    sol.details.update(lower_bound=j.lb, relaxation=j.x, steps=_log.steps(list(j.steps), "exact"))
    return sol


def _certified(model, prog, j: Joined, convex, why, rel_gap, deadline) -> Solution:
    """The joined design with its gap certificate: optimal when the gap is within ``rel_gap`` and rests on a
    bound (convex terms, or every design enumerated)."""
    ub = prog.evaluate(j.n.astype(float))[0]
    lb, lagr = j.lb, j.lagrangian
    if not convex and not j.enumerated:
        lb = lagr = -math.inf     # neither the Lagrangian inner solve nor secants are bounds without convexity
    gap = (ub - lb) / abs(ub) if ub else (0.0 if lb >= ub else math.inf)
    # a bound above the point is a numerical failure, never a proof (the bounds are made safe, so this guards
    # against a defect, not rounding): no claim rests on it
    above = lb > ub + 4 * EVAL_RTOL * abs(ub)
    gap = max(gap, 0.0)
    proven = (convex or j.enumerated) and gap <= rel_gap and not above
    steps = list(j.steps)
    if above:
        steps.append(f"the lower bound {lb!r} exceeds the point's objective {ub!r}: not a proof")
    cert = Certificate("gap", bool(proven), lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message=("every design of the box enumerated" if j.enumerated else
                                "Lagrangian bound, reduced-cost fixing, cores enumerated or solved as secant MILPs "
                                "(HiGHS)") + ("" if convex or j.enumerated else f"; no bound: {why}"))
    if proven:
        status = Status.OPTIMAL
    elif j.timed_out or deadline.passed():
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE
    bound_kind = "every design enumerated" if j.enumerated else "Lagrangian and secant bounds"
    message = (f"proven optimal: relative gap {gap:.2e} ({bound_kind})" if status == Status.OPTIMAL else
               f"stopped at the time limit with relative gap {gap:.2e} ({bound_kind})" if status == Status.TIME_LIMIT
               else f"not proven optimal: relative gap {gap:.2e}" + (f" exceeds rel_gap={rel_gap:g}" if convex or
                                                                    j.enumerated else f" (no bound: {why})"))
    if above:
        message = "not proven optimal: the computed lower bound exceeds the point's objective (not a proof)"
    sol = model.make_solution(n=j.n, status=status, certificate=cert, message=message)
    sol.details["steps"] = _log.steps(steps, "exact")
    sol.details.update(lower_bound=lb, lagrangian_bound=lagr, integrality_gap=gap, multipliers=j.lam,
                       relaxation=j.x, relaxation_bound=j.q, row_names=[r.name for r in prog.rows])
    return sol


def _solve_by_domains(model, prog, groups, rel_gap, deadline):
    """Domain targets on the objective's scale (:mod:`..domains`): exact by nested marginal allocation, or
    None (the general route then runs) when the point fails the rows' check or time runs out."""
    res = solve_domains(prog, groups, deadline)
    if res is None:
        return None
    if isinstance(res[0], str):
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {res[1]}")
    n, slack, note, binding = res
    if not feasible(prog, n):
        return None
    obj = prog.evaluate(n.astype(float))[0]
    gap = max(0.0, -slack) / abs(obj) if obj else (0.0 if slack >= 0 else math.inf)
    if gap > rel_gap:
        return None
    cert = Certificate("exchange", True, lower_bound=obj - max(0.0, -slack), gap=gap, tolerance=rel_gap,
                       slack=slack, message=f"{note}: no unit moved between two domains or free strata lowers "
                                            "the objective (discretely convex terms)")
    sol = model.make_solution(n=n, status=Status.OPTIMAL, certificate=cert, message=note, rel_gap=rel_gap)
    bind = np.zeros(prog.m, dtype=bool)
    for (_S, _cap, rows), b in zip(groups, binding):
        bind[rows] = b
    sol.details.update(lower_bound=cert.lower_bound, integrality_gap=gap, method="domains",
                       row_names=[r.name for r in prog.rows], binding_rows=bind)
    return sol


def relax_constrained(model, rel_gap: float = DEFAULT_REL_GAP, time_limit: float | None = None,
                      verbose: bool = False) -> Solution:
    """The continuous relaxation with every constraint (stratallo's opt/optcost and Bethel–Chromy's targets,
    with DP noise)."""
    rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
    deadline = Deadline(time_limit)
    prog = program_of(model)
    why = unreachable_rows(prog, integer=False)
    if why:
        return Solution(status=Status.INFEASIBLE, message=f"infeasible: {why}")
    return _finish_relaxation(model, prog, solve_dual(prog, deadline, time_share=1.0), rel_gap, deadline)


def _without_inequality_rows(model, rel_gap, deadline, verbose, window, max_milp_columns, max_states):
    """The optimum of the model without its linear inequality rows (e.g. a cost budget), when it meets them:
    removing rows can only lower the optimum, so a point of the smaller model that meets every row and is
    proven optimal there is optimal here, with the same certificate. A row that does not bind then costs one
    solve of the smaller model (a quarter of the time left) instead of a harder search with it; otherwise
    None, and the full model is solved. Each step gets its share of the time left and none starts after
    ``deadline`` (at k = 20 000 with 15 rows they took 2.3 s whatever the limit)."""
    rows = [c for c in model.constraints if c.sense != "=="]
    if not rows or deadline.passed():
        return None
    time_limit = max(deadline.left(), 1e-3)
    smaller = copy.copy(model)
    smaller.constraints = [c for c in model.constraints if c.sense == "=="]
    if hasattr(model, "design"):       # a min-cost design also carries its rows on its StratifiedDesign
        smaller.design = copy.copy(model.design)
        smaller.design.constraints = [c for c in model.design.constraints if c.sense == "=="]
    sol = _by_domains_alone(smaller, rel_gap, time_limit / 4.0)
    if sol is None:
        if deadline.passed() or _clearly_binding(smaller, rows, max(deadline.left(), 1e-3)):
            return None
        time_limit = deadline.left()
        if not time_limit:
            return None         # the check used the time left: the full model gets the grace
        with stage("the model without its inequality rows"):      # its progress lines are not the model's
            sol = solve_constrained(smaller, rel_gap, time_limit / 4.0, verbose, window, max_milp_columns,
                                    max_states)
    if sol.status != Status.OPTIMAL or sol.n is None or not model.is_feasible(sol.n):
        return None
    names = ", ".join(sorted({c.name for c in rows}))
    out = model.make_solution(n=sol.n, status=Status.OPTIMAL, certificate=sol.certificate,
                              message=f"{sol.message}; solved without {names}, which the optimum meets, so it is "
                                      "also the optimum with them")
    for key in ("lower_bound", "lagrangian_bound", "integrality_gap", "steps"):
        if key in sol.details:
            out.details[key] = sol.details[key]
    return out


def _by_domains_alone(smaller, rel_gap, time_limit):
    """The smaller model's optimum by nested marginal allocation when its rows are domain targets on the
    objective's scale (:func:`_solve_by_domains`), else None. That solve costs about what the relaxation in
    :func:`_clearly_binding` costs (measured: 5 ms each on the census frame's 51 strata), so it is tried
    before that check rather than after it: a row that does not bind then costs one such solve, not two."""
    prog = program_of(smaller)
    deadline = Deadline(time_limit)      # one clock for the convexity check and the solve
    if prog.m == 0 or convexity(smaller, deadline)[0] is not True:
        return None
    groups = domain_structure(prog)
    if groups is None:
        return None
    sol = _solve_by_domains(smaller, prog, groups, rel_gap, deadline)
    return sol if sol is not None and sol.status == Status.OPTIMAL else None


CLEARLY_BINDING = 1e-3     # relative violation of a dropped row by the smaller model's relaxation that skips it


def _clearly_binding(smaller, rows, time_limit) -> bool:
    """Whether the continuous optimum of the model without its inequality rows misses one of them by more than
    CLEARLY_BINDING of the row's magnitude Σ|a_i x_i| (a cost budget at 95 % of the free optimum's cost misses by
    5 %): its integer optimum lies within a unit or so of that point per stratum, so it misses the row too and
    solving it first is wasted (measured: 2.2 s of case (a)'s 12 s at k = 20 000). A speed choice only: when
    skipped, the full model is solved, which is always correct."""
    rel = relax_constrained(smaller, time_limit=time_limit / 16.0)
    if rel.x is None or rel.status not in (Status.OPTIMAL, Status.FEASIBLE):
        return False
    x = np.asarray(rel.x, dtype=float)
    for c in rows:
        miss = c.residual(x)
        mag = np.abs(c.A) @ np.abs(x)
        if np.any(miss > CLEARLY_BINDING * np.maximum(mag, np.abs(c.b))):
            return True
    return False


def _infeasible(model, reason: str, deadline=None) -> Solution:
    """Status infeasible, said in the user's terms when the conflict is between the precision targets and the
    total or the cost budget (:mod:`.diagnose`); the solver's own reason is kept in details["reason"]."""
    why = explain(model, relax_constrained, deadline)
    sol = Solution(status=Status.INFEASIBLE, message=f"infeasible: {why or reason}")
    sol.details["reason"] = reason
    return sol


def _finish_relaxation(model, prog, res: DualResult, rel_gap, deadline):
    if res.infeasible:
        return _infeasible(model, "the continuous relaxation has no point: the Lagrangian dual exceeds the "
                                  "objective's maximum over the bounds", deadline)
    x = res.x
    viol = prog.violation(x)
    obj, _ = prog.evaluate(x)
    lb = res.q
    gap = (obj - lb) / abs(obj) if obj else 0.0
    cert = Certificate("gap", bool(res.converged and np.all(viol <= 1e-8) and gap <= max(rel_gap, 1e-9)),
                       lower_bound=lb, gap=gap, tolerance=rel_gap,
                       message=f"Lagrangian dual bound; max relative row violation {max(np.max(viol), 0.0):.2e}")
    if cert.optimal:
        status = Status.OPTIMAL
    elif deadline.passed():
        status = Status.TIME_LIMIT
    else:
        status = Status.FEASIBLE if np.all(viol <= 1e-8) else Status.ERROR
    sol = model.make_solution(x=x, status=status, certificate=cert,
                              message=f"dual Newton, {res.iterations} iterations"
                              + ("" if res.converged else " (not converged)"))
    sol.details.update(lower_bound=lb, multipliers=res.lam, row_violation=viol,
                       row_names=[r.name for r in prog.rows])
    return sol
