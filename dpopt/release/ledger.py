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
from ..sampling import partition_id

AUDIT_FORMAT = "dpopt-privacy-audit/2"
_OLD_FORMATS = ("dpopt-privacy-audit/1",)


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
    """Measurements on one set of people (sequential); sampled when ``n`` < ``N``. ``members`` names the
    set (:func:`dpopt.sampling.members_id`); a sampled cell needs it."""

    name: str
    measurements: list[Measurement]
    N: int | None = None
    n: int | None = None
    members: str | None = None

    @property
    def epsilon_nominal(self) -> float:
        return sum_up(m.epsilon for m in self.measurements)

    @property
    def delta_nominal(self) -> float:
        return sum_up(m.delta for m in self.measurements)

    @property
    def sampled(self) -> bool:
        return self.N is not None and self.n < self.N

    @property
    def epsilon(self) -> float:
        """Per-person central ε of the cell on its own (amplified when sampled)."""
        e = self.epsilon_nominal
        return e if self.N is None else amplify_up(e, self.n, self.N)

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
        return max(c.epsilon for c in self.cells)

    @property
    def delta(self) -> float:
        return max(c.delta for c in self.cells)


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

    def to_dict(self) -> dict[str, Any]:
        parts = []
        for p in self.parts:
            cells = []
            for c in p.cells:
                cells.append({"name": c.name, "N": c.N, "n": c.n, "members": c.members,
                              "epsilon_nominal": c.epsilon_nominal, "epsilon": c.epsilon, "delta": c.delta,
                              "measurements": [_plain(asdict(m)) for m in c.measurements]})
            parts.append({"name": p.name, "partition": p.partition, "epsilon": p.epsilon, "delta": p.delta,
                          "cells": cells})
        eps, delta = PrivacyLedger.compose([self])
        return {"name": self.name, "kind": self.kind, "sample": self.sample, "target_epsilon": self.target_epsilon,
                "epsilon": eps, "delta": delta, "parts": parts, "details": _plain(self.details)}

    @classmethod
    def from_dict(cls, d: dict, where: str = "release") -> "ReleaseRecord":
        """A record from its :meth:`to_dict` form, every field checked (``where`` prefixes the messages)."""
        return _record_from_dict(d, where)


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


def _person_charge(cells, group, disjoint) -> tuple[float, float]:
    """(ε, δ) of one person in one key group: ``cells`` are the (block, cell, record) the person is in,
    ``group`` all (block, cell, record) of the group."""
    if not cells:
        return 0.0, 0.0
    blocks = {b for b, _, _ in cells}
    if len(blocks) == 1:
        X = next(iter(blocks))
        Ns = {c.N for _, c, _ in cells}
        nested = (len(Ns) == 1 and None not in Ns
                  and all((r.sample or {}).get("key") and r.sample.get("scheme") == "srswor" for _, _, r in cells)
                  and all(b == X or disjoint(X, b) for b, _, _ in group))
        if nested:
            # one key, one set of units: SRS draws are nested, so the person's releases act as one mechanism
            # on the largest sample (docs/release.md §6): sum the nominal budgets, amplify once at its rate
            N = Ns.pop()
            n = max(c.n for _, c, _ in cells)
            e = sum_up(c.epsilon_nominal for _, c, _ in cells)
            d = sum_up(c.delta_nominal for _, c, _ in cells)
            return amplify_up(e, n, N), d * n / N
    # the person's inclusion in these samples is not independent of the key's other draws: no amplification
    return (sum_up(c.epsilon_nominal for _, c, _ in cells), sum_up(c.delta_nominal for _, c, _ in cells))


