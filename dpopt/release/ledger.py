"""The privacy ledger: every measurement's budget per person, composed, checked against a declared total.

Structure of a release record (docs/release.md §6 has the rules and the audit format):

* a **measurement** is one OpenDP noise measurement, with the ε its own privacy map certifies for one
  person's change (the *nominal* budget when it runs on a sample);
* a **cell** is a set of people the release touches (a stratum, a level of a hierarchy), named by
  ``members`` (a hash of its units' ids, :func:`dpopt.sampling.members_id`); its measurements compose
  sequentially, and when the cell is an SRS of n out of N the composed nominal budget is amplified to
  ``log1p((n/N)·expm1(ε_nominal))``;
* a **part** groups disjoint cells (the strata of one stratification, named by ``partition``): parallel;
* a **release** is a sequence of parts (the levels of a hierarchy), composing sequentially, and names
  the sampling key its sample was drawn with (``sample["key"]``, never the key itself).

The ledger charges **per person**, from the cells that person is in (never from a cell's name): releases
drawn with different keys have independent samples and add their amplified budgets; releases drawn with
one key share the permanent random numbers, so for a person they are amplified together (nominal budgets
summed, amplified once at the largest rate) only when all of them sample one set of units (nested SRS
draws) and the key's other draws are on sets provably disjoint from it; otherwise the person is charged
the nominal budgets, without amplification. The total is the largest charge over all people.

All sums round up (:func:`sum_up`) and amplification rounds up (:func:`amplify_up`), so a recorded
budget is never below the exact one; a charge that would take the total above the declared ε is refused
before any noise is drawn. :meth:`PrivacyLedger.from_audit` re-verifies an audit record before use.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import numbers
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import _validate as V
from ..privacy.mechanisms import MECHANISMS
from ..privacy.mechanisms.base import ACCOUNTED_GUARANTEES
from ..sampling import partition_id

AUDIT_FORMAT = "dpopt-privacy-audit/3"
_OLD_FORMATS = ("dpopt-privacy-audit/1",)
#: audits of this format predate (ε, δ) and ρ accounting: read as pure ε-DP measurements
_PURE_FORMATS = ("dpopt-privacy-audit/2",)

#: what a measurement's budget means (docs/release.md §6): pure ε-DP, (ε, δ)-DP, ρ-zCDP — the kinds the
#: mechanisms' guarantees declare (dpopt.privacy.mechanisms.base)
GUARANTEES = ACCOUNTED_GUARANTEES
#: what a ledger accounts: ε (pure), (ε, δ) (approx) or ρ (zcdp)
ACCOUNTINGS = ACCOUNTED_GUARANTEES


class BudgetExceeded(ValueError):
    """A release would take the ledger's per-person ε (or δ, or ρ) above the declared total."""


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
    """One OpenDP noise measurement: ``epsilon`` is what its privacy map certifies at ``sensitivity``.

    ``guarantee`` says what the budget is (docs/release.md §6): ``"pure"`` (ε; δ = 0), ``"approx"`` ((ε, δ);
    a Gaussian's ε is the exact curve at the ρ OpenDP certifies, ``conversion`` names it, ``epsilon_opendp`` is
    OpenDP's own zCDP → (ε, δ) conversion at the same δ) or ``"zcdp"`` (ρ only; ε = δ = 0). ``rho`` is the
    ρ OpenDP's map certifies for the Gaussian mechanisms (0 for the pure ones, which are ε²/2-zCDP)."""

    name: str
    mechanism: str
    sensitivity: float
    scale: float
    epsilon: float
    delta: float = 0.0
    noise_variance: float = float("nan")
    guarantee: str = "pure"
    rho: float = 0.0
    conversion: str = ""
    epsilon_opendp: float | None = None

    @property
    def rho_charge(self) -> float:
        """The ρ this measurement is charged in a zCDP ledger: its certified ρ, or ε²/2 for a pure ε-DP one
        (Bun & Steinke 2016, Prop. 1.4)."""
        if self.guarantee == "pure":
            return self.epsilon * self.epsilon / 2.0 * (1.0 + 2.0 ** -50)      # rounded up
        if self.rho > 0:
            return self.rho
        return math.nan          # an (ε, δ) guarantee without a ρ: not accountable in ρ

    @property
    def epsilon_charge(self) -> float:
        """ε charged in a pure or (ε, δ) ledger; NaN for a ρ-zCDP-only measurement (no δ was allotted)."""
        return math.nan if self.guarantee == "zcdp" else self.epsilon


@dataclass
class Cell:
    """Measurements on one set of people (sequential); sampled when ``n`` < ``N``. ``members`` names the
    set (:func:`dpopt.sampling.members_id`); a sampled cell needs it."""

    name: str
    measurements: list[Measurement]
    N: int | None = None
    n: int | None = None
    members: str | None = None

    @property
    def epsilon_nominal(self) -> float:
        return sum_up(m.epsilon_charge for m in self.measurements)

    @property
    def delta_nominal(self) -> float:
        return sum_up(m.delta for m in self.measurements)

    @property
    def rho(self) -> float:
        """ρ of the cell: the measurements' ρ summed; zCDP gets no amplification from sampling, and
        subsampling never hurts (the mechanism given the sample is ρ-zCDP), so sampled or not it is this."""
        return sum_up(m.rho_charge for m in self.measurements)

    @property
    def sampled(self) -> bool:
        return self.N is not None and self.n < self.N

    @property
    def epsilon(self) -> float:
        """Per-person central ε of the cell on its own (amplified when sampled; NaN with a ρ-only measurement)."""
        e = self.epsilon_nominal
        return e if self.N is None or math.isnan(e) else amplify_up(e, self.n, self.N)

    @property
    def delta(self) -> float:
        d = self.delta_nominal
        return d if self.N is None else d * self.n / self.N


@dataclass
class Part:
    """Cells on disjoint sets of people: parallel composition (the largest cell counts). ``partition`` names
    the split they come from (:attr:`dpopt.sampling.Sample.partition`): cells of one partition are equal or
    disjoint, in every release."""

    name: str
    cells: list[Cell]
    partition: str | None = None

    @property
    def epsilon(self) -> float:
        return _top(c.epsilon for c in self.cells)

    @property
    def delta(self) -> float:
        return max(c.delta for c in self.cells)

    @property
    def rho(self) -> float:
        return _top(c.rho for c in self.cells)


