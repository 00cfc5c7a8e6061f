"""Why a constrained design is infeasible, in the user's terms: which requirements conflict, and the least
cost or sample size they need (docs/constrained.md).

An infeasible design usually means its precision targets ask for more than its fixed total or its cost
budget allows. Each requirement is a continuous relaxation solved by this backend: the least cost (or the
least total sample) over designs within the bounds that meet the targets, a lower bound for every integer
design. A bound above the budget (or the total) proves the conflict, and the message names the targets:
each alone first, then all of them together.
"""

from __future__ import annotations

import copy

import numpy as np

from ....feasibility import FEASIBILITY_TOL
from ....numerics import fill_cheapest
from ....options import DIAGNOSIS_TIME_LIMIT

_COST_BUDGET = "cost budget"


def _least(design, cost, targets, relax, deadline=None) -> float | None:
    """The least Σ cost·n over designs within the bounds meeting ``targets`` (and the design's linear rows
    other than its cost budget), by the continuous relaxation ``relax`` (this backend's); None when it has no
    point, fails, or the solve's ``deadline`` (a :class:`.deadline.Deadline`) has no time left for it."""
    from ....models.stratified import MinCostDesign

    d = copy.copy(design)
    d.constraints = [c for c in design.constraints if c.name != _COST_BUDGET]
    d.precision_targets = list(targets)          # MinCostDesign takes the design's targets as its own
    m = MinCostDesign(d, cost)
    left = None if deadline is None else deadline.left()
    if left is not None and left < 1e-3:
        return None
    sol = relax(m, time_limit=DIAGNOSIS_TIME_LIMIT if left is None else min(DIAGNOSIS_TIME_LIMIT, left))
    if not sol.ok:
        return None
    lb = sol.details.get("lower_bound", sol.objective)
    return float(min(lb, sol.objective))


def _names(targets) -> str:
    return " and ".join(repr(t.name) for t in targets)


def explain(model, relax, deadline=None) -> str | None:
    """One or two sentences naming the conflicting requirements of a stratified or min-cost design, or None
    when no conflict between its targets, its total and its cost budget is found. ``relax`` solves a
    continuous relaxation (:func:`.solve.relax_constrained`, passed in so that this module needs no import
    of the solver); ``deadline``: the solve's clock, whose time left bounds each relaxation (none left: the
    requirements not yet checked are not named)."""
    from ....models.stratified import MinCostDesign

    design = model.design if isinstance(model, MinCostDesign) else model
    targets = list(model.precision_targets)
    row = next((c for c in design.constraints if c.name == _COST_BUDGET and c.sense == "<=" and len(c.b) == 1),
               None)
    budget = None if row is None else float(row.b[0])
    # the budget's costs: add_cost_budget's, or those of a row the user named "cost budget" (add_constraint)
    unit_cost = design.cost if design.cost is not None or row is None else np.asarray(row.A[0], dtype=float)
    if unit_cost is not None and not np.all(unit_cost >= 0):
        budget = unit_cost = None           # not a cost: no knapsack argument
    fixed_total = not isinstance(model, MinCostDesign)
    if fixed_total and budget is not None:
        # the fixed total alone costs at least the cheapest strata filled first (the continuous knapsack)
        least = float(unit_cost @ fill_cheapest(unit_cost, design.lower, design.upper, design.total))
        if least > budget * (1 + FEASIBILITY_TOL):
            return (f"a total sample of {design.total} costs at least {least:.6g} (the cheapest strata first, "
                    f"within the bounds); the budget is {budget:.6g}")
    if not targets:
        return None
    out = []
    for cost, limit, what, unit in ((None, design.total, "a total sample", "the design's total is"),
                                    (unit_cost, budget, "a cost", "the budget is")):
        if limit is None or (cost is None and not fixed_total):
            continue
        c = np.ones(design.k) if cost is None else np.asarray(cost, dtype=float)
        alone = [(t, _least(design, c, [t], relax, deadline)) for t in targets]
        # (targets are compared by position: their array fields make == ambiguous)
        hit = [need is not None and need > limit * (1 + FEASIBILITY_TOL) for _t, need in alone]
        over = [t for (t, _need), h in zip(alone, hit) if h]
        if over:
            needs = max(need for (_t, need), h in zip(alone, hit) if h)
            out.append(f"the precision target(s) {_names(over)} need {what} of at least {needs:.6g}; {unit} "
                       f"{limit:.6g}")
            continue
        together = _least(design, c, targets, relax, deadline)
        if together is not None and together > limit * (1 + FEASIBILITY_TOL):
            out.append(f"the precision targets {_names(targets)} together need {what} of at least "
                       f"{together:.6g}; {unit} {limit:.6g}")
    return "; ".join(out) + " (continuous bounds: no integer design does better)" if out else None
