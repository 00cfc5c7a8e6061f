"""Run every capable backend on one model and compare: ``dpopt.compare(model)`` / ``dpopt compare FILE``.

Rows are backend *variants*: ``"pyomo:scip"`` and ``"pyomo:highs"`` are the two Pyomo routes; a plain
name runs the backend with its defaults. Each row records status, objective, relative gap to the best
objective among rows that returned a point, the certificate verdict (the exchange certificate for
integer designs of the plain sum problem, else the solver's own certificate if any) and wall time.
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

import numpy as np

from . import registry
from .report import table
from .result import Solution, Status

#: variants run for each backend name when the caller does not list them
VARIANTS = {"pyomo": {"solve": ["pyomo:scip", "pyomo:highs"], "relax": ["pyomo:scip"]}}


def _options_for(name: str) -> tuple[str, dict[str, Any]]:
    if ":" in name:
        backend, solver = name.split(":", 1)
        return backend, {"solver": solver}
    return name, {}


def _accepts(model, backend: str, task: str, option: str) -> bool:
    fn = registry._find(backend, model, task)
    if fn is None:
        return False
    params = inspect.signature(fn).parameters
    return option in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


class CompareResult(list):
    """A list of Solutions (one per backend variant, in run order) with ``table()`` and ``to_dict()``."""

    def __init__(self, model, names, solutions, task):
        super().__init__(solutions)
        self.model = model
        self.names = list(names)
        self.task = task

    @property
    def best(self) -> Solution | None:
        pts = [s for s in self if s.ok and np.isfinite(s.objective) and s.status != Status.ERROR]
        return min(pts, key=lambda s: s.objective) if pts else None

    def _rows(self):
        best = self.best
        out = []
        for name, s in zip(self.names, self):
            gap = float("nan")
            if best is not None and s.ok and np.isfinite(s.objective):
                gap = (s.objective - best.objective) / abs(best.objective) if best.objective else 0.0
            out.append({"backend": name, "status": s.status.value, "objective": s.objective, "gap_to_best": gap,
                        "certificate": self._verdict(s), "wall_time": s.wall_time, "message": s.message})
        return out

    def _verdict(self, s: Solution) -> str:
        m = self.model
        if s.n is not None and getattr(m, "is_plain", False) and hasattr(m, "certificate"):
            return "holds" if m.certificate(s.n).optimal else "FAILS"
        if s.certificate is not None:
            return f"{s.certificate.kind}:{'holds' if s.certificate.optimal else 'fails'}"
        return "-"

    def table(self) -> str:
        rows = [[r["backend"], r["status"], r["objective"], r["gap_to_best"], r["certificate"], r["wall_time"]]
                for r in self._rows()]
        return table(["backend", "status", "objective", "rel. gap to best", "certificate", "time (s)"], rows,
                     ["s", "s", ".12g", ".2e", "s", ".3g"])

    def to_dict(self) -> dict[str, Any]:
        rows = self._rows()
        for r, s in zip(rows, self):
            r["solution"] = s.to_dict()
            for key in ("objective", "gap_to_best"):
                r[key] = None if not np.isfinite(r[key]) else float(r[key])
        return {"model": repr(self.model), "task": self.task, "results": rows}


def compare(model, backends=None, time_limit: float | None = None, progress: bool = True,
            relax: bool = False, options: dict[str, dict] | None = None) -> CompareResult:
    """Solve ``model`` with each backend (variant) and collect the Solutions.

    backends: names such as ``["exact", "algorithm1", "pyomo:scip", "pyomo:highs", "cvxpy"]``; default:
    every backend with a handler for the model (Pyomo expanded into its variants).
    time_limit: passed to the backends that accept a ``time_limit`` option.
    progress: print one line per backend to stderr while running.
    options: extra options per row name, e.g. ``{"algorithm1": {"max_candidates": 10**8}}``.
    """
    task = "relax" if relax else "solve"
    if backends is None:
        names = []
        for b in registry.capable(model, task):
            names += VARIANTS.get(b, {}).get(task, [b])
        names.sort(key=lambda n: n != "exact")   # the reference first
    else:
        if isinstance(backends, str):
            backends = [b for b in backends.replace(",", " ").split() if b]
        names = list(backends)
        known = registry.available_backends()
        for n in names:
            if _options_for(n)[0] not in known:
                raise ValueError(f"unknown backend {n!r}; available: {', '.join(sorted(known))}")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    options = options or {}
    sols = []
    for k, name in enumerate(names, 1):
        backend, opts = _options_for(name)
        opts.update(options.get(name, {}))
        if time_limit is not None and _accepts(model, backend, task, "time_limit"):
            opts.setdefault("time_limit", time_limit)
        if progress:
            print(f"[{k}/{len(names)}] {name} ...", end="", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            sol = registry.dispatch(model, backend, task, opts)
        except (ValueError, TypeError) as exc:   # a bad option for this backend: report, keep going
            sol = Solution(Status.ERROR, backend=backend, message=f"{type(exc).__name__}: {exc}")
        sol.wall_time = sol.wall_time or time.perf_counter() - t0
        if progress:
            print(f" {sol.status.value} ({sol.wall_time:.3g} s)", file=sys.stderr, flush=True)
        sols.append(sol)
    return CompareResult(model, names, sols, task)
