"""SciPy backend for SampleSizeProgram: bounded scalar minimisation of the continuous V_n + rounding.

V_n is minimised over real n in [n_min, N] (δ_n ≤ 1) with ``scipy.optimize.minimize_scalar(method="bounded")`` in
log n, started on ``segments`` log-spaced sub-intervals (V need not be unimodal); the best local
minimiser is rounded down and up and the better integer is returned, compared also with n = 1 and
n = N. This is a heuristic: it is reported as ``feasible`` (never ``optimal``) because nothing
certifies that the rounded local minimum is the global integer optimum — use ``exact`` for that.
"""

from __future__ import annotations

import math

import numpy as np

from ...models.sample_size import SampleSizeProgram
from ... import _validate as V
from ...registry import register
from ...result import Solution, Status

_DESCRIPTION = "SciPy (optimize.minimize_scalar / minimize; local, not certified)"


@register("scipy", SampleSizeProgram, "solve", _DESCRIPTION)
def solve_scipy(model: SampleSizeProgram, segments: int = 16, xatol: float = 1e-10) -> Solution:
    try:
        from scipy.optimize import minimize_scalar
    except ImportError as exc:  # pragma: no cover - scipy is a dependency
        return Solution(status=Status.UNSUPPORTED, backend="scipy", message=f"scipy missing: {exc}")
    segments = V.count("segments", segments, maximum=10_000)
    xatol = V.tolerance("xatol", xatol, maximum=0.1)
    N, n0 = model.N, model.n_min        # n ≥ n_min keeps δ_n = N·δ/n ≤ 1
    logN = math.log(N)
    f = lambda t: float(model.variance(min(float(N), max(float(n0), math.exp(t)))))  # noqa: E731
    cands = {n0, N}
    nfev = 0
    if N > n0:
        edges = np.linspace(math.log(n0), logN, segments + 1)
        for lo, hi in zip(edges[:-1], edges[1:]):
            try:
                r = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": xatol})
            except Exception as exc:
                return Solution(status=Status.ERROR, backend="scipy", solver="minimize_scalar",
                                model="SampleSizeProgram", message=f"scipy failed: {exc}")
            nfev += int(r.nfev)
            x = min(float(N), max(float(n0), math.exp(float(r.x))))
            cands.update({int(math.floor(x)), int(math.ceil(x))})
    cands = np.array(sorted(c for c in cands if n0 <= c <= N), dtype=float)
    v = model.variance(cands)
    n_star = int(cands[int(np.argmin(v))])
    return model.make_solution(n=n_star, status=Status.FEASIBLE, backend="scipy", solver="minimize_scalar(bounded)",
                               message="best rounded local minimiser of the continuous V_n over "
                                       f"{segments} log-spaced segments; optimality not certified",
                               details={"evaluations": nfev})
