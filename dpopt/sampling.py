"""Drawing the sample: stratified simple random sampling without replacement, and Poisson sampling.

Both schemes use *permanent random numbers*: every unit gets the key-hashed number
``u = BLAKE2b(key, unit id)`` (64 bits). SRS without replacement of n_h units in stratum h takes the n_h
units with the smallest numbers (for independent uniform numbers every subset of size n_h is equally
likely); Poisson sampling takes unit i when ``u_i < π_i·2⁶⁴``. The draw is reproducible from the seed,
uses no numpy sampler, and is as unpredictable as the key is secret.

**Keep the sample secret.** Privacy amplification by subsampling holds only while nobody outside learns
who was sampled: the seed, the key and the list of sampled ids are confidential, like the data
(docs/release.md). Without a seed a fresh 256-bit key is drawn from the operating system.
"""

from __future__ import annotations

import csv
import hashlib
import secrets
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from . import _validate as V
from .frames import Frame

__all__ = ["Sample", "draw_stratified", "draw_srs", "draw_poisson", "sample_key"]

_TWO64 = 1 << 64


def sample_key(seed=None) -> bytes:
    """The 32-byte sampling key: from ``seed`` (int, str or bytes; reproducible) or, for None, the OS CSPRNG."""
    if seed is None:
        return secrets.token_bytes(32)
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError("seed must be an integer, a string or bytes, not a bool")
    if isinstance(seed, (int, np.integer)):
        raw = b"int:" + str(int(seed)).encode()
    elif isinstance(seed, str):
        if not seed:
            raise ValueError("seed must not be empty")
        raw = b"str:" + seed.encode()
    elif isinstance(seed, bytes):
        raw = b"bytes:" + seed
    else:
        raise TypeError(f"seed must be an integer, a string, bytes or None, got {type(seed).__name__}")
    return hashlib.sha256(b"dpopt sample key v1\0" + raw).digest()


def _numbers(key: bytes, ids, text: np.ndarray | None = None) -> np.ndarray:
    """64-bit permanent random numbers of the unit ids (uint64): keyed BLAKE2b of ``str(id)``, a
    cryptographic PRF, so nobody without the key can tell who was sampled. The keyed state is set up once and
    copied per id, integer ids are written as ASCII decimals by numpy in one pass (the bytes of ``str(id)``),
    and the digests are read in one pass: the same numbers as one hash object per id, at ~0.7 µs an id."""
    if len(ids) == 0:
        return np.empty(0, dtype=np.uint64)
    copy = hashlib.blake2b(key=key, digest_size=8, person=b"dpopt-prn").copy
    if text is None:        # the ids' bytes (:func:`_id_bytes`), when the caller has not made them already
        text = _id_bytes(np.asarray(ids) if not isinstance(ids, np.ndarray) else ids)
    texts = text.tolist()

    def digest(text: bytes) -> bytes:
        h = copy()
        h.update(text)
        return h.digest()

    return np.frombuffer(b"".join(map(digest, texts)), dtype=">u8").astype(np.uint64)


#: bytes of the longest int64/uint64 decimal (20 digits, or a sign and 19)
_ID_WIDTH = 21


def _id_bytes(ids: np.ndarray) -> np.ndarray:
    """``str(id).encode()`` of every id as a numpy bytes array (``S`` dtype): integer ids converted by numpy
    in one pass (ASCII decimals, the same bytes as ``str``), any other id one at a time."""
    if ids.dtype.kind in "iu":
        return ids.astype(f"S{_ID_WIDTH}")
    return np.array([str(u).encode() for u in ids], dtype=object)


def _unit_ids(fr: Frame, id_column):
    if id_column is None:
        return np.arange(fr.nrows, dtype=np.int64), "row"
    arr = fr.raw(id_column, "id")
    if arr.dtype.kind in "iu":        # integer ids: no missing value possible, unique checked by one sort
        dup = np.flatnonzero(np.diff(np.sort(arr)) == 0)
        if dup.size:
            raise ValueError(f"frame id column {id_column!r} must be unique; {str(np.sort(arr)[dup[0]])!r} appears "
                             "more than once")
        return arr, str(id_column)
    ids = [x.item() if hasattr(x, "item") else x for x in arr]
    text = [str(x) for x in ids]
    if len(set(text)) != len(text):
        seen = set()
        dup = next(t for t in text if t in seen or seen.add(t))
        raise ValueError(f"frame id column {id_column!r} must be unique; {dup!r} appears more than once")
    for i, x in enumerate(ids):
        if x is None or (isinstance(x, float) and x != x) or text[i].strip() == "":
            raise ValueError(f"frame id column {id_column!r} has a missing value at row {i}")
    return np.asarray(ids, dtype=object), str(id_column)


