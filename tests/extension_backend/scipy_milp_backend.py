"""A backend written outside dpopt on the compiled program (acceptance test (c) of issue 19, docs/architecture.md).

scipy's ``milp`` (HiGHS inside scipy) on the secant MILP of any stratified or min-cost design: plain, cost
budgets and linear rows, precision targets, several variables. It uses only public names: the registry's
``register``, and ``dpopt.formulations``' ``program_of`` (the compiled program), ``ranges`` (the strata's
integer ranges), ``secant_milp`` with its ``to_scipy()`` (the one unpacking of the MILP) and ``solution_from``
(the one function turning (point, bound, solver status) into a Solution with its gap certificate).

Importing this module registers the backend as ``"scipy-milp"``: ``dpopt compare`` and ``model.solve(
backend="scipy-milp")`` then run it.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import milp

from dpopt import MinCostDesign, Solution, Status, StratifiedDesign
from dpopt.formulations import program_of, ranges, secant_milp, solution_from
from dpopt.registry import register

NAME = "scipy-milp"
MAX_SEGMENTS = 200_000          # integer segments per nonlinear row (one secant cut each)
#: scipy's milp status codes (its docs) → the words solution_from reads
_WORDS = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "other", 4: "other"}


def solve(model, time_limit: float | None = None, rel_gap: float | None = None) -> Solution:
    """The integer design by scipy.optimize.milp on the whole-box secant MILP."""
    t0 = time.perf_counter()
    prog = program_of(model)
    lo, hi = ranges(prog)
    if np.any(lo > hi):
        return Solution(Status.INFEASIBLE, message="the bounds and the total leave no design")
    if int(np.sum(hi - lo)) > MAX_SEGMENTS:
        return Solution(Status.UNSUPPORTED, message=f"more than {MAX_SEGMENTS} secant segments per row")
    anchor = np.sqrt(lo * hi)
    scale = max(abs(prog.evaluate(anchor)[0]), 1e-300) * 1e-6
    mip = secant_milp(prog, lo, hi, anchor=anchor, obj_scale=scale)
    options = {"time_limit": 60.0 if time_limit is None else float(time_limit), "mip_rel_gap": rel_gap or 0.0}
    res = milp(**mip.to_scipy(), options=options)
    point = None if res.x is None else res.x[:mip.k]
    dual = getattr(res, "mip_dual_bound", None)
    # the MILP's objective is (c·v + offset)·obj_scale in the model's units
    bound = (dual + mip.offset) * mip.obj_scale if dual is not None and math.isfinite(dual) else -math.inf
    return solution_from(model, point, bound, _WORDS.get(res.status, "other"), rel_gap=rel_gap, solver="highs",
                         message=f"scipy.optimize.milp: {res.message}", program=prog,
                         bound_source="scipy milp dual bound", t0=t0)


for _cls in (StratifiedDesign, MinCostDesign):
    register(NAME, _cls, "solve", "scipy.optimize.milp on the secant MILP (an extension outside dpopt)")(solve)
