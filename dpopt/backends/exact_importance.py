"""Exact backend for ImportanceSampling (Problem 7 of Fay et al.): per-record closed form / bisection.

Problem 7 is separable, and each record's feasible weights form an interval [1, w*] (linear profiles
always; general profiles under the paper's Assumption 11), so the optimum is q_i = 1/w_i* with w_i*
from the Lambert-W closed form (linear) or log-space bisection (general); see
:mod:`dpopt.models.importance`. The certificate checks max ψ_i ≤ ε* (relative tolerance 1e-9).
"""

from __future__ import annotations

import numpy as np

from ..models.importance import ImportanceSampling
from ..registry import register
from ..result import Status

_DESCRIPTION = "dpopt's own exact solvers (no external solver needed)"


@register("exact", ImportanceSampling, "solve", _DESCRIPTION)
def solve_exact(model: ImportanceSampling, method: str = "auto"):
    """``method``: ``"auto"`` (Lambert W for linear profiles, else bisection), ``"lambert"``, ``"bisection"``."""
    w = model.optimal_weights(method)
    used = "lambert" if (model.linear and method in ("auto", "lambert")) else "bisection"
    q = 1.0 / np.asarray(w, dtype=float)
    return model.make_solution(q, status=Status.OPTIMAL, backend="exact",
                               solver="lambert-w" if used == "lambert" else "log-bisection",
                               extra={"method": used})
