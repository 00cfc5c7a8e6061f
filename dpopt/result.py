"""Result and certificate types shared by every model family and backend.

One `Solution` type is returned by every ``solve``/``relax`` call, whatever the model or backend,
in the spirit of scipy's ``OptimizeResult``: fixed, documented core fields plus a ``details``
mapping for what is specific to a model family (per-level MSE for a hierarchy, ``n_init`` for
Algorithm 1, ...). Items of ``details`` are also readable as attributes.
"""

from __future__ import annotations

import html
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


class CertificateKind(str, Enum):
    """The closed set of certificate kinds (docs/api.md); a Certificate of any other kind is refused."""

    EXCHANGE = "exchange"        # no improving one-unit exchange: integer optimality (docs/stratified.md)
    GAP = "gap"                  # a proven lower bound and the relative gap to it
    KKT = "kkt"                  # stationarity / feasibility residual of a continuous point
    SCAN = "scan"                # every candidate of a one-dimensional range evaluated
    ENUMERATION = "enumeration"  # every feasible integer point evaluated

    def __str__(self) -> str:  # print as the plain word
        return self.value


#: a gap certificate holds when the relative gap is at most ``rel_gap`` plus this: the floating-point
#: disagreement between dpopt's evaluation of the objective and a solver's own (scaled) objective and bound.
#: A solver's "gap 0" is a gap of this size, so an answer within it of a proven bound is ``optimal`` whatever
#: gap the solver was allowed to stop at.
PROVEN_GAP = 1e-9


def gap_proves(gap: float, rel_gap: float | None = None) -> bool:
    """Whether a relative gap to a proven lower bound proves the answer optimal within ``rel_gap`` (None: 0):
    ``gap <= rel_gap + PROVEN_GAP``. One rule for every gap certificate of a solver's bound."""
    try:
        g = float(gap)
    except (TypeError, ValueError):
        return False
    return math.isfinite(g) and g <= (rel_gap or 0.0) + PROVEN_GAP


