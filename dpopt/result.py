"""Result and certificate types shared by every model family and backend.

One `Solution` type is returned by every ``solve``/``relax`` call, whatever the model or backend,
in the spirit of scipy's ``OptimizeResult``: fixed, documented core fields plus a ``details``
mapping for what is specific to a model family (per-level MSE for a hierarchy, ``n_init`` for
Algorithm 1, ...). Items of ``details`` are also readable as attributes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np


class Status(str, Enum):
    """Outcome of a solve. Only ``OPTIMAL`` claims optimality."""

    OPTIMAL = "optimal"          # proven optimal (certificate or solver proof)
    FEASIBLE = "feasible"        # feasible point, optimality not proven (see gap)
    INFEASIBLE = "infeasible"    # the model has no feasible point
    TIME_LIMIT = "time_limit"    # stopped by a limit; a point may be present
    ERROR = "error"              # solver or numerical failure
    UNSUPPORTED = "unsupported"  # backend cannot honour this model (or is not installed)

    def __str__(self) -> str:  # print as the plain word
        return self.value


@dataclass
class Certificate:
    """Evidence that a returned point is optimal.

    kind="exchange": the integer-optimality test of SPEC §2 fact 3;
    ``slack = min_right - max_left`` (≥ -tol·scale when optimal).
    kind="gap": a lower bound from a relaxation/outer approximation; ``gap`` is relative.
    kind="kkt": stationarity residual of a continuous solution.
    """

    kind: str
    optimal: bool
    slack: float = float("nan")
    tolerance: float = 0.0
    lower_bound: float = float("nan")
    gap: float = float("nan")
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in self.__dict__.items()}

    def __str__(self) -> str:
        verdict = "holds" if self.optimal else "FAILS"
        if self.kind == "exchange":
            return f"exchange certificate {verdict} (slack {self.slack:.3e}, tol {self.tolerance:.1e})"
        if self.kind == "gap":
            return f"gap certificate {verdict} (relative gap {self.gap:.3e}, bound {self.lower_bound:.6g})"
        return f"{self.kind} certificate {verdict} {self.message}".strip()


@dataclass
class Solution:
    """The result of solving or relaxing a model.

    Attributes
    ----------
    status : Status
    objective : model objective at the returned point (nan when there is none)
    n : integer design (int64 array) for integer problems, else None
    x : real decision vector for continuous problems (budgets, relaxations), else None
    variance : a variance of interest when the model defines one (e.g. Var(mu_hat)), else nan
    certificate : Certificate or None
    backend : backend name, solver : underlying solver name (if any)
    wall_time : seconds spent in the backend
    message : solver message / why a status was reached
    details : family- or backend-specific extras (also readable as attributes)
    """

    status: Status
    objective: float = float("nan")
    n: np.ndarray | None = None
    x: np.ndarray | None = None
    variance: float = float("nan")
    certificate: Certificate | None = None
    backend: str = ""
    solver: str = ""
    model: str = ""
    wall_time: float = 0.0
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: expose details as attributes
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"Solution has no attribute {name!r}")

    @property
    def ok(self) -> bool:
        """True when a point is available (optimal or feasible or time-limited with a point)."""
        return self.n is not None or self.x is not None

    @property
    def point(self) -> np.ndarray | None:
        return self.n if self.n is not None else self.x

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (numpy arrays become lists, nan becomes None)."""
        out: dict[str, Any] = {
            "status": self.status.value,
            "objective": _jsonable(self.objective),
            "n": _jsonable(self.n),
            "x": _jsonable(self.x),
            "variance": _jsonable(self.variance),
            "certificate": self.certificate.to_dict() if self.certificate else None,
            "backend": self.backend,
            "solver": self.solver,
            "model": self.model,
            "wall_time": self.wall_time,
            "message": self.message,
            "details": {k: _jsonable(v) for k, v in self.details.items()},
        }
        return out

    def __repr__(self) -> str:
        pt = self.point
        pts = "" if pt is None else f", {'n' if self.n is not None else 'x'}={np.array2string(np.asarray(pt), threshold=8)}"
        return (f"Solution(status={self.status.value}, objective={self.objective:.10g}{pts}, "
                f"backend={self.backend!r}, wall_time={self.wall_time:.3g}s)")


def _jsonable(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, np.ndarray):
        return [_jsonable(a) for a in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_jsonable(a) for a in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(a) for k, a in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if not math.isfinite(f) else f
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (int, str)):
        return v
    if hasattr(v, "to_dict"):
        return v.to_dict()
    return str(v)