def sample_identity(sample) -> dict[str, str]:
    """What a release record keeps of its sample: the scheme, the public name of its key and the draw's
    fingerprint (no key, no ids)."""
    if not getattr(sample, "key_id", "") or not getattr(sample, "members", None):
        raise ValueError("the sample has no identity (key_id, members): draw it with dpopt.sampling, which the "
                         "privacy ledger needs to tell overlapping samples from independent ones")
    return {"key": sample.key_id, "scheme": sample.scheme, "fingerprint": sample.fingerprint}


@dataclass
class ReleaseRecord:
    """One release: parts composed sequentially. ``sample`` is :func:`sample_identity` of its sample
    (None for a release of the whole population)."""

    name: str
    kind: str
    parts: list[Part]
    sample: dict[str, str] | None = None
    target_epsilon: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        """Per-person ε of this release on its own (the ledger's rule applied to it alone)."""
        return PrivacyLedger.compose([self])[0]

    @property
    def delta(self) -> float:
        return PrivacyLedger.compose([self])[1]

    @property
    def rho(self) -> float:
        return _compose([self])[2]

    def to_dict(self) -> dict[str, Any]:
        parts = []
        for p in self.parts:
            cells = []
            for c in p.cells:
                cells.append({"name": c.name, "N": c.N, "n": c.n, "members": c.members,
                              "epsilon_nominal": _num(c.epsilon_nominal), "epsilon": _num(c.epsilon), "delta": c.delta,
                              "rho": _num(c.rho), "measurements": [_plain(asdict(m)) for m in c.measurements]})
            parts.append({"name": p.name, "partition": p.partition, "epsilon": _num(p.epsilon), "delta": p.delta,
                          "rho": _num(p.rho), "cells": cells})
        eps, delta, rho = _compose([self])
        return {"name": self.name, "kind": self.kind, "sample": self.sample, "target_epsilon": self.target_epsilon,
                "epsilon": _num(eps), "delta": delta, "rho": _num(rho), "parts": parts, "details": _plain(self.details)}

    @classmethod
    def from_dict(cls, d: dict, where: str = "release") -> "ReleaseRecord":
        """A record from its :meth:`to_dict` form, every field checked (``where`` prefixes the messages)."""
        return _record_from_dict(d, where)


def _num(x):
    """A budget for the audit: None where it is not defined (ε of a ρ-only release, ρ of an (ε, δ)-only one)."""
    return None if x is None or math.isnan(x) else float(x)


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


# ---------------------------------------------------------------------------------- per-person composition
# A person is described by the block (cell ``members``) they are in for every partition the ledger has seen.
# Blocks of one partition are disjoint, blocks of different partitions are assumed to overlap (the ledger has
# no ids to know better, so it charges as if someone were in every combination). Enumerating the
# combinations is exact; beyond this many it falls back to a coarser upper bound.
_MAX_PERSON_TYPES = 20000


def _check_composable(records) -> None:
    for i, r in enumerate(records):
        keyed = bool(r.sample and r.sample.get("key"))
        if not r.parts:
            raise ValueError(f"release {r.name!r} has no parts")
        for p in r.parts:
            if not p.cells:
                raise ValueError(f"release {r.name!r}, part {p.name!r} has no cells")
            named = [c.members is not None for c in p.cells]
            if (p.partition is not None) != all(named) or (p.partition is None and any(named)):
                raise ValueError(f"release {r.name!r}, part {p.name!r}: give a partition and every cell's members, "
                                 "or neither")
            if p.partition is not None and len({c.members for c in p.cells}) != len(p.cells):
                raise ValueError(f"release {r.name!r}, part {p.name!r}: two cells name the same members (cells of "
                                 "a part must be disjoint)")
            if p.partition is not None and p.partition != partition_id(c.members for c in p.cells):
                # a part covers its whole partition (every stratum), so its name follows from its cells'
                raise ValueError(f"release {r.name!r}, part {p.name!r}: partition {p.partition!r} is not the one "
                                 "its cells' members make up (a cell is missing or was changed)")
            for c in p.cells:
                if not c.measurements:
                    raise ValueError(f"release {r.name!r}, cell {c.name!r} has no measurements")
                if c.sampled and not (keyed and c.members is not None):
                    raise ValueError(f"release {r.name!r}, cell {c.name!r} is a sample (n = {c.n} of N = {c.N}) "
                                     "but the record does not name its sampling key and members: the ledger "
                                     "cannot tell whether it overlaps other samples")


def _top(values) -> float:
    """The largest value; NaN when any is NaN (a budget not defined for some cell stays undefined)."""
    xs = [float(v) for v in values]
    return math.nan if any(math.isnan(x) for x in xs) else max(xs)


def _person_charge(cells, separates) -> tuple[float, float, float]:
    """(ε, δ, ρ) of one person in one key group: ``cells`` are the (block, cell, record) the person is in;
    ``separates(X)`` tells whether every block of the group is X or disjoint from X. ρ is never amplified (zCDP
    gains nothing from sampling)."""
    if not cells:
        return 0.0, 0.0, 0.0
    rho = sum_up(c.rho for _, c, _ in cells)
    blocks = {b for b, _, _ in cells}
    if len(blocks) == 1:
        X = next(iter(blocks))
        Ns = {c.N for _, c, _ in cells}
        nested = (len(Ns) == 1 and None not in Ns
                  and all((r.sample or {}).get("key") and r.sample.get("scheme") == "srswor" for _, _, r in cells)
                  and separates(X))
        if nested:
            # one key, one set of units: SRS draws are nested, so the person's releases act as one mechanism
            # on the largest sample (docs/release.md §6): sum the nominal budgets, amplify once at its rate
            N = Ns.pop()
            n = max(c.n for _, c, _ in cells)
            e = sum_up(c.epsilon_nominal for _, c, _ in cells)
            d = sum_up(c.delta_nominal for _, c, _ in cells)
            return (e if math.isnan(e) else amplify_up(e, n, N)), d * n / N, rho
    # the person's inclusion in these samples is not independent of the key's other draws: no amplification
    return (sum_up(c.epsilon_nominal for _, c, _ in cells), sum_up(c.delta_nominal for _, c, _ in cells), rho)