@dataclass
class Sample:
    """A drawn sample: the frame rows taken, their ids, strata, inclusion probabilities and design weights.

    ``rows`` index the frame (0-based), ``stratum`` holds each unit's stratum index into ``labels``;
    ``N`` and ``n`` are the population and sample counts per stratum (``n`` is random under Poisson
    sampling). ``fingerprint`` identifies this draw (the key's hash and the rows).

    The privacy ledger decides composition by who can be in a sample, so a sample also carries its
    *identity* (docs/release.md §6): ``key_id`` names the permanent random numbers (equal for every draw
    with one key, so that draws with one key are recognised as dependent: SRS draws of one set of units
    with one key are nested), and ``members`` names each stratum's set of units (a hash of their ids,
    independent of labels and row order). Neither reveals the key, a unit or who was sampled.
    """

    scheme: str
    rows: np.ndarray
    ids: np.ndarray
    id_column: str
    stratum: np.ndarray
    labels: list[str]
    N: np.ndarray
    n: np.ndarray
    inclusion: np.ndarray
    strata_column: str | None = None
    fingerprint: str = ""
    details: dict = field(default_factory=dict)
    key_id: str = ""
    members: list[str] = field(default_factory=list)

    @property
    def partition(self) -> str:
        """Identity of the split of the frame into ``members`` (the same for any labelling of the strata)."""
        return partition_id(self.members)

    @property
    def weights(self) -> np.ndarray:
        """Design weights 1/π (N_h/n_h under stratified SRS)."""
        return 1.0 / self.inclusion

    @property
    def size(self) -> int:
        return int(self.rows.size)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (f"Sample(scheme={self.scheme!r}, n={self.size}, strata={len(self.labels)}, "
                f"N={int(self.N.sum())})")

    def values(self, frame, column, role: str = "y") -> np.ndarray:
        """The sampled units' values of a numeric frame column (same row order as the sample)."""
        fr = frame if isinstance(frame, Frame) else Frame(frame, "frame")
        if fr.nrows != int(self.N.sum()):
            raise ValueError(f"frame has {fr.nrows} rows but the sample was drawn from a frame of {int(self.N.sum())}")
        return fr.numeric(column, role)[self.rows]

    def columns(self) -> dict:
        """id, stratum label, inclusion probability and weight per sampled unit (a dict of columns)."""
        return {self.id_column: self.ids.tolist(), "stratum": [self.labels[s] for s in self.stratum],
                "inclusion_probability": self.inclusion, "weight": self.weights}

    def to_frame(self):
        """The sample as a pandas DataFrame (id, stratum, inclusion_probability, weight)."""
        from .frames import to_pandas
        return to_pandas(self.columns())

    def to_csv(self, path) -> Path:
        """Write the sample (ids with weights) as CSV; it is confidential (see the module note)."""
        path = Path(path)
        cols = self.columns()
        names = list(cols)
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(names)
            for i in range(self.size):
                w.writerow([repr(float(cols[c][i])) if c in ("inclusion_probability", "weight") else cols[c][i]
                            for c in names])
        return path


def _digest(tag: bytes, texts) -> str:
    h = hashlib.sha256(tag)
    for t in texts:
        b = t.encode()
        h.update(len(b).to_bytes(8, "big") + b)     # length-prefixed: no two lists hash alike by concatenation
    return h.hexdigest()[:32]


def key_id(key: bytes) -> str:
    """Public name of a sampling key: equal for equal keys, and reveals nothing about the key."""
    return hashlib.sha256(b"dpopt sample key id\0" + key).hexdigest()[:32]


def members_id(ids) -> str:
    """Name of a set of units, from their ids as the permanent random numbers read them (``str(id)``):
    the same set gets the same name whatever its order or labels."""
    return _digest(b"dpopt members\0", sorted(str(u) for u in ids))