def _compose(records) -> tuple[float, float]:
    records = list(records)
    if not records:
        return 0.0, 0.0
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

    def disjoint(x, y):
        return x != y and bool(partition_of[x] & partition_of[y])

    def worst(keys) -> tuple[float, float]:
        parts = sorted({P for g in keys for P, _, _, _ in groups[g]})
        choices = [sorted(blocks[P]) for P in parts]
        count = math.prod(len(c) for c in choices)
        if count > _MAX_PERSON_TYPES:
            if len(keys) > 1:        # each group at its own worst person: an upper bound of the joint worst
                ws = [worst([g]) for g in keys]
                return sum_up(w[0] for w in ws), sum_up(w[1] for w in ws)
            # a person in the worst cell of every part, without amplification: an upper bound
            per_part: dict[tuple[int, str], list[Cell]] = {}
            for P, _, c, r in groups[keys[0]]:
                per_part.setdefault((id(r), P), []).append(c)
            return (sum_up(max(c.epsilon_nominal for c in cs) for cs in per_part.values()),
                    sum_up(max(c.delta_nominal for c in cs) for cs in per_part.values()))
        best_e, best_d = 0.0, 0.0
        for combo in itertools.product(*choices):
            chosen = dict(zip(parts, combo))
            es, ds = [], []
            for g in keys:
                members = [(b, c, r) for P, b, c, r in groups[g] if chosen[P] == b]
                e, d = _person_charge(members, [(b, c, r) for _, b, c, r in groups[g]], disjoint)
                es.append(e)
                ds.append(d)
            best_e, best_d = max(best_e, sum_up(es)), max(best_d, sum_up(ds))
        return best_e, best_d

    return worst(list(groups))


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
        """Per-person (ε, δ) of ``records``, the largest over all people (module note; docs/release.md §6)."""
        return _compose(records)

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
}


# ---------------------------------------------------------------------------------- reading an audit
_MEASUREMENT_KEYS = ("name", "mechanism", "sensitivity", "scale", "epsilon", "delta", "noise_variance")
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


def _measurement(m, where: str) -> Measurement:
    m = _obj(where, m)
    extra = sorted(set(m) - set(_MEASUREMENT_KEYS))
    if extra:
        raise ValueError(f"{where}.{extra[0]} is not a field of a measurement ({', '.join(_MEASUREMENT_KEYS)})")
    for key in _MEASUREMENT_KEYS:          # the writer writes every field: a missing one was removed
        _field(m, key, where)
    nv = m["noise_variance"]
    mech = _text(f"{where}.mechanism", _field(m, "mechanism", where))
    if mech not in _MECHANISMS:
        raise ValueError(f"{where}.mechanism must be one of {', '.join(_MECHANISMS)}, got {mech!r}")
    out = Measurement(
        _text(f"{where}.name", _field(m, "name", where)), mech,
        V.positive(f"{where}.sensitivity", _field(m, "sensitivity", where)),
        V.positive(f"{where}.scale", _field(m, "scale", where)),
        V.positive(f"{where}.epsilon", _field(m, "epsilon", where)),
        V.probability(f"{where}.delta", m["delta"], closed_upper=True),
        float("nan") if nv is None else _nonnegative(f"{where}.noise_variance", nv))
    _check_map(out, where)
    return out


# a record names a built-in mechanism; its measurement is rebuilt from the registry to re-verify the map
_MECHANISMS = tuple(MECHANISMS)


@functools.lru_cache(maxsize=4096)
def _certified(mechanism: str, scale: float, sensitivity: float) -> tuple[float, float] | None:
    """(ε OpenDP's map certifies, noise variance) of a measurement; None without OpenDP. Deterministic: cached."""
    try:
        from . import _opendp
        dp = _opendp.require_opendp()
    except ImportError:                                   # pragma: no cover - depends on the environment
        return None
    d_in = _opendp.sensitivity_argument(mechanism, sensitivity)
    return (float(_opendp.noise_measurement(dp, mechanism, scale).map(d_in)),
            _opendp.variance_at_scale(mechanism, scale))


def _check_map(m: Measurement, where: str) -> None:
    """The recorded ε is what OpenDP's privacy map certifies at the recorded scale and sensitivity, to 1e-9
    (a mean's map runs through OpenDP's bounded mean; skipped when OpenDP is not installed: the rest of the
    audit is still re-verified)."""
    got = _certified(m.mechanism, m.scale, m.sensitivity)
    if got is None:
        return
    certified, variance = got
    if math.isfinite(m.noise_variance):
        _same(f"{where}.noise_variance", m.noise_variance, variance,
              f"the {m.mechanism} noise at scale {m.scale!r}")
    if abs(m.epsilon - certified) > 1e-9 * certified:
        raise ValueError(f"{where}.epsilon is {m.epsilon!r} but OpenDP's map of a {m.mechanism} measurement at scale "
                         f"{m.scale!r} and sensitivity {m.sensitivity!r} is {certified!r}")