def _compose(records) -> tuple[float, float, float]:
    """Per-person (ε, δ, ρ) of ``records``, each the largest over all people (ε NaN when some measurement is
    ρ-only, ρ NaN when some is (ε, δ) without a certified ρ)."""
    records = list(records)
    if not records:
        return 0.0, 0.0, 0.0
    _check_composable(records)
    groups: dict[Any, list[tuple[str, str, Cell, ReleaseRecord]]] = {}
    blocks: dict[str, set[str]] = {}
    for i, r in enumerate(records):
        g = ("key", r.sample["key"]) if r.sample and r.sample.get("key") else ("record", i)
        for j, p in enumerate(r.parts):
            P = p.partition if p.partition is not None else f"part {i}.{j}"    # unnamed: only its own cells known
            for k, c in enumerate(p.cells):
                b = c.members if p.partition is not None else f"cell {i}.{j}.{k}"
                blocks.setdefault(P, set()).add(b)
                groups.setdefault(g, []).append((P, b, c, r))
    partition_of: dict[str, set[str]] = {}
    for P, bs in blocks.items():
        for b in bs:
            partition_of.setdefault(b, set()).add(P)

    # a block y ≠ X is disjoint from X when some partition holds both, i.e. when y is in a partition of X: whether
    # every block of a group is, depends only on X's partitions (one answer per group and set of partitions)
    group_blocks = {g: {b for _, b, _, _ in cells} for g, cells in groups.items()}
    by_block = {g: {} for g in groups}
    for g, cells in groups.items():
        for P, b, c, r in cells:
            by_block[g].setdefault((P, b), []).append((b, c, r))
    answers: dict = {}

    def separator(g):
        def separates(X) -> bool:
            parts_of_x = frozenset(partition_of[X])
            if (g, parts_of_x) not in answers:
                near = set().union(*(blocks[P] for P in parts_of_x))
                answers[g, parts_of_x] = group_blocks[g] <= near
            return answers[g, parts_of_x]
        return separates

    def worst(keys) -> tuple[float, float, float]:
        parts = sorted({P for g in keys for P, _, _, _ in groups[g]})
        choices = [sorted(blocks[P]) for P in parts]
        count = math.prod(len(c) for c in choices)
        if count > _MAX_PERSON_TYPES:
            if len(keys) > 1:        # each group at its own worst person: an upper bound of the joint worst
                ws = [worst([g]) for g in keys]
                return sum_up(w[0] for w in ws), sum_up(w[1] for w in ws), sum_up(w[2] for w in ws)
            # a person in the worst cell of every part, without amplification: an upper bound
            per_part: dict[tuple[int, str], list[Cell]] = {}
            for P, _, c, r in groups[keys[0]]:
                per_part.setdefault((id(r), P), []).append(c)
            return (sum_up(_top(c.epsilon_nominal for c in cs) for cs in per_part.values()),
                    sum_up(max(c.delta_nominal for c in cs) for cs in per_part.values()),
                    sum_up(_top(c.rho for c in cs) for cs in per_part.values()))
        best_e, best_d, best_r = 0.0, 0.0, 0.0
        separates = {g: separator(g) for g in keys}
        for combo in itertools.product(*choices):
            es, ds, rs = [], [], []
            for g in keys:
                # the group's cells this person is in: those of the chosen block of every partition
                members = [x for P, b in zip(parts, combo) for x in by_block[g].get((P, b), ())]
                e, d, rr = _person_charge(members, separates[g])
                es.append(e)
                ds.append(d)
                rs.append(rr)
            best_e, best_d, best_r = _top([best_e, sum_up(es)]), max(best_d, sum_up(ds)), _top([best_r, sum_up(rs)])
        return best_e, best_d, best_r

    return worst(list(groups))


