"""One block of the program (rows on their own set of strata) solved to a certified integer optimum: the dual
(:mod:`.dual`), the integer Lagrangian bound at the best multipliers (:mod:`.bound`, the secant LP's duals from
:mod:`.highs_milp`), then the cores (:mod:`.search`); without convexity, a small box is enumerated
(:mod:`.box`) or HiGHS looks for a good point on a widening window."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from ....formulations.repair import improve_by_unit_moves
from ....formulations.separable import secant_milp
from .bound import IntegerBound, integer_bound, lattice_bound
from .box import BOX_POINTS, box, enumerate_box
from .cores import DEFAULT_MAX_STATES
from .dual import DualResult, solve_dual
from .fixing import window as window_of
from .highs_milp import highs_solve, lp_multipliers
from .incumbent import Incumbent, lagrangian_design
from .search import INFEASIBLE, CoreSearch
from .subset import improve as improve_one_row


@dataclass(frozen=True)
class BlockResult:
    """A block's answer: the best design ``n`` (None when none was found) and its objective ``ub``; ``lb`` a
    proven lower bound (−inf without convexity), ``lagrangian`` the integer Lagrangian's; the relaxation ``x``,
    its dual value ``q`` and the multipliers ``lam``; ``infeasible`` proven (``reason``); the ``steps`` taken;
    ``budget``, ``core_bound``, ``enum_stopped_after`` (seconds its last core's enumeration ran before the limit
    stopped it; 0 when none did), ``done`` (the largest budget whose core was listed completely) and ``bound`` (the
    integer bound at ``lam`` and the scale) for resuming a block that ran out of time; ``enumerated``: the whole
    box was scanned (a proof without convexity)."""
    x: np.ndarray
    q: float
    lam: np.ndarray
    steps: tuple[str, ...] = ()
    n: np.ndarray | None = None
    ub: float = math.inf
    lb: float = -math.inf
    lagrangian: float = -math.inf
    converged: bool = False
    infeasible: bool = False
    reason: str = ""
    timed_out: bool = False
    budget: float = 0.0
    core_bound: float = -math.inf
    enumerated: bool = False
    enum_stopped_after: float = 0.0
    done: float = 0.0
    bound: tuple | None = None        # (IntegerBound at lam, the problem's scale), for resuming


def solve_block(prog, convex, deadline, rel_gap, window, max_cols, verbose, max_states=DEFAULT_MAX_STATES,
                resume: BlockResult | None = None) -> BlockResult:
    """Certified integer optimum of one block of the program (see the package docstring). ``resume``: an
    earlier result for this block that ran out of time (its incumbent, bound and last budget are taken up)."""
    steps: list[str] = []
    if not convex and resume is None:
        # no bound exists without convexity, but a small box is its own proof
        base = BlockResult(x=prog.lower.astype(float), q=-math.inf, lam=np.zeros(prog.m))
        done = _by_box(prog, base, deadline, steps, "terms not proven convex")
        if done is not None:
            return done
    if resume is not None and resume.bound is not None:
        # the first run's dual and multipliers serve again: a resumed block has only the time the others left,
        # and they were a third of case (d)'s setup at k = 20 000 (0.5 s over five resumed blocks)
        base = BlockResult(x=resume.x, q=resume.q, lam=resume.lam, converged=resume.converged, bound=resume.bound)
        (ib, scale), lam, x = resume.bound, resume.lam, resume.x
    else:
        res = solve_dual(prog, deadline)
        base = BlockResult(x=res.x, q=res.q, lam=res.lam, converged=res.converged)
        if res.infeasible:
            return dataclasses.replace(base, infeasible=True, steps=tuple(steps), reason=(
                "the continuous relaxation has no point (the Lagrangian dual exceeds the objective's maximum "
                "over the bounds)"))
        if not res.converged and resume is None:
            # the dual stalled or used its share of the time: a small box is enumerated instead
            done = _by_box(prog, base, deadline, steps, "the continuous dual stalled" if res.stalled
                           else "the continuous dual did not converge")
            if done is not None:
                return done
            steps.append(f"continuous dual not converged after {res.iterations} iterations"
                         + (" (no progress)" if res.stalled else ""))
        ib, lam, scale = _best_bound(prog, convex, res, deadline, window)
        # kept for a resume unless the time cut the dual or the multipliers' LP short (a resume redoes them)
        base = dataclasses.replace(base, lam=lam,
                                   bound=(ib, scale) if res.converged and not deadline.passed() else None)
        x = res.x
    inc = Incumbent(prog, deadline)
    inc.offer(ib.n)
    if not convex:
        _window_search(prog, x, ib.n, window, scale, inc, steps, deadline, rel_gap, max_cols, verbose)
        return dataclasses.replace(base, n=inc.n, ub=inc.ub, timed_out=deadline.passed(), steps=tuple(steps))
    if resume is None:
        # one row: a point within the gap of the bound ends the search before any core is listed (.subset)
        t0 = time.perf_counter()
        had = inc.ub
        # the bound the certificate will rest on (.search: the Lagrangian bound less its rounding allowance,
        # rounded up to the objective's cost lattice when it has one)
        safe = ib.lb - max(4 * ib.margin, 1e-10 * scale)
        improve_one_row(prog, ib, inc, max(ib.lb, lattice_bound(prog, safe)), rel_gap, deadline)
        if inc.ub < had:
            steps.append(f"one-row repair and subset search: gap {(inc.ub - ib.lb) / abs(inc.ub):.1e} in "
                         f"{time.perf_counter() - t0:.2f} s")
    # without a design yet, the cores get 80 % of the time left: a search stopped by the limit still returns
    # a point, from the secant MILP on a window around the relaxation in the last 20 % (a solve that finishes
    # in time never runs it)
    reserve = not inc.found and prog.m > 0 and deadline.end is not None
    search = CoreSearch(prog, ib, lam, x, scale, inc, steps, deadline.fraction(0.8) if reserve else deadline,
                        rel_gap, max_cols, max_states, verbose, resume, full=deadline if reserve else None)
    outcome = search.run()
    if reserve and outcome != INFEASIBLE and not inc.found:
        # at least FIRST_DESIGN_TIME for it, within the solve's grace after the limit (.deadline): a solve that
        # stops without a design has no answer at all, while the first design takes a fraction of a second
        _first_design(prog, x, ib.n, max(window, 1), scale, inc, steps, deadline.at_least(FIRST_DESIGN_TIME),
                      rel_gap, max_cols, verbose)
    if outcome == INFEASIBLE:
        return dataclasses.replace(base, lagrangian=ib.lb, infeasible=True, reason=search.reason,
                                   steps=tuple(steps))
    if not inc.found:
        # neither a design nor a proof (HiGHS's points refused by the feasibility test, its infeasibility claim
        # not made): a small box settles it by enumeration (a level of a min-max design 5e-7 below its optimum,
        # 5 strata, was left unsettled this way)
        done = _by_box(prog, dataclasses.replace(base, lagrangian=ib.lb), deadline, steps,
                       "the search found no design")
        if done is not None:
            return done
    return dataclasses.replace(base, n=inc.n, ub=inc.ub, lb=search.lower_bound(), lagrangian=ib.lb,
                               timed_out=deadline.passed() or search.deadline.passed(), budget=search.b,
                               core_bound=search.bound, enum_stopped_after=search.enum_stopped_after, done=search.done,
                               steps=tuple(steps))


def _best_bound(prog, convex, res: DualResult, deadline, width) -> tuple[IntegerBound, np.ndarray, float]:
    """The integer Lagrangian bound at the dual's multipliers or, when better, at the secant LP's on a window
    around the relaxation (its duals are the best multipliers for that window: its value is the convex hull bound
    there); with the multipliers used and the problem's scale."""
    lam = res.lam
    ib = integer_bound(prog, lam)
    scale = max(abs(ib.lb), abs(prog.evaluate(ib.n.astype(float))[0]), 1e-300)
    if convex and prog.m:
        ib, lam = _hull_multipliers(prog, res.x, ib, lam, scale, deadline, width)
    return ib, lam, scale


