"""The solver's checks: options, discrete convexity of the terms, the one feasibility test, and rows no design
within the bounds can meet."""

from __future__ import annotations

import math

import numpy as np

from .... import _validate as V
from ....formulations.separable import FEASIBILITY_TOL, safe_lower
from .inner import inner_continuous, inner_integer, phi

from ....options import DEFAULT_REL_GAP, DEFAULT_TIME_LIMIT, time_limit_or_default  # noqa: E402, F401
FEAS_TOL = FEASIBILITY_TOL        # the one feasibility test's tolerance (formulations.separable)
_CONVEXITY_POINTS = 30_000_000     # increments checked for terms not proven convex (~1 s per 10^7, measured)


def check_options(rel_gap, time_limit, verbose):
    rel_gap = V.option(V.real, "rel_gap", rel_gap)
    if not 0 <= rel_gap < 1:
        raise V.InvalidOption(f"rel_gap must be in [0, 1), got {rel_gap:g}")
    verbose = V.option(V.flag, "verbose", verbose)
    # HiGHS runs inside: a solve always ends, as with the other routes' external solvers
    return rel_gap, time_limit_or_default(time_limit), verbose


def convexity(model, deadline=None):
    """The design's discrete convexity (StratifiedDesign.convexity_verified), checked until ``deadline`` (a
    :class:`.deadline.Deadline`) at most: unknown past it."""
    design = getattr(model, "design", model)
    return design.convexity_verified(max_points=_CONVEXITY_POINTS,
                                     until=None if deadline is None else deadline.end)


def feasible(prog, n) -> bool:
    """The one feasibility test (SeparableProgram.feasible, FEASIBILITY_TOL; docs/constrained.md)."""
    return prog.feasible(np.asarray(n))


def unreachable_rows(prog, integer: bool = True, minima=None) -> str | None:
    """A row whose own minimum over the bounds exceeds its right-hand side plus the feasibility test's allowance
    makes the model infeasible; name it (e.g. a precision target below the floor the DP noise sets: more
    sample can mean more noise). ``integer``: the minimum over integer designs, exact per stratum (discretely
    convex terms) and lowered by its rounding error (safe_lower); else the continuous relaxation's minimum.
    ``minima``: :func:`row_minima` of a program with the same bounds and rows but for their right-hand sides
    (a min-max's levels: each took 0.3-0.4 s with 51 rows at k = 1 000)."""
    allow = prog.allowance() if prog.m else np.zeros(0)
    minima = row_minima(prog, integer) if minima is None else minima
    for l, r in enumerate(prog.rows):
        if r.sense != "<=":
            continue
        low = minima[l]
        if integer:
            unreachable = low > r.rhs + allow[l]
        else:
            unreachable = low - r.rhs - allow[l] > FEASIBILITY_TOL * max(abs(r.rhs), abs(low))
        if unreachable:
            return _unreachable_message(r, low)
    return None


def row_minima(prog, integer: bool = True) -> list:
    """Each "<=" row's minimum over the bounds (None for the other rows), as :func:`unreachable_rows` uses it."""
    return [_row_minimum(prog, r, integer) if r.sense == "<=" else None for r in prog.rows]


def _row_minimum(prog, r, integer):
    """Row r's minimum over the bounds: integer (safe, see :func:`unreachable_rows`) or continuous."""
    Om = np.zeros((prog.k, prog.model.J)) if r.W is None else r.W
    ell = np.zeros(prog.k) if r.a is None else r.a.astype(float)
    # strata the row does not touch add exactly 0: the minimum over the others alone (a domain's row at k = 1 000
    # touches a tenth of the strata; case (d) spent 0.1 s here on 20 rows)
    touched = np.flatnonzero(np.any(Om != 0, axis=1) | (ell != 0))
    if touched.size < prog.k:
        # (with the row itself: a program computes only the unit-term columns its rows use)
        prog, Om, ell = prog.subprogram(touched, [r]), Om[touched], ell[touched]
    if not integer:
        x = inner_continuous(prog, Om, ell)
        return float(np.sum(phi(prog, Om, ell, x)))
    m = inner_integer(prog, Om, ell)
    vals = phi(prog, Om, ell, m.astype(float))
    for d in (-1, 1):
        vals = np.minimum(vals, phi(prog, Om, ell, np.clip(m + d, prog.lower, prog.upper).astype(float)))
    return safe_lower(vals, extra_ops=prog.model.J + 2)


def _unreachable_message(r, low) -> str:
    target = r.target
    if getattr(target, "kind", None) in ("se", "cv", "variance"):
        var = max(low - target.fpc_const, 0.0)
        floor = math.sqrt(var)
        what = {"se": f"SE {floor:.6g}", "cv": f"CV {floor / abs(target.mean or 1.0):.6g}",
                "variance": f"variance {var:.6g}"}[target.kind]
        return (f"precision target {r.name!r} ({target.kind} {target.target:g}) cannot be met: the smallest "
                f"{what} any design within the bounds reaches")
    return f"row {r.name!r} cannot be met: its smallest value within the bounds is {low:.6g} > {r.rhs:.6g}"
