"""The privacy ledger: every measurement's budget per person, composed, checked against a declared total.

Structure of a release record (docs/release.md has the rules and the audit format):

* a **measurement** is one OpenDP noise measurement, with the ε its own privacy map certifies for one
  person's change (the *nominal* budget when it runs on a sample);
* a **cell** is a part of the population the release touches; its measurements compose sequentially
  (several study variables of one person), and when the cell is an SRS of n out of N the composed
  nominal budget is amplified to ``log1p((n/N)·expm1(ε_nominal))``;
* a **part** groups disjoint cells (strata of one release, nodes of one level): they compose in parallel,
  so a part costs the largest of its cells;
* a **release** is a sequence of parts (the levels of a hierarchy), composing sequentially;
* the **ledger** composes its releases sequentially. Releases that reuse one sample (same fingerprint)
  are composed on the nominal scale first and amplified once, per cell: amplifying separately and adding
  would under-count, because the releases share the sampling randomness.

All sums round up (:func:`sum_up`) and amplification rounds up (:func:`amplify_up`), so a recorded
budget is never below the exact one; a charge that would take the total above the declared ε is refused
before any noise is drawn.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import _validate as V

AUDIT_FORMAT = "dpopt-privacy-audit/1"


class BudgetExceeded(ValueError):
    """A release would take the ledger's per-person ε (or δ) above the declared total."""


# ---------------------------------------------------------------------------------- arithmetic
def sum_up(values) -> float:
    """Σ values rounded up: the correctly rounded sum, moved up one ulp when it fell below the exact sum."""
    xs = [float(v) for v in values]
    if not xs:
        return 0.0
    s = math.fsum(xs)
    if math.fsum(xs + [-s]) > 0:          # the exact residual Σ − s is positive: s rounded down
        s = math.nextafter(s, math.inf)
    return s


# relative error bound of amplify's float evaluation is a few ulps; 2^-48 (= 32 ulps) covers it
_AMPLIFY_MARGIN = 2.0 ** -48


def amplify(epsilon_nominal: float, n: int, N: int) -> float:
    """log1p((n/N)·expm1(ε_nominal)): the central ε of an ε_nominal mechanism run on an SRS of n out of N."""
    e = float(epsilon_nominal)
    if n == N:
        return e
    q = n / N
    if e <= 700.0:
        return math.log1p(math.expm1(e) * q)
    # q·e^e overflows: log1p(q(e^e − 1)) = e + log q + log1p((1 − q)/q · e^{−e})
    return e + math.log(q) + math.log1p((1.0 - q) / q * math.exp(-e))


def amplify_up(epsilon_nominal: float, n: int, N: int) -> float:
    """:func:`amplify` rounded up (never below the exact value)."""
    if n == N:
        return float(epsilon_nominal)
    return amplify(epsilon_nominal, n, N) * (1.0 + _AMPLIFY_MARGIN)


def nominal_within(epsilon: float, n: int, N: int) -> float:
    """The largest nominal budget (to within a few ulps) whose :func:`amplify_up` is ≤ ``epsilon``."""
    eps = float(epsilon)
    if n == N:
        return eps
    q = n / N
    # log1p(expm1(ε)/q), in log space for large ε
    e = eps + math.log1p(-math.exp(-eps)) - math.log(q) if eps > 1.0 else math.log(math.expm1(eps) / q)
    nominal = e + math.log1p(math.exp(-e)) if e > 0 else math.log1p(math.exp(e))
    step = 2.0 ** -52
    for _ in range(200):
        if amplify_up(nominal, n, N) <= eps:
            return nominal
        nominal *= 1.0 - step
        step *= 2.0
    raise RuntimeError(f"no nominal budget found for epsilon={eps!r}, n={n}, N={N}")  # pragma: no cover


# ---------------------------------------------------------------------------------- records
@dataclass
class Measurement:
    """One OpenDP noise measurement: ``epsilon`` is what its privacy map certifies at ``sensitivity``."""

    name: str
    mechanism: str
    sensitivity: float
    scale: float
    epsilon: float
    delta: float = 0.0
    noise_variance: float = float("nan")


