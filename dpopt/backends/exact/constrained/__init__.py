"""Exact backend for constrained stratified designs and min-cost designs (docs/constrained.md).

Works on the model's :class:`~dpopt.formulations.SeparableProgram` (objective row plus convex and linear
constraint rows over the unit terms). Three steps:

1. **Continuous relaxation** by its Lagrangian dual: for multipliers λ the Lagrangian separates into
   one-dimensional convex problems per stratum (bracketed Newton, vectorised); the dual is smooth and
   concave in λ and is maximised by a projected Newton method with line search (its Hessian is
   −Σ_i g_i g_iᵀ / φ_i''). A dual value above the objective's maximum over the box proves infeasibility.
2. **Integer Lagrangian bound**: the secant LP over a window around the relaxation is the convex hull of
   the integer problem there, so its row duals are the best multipliers λ; the integer Lagrangian then
   separates into discretely convex problems per stratum, solved by bisection on increments. Its value is a
   proven lower bound LB, and every feasible n satisfies f(n) = LB + Σ_i r_i(n_i) + Σ_l λ_l s_l(n) with
   r_i ≥ 0 the reduced costs and s_l ≥ 0 the slacks of the inequality rows.
3. **Integer optimum on cores**: with a budget b, reduced-cost fixing keeps per stratum the values with
   r_i ≤ b; this core holds every design within LB + b. A core is solved exactly by enumeration (dynamic
   programming over its free strata, pruned by the budget, by row reachability and by dominance) or, when
   too many partial designs survive, as a secant MILP (k integer columns, one epigraph column per stratum
   and nonlinear row) by HiGHS. Either proves that nothing lies below min(its optimum, LB + b); the budget
   starts at 1e-9·|LB| and grows until it covers the incumbent's excess ub − LB, when the core's optimum
   is global. The certificate's lower bound is the best of these; ``optimal`` means a relative gap ≤
   ``rel_gap``. Rows on disjoint sets of strata (e.g. one target per domain in a min-cost design) form
   blocks solved one by one, each with a share of the time left.

Secant cuts and the Lagrangian inner solves are exact lower bounds only where every row is discretely
convex in each n_i: proven for the built-in pure-DP mechanisms at any budget share, checked increment by
increment otherwise (``convexity_verified``); without that the answer is at best ``feasible``.

Modules, in the order a solve runs them:

* :mod:`.solve` — the entry points :func:`solve_constrained` and :func:`relax_constrained`: options, the
  infeasibility and domain shortcuts, blocks, the joined answer and its certificate;
* :mod:`.block` — one block: dual, bound, cores (:class:`~.block.BlockResult`);
* :mod:`.deadline` — the clock and its shares;
* :mod:`.inner` — the per-stratum inner problems φ_i (continuous and integer minimisers);
* :mod:`.dual` — step 1, the Lagrangian dual (:class:`~.dual.DualResult`);
* :mod:`.bound` — step 2, the safe integer Lagrangian bound (:class:`~.bound.IntegerBound`);
* :mod:`.fixing` — reduced-cost fixing (the core of a budget) and the LP window;
* :mod:`.subset` — one-row blocks (the row alone or beside the total): a point within the gap of the bound
  (repair and meet-in-the-middle over near-tie moves) before any core is listed;
* :mod:`.search` — step 3's budget loop over cores (on a cost lattice, bounds rounded up to it,
  :func:`.bound.lattice_bound`);
* :mod:`.cores` — the core enumeration (one dynamic programme and chunk loop; :class:`~.cores.CoreResult`);
* :mod:`.linked` — the same for groups of strata linked only by the total, joined by min-plus convolution;
* :mod:`.highs_milp` — HiGHS on the secant MILP and LP (:class:`~.highs_milp.MilpResult`);
* :mod:`.box` — the whole box enumerated (no convexity needed; :class:`~.box.BoxResult`);
* :mod:`.checks` — options, convexity, the one feasibility test, unreachable rows;
* :mod:`.incumbent` — the best feasible design so far.
"""

from __future__ import annotations

from .block import BlockResult, solve_block
from .bound import IntegerBound, integer_bound
from .box import BoxResult, enumerate_box
from .checks import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT, FEAS_TOL, convexity, feasible
from .cores import DEFAULT_MAX_STATES, CoreResult, enumerate_core
from .deadline import Deadline
from .dual import DualResult, solve_dual
from .fixing import reduced_ranges
from .highs_milp import MilpResult
from .inner import phi
from .linked import enumerate_linked, linked_groups
from .solve import relax_constrained, solve_constrained

__all__ = ["solve_constrained", "relax_constrained", "DEFAULT_REL_GAP", "DEFAULT_TIME_LIMIT", "DEFAULT_MAX_STATES",
           "FEAS_TOL", "Deadline", "DualResult", "IntegerBound", "CoreResult", "BoxResult", "MilpResult",
           "BlockResult", "solve_dual", "integer_bound", "reduced_ranges", "enumerate_core", "enumerate_linked",
           "linked_groups", "enumerate_box", "solve_block", "convexity", "feasible", "phi"]