def _members_by_stratum(ids: np.ndarray, codes: np.ndarray, k: int, text: np.ndarray | None = None) -> list[str]:
    """``members_id`` of every stratum's ids (``codes`` give each id's stratum 0..k-1): the same names, built in
    one pass for integer ids (their decimal bytes sorted per stratum by numpy, length-prefixed as
    :func:`_digest` writes them), else one stratum at a time."""
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or ids.size == 0:
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(k + 1))
        return [members_id(ids[order[bounds[h]:bounds[h + 1]]]) for h in range(k)]
    text = _id_bytes(ids) if text is None else text
    order = np.lexsort((text, codes))               # by stratum, then by the id's text (bytes order = str order)
    text = text[order]
    length = np.char.str_len(text).astype(np.int64)
    m = text.size
    block = np.zeros((m, 8 + _ID_WIDTH), dtype=np.uint8)
    block[:, :8] = length.astype(">u8").view(np.uint8).reshape(m, 8)     # len(b).to_bytes(8, "big")
    block[:, 8:] = text.view(np.uint8).reshape(m, _ID_WIDTH)
    stream = block[np.arange(8 + _ID_WIDTH)[None, :] < (8 + length)[:, None]].tobytes()
    ends = np.concatenate([[0], np.cumsum(8 + length)])
    bounds = ends[np.searchsorted(codes[order], np.arange(k + 1))]
    out = []
    for h in range(k):
        dg = hashlib.sha256(b"dpopt members\0")
        dg.update(stream[bounds[h]:bounds[h + 1]])
        out.append(dg.hexdigest()[:32])
    return out