def _nonnegative(where: str, v) -> float:
    x = V.real(where, v)
    if x < 0:
        raise ValueError(f"{where} must be >= 0, got {x:g}")
    return x


def _cell(c, where: str) -> Cell:
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
    ms = [_measurement(m, f"{where}.measurements[{i}]")
          for i, m in enumerate(_list(f"{where}.measurements", _field(c, "measurements", where)))]
    cell = Cell(_text(f"{where}.name", _field(c, "name", where)), ms, N, n,
                _text(f"{where}.members", c.get("members"), optional=True, hexdigest=True))
    _same(f"{where}.epsilon_nominal", _field(c, "epsilon_nominal", where), cell.epsilon_nominal)
    _same(f"{where}.epsilon", _field(c, "epsilon", where), cell.epsilon)
    _same(f"{where}.delta", _field(c, "delta", where), cell.delta)
    return cell


def _record_from_dict(d, where: str) -> ReleaseRecord:
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
        cells = [_cell(c, f"{pw}.cells[{k}]") for k, c in enumerate(_list(f"{pw}.cells", _field(p, "cells", pw)))]
        part = Part(_text(f"{pw}.name", _field(p, "name", pw)), cells,
                    _text(f"{pw}.partition", p.get("partition"), optional=True, hexdigest=True))
        _same(f"{pw}.epsilon", _field(p, "epsilon", pw), part.epsilon)
        _same(f"{pw}.delta", _field(p, "delta", pw), part.delta)
        parts.append(part)
    target = d.get("target_epsilon")
    details = d.get("details", {})
    rec = ReleaseRecord(_text(f"{where}.name", _field(d, "name", where)), _text(f"{where}.kind", _field(d, "kind", where)),
                        parts, sample, None if target is None else V.positive(f"{where}.target_epsilon", target),
                        _obj(f"{where}.details", details))
    try:
        eps, delta = PrivacyLedger.compose([rec])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    _same(f"{where}.epsilon", _field(d, "epsilon", where), eps)
    _same(f"{where}.delta", _field(d, "delta", where), delta)
    if rec.target_epsilon is not None and eps > rec.target_epsilon:
        raise ValueError(f"{where}.target_epsilon is {rec.target_epsilon!r} but the release spends {eps!r}")
    return rec


def _ledger_from_audit(cls, audit: dict) -> "PrivacyLedger":
    fmt = audit.get("format")
    if fmt in _OLD_FORMATS:
        raise ValueError(f"audit format {fmt!r} was written by an older dpopt whose ledger could book overlapping "
                         "samples as independent; it cannot be re-verified (start a new ledger from the releases)")
    if fmt != AUDIT_FORMAT:
        raise ValueError(f"not a dpopt privacy audit (format {fmt!r}, expected {AUDIT_FORMAT!r})")
    _finite_everywhere("audit", audit)
    led = cls(V.positive("epsilon_total", _field(audit, "epsilon_total", "audit")),
              V.probability("delta_total", audit.get("delta_total", 0.0)),
              _text("ledger", audit.get("ledger", "")))
    led.records = [_record_from_dict(r, f"releases[{i}]")
                   for i, r in enumerate(_list("releases", _field(audit, "releases", "audit"), nonempty=False))]
    try:
        eps, delta = led.compose(led.records)
    except ValueError as exc:
        raise ValueError(f"releases: {exc}") from None
    _same("epsilon_spent", _field(audit, "epsilon_spent", "audit"), eps, "the recorded releases")
    _same("delta_spent", _field(audit, "delta_spent", "audit"), delta, "the recorded releases")
    within = V.flag("within_budget", _field(audit, "within_budget", "audit"))
    if within != (eps <= led.epsilon_total and delta <= led.delta_total):
        raise ValueError(f"within_budget is {within} but the releases spend epsilon {eps!r} of {led.epsilon_total!r}")
    if not within:
        raise ValueError(f"the releases spend epsilon {eps!r} (delta {delta!r}), above epsilon_total "
                         f"{led.epsilon_total!r} (delta_total {led.delta_total!r}): not a ledger to charge")
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
