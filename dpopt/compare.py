"""Run every capable backend on one model and compare: ``dpopt.compare(model)`` / ``dpopt compare FILE``.

Rows are backend *variants*: ``"backend:solver"`` runs the backend with ``solver=...`` (e.g. ``"pyomo:scip"``
and ``"pyomo:highs"``, the two Pyomo routes for stratified designs); a plain name runs the backend with its
defaults. By default a backend is split into solver variants only where its handler for the model's class
and task takes those solvers (see :func:`default_rows`); elsewhere it runs once, under its plain name. Each
row records the formulation the solver ran (SCIP and HiGHS get their strongest, :data:`STRONGEST_FORMULATION`,
unless the row's options name another), status, objective, the gap the solver proved (never nan: inf when
nothing bounds it), relative gap to the best objective among rows that returned a point, the
certificate verdict (the exchange certificate for integer designs of the plain sum problem, else the
solver's own certificate if any), wall time and, for rows that are not optimal, the backend's message.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from . import _validate as V
from . import registry
from .io.report import table
from .result import Solution, Status

#: solver variants of a backend per task; :func:`default_rows` uses them only for handlers that take them
VARIANTS = {"pyomo": {"solve": ["pyomo:scip", "pyomo:highs"], "relax": ["pyomo:scip"]}}

#: the strongest formulation of each generic solver for an integer stratified design, used by default so that a
#: comparison is fair to the solver (issue 20): the secant MILP (docs/constrained.md), whose bound SCIP and
#: HiGHS tighten by LP alone; SCIP's MINLP proved the plain problem only up to k = 6-8 in 10 s
STRONGEST_FORMULATION = {("pyomo", "scip"): "secant", ("pyomo", "highs"): "secant"}

#: width of the table's "note" column (the message of rows that are not optimal); to_dict() keeps it whole
NOTE_WIDTH = 60


def _options_for(name: str) -> tuple[str, dict[str, Any]]:
    if ":" in name:
        backend, solver = name.split(":", 1)
        return backend, {"solver": solver}
    return name, {}


def _accepts(model, backend: str, task: str, option: str) -> bool:
    return registry.option_parameter(model, backend, task, option) is not None


def handler_solvers(model, backend: str, task: str) -> tuple[str, ...] | None:
    """The solver names the handler of (backend, model class, task) takes (its ``solvers`` attribute, set by
    the Pyomo handlers from their allow-list), or None when it declares none."""
    if registry.option_parameter(model, backend, task, "solver") is None:
        return None
    fn = registry._find(backend, model, task)
    return tuple(getattr(fn, "solvers", ())) or None


def _variants(model, backend: str, task: str) -> list[str]:
    """Row names for ``backend``: its solver variants where the handler takes them, else just ``backend``.

    The variants of :data:`VARIANTS` whose solver the handler takes are used only when the handler for this
    model class and task takes several solvers (the stratified Pyomo handler: ``"scip"``/``"highs"``). A
    handler with a single solver (Pyomo on hierarchies and sample-size programs: SCIP) runs once, by default.
    """
    names = VARIANTS.get(backend, {}).get(task)
    takes = handler_solvers(model, backend, task) or ()
    kept = [n for n in names or () if _options_for(n)[1].get("solver") in takes]
    return kept if kept and len(takes) >= 2 else [backend]


def default_rows(model, task: str = "solve") -> list[str]:
    """The rows :func:`compare` runs when no backends are given: every capable backend (split into its solver
    variants where the handler takes them), the exact reference first."""
    names = []
    for b in registry.capable(model, task):
        names += _variants(model, b, task)
    names.sort(key=lambda n: n != "exact")   # the reference first
    return names


def _note(s: Solution) -> str:
    """One-line, shortened message of a row that is not optimal ('' for optimal rows)."""
    if s.status == Status.OPTIMAL:
        return ""
    msg = " ".join(str(s.message or "").split()) or "-"
    return msg if len(msg) <= NOTE_WIDTH else msg[:NOTE_WIDTH - 3].rstrip() + "..."


def proven_gap(s: Solution) -> float:
    """The relative gap a row's solver proved, never nan: the certificate's gap, else (objective − lower bound)
    / |objective| from its reported bound; 0 for a row proven optimal without a gap figure; inf when nothing
    bounds it (no point, or no bound: a solver stopped by its limit without either)."""
    cert = s.certificate
    if cert is not None and cert.gap is not None and not np.isnan(cert.gap):
        return max(float(cert.gap), 0.0)
    lb = s.details.get("lower_bound")
    try:
        obj, lb = float(s.objective), float(lb)
    except (TypeError, ValueError):
        obj = lb = float("nan")
    if s.ok and np.isfinite(obj) and np.isfinite(lb):
        return max(obj - lb, 0.0) / abs(obj) if obj else (0.0 if lb >= obj else float("inf"))
    if s.status == Status.OPTIMAL and cert is not None and cert.optimal:
        return 0.0
    return float("inf")


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
            out.append({"backend": name, "formulation": s.details.get("formulation") or "-",
                        "status": s.status.value, "objective": s.objective, "gap_to_best": gap,
                        "proven_gap": proven_gap(s), "certificate": self._verdict(s), "wall_time": s.wall_time,
                        "message": s.message})
        return out

    def _verdict(self, s: Solution) -> str:
        m = self.model
        if s.n is not None and getattr(m, "is_plain", False) and hasattr(m, "certificate"):
            return "holds" if m.certificate(s.n).optimal else "FAILS"
        if s.certificate is not None:
            return f"{s.certificate.kind}:{'holds' if s.certificate.optimal else 'fails'}"
        return "-"

    def table(self) -> str:
        """Text table; a last, left-aligned "note" column gives the (shortened) message of rows that are not
        optimal, and is left out when every row is optimal."""
        rows = [[r["backend"], r["formulation"], r["status"], r["objective"], r["proven_gap"], r["gap_to_best"],
                 r["certificate"], r["wall_time"]] for r in self._rows()]
        headers = ["backend", "formulation", "status", "objective", "proven gap", "rel. gap to best", "certificate",
                   "time (s)"]
        formats = ["s", "s", "s", ".12g", ".2e", ".2e", "s", ".3g"]
        notes = [_note(s) for s in self]
        if any(notes):
            w = max(len("note"), *(len(n) for n in notes))
            headers.append("note".ljust(w))
            formats.append("s")
            for row, n in zip(rows, notes):
                row.append(n.ljust(w))
        return "\n".join(line.rstrip() for line in table(headers, rows, formats).splitlines())

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-serialisable dict: one row per backend (and solver) with its Solution."""
        rows = self._rows()
        for r, s in zip(rows, self):
            r["solution"] = s.to_dict()
            for key in ("objective", "gap_to_best", "proven_gap"):
                r[key] = None if not np.isfinite(r[key]) else float(r[key])
        return {"model": repr(self.model), "task": self.task, "results": rows}