LP_STRATA = 2000      # above this many strata the multipliers' LP spans only ⌊x⌋, ⌈x⌉ and n_λ (_hull_multipliers)
LP_ROUNDS = 4         # the multipliers' LP solved at most this many times, widened to each one's minimiser


def _hull_multipliers(prog, x, ib: IntegerBound, lam, scale, deadline, width):
    """The multipliers of the secant LP on a window W around the relaxation x and n_λ (``width`` either side,
    0 above LP_STRATA strata), solved again on W widened to the integer Lagrangian's minimiser at its duals while
    that lies outside W (at most LP_ROUNDS times). The LP on W is the convex hull of the integer problem on W, so
    its duals λ_W maximise the Lagrangian restricted to W; once the minimiser at λ_W lies in W, the Lagrangian
    there equals the LP's value, an upper bound on every multiplier's bound: λ_W then maximises the integer
    Lagrangian dual itself. Any multipliers give a valid bound, and the LP's are kept only when their bound is
    better, so a window (or a round cut off by the deadline) can weaken the bound, never make it wrong.

    Why: the ±1 window on 20 000 strata took 2.5-5.4 s, and restricting it to the 2 000 strata whose ±1 moves
    cost least (as until now) left the bound 1.7e-5 (relative) below the dual's maximum on case (e) of
    benchmarks/bench_constrained.py at k = 20 000, far above the optimum's distance from it, so no core budget
    could close the gap in time. ⌊x⌋, ⌈x⌉ and n_λ on every stratum took 0.22 s there, and one more round on the
    27 strata whose minimiser left it reached the maximum."""
    narrow = prog.k > LP_STRATA
    lo, hi = window_of(prog, x, ib.n, 0 if narrow else width)
    for _ in range(LP_ROUNDS):
        # the narrow window's LP without presolve: on a one-row design at k = 20 000 (case (b), DLap) HiGHS's
        # presolve took 2.4 s of a 2.5 s LP that solves in 0.08 s without it (ten rows, case (e): 0.12 s for
        # 0.16 s). The ±1 window keeps it: without, the LP's duals (the same value, another vertex) made case (f)
        # at k = 100 take 6.5 s instead of 1.8 s and case (d) at k = 1 000 1.9 s instead of 1.3 s
        lam_lp = lp_multipliers(prog, lo, hi, x, scale, deadline, presolve=not narrow)
        if lam_lp is None:
            break
        ib_lp = integer_bound(prog, lam_lp)
        if ib_lp.lb > ib.lb:
            ib, lam = ib_lp, lam_lp
        if np.all((ib_lp.n >= lo) & (ib_lp.n <= hi)):
            break       # λ_W maximises the integer Lagrangian dual
        lo, hi = np.minimum(lo, ib_lp.n), np.maximum(hi, ib_lp.n)
    return ib, lam


