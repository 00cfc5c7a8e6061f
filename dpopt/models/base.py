"""Common interface of every model family: declare once, solve with any capable backend."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import registry
from ..feasibility import FEASIBILITY_TOL
from ..options import COMMON
from ..result import Certificate, Solution, Status

#: model class -> ``fn(model, solution) -> str``; filled by :mod:`dpopt.io.report` (imported by ``import dpopt``)
#: and by third-party families through :func:`register_report`, so the models never import the reports
_REPORTS: dict[type, Callable[..., str]] = {}


def register_report(model_cls: type):
    """Decorator registering ``fn(model, solution) -> str`` as the report of ``model_cls`` (and subclasses)."""
    def deco(fn):
        _REPORTS[model_cls] = fn
        return fn
    return deco


def report(model, solution: Solution) -> str:
    """The plain-text report of ``solution`` for ``model``: its family's registered report (looked up along the
    class's MRO), else the Solution's repr."""
    for cls in type(model).__mro__:
        if cls in _REPORTS:
            return _REPORTS[cls](model, solution)
    return repr(solution)


def _options_doc(what: str) -> str:
    """The docstring of Model.solve/relax, written from the option declarations (dpopt/options.py)."""
    lines = [f"{what} (default: the family's ``default_backend``) and return a :class:`~dpopt.result.Solution`",
             "with an honest status; solver faults become a status, bad options raise ValueError/TypeError.",
             "", "Common options (each backend takes the ones it can honour):", ""]
    for o in COMMON.values():
        lines.append(f"    {o.name} : {o.type}, default {o.default!r}, in {o.range}")
        lines.append(f"        {o.description}")
    lines += ["", "Each backend's own options: ``dpopt.options.OWN[backend]`` and the options table in the README;",
              "``model.backends()`` lists the backends able to run this model."]
    return "\n".join(lines)


class Model:
    """Base class of dpopt's backend-independent models.

    ``solve`` answers the model as stated (integer where the model is integer); ``relax`` answers its
    continuous relaxation. Both return a :class:`~dpopt.result.Solution` and turn solver faults into a
    status rather than an exception; bad *options* (unknown names, wrong types) still raise.
    """

    #: the default backend needs no external solver
    default_backend = "exact"

    def solve(self, backend: str | None = None, **options) -> Solution:
        return registry.dispatch(self, self.default_backend if backend is None else backend, "solve", options)

    def relax(self, backend: str | None = None, **options) -> Solution:
        return registry.dispatch(self, self.default_backend if backend is None else backend, "relax", options)

    solve.__doc__ = _options_doc("Answer the model as stated (integer where the model is integer) with ``backend``")
    relax.__doc__ = _options_doc("Answer the model's continuous relaxation with ``backend``")

    def backends(self, task: str = "solve") -> list[str]:
        """Names of the backends able to run ``task`` on this model."""
        return registry.capable(self, task)

    def make_solution(self, n=None, x=None, *, status: Status = Status.OPTIMAL,
                      certificate: Certificate | None = None, rel_gap: float | None = None, backend: str = "",
                      solver: str = "", message: str = "", details: dict | None = None) -> Solution:
        """The one way every backend packages an answer (same signature in every family).

        ``n``: an integer point (a vector of sample sizes, or one sample size); ``x``: a real point
        (a relaxation, budgets per level, probabilities). The family fills the objective, ``variance`` and its
        per-row details from the point; ``certificate`` is the backend's proof; ``details`` are added to the
        family's. ``rel_gap``: where the family proves a bound itself (importance sampling) the point is
        ``optimal`` only when that gap is ≤ rel_gap; every family demotes an ``optimal`` status whose
        certificate shows a gap above ``rel_gap`` to ``feasible`` (an answer is never labelled optimal beyond
        the caller's tolerance)."""
        raise NotImplementedError(f"{type(self).__name__} does not package solutions")

    def report(self, solution: Solution) -> str:
        """Human-readable summary of a solution (used by the CLI): the report :mod:`dpopt.io.report` registered
        for this family (:func:`register_report`), else the Solution's repr."""
        return report(self, solution)


def honest_status(sol: Solution, rel_gap: float | None) -> Solution:
    """Demote an ``optimal`` answer whose certificate shows a relative gap above ``rel_gap`` (shared by every
    family's :meth:`Model.make_solution`)."""
    cert = sol.certificate
    _refuse_bound_above_point(sol)
    if rel_gap is None or cert is None or sol.status != Status.OPTIMAL:
        return sol
    gap = getattr(cert, "gap", None)
    if gap is not None and gap == gap and gap > rel_gap:
        sol.status = Status.FEASIBLE
        cert.optimal = False
        note = f"proven relative gap {gap:.3e} > rel_gap {rel_gap:g}"
        sol.message = f"{sol.message}; {note}" if sol.message else note
    return sol


def _refuse_bound_above_point(sol: Solution) -> None:
    """``optimal`` never rests on a lower bound above the point's own objective (a bound is made safe in
    floating point, docs/constrained.md; one above the point is a numerical failure, not a proof): demote it
    to ``feasible``. Allowed excess: FEASIBILITY_TOL relative to the objective."""
    cert = sol.certificate
    lb = getattr(cert, "lower_bound", None) if cert is not None else None
    obj = sol.objective
    if sol.status != Status.OPTIMAL or lb is None or obj is None:
        return
    try:
        lb, obj = float(lb), float(obj)
    except (TypeError, ValueError):
        return
    if lb == lb and obj == obj and lb > obj + FEASIBILITY_TOL * abs(obj):
        sol.status = Status.FEASIBLE
        cert.optimal = False
        note = f"the certificate's lower bound {lb!r} exceeds the objective {obj!r}: not a proof"
        sol.message = f"{sol.message}; {note}" if sol.message else note


class DesignDelegate:
    """The data a model built on a :class:`StratifiedDesign` reads from it (``self.design``): k, the bounds, N."""

    @property
    def k(self) -> int:
        return self.design.k

    @property
    def lower(self) -> np.ndarray:
        return self.design.lower

    @property
    def upper(self) -> np.ndarray:
        return self.design.upper

    @property
    def N(self) -> np.ndarray:
        return self.design.N
