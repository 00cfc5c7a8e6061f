"""Robust designs over variance scenarios (docs/robust.md): each scenario's own optimum g*_s by the exact
stratified route, the nominal design, then the min-max regret design by the min-max engine (:mod:`.minmax`),
or, for a min-cost design, the cheapest design meeting its requirements in every scenario by the constrained
route. The answer carries the engine's certificate and every scenario's regret."""

from __future__ import annotations

from ...models.robust import RobustDesign
from ...options import default_rel_gap
from ...registry import register
from ...result import Solution, Status
from .constrained import solve_constrained
from .constrained.deadline import Deadline
from .constrained.checks import check_options
from .minmax import solve_minmax

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


def solve_robust(model: RobustDesign, rel_gap: float | None = None, time_limit: float | None = None,
                 verbose: bool = False) -> Solution:
    """The certified robust design (see the module docstring). ``rel_gap`` defaults to the min-max family's
    (1e-6, :data:`dpopt.options.FAMILY_REL_GAP`)."""
    if model.min_cost is not None:
        rel_gap = default_rel_gap("exact", "RobustDesign") if rel_gap is None else rel_gap
        rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
        sol = solve_constrained(model.min_cost_model(), rel_gap, time_limit, verbose)
        if sol.n is None:
            return sol
        out = model.make_solution(n=sol.n, status=sol.status, certificate=sol.certificate, message=sol.message,
                                  rel_gap=rel_gap)
        out.details["steps"] = sol.details.get("steps")
        return out
    rel_gap = default_rel_gap("exact", "RobustDesign") if rel_gap is None else rel_gap
    rel_gap, time_limit, verbose = check_options(rel_gap, time_limit, verbose)
    deadline = Deadline(time_limit)
    nominal = model.design.solve("exact", time_limit=deadline.share(4).left())
    try:
        model.scenario_optima("exact", time_limit=deadline.share(3).left())
    except ValueError as exc:
        return Solution(status=Status.ERROR, message=str(exc))
    sol = solve_minmax(model.minmax(), rel_gap, max(deadline.left() or 0.0, 1e-3), verbose)
    if sol.n is None:
        return sol
    details = {"steps": sol.details.get("steps")}
    if nominal.n is not None:
        details["nominal_n"] = nominal.n
        details["nominal_status"] = str(nominal.status)
    out = model.make_solution(n=sol.n, status=sol.status, certificate=sol.certificate, message=sol.message,
                              rel_gap=rel_gap, details=details)
    out.details["lower_bound"] = sol.certificate.lower_bound if sol.certificate is not None else None
    return out


register("exact", RobustDesign, "solve", _DESCRIPTION)(solve_robust)