@dataclass
class Cell:
    """Measurements on one part of the population (sequential); sampled when ``n`` < ``N``."""

    name: str
    measurements: list[Measurement]
    N: int | None = None
    n: int | None = None

    @property
    def epsilon_nominal(self) -> float:
        return sum_up(m.epsilon for m in self.measurements)

    @property
    def delta_nominal(self) -> float:
        return sum_up(m.delta for m in self.measurements)

    @property
    def epsilon(self) -> float:
        """Per-person central ε of the cell (amplified when sampled)."""
        e = self.epsilon_nominal
        return e if self.N is None else amplify_up(e, self.n, self.N)

    @property
    def delta(self) -> float:
        d = self.delta_nominal
        return d if self.N is None else d * self.n / self.N


@dataclass
class Part:
    """Cells on disjoint parts of the population: parallel composition (the largest cell counts)."""

    name: str
    cells: list[Cell]

    @property
    def epsilon(self) -> float:
        return max(c.epsilon for c in self.cells)

    @property
    def delta(self) -> float:
        return max(c.delta for c in self.cells)


@dataclass
class ReleaseRecord:
    """One release: parts composed sequentially. ``sample`` is the fingerprint of the sample it used."""

    name: str
    kind: str
    parts: list[Part]
    sample: str | None = None
    target_epsilon: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return sum_up(p.epsilon for p in self.parts)

    @property
    def delta(self) -> float:
        return sum_up(p.delta for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        parts = []
        for p in self.parts:
            cells = []
            for c in p.cells:
                cells.append({"name": c.name, "N": c.N, "n": c.n, "epsilon_nominal": c.epsilon_nominal,
                              "epsilon": c.epsilon, "delta": c.delta,
                              "measurements": [asdict(m) for m in c.measurements]})
            parts.append({"name": p.name, "epsilon": p.epsilon, "delta": p.delta, "cells": cells})
        return {"name": self.name, "kind": self.kind, "sample": self.sample, "target_epsilon": self.target_epsilon,
                "epsilon": self.epsilon, "delta": self.delta, "parts": parts, "details": _plain(self.details)}

    @classmethod
    def from_dict(cls, d: dict) -> "ReleaseRecord":
        parts = [Part(p["name"], [Cell(c["name"], [Measurement(**m) for m in c["measurements"]], c["N"], c["n"])
                                  for c in p["cells"]]) for p in d["parts"]]
        return cls(d["name"], d["kind"], parts, d.get("sample"), d.get("target_epsilon"), d.get("details", {}))


def _plain(v):
    """JSON-ready copy (numpy scalars and arrays to Python; non-finite floats to None)."""
    import numpy as np
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


# ---------------------------------------------------------------------------------- the ledger
class PrivacyLedger:
    """Per-person (ε, δ) spent by a sequence of releases on one population, against a declared total.

    ``charge(record)`` adds a release after checking that the composed total stays within
    ``epsilon_total`` (and ``delta_total``); otherwise it raises :class:`BudgetExceeded` and records
    nothing. Releases call it *before* drawing any noise.
    """

    def __init__(self, epsilon_total, delta_total: float = 0.0, name: str = ""):
        self.epsilon_total = V.positive("epsilon_total", epsilon_total)
        self.delta_total = V.probability("delta_total", delta_total)
        self.name = str(name)
        self.records: list[ReleaseRecord] = []

    def __repr__(self) -> str:
        return (f"PrivacyLedger(spent={self.epsilon_spent:.6g} of epsilon_total={self.epsilon_total:g}, "
                f"releases={len(self.records)})")

    # ----------------------------------------------------------------- composition
    @staticmethod
    def compose(records) -> tuple[float, float]:
        """Per-person (ε, δ) of ``records`` (see the module note: same-sample releases compose nominally)."""
        groups: dict[Any, list[ReleaseRecord]] = {}
        for i, r in enumerate(records):
            groups.setdefault(r.sample if r.sample else ("unsampled", i), []).append(r)
        eps_terms, delta_terms = [], []
        for recs in groups.values():
            if len(recs) == 1:
                eps_terms.append(recs[0].epsilon)
                delta_terms.append(recs[0].delta)
                continue
            # one sample, several releases: per cell, sum the nominal budgets, then amplify once
            cells: dict[str, list[Cell]] = {}
            for r in recs:
                if len(r.parts) != 1:
                    raise ValueError(f"release {r.name!r} reuses a sample but has several sequential parts; "
                                     "draw a new sample for it")
                for c in r.parts[0].cells:
                    cells.setdefault(c.name, []).append(c)
            worst_e, worst_d = 0.0, 0.0
            for name, cs in cells.items():
                Ns = {(c.N, c.n) for c in cs}
                if len(Ns) != 1:
                    raise ValueError(f"cell {name!r} has different (N, n) in releases of one sample")
                N, n = Ns.pop()
                merged = Cell(name, [m for c in cs for m in c.measurements], N, n)   # nominal sums, amplified once
                worst_e, worst_d = max(worst_e, merged.epsilon), max(worst_d, merged.delta)
            eps_terms.append(worst_e)
            delta_terms.append(worst_d)
        return sum_up(eps_terms), sum_up(delta_terms)

    @property
    def epsilon_spent(self) -> float:
        return self.compose(self.records)[0]

    @property
    def delta_spent(self) -> float:
        return self.compose(self.records)[1]

    @property
    def epsilon_remaining(self) -> float:
        return max(self.epsilon_total - self.epsilon_spent, 0.0)

    def check(self, record: ReleaseRecord) -> tuple[float, float]:
        """The (ε, δ) total with ``record`` added; :class:`BudgetExceeded` if it exceeds the declared total."""
        eps, delta = self.compose(self.records + [record])
        if eps > self.epsilon_total or delta > self.delta_total:
            spent = self.epsilon_spent
            raise BudgetExceeded(
                f"release {record.name!r} refused: it needs epsilon {record.epsilon:.6g} per person"
                f"{', delta ' + format(record.delta, '.3g') if record.delta else ''}; with the "
                f"{spent:.6g} already spent the total would be {eps:.6g} > epsilon_total {self.epsilon_total:g}"
                + (f" (or delta {delta:.3g} > {self.delta_total:g})" if delta > self.delta_total else "")
                + "; no noise was drawn")
        return eps, delta

    def charge(self, record: ReleaseRecord) -> float:
        """Check and add ``record``; returns the new per-person ε spent."""
        eps, _ = self.check(record)
        self.records.append(record)
        return eps

    # ----------------------------------------------------------------- audit
    def audit(self, extra: dict | None = None) -> dict[str, Any]:
        """The JSON-ready audit record: declared totals, every release with its measurements, the
        composition and the software versions (no seeds, keys or data)."""
        eps, delta = self.compose(self.records)
        out = {"format": AUDIT_FORMAT, "ledger": self.name, "epsilon_total": self.epsilon_total,
               "delta_total": self.delta_total, "epsilon_spent": eps, "delta_spent": delta,
               "within_budget": bool(eps <= self.epsilon_total and delta <= self.delta_total),
               "composition": {
                   "within_cell": "sequential over measurements (nominal), then amplification by SRS without "
                                  "replacement: log1p((n/N) * expm1(epsilon_nominal))",
                   "across_cells": "parallel (disjoint parts of the population): maximum",
                   "across_parts": "sequential: sum",
                   "across_releases": "sequential: sum; releases sharing a sample fingerprint are summed on the "
                                      "nominal scale per cell and amplified once",
                   "rounding": "sums and amplification rounded up"},
               "releases": [r.to_dict() for r in self.records],
               "software": _versions()}
        if extra:
            out.update(_plain(extra))
        return out

    def write_audit(self, path, extra: dict | None = None) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.audit(extra), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_audit(cls, audit) -> "PrivacyLedger":
        """Rebuild a ledger from an audit record (a dict or a JSON file) to recheck its composition."""
        if not isinstance(audit, dict):
            audit = json.loads(Path(audit).read_text(encoding="utf-8"))
        if audit.get("format") != AUDIT_FORMAT:
            raise ValueError(f"not a dpopt privacy audit (format {audit.get('format')!r}, expected {AUDIT_FORMAT!r})")
        led = cls(audit["epsilon_total"], audit.get("delta_total", 0.0), audit.get("ledger", ""))
        led.records = [ReleaseRecord.from_dict(r) for r in audit["releases"]]
        return led


def _versions() -> dict[str, str]:
    from importlib import metadata
    out = {}
    for pkg in ("dpopt", "opendp", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:  # pragma: no cover - depends on the environment
            out[pkg] = "not installed"
    return out
