"""Common interface of every model family: declare once, solve with any capable backend."""

from __future__ import annotations

from .. import registry
from ..result import Solution


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

    def backends(self, task: str = "solve") -> list[str]:
        """Names of the backends able to run ``task`` on this model."""
        return registry.capable(self, task)

    def report(self, solution: Solution) -> str:
        """Human-readable summary of a solution (used by the CLI); written by :mod:`dpopt.io.report`."""
        from ..io.report import report      # reports live with the file formats, outside the mathematics
        return report(self, solution)