# ---------------------------------------------------------------------------------- the ledger
class PrivacyLedger:
    """Per-person budget spent by a sequence of releases on one population, against a declared total.

    ``accounting`` (docs/release.md §6) is what the ledger composes and refuses on:

    * ``"pure"`` (``PrivacyLedger(epsilon_total)``): ε; every measurement must be pure ε-DP;
    * ``"approx"`` (``PrivacyLedger(epsilon_total, delta_total)`` with δ > 0): (ε, δ); ε and δ add up
      sequentially, amplification by SRS gives log1p(q·expm1(ε)) and q·δ; ρ-only measurements are refused;
    * ``"zcdp"`` (``PrivacyLedger(rho_total=ρ, delta_report=δ)``): ρ; ρ adds up, sampling gives no
      amplification, a pure ε measurement counts ε²/2; the total is reported as (ε, δ) at ``delta_report``
      (:meth:`report`), by the exact Gaussian curve when every measurement is a continuous Gaussian and by
      Canonne, Kamath & Steinke's conversion (OpenDP's) otherwise.

    ``charge(record)`` adds a release after checking that the composed total stays within the declared
    total; otherwise it raises :class:`BudgetExceeded` and records nothing. Releases call it *before*
    drawing any noise.
    """

    def __init__(self, epsilon_total=None, delta_total: float = 0.0, name: str = "", *, rho_total=None,
                 delta_report: float | None = None, accounting: str | None = None):
        if accounting is None:
            accounting = "zcdp" if rho_total is not None else ("approx" if delta_total else "pure")
        self.accounting = V.choice("accounting", accounting, ACCOUNTINGS)
        if self.accounting == "zcdp":
            if epsilon_total is not None:
                raise ValueError("epsilon_total must be None for accounting='zcdp' (the total is rho_total; the "
                                 "(epsilon, delta) it implies is reported at delta_report)")
            self.rho_total = V.positive("rho_total", rho_total)
            self.epsilon_total = math.inf
            self.delta_total = V.probability("delta_total", delta_total)
            if self.delta_total:
                raise ValueError("delta_total must be 0 for accounting='zcdp' (a zCDP ledger reports its delta at "
                                 "delta_report)")
        else:
            if rho_total is not None:
                raise ValueError(f"rho_total is only for accounting='zcdp', got accounting={self.accounting!r}")
            if epsilon_total is None:
                raise ValueError(f"epsilon_total is required for accounting={self.accounting!r}")
            self.epsilon_total = V.positive("epsilon_total", epsilon_total)
            self.delta_total = V.probability("delta_total", delta_total)
            self.rho_total = None
            if self.accounting == "approx" and not 0.0 < self.delta_total < 1.0:
                raise ValueError(f"delta_total must be in (0, 1) for accounting='approx', got {delta_total!r}")
            if self.accounting == "pure" and self.delta_total:
                raise ValueError(f"delta_total must be 0 for accounting='pure', got {delta_total!r}")
        self.delta_report = None
        if delta_report is not None and self.accounting != "zcdp":
            raise ValueError(f"delta_report is only for accounting='zcdp' (a rho total reported as (epsilon, delta)), "
                             f"got accounting={self.accounting!r}")
        if delta_report is not None:
            d = V.probability("delta_report", delta_report)
            if not 0.0 < d < 1.0:
                raise ValueError(f"delta_report must be in (0, 1), got {delta_report!r}")
            self.delta_report = d
        self.name = str(name)
        self.records: list[ReleaseRecord] = []

    def __repr__(self) -> str:
        if self.accounting == "zcdp":
            return (f"PrivacyLedger(spent rho={self.rho_spent:.6g} of rho_total={self.rho_total:g}, "
                    f"releases={len(self.records)})")
        d = f", delta_total={self.delta_total:g}" if self.accounting == "approx" else ""
        return (f"PrivacyLedger(spent={self.epsilon_spent:.6g} of epsilon_total={self.epsilon_total:g}{d}, "
                f"releases={len(self.records)})")

    # ----------------------------------------------------------------- composition
    @staticmethod
    def compose(records) -> tuple[float, float]:
        """Per-person (ε, δ) of ``records``, the largest over all people (module note; docs/release.md §6);
        ε is NaN when some measurement is ρ-zCDP only."""
        return _compose(records)[:2]

    @staticmethod
    def compose_rho(records) -> float:
        """Per-person ρ of ``records`` (no amplification; a pure ε measurement counts ε²/2)."""
        return _compose(records)[2]

    @property
    def epsilon_spent(self) -> float:
        return self.compose(self.records)[0]

    @property
    def delta_spent(self) -> float:
        return self.compose(self.records)[1]

    @property
    def rho_spent(self) -> float:
        return self.compose_rho(self.records)

    @property
    def epsilon_remaining(self) -> float:
        return max(self.epsilon_total - self.epsilon_spent, 0.0)

    def _accountable(self, record: ReleaseRecord) -> None:
        """Every measurement of ``record`` has a guarantee this ledger accounts, else ValueError naming it."""
        for p in record.parts:
            for c in p.cells:
                for m in c.measurements:
                    if m.guarantee not in GUARANTEES:
                        raise ValueError(f"measurement {m.name!r}: guarantee must be one of {', '.join(GUARANTEES)}, "
                                         f"got {m.guarantee!r}")
                    if self.accounting == "pure" and m.guarantee != "pure":
                        raise ValueError(f"release {record.name!r}, measurement {m.name!r} is {m.guarantee} "
                                         "(not pure epsilon-DP): this ledger accounts pure epsilon only; use "
                                         "PrivacyLedger(epsilon_total, delta_total) or PrivacyLedger(rho_total=...)")
                    if self.accounting == "approx" and m.guarantee == "zcdp":
                        raise ValueError(f"release {record.name!r}, measurement {m.name!r} is rho-zCDP without an "
                                         "allotted delta: an (epsilon, delta) ledger cannot compose it; release it "
                                         "under (epsilon, delta) or use PrivacyLedger(rho_total=...)")
                    if self.accounting == "zcdp" and math.isnan(m.rho_charge):
                        raise ValueError(f"release {record.name!r}, measurement {m.name!r} is (epsilon, delta)-DP "
                                         "without a certified rho: a zCDP ledger cannot compose it")

    def check(self, record: ReleaseRecord) -> tuple[float, float]:
        """The (ε, δ) total with ``record`` added (ρ-zCDP ledgers: (NaN, 0) — see :meth:`check_rho`);
        :class:`BudgetExceeded` if it exceeds the declared total."""
        self._accountable(record)
        if self.accounting == "zcdp":
            self.check_rho(record)
            return self.compose(self.records + [record])
        eps, delta = self.compose(self.records + [record])
        if eps > self.epsilon_total or delta > self.delta_total:
            spent = self.epsilon_spent
            # the composed total exceeds spent + this release's own ε when the sample overlaps earlier ones
            # drawn with the same key: those people's nominal budgets add up without amplification
            lost = eps > (spent + record.epsilon) * (1 + 1e-12)
            raise BudgetExceeded(
                f"release {record.name!r} refused: it needs epsilon {record.epsilon:.6g} per person"
                f"{', delta ' + format(record.delta, '.3g') if record.delta else ''}; with the "
                f"{spent:.6g} already spent the total would be {eps:.6g} > epsilon_total {self.epsilon_total:g}"
                + (f" (or delta {delta:.3g} > {self.delta_total:g})" if delta > self.delta_total else "")
                + ("; the total is more than the sum because this sample shares people with earlier releases "
                   "drawn with the same key but not as the same sample, so for them the subsampling "
                   "amplification is lost and their nominal budgets add up (docs/release.md, section 6)"
                   if lost else "")
                + "; no noise was drawn. A planned series of releases needs a larger epsilon_total "
                  "(dpopt release --epsilon-total)")
        return eps, delta

    def check_rho(self, record: ReleaseRecord) -> float:
        """ρ total with ``record`` added; :class:`BudgetExceeded` if it exceeds ``rho_total``."""
        self._accountable(record)
        rho = self.compose_rho(self.records + [record])
        if not rho <= self.rho_total:
            raise BudgetExceeded(
                f"release {record.name!r} refused: it needs rho {record.rho:.6g} per person; with the "
                f"{self.rho_spent:.6g} already spent the total would be {rho:.6g} > rho_total {self.rho_total:g} "
                "(zCDP composes by adding rho; sampling gives no amplification); no noise was drawn")
        return rho

    def report(self, delta: float | None = None) -> dict[str, Any]:
        """The spent budget stated as (ε, δ): for a zCDP ledger at ``delta`` (default ``delta_report``), with the
        conversion used (``"gaussian-exact"``: the analytic Gaussian curve at μ = √(2ρ), exact when every
        measurement is a continuous Gaussian; ``"cks"``: Canonne, Kamath & Steinke 2020 Prop. 12, OpenDP's,
        valid for any ρ-zCDP guarantee); for the other ledgers the composed (ε, δ) itself."""
        if self.accounting != "zcdp":
            eps, d = self.compose(self.records)
            return {"accounting": self.accounting, "epsilon": eps, "delta": d, "conversion": "none"}
        from ..privacy.gaussian import gaussian_epsilon, zcdp_epsilon
        delta = self.delta_report if delta is None else delta
        rho = self.rho_spent
        out: dict[str, Any] = {"accounting": "zcdp", "rho": rho, "delta": delta, "epsilon": None,
                               "conversion": None, "epsilon_cks": None, "epsilon_gaussian": None}
        if delta is None or rho <= 0:
            return out
        delta = V.probability("delta", delta)
        out["epsilon_cks"] = float(zcdp_epsilon(rho, delta))
        gaussian = all(m.mechanism in ("gaussian", "gaussian-zcdp") and m.guarantee != "pure"
                       for r in self.records for p in r.parts for c in p.cells for m in c.measurements)
        if gaussian and self.records:
            out["epsilon_gaussian"] = float(gaussian_epsilon(math.sqrt(2.0 * rho), delta))
            out["epsilon"], out["conversion"] = out["epsilon_gaussian"], "gaussian-exact"
        else:
            out["epsilon"], out["conversion"] = out["epsilon_cks"], "cks"
        return out

    def charge(self, record: ReleaseRecord) -> float:
        """Check and add ``record``; returns the new per-person ε spent (ρ for a zCDP ledger)."""
        eps, _ = self.check(record)
        self.records.append(record)
        return self.rho_spent if self.accounting == "zcdp" else eps

    def within_budget(self) -> bool:
        if self.accounting == "zcdp":
            return bool(self.rho_spent <= self.rho_total)
        eps, delta = self.compose(self.records)
        return bool(eps <= self.epsilon_total and delta <= self.delta_total)

    # ----------------------------------------------------------------- audit
    def audit(self, extra: dict | None = None) -> dict[str, Any]:
        """The JSON-ready audit record: declared totals, every release with its measurements, the
        composition and the software versions (no seeds, keys or data)."""
        eps, delta, rho = _compose(self.records)
        zcdp = self.accounting == "zcdp"
        out = {"format": AUDIT_FORMAT, "ledger": self.name, "accounting": self.accounting,
               "guarantee": GUARANTEE_TEXT[self.accounting],
               "epsilon_total": None if zcdp else self.epsilon_total,
               "delta_total": self.delta_total, "rho_total": self.rho_total, "delta_report": self.delta_report,
               "epsilon_spent": _num(eps), "delta_spent": delta, "rho_spent": _num(rho),
               "within_budget": self.within_budget(),
               "report": _plain(self.report()),
               "composition": COMPOSITION_RULES,
               "releases": [r.to_dict() for r in self.records],
               "software": _versions()}
        if extra:
            out.update(_plain(extra))
        return out

    def write_audit(self, path, extra: dict | None = None) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.audit(extra), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_audit(cls, audit) -> "PrivacyLedger":
        """Rebuild a ledger from an audit record (a dict or a JSON file), re-verifying it: every number
        finite and in range, every recorded total recomputed from the recorded measurements. An audit that
        does not re-verify is refused with a ValueError (TypeError for a wrong type) naming the field."""
        src = "audit"
        if not isinstance(audit, dict):
            path = Path(audit)
            src = str(path)
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{src}: not a dpopt privacy audit (not a UTF-8 text file)") from None
            try:
                audit = json.loads(text)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise ValueError(f"{src}: not a dpopt privacy audit (not valid JSON: {exc})") from None
            if not isinstance(audit, dict):
                raise ValueError(f"{src}: not a dpopt privacy audit (a JSON {type(audit).__name__}, expected an "
                                 "object with \"format\": " + json.dumps(AUDIT_FORMAT) + ")")
        try:
            return _ledger_from_audit(cls, audit)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{src}: {exc}") from None


