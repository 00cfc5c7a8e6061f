"""Step 3, the integer optimum on cores: with a budget b, reduced-cost fixing (:mod:`.fixing`) keeps per stratum
the values with r_i ≤ b; this core holds every design within LB + b. A core is solved exactly by enumeration
(:mod:`.cores`, :mod:`.linked`) or, when too many partial designs survive, as a secant MILP by HiGHS
(:mod:`.highs_milp`). Either proves that nothing lies below min(its optimum, LB + b); the budget starts at
1e-9·|LB| and grows until it covers the incumbent's excess ub − LB, when the core's optimum is global."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from ....formulations.separable import secant_milp
from ....progress import BoundProgress
from .cells import cell_milp, cells_of
from .bound import IntegerBound, lattice_bound, lattice_step
from .checks import FEAS_TOL
from .cores import beam_core, enumerate_core
from .fixing import reduced_ranges
from .highs_milp import TIGHT_TOL, highs_solve
from .incumbent import Incumbent
from .linked import enumerate_linked, linked_groups, tracked_row
from .scip_milp import scip_solve

START_BUDGET = 1e-9      # first reduced-cost budget, relative to the Lagrangian bound
_ENUM_SLOW = 0.25         # seconds: a core enumeration slower than this hands the following cores to HiGHS
HEDGE = 4.0               # ... which gets this many times that enumeration's time (at least HEDGE_MIN s) per core
HEDGE_MIN = 1.0           # before the enumeration takes the core back
_JUMP = 2.5               # a budget this close to the incumbent's excess goes straight to it
_GROWTH = 2.0             # budget growth between core MILPs
CELL_HIGHS_SLICE = 2.0    # seconds HiGHS gets on a cells' MILP before SCIP takes it over (.scip_milp)
RESUME_ENUM = 3.0         # a resumed block enumerates its stopped core again with at least this many times its time
COARSE_STEP = 1e-6        # a cost lattice step (relative to the objective) HiGHS's bound may be read against
TRACK_STEPS = 3           # the tracked join first at 1/2^TRACK_STEPS of the room between bound and incumbent
BEAM_WIDTHS = (2_000, 20_000)   # partial designs a beam search keeps per stratum, the wider once the narrower
#                                 found nothing better (CoreSearch.beam) ...
BEAM_WIDE_AFTER = 0.05    # ... in at most this many seconds (the time grows about with the width: on case (f)'s
#                           14 rows a narrow beam of 0.12 s was followed by a wide one of 1.4 s that found nothing)
BEAM_ROUNDS = 8           # beam searches at most per incumbent
BEAM_PEAK = 10_000        # a beam search runs once a core enumeration kept this many partial designs,
BEAM_AHEAD = 4.0          # ... over the core of this many times the budget, or the incumbent's excess if smaller

NEXT, STOP, MILP, INFEASIBLE = "next", "stop", "milp", "infeasible"     # what the budget loop does next


class CoreSearch:
    """The budget loop of one block: its state (budget ``b``, proven ``bound`` from the cores, the largest
    budget ``done`` enumerated completely) and one method per kind of step. ``reason`` names a proof of
    infeasibility when :meth:`run` returns :data:`INFEASIBLE`."""

    def __init__(self, prog, ib: IntegerBound, lam, x, scale, inc: Incumbent, steps: list, deadline, rel_gap,
                 max_cols, max_states, verbose, resume=None, full=None):
        self.prog, self.ib, self.lam, self.x, self.scale = prog, ib, lam, x, scale
        self.inc, self.steps, self.deadline = inc, steps, deadline
        self.rel_gap, self.max_cols, self.max_states, self.verbose = rel_gap, max_cols, max_states, verbose
        self.reason = ""
        # ``deadline`` may keep part of the time for a first point found elsewhere (.block); on cells, once the
        # cores have one, the search takes the whole ``full`` deadline: the one MILP on the cells stopped early
        # loses its tree on resuming (on strata a resumed block enumerates its last core instead, which helps)
        self.full = full
        # Every feasible n has f(n) = lb + Σ r_i(n_i) + λ·slack ≥ lb + r_i(n_i). Budgets start small (fast,
        # tight cores) and grow.
        self.b = START_BUDGET * scale
        # proven lower bound from the cores; from the start, the Lagrangian bound rounded up to the lattice of
        # the objective's costs (costs in cents: every design costs a whole number of cents; .bound)
        self.bound = -math.inf
        # the part of the bound that rests on dpopt's own safe arithmetic (the Lagrangian bound and complete core
        # enumerations), never on HiGHS's tolerances: only this part is rounded up to a cost lattice, where an
        # error of a fraction of a unit would otherwise become a whole unit
        self.exact = -math.inf
        # how far a computed reduced-cost sum can be off (rounding over many strata), kept off the lattice
        self.delta = max(4 * ib.margin, 1e-10 * scale)
        # on a cost lattice, a design better than the incumbent is cheaper by at least this step
        step, self.slip = lattice_step(prog)
        self.step = step - 2 * self.delta if step > 2 * self.delta else 0.0
        self.done = 0.0               # largest budget whose core was enumerated completely
        # designs feasible within the rows' tolerance have slacks down to −tol: r_i may exceed f − lb by λ·tol
        self.allow = 2 * FEAS_TOL * float(np.where(prog.inequality(), lam, 0.0)
                                          @ prog.row_scale(ib.n.astype(float))) if prog.m else 0.0
        self.retries = 0
        if resume is not None:
            inc.offer(resume.n)
            self.b, self.bound = max(self.b, resume.budget), resume.core_bound
            # the budget listed completely before: an enumeration stopped by its state limit retries between it
            # and the budget (enumeration_stopped); without it a resumed Bethel-type core went to HiGHS, which
            # did not close it in 5.8 s, where the retry closes it in 0.5 s (case (d), k = 1 000, ε = 5)
            self.done = resume.done
        # a block resumed after its last core's enumeration ran out of time enumerates it again only with at least
        # RESUME_ENUM times the time that enumeration had: with less, the repeat stopped at the limit again (case
        # (d), k = 20 000), while with the time the other blocks left it finished in 0.5 s where HiGHS on the same
        # core did not in 7.6 s (case (d), k = 1 000)
        left = deadline.left()
        self.enumerate_ok = resume is None or left is None or left >= RESUME_ENUM * resume.enum_stopped_after
        self.enum_stopped_after = 0.0     # seconds an enumeration ran before the time limit stopped it
        # a slow enumeration hands the cores to HiGHS for at most `hedge` seconds each; HiGHS stopped by that
        # hands them back for good (`highs_lost`)
        self.hedge = None
        self.highs_lost = False
        # HiGHS's feasibility tolerances at TIGHT_TOL from the first core its defaults could not bound (milp)
        self.tight = False
        # groups of strata linked only by the total (one target per domain) are enumerated group by group
        self.linked = linked_groups(prog)
        # with rows over several groups relaxed (cost budgets beside one target per domain) the join bounds every
        # design but does not list them: the cores are searched as without groups, and each new incumbent's
        # excess is checked against the groups' join (group_bound)
        self.relaxed_groups = None
        if self.linked is not None and self.linked.relaxed:
            self.relaxed_groups, self.linked = self.linked, None
        self.group_ub = math.inf          # the incumbent the groups' join was last run for
        self.progress = BoundProgress("exact")     # incumbent and bound lines on a long search (verbose)
        self.cells = cells_of(prog)
        # several inequality rows on strata (no groups, no cells): a beam search looks for better designs before
        # the cores are listed, once per incumbent (beam)
        self.beam_ok = self.linked is None and int(np.sum(prog.inequality())) >= 2 and self.cells is None
        self.beam_ub = math.inf           # the incumbent the beam search last ran for
        self.beam_b = 0.0                 # ... and the cores' budget then (it runs again once that doubled)
        self.peak = 0                     # the most partial designs a core enumeration of this search kept
        self.by_groups = "" if self.linked is None else f" in {len(self.linked.groups)} groups linked by the total"
        if self.cells is not None:
            # the cells' MILP is small whatever the core's width; listing the strata's cores is not (measured: 8 s
            # at k = 1 000 for a core of 147 strata, stopped by its state limit)
            self.enumerate_ok = False

    @property
    def proven(self) -> bool:
        inc = self.inc
        return inc.found and inc.ub - self.lower_bound() <= self.rel_gap * abs(inc.ub)

    @property
    def excess(self) -> float:
        """The budget a core needs to hold every design better than the incumbent."""
        return self.inc.ub - self.step - self.ib.lb

    @property
    def covers(self) -> bool:
        """The budget covers the incumbent's excess: the core holds every better design."""
        return self.inc.found and self.b >= self.excess

    def run(self) -> str:
        """Cores of growing budgets until proven, out of time or stopped: :data:`STOP` or :data:`INFEASIBLE`."""
        prog, ib = self.prog, self.ib
        for _ in range(200):
            if self.full is not None and self.inc.found and self.cells is not None:
                self.deadline = self.full
            self.group_bound()
            self.progress.update(self.inc.ub, self.lower_bound())
            if self.proven or self.deadline.passed():
                break
            if self.beam_ok and self.peak >= BEAM_PEAK and ((self.inc.found and self.inc.ub < self.beam_ub)
                                                            or self.b > 2 * self.beam_b):
                self.beam()
                if self.proven:
                    break
            if self.inc.found:
                self.b = min(self.b, max(self.excess, 0.0))
            r_lo, r_hi = reduced_ranges(prog, ib.Om, ib.ell, ib.n, self.core_budget())
            whole = bool(np.all(r_lo == prog.lower) and np.all(r_hi == prog.upper))
            free = int(np.sum(r_hi > r_lo))
            act = MILP
            if self.enumerate_ok and self.max_states > 0:
                act = self.enumerate(r_lo, r_hi, whole, free)
            if act == MILP:
                act = self.milp(r_lo, r_hi, whole, free)
            if act != NEXT:
                return INFEASIBLE if act == INFEASIBLE else STOP
        return STOP

    def core_budget(self) -> float:
        """The reduced cost a design of the core may have (the budget, plus the rows' tolerance and rounding)."""
        return self.core_budget_at(self.b)

    def core_budget_at(self, b) -> float:
        return b * (1 + 1e-12) + self.allow + 1e-300

    def enumerate(self, r_lo, r_hi, whole, free) -> str:
        """The core enumerated (:mod:`.cores`): nothing outside it or pruned lies below lb + b."""
        ib, b, t0 = self.ib, self.b, time.perf_counter()
        args = (self.prog, ib.Om, ib.ell, self.lam, ib.n, r_lo, r_hi, b, self.max_states, self.deadline)
        res = enumerate_core(*args) if self.linked is None else enumerate_linked(*args, self.linked)
        if res is None:
            return self.enumeration_stopped(free, time.perf_counter() - t0)
        self.inc.offer(res.n)
        # the best design examined is res.n (its excess was computed against the unsafe Lagrangian value,
        # ranking within `margin`)
        best_seen = self.above_lb(res.excess)
        if res.n is not None:
            best_seen = max(best_seen, self.prog.evaluate(res.n.astype(float))[0] - 2 * ib.margin)
        self.bound = max(self.bound, min(ib.lb + b, best_seen))
        self.exact = max(self.exact, min(ib.lb + b, best_seen))
        self.steps.append(f"enumerated {free} strata{self.by_groups} (budget {b / self.scale:.1e}, {res.peak} "
                          f"partial designs) in {time.perf_counter() - t0:.2f} s"
                          + ("" if math.isfinite(res.excess) else ": nothing within the budget"))
        if self.proven or self.covers:
            return STOP       # proven, or the core held every better design (rounding left a sliver)
        if whole and not self.inc.found and not math.isfinite(b):
            self.reason = ("no integer design meets every constraint (the continuous relaxation is feasible; "
                           "every design in the bounds was enumerated)")
            return INFEASIBLE
        if whole and not self.inc.found and not math.isfinite(res.excess):
            # the whole box holds no design within the budget: enumerate it without one (an empty answer then
            # proves the integer problem infeasible)
            self.b = math.inf
            return NEXT
        self.peak = max(self.peak, res.peak)
        self.grow_after_enumeration(res.peak, t0, res.parts)
        return NEXT

    def beam(self) -> None:
        """Better designs than the incumbent from a beam search over the core that holds them all
        (:func:`.cores.beam_core`), again from each one found: no bound, only the incumbent improves, so the
        cores that follow need only the budget below it (Bethel-type blocks at k = 1 000, tight CVs: the first
        incumbent lay 3-25 cost steps above the optimum, and the core enumerations that found the optimum were
        most of the solve's time). Once the cores' enumerations grow large, also over the core of BEAM_AHEAD
        times the current budget when that is smaller (or there is no incumbent): a Bethel-type block at k = 10 000
        had its optimum at 1.25 times a budget whose enumeration stopped at the state limit, and took 3.7 s to
        find it by cores; another's beam at its incumbent's excess (389 free strata) stopped 4 times above its
        optimum."""
        ib, inc, t0 = self.ib, self.inc, time.perf_counter()
        start, width = inc.ub, 0
        ahead = BEAM_AHEAD * self.b
        self.beam_b = self.b
        for _ in range(BEAM_ROUNDS):
            self.beam_ub = inc.ub
            b = min(max(self.excess, 0.0), ahead) if inc.found else ahead
            if b <= self.done or self.deadline.passed():
                break       # a core of that budget was listed completely: nothing better is there
            r_lo, r_hi = reduced_ranges(self.prog, ib.Om, ib.ell, ib.n, self.core_budget_at(b))
            t1 = time.perf_counter()
            inc.offer(beam_core(self.prog, ib.Om, ib.ell, self.lam, ib.n, r_lo, r_hi, b, BEAM_WIDTHS[width],
                                self.deadline), repair_it=False)
            if inc.ub >= self.beam_ub:
                width += 1          # no better design at this width: a wider beam, or done
                if width == len(BEAM_WIDTHS) or time.perf_counter() - t1 > BEAM_WIDE_AFTER:
                    break
        self.beam_ub = inc.ub
        if inc.ub < start:
            was = f"{(start - ib.lb) / self.scale:.2e}" if math.isfinite(start) else "none"
            self.steps.append(f"beam search: incumbent {was} -> {(inc.ub - ib.lb) / self.scale:.2e} above the "
                              f"Lagrangian bound in {time.perf_counter() - t0:.2f} s")

    def group_bound(self) -> None:
        """With groups linked by the total beside relaxed rows: the join over the total of every group's designs
        within the incumbent's excess (:func:`.linked.enumerate_linked`), once per incumbent. Each group's part of
        f − LB is at least its least e_g, so the join lifts the bound by about Σ e_g, the integrality of each
        domain's own target (case (f), k = 500: Σ e_g = 3.13e-5 of a gap of 3.51e-5); a relaxed row's λ·slack
        is ≥ 0 on every feasible design, so nothing within the budget lies below the join's least.

        Then, unless that proved the incumbent, the join again with the binding budget tracked: its λ·slack is
        then counted exactly, so the join's least is the least objective over every design within the budget
        (up to other relaxed rows with λ > 0) and its design, when it meets every row, the optimum (case (f),
        k = 500: 3.14e-5 untracked, the optimum at 3.66e-5 tracked)."""
        lg, inc = self.relaxed_groups, self.inc
        if lg is None or not inc.found or inc.ub >= self.group_ub or self.proven or self.deadline.passed():
            return
        self.group_ub = inc.ub
        if not self.join_at(lg, max(self.excess, 0.0), False, self.deadline):
            return
        if tracked_row(self.prog, self.lam, self.ib.n, lg.relaxed) is None:
            return      # no relaxed row has a multiplier: a tracked join would repeat the plain one
        # the tracked join at budgets growing from the plain join's bound towards the incumbent's excess: its
        # cost grows steeply with the room above the groups' least parts, and a design it finds within a budget
        # is the optimum (case (f), k = 500, DLap, ε = 5: the first incumbent lay 6.2e-5 above the Lagrangian
        # bound, the optimum 3.61e-5 and the plain join 3.14e-5; the tracked join at 6.2e-5 took 13.9 s). It gets
        # three quarters of the time left: when it cannot finish, the cores (HiGHS) still improve the bound
        deadline = self.deadline.fraction(0.75)
        for step in range(TRACK_STEPS, -1, -1):
            if self.proven or deadline.passed():
                return
            floor = max(self.bound - self.ib.lb, 0.0)
            b = min(floor + (max(self.excess, 0.0) - floor) / 2.0 ** step, max(self.excess, 0.0))
            if not self.join_at(lg, b, True, deadline):
                return

    def join_at(self, lg, b, track, deadline) -> bool:
        """One join of the groups at budget b (tracked or not): the bound it proves and the design it finds.
        False when it stopped at the state or time limit."""
        ib, t0 = self.ib, time.perf_counter()
        r_lo, r_hi = reduced_ranges(self.prog, ib.Om, ib.ell, ib.n, self.core_budget_at(b))
        res = enumerate_linked(self.prog, ib.Om, ib.ell, self.lam, ib.n, r_lo, r_hi, b, self.max_states, deadline,
                               lg, track=track)
        what = (f"groups of {len(lg.groups)} linked by the total, {len(lg.relaxed)} rows over several "
                f"{'relaxed, the binding one tracked' if track else 'relaxed'} (budget {b / self.scale:.1e})")
        if res is None:
            self.steps.append(f"{what}: stopped at the state or time limit")
            return False
        # a design the feasibility test accepts may have a relaxed row's slack down to −allowance: λ·that less
        short = float(np.where(self.prog.inequality(), self.lam, 0.0)[lg.relaxed] @ self.prog.allowance()[lg.relaxed])
        low = min(ib.lb + b, self.above_lb(res.excess - short))
        self.bound = max(self.bound, low)
        self.exact = max(self.exact, low)
        # a core with a smaller budget holds no design at all: the search goes on from there
        self.b = max(self.b, low - ib.lb)
        self.steps.append(f"{what}: nothing below {(low - ib.lb) / self.scale:.2e} above the Lagrangian bound, "
                          f"{res.peak} partial designs, in {time.perf_counter() - t0:.2f} s")
        self.inc.offer(res.n)
        self.group_ub = self.inc.ub
        return True

    def above_lb(self, excess) -> float:
        """The least objective of the designs an enumeration examined, from their least computed ``excess`` (each
        design's own slack λ·s counted, negative within the rows' tolerance): LB lies below the Lagrangian's value
        by the rows' tolerance (IntegerBound.tolerance) plus rounding, so that part comes back, less the most the
        computed excess can be off by (``delta``). Case (f), k = 500: the tolerance was 1.3e-9 of the objective,
        more than the gap asked for."""
        return self.ib.lb + excess + max(self.ib.tolerance - self.delta, 0.0)

    def grow_after_enumeration(self, peak, t0, parts=0.0) -> None:
        # the number of partial designs grows steeply with the budget (~b^7 measured): grow gently once it is a
        # sizeable share of the limit
        self.done = b = self.b
        grow = 4.0 if peak <= 100 else min(max((self.max_states / (2.0 * peak)) ** (1 / 7), 1.05), 4.0)
        self.b = b * grow if math.isfinite(b) else b
        if self.inc.found and math.isfinite(b) and self.b < self.excess and self.linked is not None \
                and self.excess - parts <= b:
            # groups linked by the total: an enumeration's cost follows the room its join leaves above the groups'
            # least parts, not the budget, so when that room is no larger than the budget just enumerated the
            # budget goes straight to the incumbent's excess (case (e), k = 5 000: the first join found the
            # optimum at 2.15 with the budget at 0.39 and parts summing to 2.12; four gentle steps had taken
            # 5.5 s). A first join far above the parts (k = 500, Laplace, ε = 0.5) is not jumped to: its groups'
            # cuts would be as wide as the room, and the search stopped at its limit there
            self.b = self.excess
        elif self.inc.found and math.isfinite(b) and self.b < self.excess <= _JUMP * b:
            # the incumbent's excess is near: one enumeration at it proves the optimum, where gentle steps would
            # enumerate the same designs twice or more (case (e), k = 1 000: 1e-5, 1.6e-5, 2e-5 took 1.3 + 3.3 +
            # 5.2 s)
            self.b = self.excess
        elapsed = time.perf_counter() - t0
        if elapsed > _ENUM_SLOW and math.isfinite(self.b) and self.linked is None and not self.highs_lost:
            # each larger budget costs several times more (many rows: no dominance, wide cores); HiGHS on the
            # core's secant MILP often closes such gaps in a fraction of the time (measured: 0.3 s instead of 6.9 s
            # for 5 strata with four equality rows), but not always: on 40 strata with two rows (Bethel-type
            # targets at k = 1 000) HiGHS took 14-40 s where the next enumeration takes about a second. So HiGHS
            # gets HEDGE times the enumeration's time per core, and the enumeration takes the core back when
            # that runs out. Groups linked only by the total keep enumerating: each has one row, so dominance
            # keeps them small (case (e), k = 1 000: the enumeration proved the optimum in 10 s where HiGHS on
            # the same core had not in 118 s)
            self.enumerate_ok = False
            self.hedge = max(HEDGE_MIN, HEDGE * elapsed)
            self.steps.append(f"enumeration slowing down (over {_ENUM_SLOW:g} s): further cores go to HiGHS "
                              f"(up to {self.hedge:.1f} s each)")

    def enumeration_stopped(self, free, elapsed) -> str:
        """The enumeration hit its state limit: a smaller step after an overshoot, else HiGHS from now on."""
        if self.deadline.passed():
            self.steps.append(f"enumeration of {free} strata (budget {self.b / self.scale:.1e}) stopped at the "
                              "time limit")
            self.enum_stopped_after = elapsed
            return STOP
        self.steps.append(f"enumeration of {free} strata (budget {self.b / self.scale:.1e}) stopped at its limit "
                          f"({self.max_states} partial designs)")
        self.peak = max(self.peak, self.max_states)
        self.retries += 1
        if self.done > 0 and self.b > 1.05 * self.done and self.retries <= 3:
            self.b = math.sqrt(self.b * self.done)         # overshot: a smaller step may still enumerate
            return NEXT
        self.enumerate_ok = False
        self.hedge = None          # the enumeration cannot take this core back: HiGHS gets the time left
        return MILP

    def milp(self, r_lo, r_hi, whole, free) -> str:
        """The core as a secant MILP (HiGHS); its bound holds over the core."""
        size = int(np.sum(r_hi - r_lo))
        if size > self.max_cols:
            self.steps.append(f"core of {size} secant segments exceeds max_milp_columns={self.max_cols}")
            return STOP
        inc, b = self.inc, self.b
        start = inc.n if self.covers else None
        sc = abs(inc.ub) if inc.found else self.scale
        # rows at rhs + allowance: the MILP's bound (and an infeasibility proof) must hold for every design the
        # feasibility test accepts, including those with no slack or a violation within the tolerance (a target
        # set from a design's own precision; tightened rows missed them and proved a worse point); HiGHS's
        # points are then checked against the rows by feasible()
        # strata every row weighs alike are one variable each (.cells): HiGHS branches on the cells' totals
        cm = None if self.cells is None else cell_milp(self.prog, self.cells, r_lo, r_hi, self.x,
                                                       max(sc, 1e-300) * 1e-6, self.lam, self.core_budget())
        milp = cm.milp if cm is not None else secant_milp(self.prog, r_lo, r_hi, anchor=self.x,
                                                          obj_scale=max(sc, 1e-300) * 1e-6, relax_rows=True)
        if cm is not None and start is not None:
            start = cm.totals(start)
        # on a coarse cost lattice (a step far above HiGHS's tolerances) HiGHS may stop once its bound is within
        # step/2 of its best point p: nothing in the core is then cheaper than p − step, i.e. (lattice) nothing
        # in it is cheaper than p at all, up to the lattice's representation error
        coarse = self.step > 0 and self.step >= COARSE_STEP * sc
        abs_gap = 0.5 * self.step / milp.obj_scale if coarse else 0.0
        t0 = time.perf_counter()
        left = self.deadline.left()
        limit = left if self.hedge is None else (self.hedge if left is None else min(left, self.hedge))
        args = (self.rel_gap * 0.25, abs_gap)
        kw = dict(report=self.report_highs, tight=self.tight)
        res = highs_solve(milp, *args, limit if cm is None or limit is None else min(limit, CELL_HIGHS_SLICE),
                          self.verbose, start=start, **kw)
        text = f"{res.text} in {time.perf_counter() - t0:.2f} s"
        if cm is not None and res.status == "time_limit" and (limit is None or limit > CELL_HIGHS_SLICE) \
                and not self.deadline.passed():
            # HiGHS did not close the cells' MILP within its slice: SCIP gets the time left (.scip_milp), from
            # HiGHS's point; HiGHS's bound holds for the same MILP, so the better of the two bounds is kept
            t1 = time.perf_counter()
            if res.n is not None:
                inc.offer(cm.design(res.n))
            first = res
            res = scip_solve(milp, *args, self.deadline.left(), self.verbose,
                             start=res.n if res.n is not None else start, **kw)
            res = dataclasses.replace(res, bound=max(res.bound, first.bound))
            text += f", then {res.text} in {time.perf_counter() - t1:.2f} s"
        if cm is not None and res.n is not None:
            res = dataclasses.replace(res, n=cm.design(res.n))
        on = f" as {self.cells.count} cells" if cm is not None else ""
        tight = f", tolerances {TIGHT_TOL:g}" if self.tight else ""
        self.steps.append(f"HiGHS on {free} strata{on}, {size} segments (budget {b / self.scale:.1e}){tight}: "
                          f"{text}")
        inc.offer(res.n)
        if res.status == "optimal" and not self.tight and inc.ub - res.objective > self.rel_gap * abs(inc.ub) \
                and not self.deadline.passed():
            # HiGHS's optimum is not a design the feasibility test accepts (nor one its repair reaches at that
            # objective): it used HiGHS's feasibility tolerance (1e-6 of a row's scale, highs_model), and its
            # bound, below the incumbent, proves nothing. This core and every later one go to HiGHS with
            # tolerances of 1e-9. Case (d), k = 10 000: the defaults' optima lay 4e-7 to 9e-6 below even the
            # Lagrangian bound, and the solve stopped at a gap of 3e-8 with 6 s left; a Bethel-type block at
            # k = 1 000 on a loaded machine stopped at 4.7e-6 with 33 s left. Tight from the start, the
            # tolerances slowed a k = 20 000 cost-budget core from 1.5 s to 6.9 s, so they wait for this sign
            self.tight = True
            self.steps.append("HiGHS's optimum is no design the feasibility test accepts (its tolerance): the "
                              f"core again with tolerances of {TIGHT_TOL:g}")
            return NEXT
        if coarse and inc.found and math.isfinite(res.bound) and res.bound > inc.ub - self.step \
                and res.status != "infeasible":
            # the core holds nothing cheaper than inc.ub − slip; outside it, nothing below lb + b
            self.bound = max(self.bound, min(inc.ub - self.slip, self.ib.lb + b))
            if self.covers:
                self.bound = max(self.bound, inc.ub - self.slip)
                return STOP
            self.grow()
            return NEXT
        if res.status == "time_limit" and self.hedge is not None and not self.deadline.passed():
            # HiGHS used its share without closing the core: its bound holds over the core, and the enumeration
            # takes this core (and every later one) back
            if math.isfinite(res.bound):
                self.bound = max(self.bound, min(res.bound, self.ib.lb + b))
            self.steps.append(f"HiGHS stopped after {self.hedge:.1f} s: the enumeration takes the cores back")
            self.enumerate_ok, self.highs_lost, self.hedge = True, True, None
            return NEXT
        if res.status == "optimal":
            return self.after_optimal(res.bound)
        if res.status == "infeasible":
            # the cells' MILP keeps only cell totals within the budget (.cells), so only at an infinite budget
            # is its infeasibility the whole box's
            return self.after_infeasible(whole and (cm is None or not math.isfinite(b)))
        if math.isfinite(res.bound):      # time limit: HiGHS's bound holds over the core
            self.bound = max(self.bound, min(res.bound, self.ib.lb + b))
            if self.covers:
                self.bound = max(self.bound, min(res.bound, inc.ub - self.slip))
        return STOP

    def report_highs(self, primal, dual) -> None:
        """A progress line from inside HiGHS: its bound holds over the core, i.e. up to LB + b."""
        self.progress.update(min(self.inc.ub, primal), max(self.lower_bound(), min(dual, self.ib.lb + self.b)))

    def after_optimal(self, bnd) -> str:
        self.bound = max(self.bound, min(bnd, self.ib.lb + self.b))
        if self.covers:
            self.bound = max(self.bound, min(bnd, self.inc.ub - self.slip))
            return STOP
        self.grow()
        return NEXT

    def after_infeasible(self, whole) -> str:
        if whole:
            self.reason = ("no integer design meets every constraint (the continuous relaxation is feasible; "
                           "HiGHS proved the whole box infeasible)")
            return INFEASIBLE
        self.bound = max(self.bound, self.ib.lb + self.b)
        if self.covers:
            # nothing better than the incumbent (it lies in the core but only meets the rows within tolerance)
            self.bound = max(self.bound, self.inc.ub - self.slip)
            return STOP
        self.grow()
        if self.b > 1e3 * self.scale:
            self.b = math.inf
        return NEXT

    def grow(self) -> None:
        b, inc = self.b, self.inc
        if inc.found and self.cells is not None:
            # on cells HiGHS's work is in the branching on the cells' totals, which each core solved from scratch
            # repeats: one MILP on the core that holds every better design (measured at k = 1 000: steps of 8
            # proved nothing in 10 s, the one MILP proved Laplace and TuLap instances in 7.5 s)
            self.b = max(self.excess, 0.0)
            return
        self.b = b * _GROWTH if not inc.found else min(max(self.excess, 0.0), b * _GROWTH)

    def lower_bound(self) -> float:
        """The block's proven lower bound: the Lagrangian's and the cores' (capped at the incumbent)."""
        lb = self.ib.lb
        lb = max(lb, min(self.bound, self.inc.ub)) if self.inc.found else max(lb, self.bound)
        # every design's cost lies on the objective's lattice, when it has one (.bound.lattice_bound): the safe
        # part of the bound, less its rounding allowance, rounds up to it
        safe = max(self.ib.lb, self.exact) - self.delta
        lat = lattice_bound(self.prog, safe)
        if lat > safe:
            lb = max(lb, min(lat, self.inc.ub) if self.inc.found else lat)
        return lb
