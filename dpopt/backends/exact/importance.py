"""Exact backend for ImportanceSampling (Problem 7 of Fay et al.): per-record closed form / bisection.

Problem 7 is separable, and each record's feasible weights form an interval [1, w*] (linear profiles
always; general profiles under the paper's Assumption 11), so the optimum is q_i = 1/w_i* with w_i*
from the Lambert-W closed form (linear) or log-space bisection (general); see
:mod:`dpopt.models.importance`. The model checks every ψ_i ≤ ε* and certifies the gap (:meth:`ImportanceSampling.make_solution`).
"""

from __future__ import annotations

import numpy as np

from ... import _validate as V
from ...models.importance import DEFAULT_REL_GAP, ImportanceSampling
from ...registry import register
from ...result import Status

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


@register("exact", ImportanceSampling, "solve", _DESCRIPTION)
def solve_exact(model: ImportanceSampling, method: str = "auto", rel_gap: float = DEFAULT_REL_GAP):
    """``method``: ``"auto"`` (Lambert W for linear profiles, else bisection), ``"lambert"``, ``"bisection"``;
    ``rel_gap``: the proven relative gap below which the answer is reported optimal."""
    method = V.option(V.choice, "method", method, allowed=("auto", "lambert", "bisection"))
    rel_gap = V.rel_gap(rel_gap)
    if method == "lambert" and not model.linear:
        raise V.InvalidOption("method 'lambert' needs linear profiles (slopes); use 'bisection' or 'auto'")
    w = model.optimal_weights(method)
    used = "lambert" if (model.linear and method in ("auto", "lambert")) else "bisection"
    q = model.repair(1.0 / np.asarray(w, dtype=float))    # a no-op unless round-off left psi above eps*
    return model.make_solution(x=q, status=Status.OPTIMAL, backend="exact", rel_gap=rel_gap,
                               solver="lambert-w" if used == "lambert" else "log-bisection",
                               details={"method": used})