GUARANTEE_TEXT = {"pure": "pure epsilon-DP per person",
                  "approx": "(epsilon, delta)-DP per person",
                  "zcdp": "rho-zCDP per person (reported as (epsilon, delta) at delta_report by the conversion named "
                          "in report.conversion)"}

COMPOSITION_RULES = {
    "within_cell": "sequential over measurements (nominal), then amplification by SRS without replacement: "
                   "log1p((n/N) * expm1(epsilon_nominal))",
    "across_cells": "parallel (disjoint sets of people: cells of one partition): maximum",
    "across_parts": "sequential: sum",
    "per_person": "the charge of a person follows from the cells that person is in (by their members, never by "
                  "name); cells of different partitions are assumed to overlap; the total is the largest charge",
    "across_keys": "releases whose samples were drawn with different keys: sum of their amplified budgets",
    "same_key": "releases drawn with one key: for a person whose cells in them all sample one set of units (nested "
                "SRS) while the key's other draws are on disjoint sets, nominal budgets summed and amplified once "
                "at the largest rate; otherwise the nominal budgets summed, without amplification",
    "rounding": "sums and amplification rounded up",
    "approx": "(epsilon, delta): epsilon and delta add up sequentially; amplification by SRS: log1p(q * expm1(eps)), "
              "q * delta; a Gaussian measurement's epsilon is the analytic Gaussian curve (Balle & Wang 2018) at the "
              "rho OpenDP certifies (mu = sqrt(2 rho)) and its delta, confirmed by dp-accounting",
    "zcdp": "rho: adds up sequentially, maximum across disjoint cells, no amplification by sampling; a pure "
            "epsilon measurement counts epsilon^2/2 (Bun & Steinke 2016)",
}