@dataclass
class Certificate:
    """Evidence that a returned point is optimal; ``kind`` is a :class:`CertificateKind`.

    kind="exchange": the integer-optimality test of docs/stratified.md (exchange certificate);
    ``slack = min_right - max_left`` (≥ -tol·scale when optimal).
    kind="gap": a lower bound from a relaxation/outer approximation; ``gap`` is relative.
    kind="kkt": stationarity residual of a continuous solution.
    kind="scan" / "enumeration": every candidate was evaluated (one-dimensional range / integer points).
    """

    kind: CertificateKind
    optimal: bool
    slack: float = float("nan")
    tolerance: float = 0.0
    lower_bound: float = float("nan")
    gap: float = float("nan")
    message: str = ""

    def __post_init__(self) -> None:
        try:
            self.kind = CertificateKind(self.kind)
        except ValueError:
            allowed = ", ".join(k.value for k in CertificateKind)
            raise ValueError(f"certificate kind must be one of {allowed}; got {self.kind!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """The certificate's fields as a JSON-serialisable dict."""
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
    """The result of solving or relaxing a model (what each field holds per family: docs/api.md).

    Attributes
    ----------
    status : Status
    objective : model objective at the returned point (nan when there is none)
    n : integer decision: an int64 array (one entry per stratum) for stratified designs, a Python
        ``int`` where the family's decision is one number (sample size); None otherwise
    x : real decision vector for continuous problems (budgets, relaxations, probabilities), else None
    variance : a variance of interest when the model defines one (e.g. Var(mu_hat)), else nan
    certificate : Certificate or None
    backend : backend name, solver : underlying solver name (if any)
    model : the model class's name
    wall_time : seconds spent in the backend
    message : one or two sentences for people: what was proven, why it stopped (the step trail of a
        search goes to the ``dpopt`` logger, and to ``details["steps"]``)
    termination : the underlying solver's own termination reason, as it said it (``"maxTimeLimit"``,
        ``"optimal_inaccurate"``, ``"Time limit reached"``; ``""`` when no external solver ran). ``status``
        is what the point is worth; this is why the solver stopped (dpopt.backends._status maps one to the other)
    details : family- or backend-specific extras (also readable as attributes)
    epsilon : the privacy budgets a budget-allocation family chooses (ε per level of a hierarchy:
        the decision ``x`` itself); None for the other families
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
    epsilon: np.ndarray | None = None
    termination: str = ""

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if isinstance(self.n, np.integer) or (isinstance(self.n, np.ndarray) and self.n.ndim == 0):
            self.n = int(self.n)    # a scalar decision is a plain int (docs/api.md)

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
            "termination": self.termination,
            "details": {k: _jsonable(v) for k, v in self.details.items()},
            "epsilon": _jsonable(self.epsilon),
        }
        return out

    def _rows(self) -> tuple[str, list, dict[str, Any]]:
        """(index name, index, columns) of the decision: one row per stratum, level or record.

        The columns are the decision (``n``, ``x``, or ``epsilon`` for budgets) and every entry of
        ``details`` holding one number per row; a scalar decision gives one row with the scalar details.
        """
        pt = self.point
        if pt is None:
            return _ROW_NAMES.get(self.model, "row"), [], {}
        arr = np.asarray(pt)
        if arr.ndim == 0:
            cols: dict[str, Any] = {"n" if self.n is not None else "x": [pt], "objective": [self.objective],
                                    "variance": [self.variance]}
            for k, v in self.details.items():
                if k not in cols and _is_number(v):
                    cols[k] = [v]
            return "row", [0], cols
        size = arr.shape[0]
        name = _ROW_NAMES.get(self.model, "row")
        labels = self.details.get("labels")
        if isinstance(labels, (list, tuple)) and len(labels) == size:
            index = list(labels)
        elif name == "level":
            index = list(range(1, size + 1))           # levels are numbered from the root, 1..L
        else:
            index = list(range(size))
        cols = {"epsilon": np.asarray(self.epsilon)} if self.epsilon is not None else \
            {"n" if self.n is not None else "x": arr}
        for k, v in self.details.items():
            if k == "labels" or k in cols:
                continue
            if isinstance(v, np.ndarray):
                per_row = v.ndim == 1 and v.size == size and v.dtype.kind in "biuf"
            else:   # numbers, or names (a stratum's domain)
                per_row = isinstance(v, (list, tuple)) and len(v) == size and (
                    all(map(_is_number, v)) or all(isinstance(e, str) for e in v))
            if per_row:
                cols[k] = np.asarray(v)
        return name, index, cols

    def to_frame(self):
        """The decision as a pandas DataFrame: one row per stratum (indexed by label), level (1..L) or
        record, with the decision and the per-row details as columns; a scalar decision (sample size) gives
        one row. Status, objective, backend and solver are in ``frame.attrs``. Needs pandas (optional)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Solution.to_frame() needs pandas, which dpopt does not require: "
                              "pip install pandas") from None
        name, index, cols = self._rows()
        frame = pd.DataFrame(cols, index=pd.Index(index, name=name))
        frame.attrs.update(status=self.status.value, objective=self.objective, backend=self.backend,
                           solver=self.solver, model=self.model)
        return frame

    def _repr_html_(self) -> str:
        """Notebook display: the core fields, then the decision table (first 20 rows; no pandas needed)."""
        esc = html.escape
        fields = [("status", self.status.value), ("objective", f"{self.objective:.10g}")]
        if math.isfinite(self.variance):
            fields.append(("variance", f"{self.variance:.6g}"))
        if self.certificate is not None:
            fields.append(("certificate", str(self.certificate)))
        fields += [("model", self.model), ("backend", self.backend + (f" ({self.solver})" if self.solver else "")),
                   ("wall time", f"{self.wall_time:.3g} s")]
        if self.message:
            fields.append(("message", self.message))
        if self.termination:
            fields.append(("solver termination", self.termination))
        out = ["<div><strong>dpopt Solution</strong>", "<table>"]
        out += [f"<tr><th style='text-align:left'>{esc(k)}</th><td style='text-align:left'>{esc(str(v))}</td></tr>"
                for k, v in fields]
        out.append("</table>")
        name, index, cols = self._rows()
        if index:
            heads = [name] + list(cols)
            out.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in heads) + "</tr></thead><tbody>")
            for r, label in enumerate(index[:_HTML_ROWS]):
                cells = [label] + [_cell(np.asarray(c)[r]) for c in cols.values()]
                out.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>")
            out.append("</tbody></table>")
            if len(index) > _HTML_ROWS:
                out.append(f"<p>{len(index) - _HTML_ROWS} more rows (to_frame() has them all)</p>")
        out.append("</div>")
        return "\n".join(out)

    def __repr__(self) -> str:
        pt = self.point
        pts = "" if pt is None else f", {'n' if self.n is not None else 'x'}={np.array2string(np.asarray(pt), threshold=8)}"
        return (f"Solution(status={self.status.value}, objective={self.objective:.10g}{pts}, "
                f"backend={self.backend!r}, wall_time={self.wall_time:.3g}s)")


# what one row of Solution.to_frame() is, by model class (docs/api.md)
_ROW_NAMES = {"StratifiedDesign": "stratum", "MinCostDesign": "stratum", "HierarchyBudget": "level",
              "ImportanceSampling": "record"}
_HTML_ROWS = 20


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating, bool, np.bool_))


def _cell(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v.item() if isinstance(v, np.generic) else v)


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