def _smallest_per_stratum(codes: np.ndarray, u: np.ndarray, n: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Frame rows of the n_h smallest numbers ``u`` in every stratum (ties, probability ~2^-64, broken by row),
    grouped by stratum and ascending within it: one stable sort by (stratum, number) for all strata."""
    order = np.lexsort((u, codes))                   # stable: equal numbers keep row order
    starts = np.concatenate([[0], np.cumsum(N)[:-1]])
    sorted_codes = codes[order]
    rank = np.arange(order.size) - starts[sorted_codes]
    picked = order[rank < n[sorted_codes]]
    return picked[np.lexsort((picked, codes[picked]))]


def partition_id(members) -> str:
    """Name of a split of a frame into the sets named ``members`` (any order): the privacy ledger recomputes
    it from a part's cells, so a part that lost or changed a cell is refused."""
    return _digest(b"dpopt partition\0", sorted(members))


def _fingerprint(key: bytes, scheme: str, rows: np.ndarray) -> str:
    h = hashlib.sha256(b"dpopt sample fingerprint\0" + hashlib.sha256(key).digest() + scheme.encode())
    h.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
    return h.hexdigest()[:32]


def draw_stratified(frame, model, n, *, strata: str, id: str | None = None, seed=None) -> Sample:
    """Stratified SRS without replacement: n_h units from every stratum of the frame.

    ``model`` is the :class:`~dpopt.models.stratified.StratifiedDesign` (its labels and N_h must match the
    frame: the privacy accounting uses N_h), ``n`` the integer design (array or Solution) in the model's
    stratum order, ``strata`` the frame's stratum column, ``id`` an optional unique unit id column (default:
    the row number), ``seed`` the secret seed (None: a fresh random key).
    """
    fr = Frame(frame, "frame")
    n = np.asarray(getattr(n, "n", n))
    if n.ndim != 1 or n.size != model.k:
        raise ValueError(f"n must be an integer design with one size per stratum ({model.k}), got shape {n.shape}")
    if np.any(n != np.round(n)):
        raise ValueError("n must be integers (solve the design, not its relaxation)")
    n = n.astype(np.int64)
    labels, codes = fr.labels(strata, "strata")
    if sorted(labels) != sorted(model.labels):
        missing = [lab for lab in model.labels if lab not in labels]
        extra = [lab for lab in labels if lab not in model.labels]
        what = (f"stratum {missing[0]!r} of the model is not in the frame" if missing
                else f"stratum {extra[0]!r} of the frame is not in the model")
        raise ValueError(f"frame strata column {strata!r} does not match the model: {what}")
    # recode the frame's strata to the model's order
    position = {lab: i for i, lab in enumerate(model.labels)}
    order = np.array([position[lab] for lab in labels], dtype=np.int64)
    codes = order[codes]
    N = np.bincount(codes, minlength=model.k)
    bad = np.flatnonzero(N != model.N)
    if bad.size:
        h = int(bad[0])
        raise ValueError(f"frame strata column {strata!r}: stratum {model.labels[h]!r} has {N[h]} units but the "
                         f"model's N is {model.N[h]} (the amplification uses N_h: design from this frame)")
    if np.any(n < 0) or np.any(n > N):
        h = int(np.argmax((n < 0) | (n > N)))
        raise ValueError(f"n for stratum {model.labels[h]!r} must be in [0, {N[h]}], got {n[h]}")
    ids, id_name = _unit_ids(fr, id)
    key = sample_key(seed)
    text = _id_bytes(ids)
    u = _numbers(key, ids, text)
    rows = _smallest_per_stratum(codes, u, n, N)
    stratum = codes[rows]
    incl = (n / N)[stratum]
    members = _members_by_stratum(ids, codes, model.k, text)
    return Sample("srswor", rows, ids[rows], id_name, stratum, list(model.labels), N.astype(np.int64), n,
                  incl.astype(float), strata_column=str(strata), fingerprint=_fingerprint(key, "srswor", rows),
                  key_id=key_id(key), members=members)


def draw_poisson(frame, probabilities, *, id: str | None = None, seed=None, strata: str | None = None) -> Sample:
    """Poisson sampling: unit i is taken independently with probability π_i (one per frame row, in (0, 1]).

    ``probabilities`` is an array or the name of a frame column (e.g. the q of an importance-sampling
    solution). Weights are 1/π_i. ``strata`` optionally labels the units (for reporting).
    """
    fr = Frame(frame, "frame")
    if isinstance(probabilities, str):
        p = fr.numeric(probabilities, "probability")
    else:
        p = V.vector("probabilities", getattr(probabilities, "x", probabilities), length=fr.nrows)
    if np.any(p <= 0) or np.any(p > 1):
        i = int(np.argmax((p <= 0) | (p > 1)))
        raise ValueError(f"probabilities must be in (0, 1]; row {i} has {p[i]!r}")
    if strata is None:
        labels, codes = ["all"], np.zeros(fr.nrows, dtype=np.int64)
    else:
        labels, codes = fr.labels(strata, "strata")
    ids, id_name = _unit_ids(fr, id)
    key = sample_key(seed)
    u = _numbers(key, ids)
    # u < π·2^64 exactly (integer comparison; π = 1 always takes the unit)
    thresholds = [int(Fraction(float(x)) * _TWO64) for x in p]
    take = np.fromiter((int(ui) < t for ui, t in zip(u, thresholds)), dtype=bool, count=fr.nrows)
    rows = np.flatnonzero(take)
    N = np.bincount(codes, minlength=len(labels)).astype(np.int64)
    n = np.bincount(codes[rows], minlength=len(labels)).astype(np.int64)
    return Sample("poisson", rows, ids[rows], id_name, codes[rows], labels, N, n, p[rows].astype(float),
                  strata_column=strata, fingerprint=_fingerprint(key, "poisson", rows),
                  details={"expected_size": float(p.sum())}, key_id=key_id(key),
                  members=_members_by_stratum(ids, codes, len(labels)))


def draw_srs(frame, n, *, id: str | None = None, seed=None) -> Sample:
    """Simple random sample without replacement of ``n`` units from the whole frame (one stratum "all")."""
    fr = Frame(frame, "frame")
    n = V.integer("n", getattr(n, "n_star", n), minimum=0)
    if n > fr.nrows:
        raise ValueError(f"n must be <= the frame's {fr.nrows} rows, got {n}")
    ids, id_name = _unit_ids(fr, id)
    key = sample_key(seed)
    u = _numbers(key, ids)
    all_rows = np.arange(fr.nrows)
    rows = np.sort(all_rows[np.lexsort((all_rows, u))[:n]])
    N = np.array([fr.nrows], dtype=np.int64)
    return Sample("srswor", rows, ids[rows], id_name, np.zeros(n, dtype=np.int64), ["all"], N,
                  np.array([n], dtype=np.int64), np.full(n, n / fr.nrows),
                  fingerprint=_fingerprint(key, "srswor", rows), key_id=key_id(key),
                  members=_members_by_stratum(ids, np.zeros(len(ids), dtype=np.int64), 1))