# ---------------------------------------------------------------------------------- reading an audit
_PURE_KEYS = ("name", "mechanism", "sensitivity", "scale", "epsilon", "delta", "noise_variance")
_MEASUREMENT_KEYS = _PURE_KEYS + ("guarantee", "rho", "conversion", "epsilon_opendp")
_REL_TOL = 1e-12       # recorded totals are recomputed; a libm may differ by an ulp, a tampered total by more


def _obj(where: str, v) -> dict:
    if not isinstance(v, dict):
        raise TypeError(f"{where} must be an object, got {V._describe(v)}")
    return v


def _list(where: str, v, nonempty: bool = True) -> list:
    if not isinstance(v, list):
        raise TypeError(f"{where} must be a list, got {V._describe(v)}")
    if nonempty and not v:
        raise ValueError(f"{where} must not be empty")
    return v


def _text(where: str, v, *, optional: bool = False, hexdigest: bool = False):
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise TypeError(f"{where} must be a string, got {V._describe(v)}")
    if hexdigest and (len(v) != 32 or any(ch not in "0123456789abcdef" for ch in v)):
        raise ValueError(f"{where} must be a 32-digit lower-case hex name, got {v!r}")
    return v


def _field(d: dict, key: str, where: str):
    if key not in d:
        raise ValueError(f"{where}.{key} is missing")
    return d[key]


def _finite_everywhere(where: str, v) -> None:
    """Every number anywhere in the audit is finite (JSON from Python may carry NaN and Infinity)."""
    if isinstance(v, dict):
        for k, x in v.items():
            _finite_everywhere(f"{where}.{k}", x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _finite_everywhere(f"{where}[{i}]", x)
    elif isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} must be finite, got {v}")


def _same(where: str, recorded, recomputed: float, source: str = "the recorded measurements") -> None:
    r = V.real(where, recorded)
    if not (r == recomputed or abs(r - recomputed) <= _REL_TOL * max(abs(r), abs(recomputed))):
        raise ValueError(f"{where} is {r!r} but {source} give {recomputed!r}")


def _measurement(m, where: str, legacy: bool = False) -> Measurement:
    m = _obj(where, m)
    keys = _PURE_KEYS if legacy else _MEASUREMENT_KEYS
    extra = sorted(set(m) - set(keys))
    if extra:
        raise ValueError(f"{where}.{extra[0]} is not a field of a measurement ({', '.join(keys)})")
    for key in keys:          # the writer writes every field: a missing one was removed
        _field(m, key, where)
    nv = m["noise_variance"]
    mech = _text(f"{where}.mechanism", _field(m, "mechanism", where))
    if mech not in _MECHANISMS:
        raise ValueError(f"{where}.mechanism must be one of {', '.join(_MECHANISMS)}, got {mech!r}")
    guarantee = "pure" if legacy else _text(f"{where}.guarantee", m["guarantee"])
    if guarantee not in GUARANTEES:
        raise ValueError(f"{where}.guarantee must be one of {', '.join(GUARANTEES)}, got {guarantee!r}")
    zcdp = guarantee == "zcdp"
    eps = m["epsilon"]
    out = Measurement(
        _text(f"{where}.name", _field(m, "name", where)), mech,
        V.positive(f"{where}.sensitivity", _field(m, "sensitivity", where)),
        V.positive(f"{where}.scale", _field(m, "scale", where)),
        _nonnegative(f"{where}.epsilon", eps) if zcdp else V.positive(f"{where}.epsilon", eps),
        V.probability(f"{where}.delta", m["delta"], closed_upper=True),
        float("nan") if nv is None else _nonnegative(f"{where}.noise_variance", nv),
        guarantee,
        0.0 if legacy else _nonnegative(f"{where}.rho", m["rho"]),
        "" if legacy else _text(f"{where}.conversion", m["conversion"]),
        None if legacy or m["epsilon_opendp"] is None else V.positive(f"{where}.epsilon_opendp", m["epsilon_opendp"]))
    gaussian = mech in _GAUSSIAN
    # what each guarantee must look like (docs/release.md §6)
    if guarantee == "pure" and (gaussian or out.rho or out.conversion or out.epsilon_opendp is not None):
        raise ValueError(f"{where}.guarantee is 'pure' but the measurement is {mech!r} with rho {out.rho!r}, "
                         f"conversion {out.conversion!r}: a pure measurement is a Laplace-family one without them")
    if guarantee != "pure" and not gaussian:
        raise ValueError(f"{where}.guarantee is {guarantee!r} but mechanism {mech!r} is pure epsilon-DP")
    if zcdp and (out.epsilon != 0 or out.delta != 0 or out.conversion or out.epsilon_opendp is not None):
        raise ValueError(f"{where}.epsilon must be 0 for a rho-zCDP measurement (and delta 0, no conversion): its "
                         "budget is rho alone")
    if guarantee != "pure" and not out.rho > 0:
        raise ValueError(f"{where}.rho must be > 0 for a {guarantee} Gaussian measurement, got {out.rho!r}")
    if guarantee == "approx":
        if not 0.0 < out.delta < 1.0:
            raise ValueError(f"{where}.delta must be in (0, 1) for an (epsilon, delta) measurement, got {out.delta!r}")
        from ._opendp import ANALYTIC
        if out.conversion != ANALYTIC:
            raise ValueError(f"{where}.conversion must be {ANALYTIC!r} (the only conversion an (epsilon, delta) "
                             f"Gaussian measurement is recorded with), got {out.conversion!r}")
        if out.epsilon_opendp is None:
            raise ValueError(f"{where}.epsilon_opendp is missing: OpenDP's own conversion is recorded with every "
                             "(epsilon, delta) Gaussian measurement")
    _check_map(out, where)
    return out


# a record names a built-in mechanism; its measurement is rebuilt from the registry to re-verify the map
_GAUSSIAN = ("gaussian", "gaussian-zcdp", "discrete-gaussian")
_MECHANISMS = tuple(dict.fromkeys(tuple(MECHANISMS) + _GAUSSIAN))