def compare(model, backends=None, time_limit: float | None = None, progress: bool = True,
            relax: bool = False, options: dict[str, dict] | None = None) -> CompareResult:
    """Solve ``model`` with each backend (variant) and collect the Solutions.

    backends: names such as ``["exact", "algorithm1", "pyomo:scip", "pyomo:highs", "cvxpy"]``; default:
    :func:`default_rows` (every backend with a handler for the model; Pyomo split into ``pyomo:scip`` and
    ``pyomo:highs`` only where its handler takes those solvers, else run once as ``pyomo``).
    time_limit: passed to the backends whose handler has a ``time_limit`` parameter (not to the others).
    progress: print one line per backend to stderr while running.
    options: extra options per row name, e.g. ``{"algorithm1": {"max_candidates": 10**8}}``.
    """
    task = "relax" if relax else "solve"
    if backends is None:
        names = default_rows(model, task)
    else:
        if isinstance(backends, str):
            backends = [b for b in backends.replace(",", " ").split() if b]
        names = list(backends)
        known = registry.available_backends()
        for n in names:
            if _options_for(n)[0] not in known:
                raise ValueError(f"unknown backend {n!r}; available: {', '.join(sorted(known))}")
    time_limit = V.time_limit(time_limit)
    options = options or {}
    sols = []
    for k, name in enumerate(names, 1):
        backend, opts = _options_for(name)
        opts.update(options.get(name, {}))
        if time_limit is not None and _accepts(model, backend, task, "time_limit"):
            opts.setdefault("time_limit", time_limit)
        strongest = STRONGEST_FORMULATION.get((backend, str(opts.get("solver", "")).lower()))
        if strongest is not None and task == "solve" and _accepts(model, backend, task, "formulation"):
            opts.setdefault("formulation", strongest)
        if progress:
            print(f"[{k}/{len(names)}] {name} ...", end="", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            if "solver" in opts and backend in registry.capable(model, task) \
                    and not _accepts(model, backend, task, "solver"):
                sol = Solution(Status.UNSUPPORTED, backend=backend, model=type(model).__name__,
                               message=f"backend {backend!r} takes no solver option for a {type(model).__name__} "
                                       f"({task}); run it as {backend!r}")
            else:
                sol = registry.dispatch(model, backend, task, opts)
        except (ValueError, TypeError) as exc:   # a bad option for this backend: report, keep going
            sol = Solution(Status.ERROR, backend=backend, message=f"{type(exc).__name__}: {exc}")
        sol.wall_time = sol.wall_time or time.perf_counter() - t0
        if progress:
            print(f" {sol.status.value} ({sol.wall_time:.3g} s)", file=sys.stderr, flush=True)
        sols.append(sol)
    return CompareResult(model, names, sols, task)