FIRST_DESIGN_TIME = 0.4   # seconds a first design may take at least (measured: 0.17 s at k = 200, loaded machine)
WINDOW_FIRST = 20_000     # secant segments up to which HiGHS on the window is tried before the tightened rows


def _first_design(prog, x, n_lam, width, scale, inc, steps, deadline, rel_gap, max_cols, verbose) -> None:
    """A first design when the cores found none: HiGHS's MILP on the window around the relaxation (fast on small
    windows) and the Lagrangian of tightened rows (.incumbent.lagrangian_design: a few dual solves, whatever k;
    on case (e) at k = 20 000 the window's MILP spent its time in HiGHS's presolve), the one likelier to be quick
    first and with most of the time left, the other with the rest."""
    if deadline.passed():
        return      # no grace left (a caller holding a design already: .deadline.Deadline.without_grace)
    lo, hi = window_of(prog, x, n_lam, width)

    def tightened(dl):
        t0 = time.perf_counter()
        first = lagrangian_design(prog, x, dl)
        inc.offer(first)
        if inc.found and first is not None:
            inc.offer(improve_by_unit_moves(prog, first, dl), repair_it=False)
        if inc.found:
            steps.append(f"no design found by the cores: a first one from the Lagrangian of tightened rows, "
                         f"improved by unit moves, in "
                         f"{time.perf_counter() - t0:.2f} s")

    def window(dl):
        steps.append("no design found by the cores: a first one from the window around the relaxation")
        _window_search(prog, x, n_lam, width, scale, inc, steps, dl, rel_gap, max_cols, verbose)

    order = (window, tightened) if int(np.sum(hi - lo)) <= WINDOW_FIRST else (tightened, window)
    order[0](deadline.fraction(0.7))
    if not inc.found and not deadline.passed():
        order[1](deadline)


def _window_search(prog, x, n_lam, width, scale, inc, steps, deadline, rel_gap, max_cols, verbose) -> None:
    """Without convexity no bound exists: look for a good point on a widening window around the relaxation."""
    lo, hi = prog.lower, prog.upper
    region = window_of(prog, x, n_lam, width)
    for attempt in range(6):
        size = int(np.sum(region[1] - region[0]))
        if size > max_cols or deadline.passed():
            break
        milp = secant_milp(prog, region[0], region[1], anchor=x, obj_scale=scale * 1e-6, row_tighten=2e-10)
        if deadline.passed():
            break       # the model's build used the time left
        res = highs_solve(milp, rel_gap * 0.25, 0.0, deadline.left(), verbose)
        steps.append(f"HiGHS on {size} segments: {res.text}")
        inc.offer(res.n)
        if inc.found or res.status != "infeasible":
            break
        grow = 4 ** (attempt + 1) * (width + 1)
        region = (np.clip(region[0] - grow, lo, hi), np.clip(region[1] + grow, lo, hi))


def _by_box(prog, base: BlockResult, deadline, steps, why) -> BlockResult | None:
    """``base`` completed by :func:`.box.enumerate_box` (the optimum, or infeasibility, proven by enumeration),
    or None when the box is too large or the scan did not finish."""
    _, _, count = box(prog)
    if count > BOX_POINTS:
        return None
    t0 = time.perf_counter()
    res = enumerate_box(prog, deadline)
    if res is None:
        return None
    steps.append(f"{why}: enumerated all {res.scanned} designs of the box in {time.perf_counter() - t0:.2f} s")
    if res.n is None:
        return dataclasses.replace(base, infeasible=True, steps=tuple(steps), reason=(
            "no integer design meets every constraint (every design in the bounds was enumerated)"))
    return dataclasses.replace(base, n=res.n, ub=res.value, lb=res.value, enumerated=True, timed_out=False,
                               budget=0.0, core_bound=res.value, steps=tuple(steps))