@functools.lru_cache(maxsize=4096)
def _certified(mechanism: str, scale: float, sensitivity: float) -> tuple[float, float] | None:
    """(ε OpenDP's map certifies — ρ for a Gaussian —, noise variance) of a measurement; None without OpenDP.
    Deterministic: cached."""
    try:
        from . import _opendp
        dp = _opendp.require_opendp()
    except ImportError:                                   # pragma: no cover - depends on the environment
        return None
    if mechanism in _GAUSSIAN:
        integer = mechanism == "discrete-gaussian"
        if integer and sensitivity != round(sensitivity):
            raise ValueError(f"the discrete Gaussian needs an integer sensitivity, got {sensitivity!r}")
        return (_opendp.gaussian_rho(dp, integer, scale, sensitivity), _opendp.gaussian_variance(integer, scale))
    d_in = _opendp.sensitivity_argument(mechanism, sensitivity)
    return (float(_opendp.noise_measurement(dp, mechanism, scale).map(d_in)),
            _opendp.variance_at_scale(mechanism, scale))


@functools.lru_cache(maxsize=4096)
def _gaussian_epsilons(rho: float, delta: float, mechanism: str, scale: float, sensitivity: float):
    """(the analytic ε at ρ and δ, OpenDP's own conversion) of an (ε, δ) Gaussian measurement."""
    from . import _opendp
    dp = _opendp.require_opendp()
    return (_opendp.gaussian_certified_epsilon(rho, delta),
            _opendp.zcdp_to_approx_by_opendp(dp, mechanism == "discrete-gaussian", scale, sensitivity, delta))


def _check_map(m: Measurement, where: str) -> None:
    """The recorded ε (ρ for a Gaussian) is what OpenDP's privacy map certifies at the recorded scale and
    sensitivity, to 1e-9; a Gaussian (ε, δ) measurement's ε is the analytic curve at that ρ and its
    ``epsilon_opendp`` OpenDP's conversion (a mean's map runs through OpenDP's bounded mean; skipped when OpenDP
    is not installed: the rest of the audit is still re-verified)."""
    got = _certified(m.mechanism, m.scale, m.sensitivity)
    if got is None:
        return
    certified, variance = got
    if math.isfinite(m.noise_variance):
        _same(f"{where}.noise_variance", m.noise_variance, variance,
              f"the {m.mechanism} noise at scale {m.scale!r}")
    if m.mechanism in _GAUSSIAN:
        if abs(m.rho - certified) > 1e-9 * certified:
            raise ValueError(f"{where}.rho is {m.rho!r} but OpenDP's map of a {m.mechanism} measurement at scale "
                             f"{m.scale!r} and sensitivity {m.sensitivity!r} is {certified!r}")
        if m.guarantee == "approx":
            analytic, theirs = _gaussian_epsilons(m.rho, m.delta, m.mechanism, m.scale, m.sensitivity)
            if abs(m.epsilon - analytic) > 1e-9 * analytic:
                raise ValueError(f"{where}.epsilon is {m.epsilon!r} but the analytic Gaussian curve at rho "
                                 f"{m.rho!r} and delta {m.delta!r} gives {analytic!r}")
            if abs(m.epsilon_opendp - theirs) > 1e-9 * theirs:
                raise ValueError(f"{where}.epsilon_opendp is {m.epsilon_opendp!r} but OpenDP's zCDP -> (epsilon, "
                                 f"delta) conversion gives {theirs!r}")
        return
    if abs(m.epsilon - certified) > 1e-9 * certified:
        raise ValueError(f"{where}.epsilon is {m.epsilon!r} but OpenDP's map of a {m.mechanism} measurement at scale "
                         f"{m.scale!r} and sensitivity {m.sensitivity!r} is {certified!r}")


def _nonnegative(where: str, v) -> float:
    x = V.real(where, v)
    if x < 0:
        raise ValueError(f"{where} must be >= 0, got {x:g}")
    return x


def _same_or_null(where: str, recorded, recomputed: float, source: str = "the recorded measurements") -> None:
    """A budget that may be undefined (ε of a ρ-only cell, ρ of an (ε, δ)-only one): null exactly when it is."""
    if math.isnan(recomputed):
        if recorded is not None:
            raise ValueError(f"{where} is {recorded!r} but {source} do not define it (null)")
        return
    _same(where, recorded, recomputed, source)


def _cell(c, where: str, legacy: bool = False) -> Cell:
    c = _obj(where, c)
    N, n = c.get("N"), c.get("n")
    if (N is None) != (n is None):
        raise ValueError(f"{where}: N and n must both be given (a sampled cell) or both be null, got N={N!r}, n={n!r}")
    if N is not None:
        for key, v in (("N", N), ("n", n)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"{where}.{key} must be an integer, got {V._describe(v)}")
        N = V.integer(f"{where}.N", N, minimum=1)
        n = V.integer(f"{where}.n", n, minimum=1, maximum=N)
    ms = [_measurement(m, f"{where}.measurements[{i}]", legacy)
          for i, m in enumerate(_list(f"{where}.measurements", _field(c, "measurements", where)))]
    cell = Cell(_text(f"{where}.name", _field(c, "name", where)), ms, N, n,
                _text(f"{where}.members", c.get("members"), optional=True, hexdigest=True))
    _same_or_null(f"{where}.epsilon_nominal", _field(c, "epsilon_nominal", where), cell.epsilon_nominal)
    _same_or_null(f"{where}.epsilon", _field(c, "epsilon", where), cell.epsilon)
    _same(f"{where}.delta", _field(c, "delta", where), cell.delta)
    if not legacy:
        _same_or_null(f"{where}.rho", _field(c, "rho", where), cell.rho)
    return cell


