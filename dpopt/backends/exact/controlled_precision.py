"""Multi-domain controlled precision on the shared min-max engine (docs/controlled_precision.md).

A :class:`~dpopt.models.controlled_precision.ControlledPrecisionDesign` is the min-max design whose rows are the
domains' variance rows R_d, scales ρ_d² and offsets the domains' fpc constants, over the design's own unit terms
and with its total, linear constraints and precision targets as the other rows. ``solve`` is the certified level
search of :mod:`.minmax`, ``relax`` its continuous counterpart (:mod:`.minmax_relax`); the answers are repackaged
with the domains' variances and ratios (``details["domains"]``).
"""

from __future__ import annotations

from ...models.controlled_precision import ControlledPrecisionDesign
from ...options import default_rel_gap
from ...models.minmax import MinMaxDesign
from ...registry import register
from ...result import Solution
from .minmax import solve_minmax
from .minmax_relax import relax_minmax

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


def minmax_of(model: ControlledPrecisionDesign) -> MinMaxDesign:
    """The min-max design of a controlled-precision design: ratio d is V_d(n)/ρ_d²."""
    rows, scales, offsets = model.domain_rows()
    terms = model.constraint_design()
    return MinMaxDesign.from_design(terms, rows, scales, offsets, names=list(model.domain_names),
                                    name=model.name)


def _repackage(model: ControlledPrecisionDesign, sol: Solution) -> Solution:
    if sol.n is None and sol.x is None:
        sol.model = type(model).__name__
        return sol
    out = model.make_solution(n=sol.n, x=sol.x if sol.n is None else None, status=sol.status,
                              certificate=sol.certificate, message=sol.message)
    for key in ("steps", "lower_bound", "integrality_gap", "level_steps"):
        if key in sol.details:
            out.details[key] = sol.details[key]
    out.wall_time = sol.wall_time
    return out


def solve_controlled_precision(model: ControlledPrecisionDesign, rel_gap: float | None = None,
                               time_limit: float | None = None, verbose: bool = False) -> Solution:
    """The certified integer design with the smallest largest weighted domain variance (default rel_gap 1e-6,
    :data:`dpopt.options.FAMILY_REL_GAP`; see :func:`.minmax.solve_minmax`)."""
    rel_gap = default_rel_gap("exact", "ControlledPrecisionDesign") if rel_gap is None else rel_gap
    return _repackage(model, solve_minmax(minmax_of(model), rel_gap=rel_gap, time_limit=time_limit,
                                          verbose=verbose))


def relax_controlled_precision(model: ControlledPrecisionDesign, rel_gap: float | None = None,
                               time_limit: float | None = None, verbose: bool = False) -> Solution:
    """The continuous optimum (stratallo's ``dopt`` answers it without noise), proven to ``rel_gap``
    (default 1e-6, as ``solve``)."""
    rel_gap = default_rel_gap("exact", "ControlledPrecisionDesign") if rel_gap is None else rel_gap
    return _repackage(model, relax_minmax(minmax_of(model), rel_gap=rel_gap, time_limit=time_limit,
                                          verbose=verbose))


register("exact", ControlledPrecisionDesign, "solve", _DESCRIPTION)(solve_controlled_precision)
register("exact", ControlledPrecisionDesign, "relax", _DESCRIPTION)(relax_controlled_precision)