def _record_from_dict(d, where: str, legacy: bool = False) -> ReleaseRecord:
    d = _obj(where, d)
    sample = d.get("sample")
    if sample is not None:
        sample = _obj(f"{where}.sample", sample)
        sample = {"key": _text(f"{where}.sample.key", _field(sample, "key", f"{where}.sample"), hexdigest=True),
                  "scheme": _text(f"{where}.sample.scheme", _field(sample, "scheme", f"{where}.sample")),
                  "fingerprint": _text(f"{where}.sample.fingerprint", sample.get("fingerprint", ""))}
        if sample["scheme"] not in ("srswor", "poisson"):
            raise ValueError(f"{where}.sample.scheme must be 'srswor' or 'poisson', got {sample['scheme']!r}")
    parts = []
    for j, p in enumerate(_list(f"{where}.parts", _field(d, "parts", where))):
        pw = f"{where}.parts[{j}]"
        p = _obj(pw, p)
        cells = [_cell(c, f"{pw}.cells[{k}]", legacy) for k, c in enumerate(_list(f"{pw}.cells", _field(p, "cells", pw)))]
        part = Part(_text(f"{pw}.name", _field(p, "name", pw)), cells,
                    _text(f"{pw}.partition", p.get("partition"), optional=True, hexdigest=True))
        _same_or_null(f"{pw}.epsilon", _field(p, "epsilon", pw), part.epsilon)
        _same(f"{pw}.delta", _field(p, "delta", pw), part.delta)
        if not legacy:
            _same_or_null(f"{pw}.rho", _field(p, "rho", pw), part.rho)
        parts.append(part)
    target = d.get("target_epsilon")
    details = d.get("details", {})
    rec = ReleaseRecord(_text(f"{where}.name", _field(d, "name", where)), _text(f"{where}.kind", _field(d, "kind", where)),
                        parts, sample, None if target is None else V.positive(f"{where}.target_epsilon", target),
                        _obj(f"{where}.details", details))
    try:
        eps, delta, rho = _compose([rec])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    _same_or_null(f"{where}.epsilon", _field(d, "epsilon", where), eps)
    _same(f"{where}.delta", _field(d, "delta", where), delta)
    if not legacy:
        _same_or_null(f"{where}.rho", _field(d, "rho", where), rho)
    if rec.target_epsilon is not None and eps > rec.target_epsilon:
        raise ValueError(f"{where}.target_epsilon is {rec.target_epsilon!r} but the release spends {eps!r}")
    return rec


def _ledger_from_audit(cls, audit: dict) -> "PrivacyLedger":
    fmt = audit.get("format")
    if fmt in _OLD_FORMATS:
        raise ValueError(f"audit format {fmt!r} was written by an older dpopt whose ledger could book overlapping "
                         "samples as independent; it cannot be re-verified (start a new ledger from the releases)")
    legacy = fmt in _PURE_FORMATS           # before (ε, δ) and ρ: pure ε measurements only
    if fmt != AUDIT_FORMAT and not legacy:
        raise ValueError(f"not a dpopt privacy audit (format {fmt!r}, expected {AUDIT_FORMAT!r})")
    _finite_everywhere("audit", audit)
    accounting = "pure" if legacy else _text("accounting", _field(audit, "accounting", "audit"))
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}, got {accounting!r}")
    if not legacy and audit.get("guarantee") != GUARANTEE_TEXT[accounting]:
        raise ValueError(f"guarantee is {audit.get('guarantee')!r} but a {accounting!r} ledger states "
                         f"{GUARANTEE_TEXT[accounting]!r}")
    name = _text("ledger", audit.get("ledger", ""))
    if not legacy:        # the writer writes every field (null where it does not apply): a missing one was removed
        for key in ("rho_total", "delta_report", "delta_total", "epsilon_total"):
            _field(audit, key, "audit")
    delta_report = None if legacy else audit.get("delta_report")
    if accounting == "zcdp":
        if audit.get("epsilon_total") is not None:
            raise ValueError(f"epsilon_total must be null in a zcdp audit (its total is rho_total), got "
                             f"{audit.get('epsilon_total')!r}")
        led = cls(None, V.probability("delta_total", audit.get("delta_total", 0.0)), name,
                  rho_total=V.positive("rho_total", _field(audit, "rho_total", "audit")), delta_report=delta_report,
                  accounting="zcdp")
    else:
        if not legacy and audit.get("rho_total") is not None:
            raise ValueError(f"rho_total must be null in a {accounting!r} audit, got {audit.get('rho_total')!r}")
        led = cls(V.positive("epsilon_total", _field(audit, "epsilon_total", "audit")),
                  V.probability("delta_total", audit.get("delta_total", 0.0)), name, delta_report=delta_report,
                  accounting=accounting)
    led.records = [_record_from_dict(r, f"releases[{i}]", legacy)
                   for i, r in enumerate(_list("releases", _field(audit, "releases", "audit"), nonempty=False))]
    try:
        for r in led.records:
            led._accountable(r)
        eps, delta, rho = _compose(led.records)
    except ValueError as exc:
        raise ValueError(f"releases: {exc}") from None
    _same_or_null("epsilon_spent", _field(audit, "epsilon_spent", "audit"), eps, "the recorded releases")
    _same("delta_spent", _field(audit, "delta_spent", "audit"), delta, "the recorded releases")
    if not legacy:
        _same_or_null("rho_spent", _field(audit, "rho_spent", "audit"), rho, "the recorded releases")
        report = _obj("report", _field(audit, "report", "audit"))
        want = _plain(led.report())
        for key, value in want.items():
            got = report.get(key)
            if isinstance(value, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
                _same(f"report.{key}", got, value, "the recorded releases")
            elif got != value:
                raise ValueError(f"report.{key} is {got!r} but the recorded releases give {value!r}")
    within = V.flag("within_budget", _field(audit, "within_budget", "audit"))
    if within != led.within_budget():
        raise ValueError(f"within_budget is {within} but the releases spend epsilon {eps!r} of {led.epsilon_total!r}"
                         + (f" (rho {rho!r} of {led.rho_total!r})" if accounting == "zcdp" else ""))
    if not within:
        raise ValueError(f"the releases spend epsilon {eps!r} (delta {delta!r}, rho {rho!r}), above the declared "
                         f"total (epsilon_total {led.epsilon_total!r}, delta_total {led.delta_total!r}, rho_total "
                         f"{led.rho_total!r}): not a ledger to charge")
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
