"""The privacy ledger charges what was really spent (issue 18 §2): composition by who is in a sample, never by a
cell's name; nested and repeated samples charged as overlapping; plans tied to their design; audits re-verified.

The oracle is written here from docs/release.md §6 and docs/privacy.md, in 50-digit arithmetic, per person of
the population: releases drawn with different keys add their amplified budgets log1p(q·expm1(ε_nom)); releases
drawn with one key, for a person whose cells in them are all one set X of units while every other cell of that
key is X or disjoint from X, sum their nominal budgets and amplify once at the largest rate; otherwise the
person's nominal budgets add up without amplification. The ledger must equal the worst person's charge.
"""

import copy
import json
import math
import random

import numpy as np
import pytest

from dpopt import SampleSizeProgram, StratifiedDesign
from dpopt.cli import main
from dpopt.sampling import draw_srs, draw_stratified

pytest.importorskip("opendp")
mpmath = pytest.importorskip("mpmath")

from dpopt.release import (PrivacyLedger, plan_stratified, release_mean, release_stratified)  # noqa: E402

mpmath.mp.dps = 50


def _amplified(nominals, n, N):
    """docs/privacy.md: ε = log1p((n/N)·expm1(Σ ε_nom)), exact."""
    return mpmath.log1p(mpmath.mpf(n) / N * mpmath.expm1(mpmath.fsum(mpmath.mpf(e) for e in nominals)))


def _nominal(cell):
    return [m.epsilon for m in cell.measurements]


# a population of 60 people, every region × age combination present (10 people each)
N_POP = 60
_rng = np.random.default_rng(18)
FRAME = {"id": [f"u{i:02d}" for i in range(N_POP)],
         "region": [["a", "b", "c"][i % 3] for i in range(N_POP)],
         "age": [["young", "old"][(i // 3) % 2] for i in range(N_POP)],
         "everyone": ["all"] * N_POP,
         "y": _rng.uniform(0.0, 1.0, N_POP).tolist()}


def _design(column, epsilon, total):
    return StratifiedDesign.from_frame(FRAME, column, "y", total=total, epsilon=epsilon, value_range=(0.0, 1.0))


# ---------------------------------------------------------------------------------- the cases
def test_stratified_and_mean_of_the_same_people_compose_sequentially():
    """One SRS released by release_stratified (cell 'all') and release_mean (cell 'population'): the same
    people, so their nominal budgets add and are amplified once (was booked as parallel: ε = 1)."""
    model = _design("everyone", 1.0, 20)
    sample = draw_srs(FRAME, 20, id="id", seed="shared secret")
    ledger = PrivacyLedger(100.0)
    a = release_stratified(model, sample, sample.values(FRAME, "y"), ledger=ledger)
    program = SampleSizeProgram(N_POP, float(np.var(FRAME["y"], ddof=1)), 1.0, value_range=1.0)
    b = release_mean(program, sample, sample.values(FRAME, "y"), (0.0, 1.0), ledger=ledger)
    exact = _amplified(_nominal(a.record.parts[0].cells[0]) + _nominal(b.record.parts[0].cells[0]), 20, N_POP)
    assert ledger.epsilon_spent >= exact and float(exact) == pytest.approx(ledger.epsilon_spent, rel=1e-12)
    assert ledger.epsilon_spent > 2.0


def test_nested_samples_of_one_key_are_charged_as_overlapping():
    """n = 40 and n = 41 with one seed are nested (keyed permanent random numbers): charged as one mechanism
    on the 41, not as two independent samples (was 2.0)."""
    frame = {"id": [f"p{i}" for i in range(400)], "s": ["all"] * 400,
             "y": np.random.default_rng(1).uniform(0, 10, 400).tolist()}
    small = draw_srs(frame, 40, id="id", seed="k")
    large = draw_srs(frame, 41, id="id", seed="k")
    assert set(small.ids) < set(large.ids) and small.fingerprint != large.fingerprint
    ledger = PrivacyLedger(100.0)
    recs = []
    for n, s in ((40, small), (41, large)):
        m = StratifiedDesign.from_frame(frame, "s", "y", total=n, epsilon=1.0, value_range=(0, 10))
        recs.append(release_stratified(m, s, s.values(frame, "y"), ledger=ledger).record)
    exact = _amplified(_nominal(recs[0].parts[0].cells[0]) + _nominal(recs[1].parts[0].cells[0]), 41, 400)
    assert ledger.epsilon_spent >= exact and float(exact) == pytest.approx(ledger.epsilon_spent, rel=1e-12)
    assert ledger.epsilon_spent > 3.0
    # another key: independent samples, the amplified budgets add (each ≤ 1)
    other = draw_srs(frame, 41, id="id", seed="another key")
    m = StratifiedDesign.from_frame(frame, "s", "y", total=41, epsilon=1.0, value_range=(0, 10))
    led2 = PrivacyLedger(100.0)
    r1 = release_stratified(m, large, large.values(frame, "y"), ledger=led2).record
    r2 = release_stratified(m, other, other.values(frame, "y"), ledger=led2).record
    exact2 = _amplified(_nominal(r1.parts[0].cells[0]), 41, 400) + _amplified(_nominal(r2.parts[0].cells[0]), 41, 400)
    assert float(exact2) == pytest.approx(led2.epsilon_spent, rel=1e-12) and led2.epsilon_spent <= 2.0


@pytest.mark.parametrize("change", ["N", "epsilon", "mechanism", "shares", "scale"])
def test_plan_is_tied_to_its_design(change):
    """A plan made for another population size or ε has the wrong noise scale: refused, naming the field."""
    frame = {"id": [f"p{i}" for i in range(200)], "r": [["a", "b"][i % 2] for i in range(200)],
             "y": np.random.default_rng(2).integers(0, 5, 200).astype(float).tolist()}
    model = StratifiedDesign.from_frame(frame, "r", "y", total=20, epsilon=1.0, value_range=(0, 4))
    n = np.array([10, 10])
    sample = draw_stratified(frame, model, n, strata="r", id="id", seed="plan")
    if change == "N":   # the same labels and n in a population of another size
        small = {k: v[:100] for k, v in frame.items()}
        other = StratifiedDesign.from_frame(small, "r", "y", total=20, epsilon=1.0, value_range=(0, 4))
    elif change == "epsilon":
        other = StratifiedDesign.from_frame(frame, "r", "y", total=20, epsilon=5.0, value_range=(0, 4))
    elif change == "mechanism":
        other = StratifiedDesign.from_frame(frame, "r", "y", total=20, epsilon=1.0, value_range=(0, 4),
                                            mechanism="dlap")
    else:
        other = model
    plan = plan_stratified(other, n)
    field = {"N": r"plan\[0\]\.N", "epsilon": r"plan\[0\]\.epsilon_target", "mechanism": r"plan\[0\]\.mechanism",
             "shares": r"plan\[0\]\.shares", "scale": r"plan\[0\].*spend"}[change]
    if change == "shares":
        plan[0].shares = [0.5]
    if change == "scale":
        plan[0].scales = [plan[0].scales[0] / 3]
    ledger = PrivacyLedger(10.0)
    with pytest.raises(ValueError, match=field):
        release_stratified(model, sample, sample.values(frame, "y"), plan=plan, ledger=ledger)
    assert ledger.records == []
    # the plan made for this design is accepted, and gives the same record as no plan
    good = plan_stratified(model, n)
    rel = release_stratified(model, sample, sample.values(frame, "y"), plan=good, ledger=ledger)
    assert rel.epsilon_spent <= 1.0


# ---------------------------------------------------------------------------------- fuzz: overlapping samples
_DESIGNS = {"region": [[5, 5, 5], [6, 5, 7], [10, 10, 10]], "age": [[5, 5], [8, 9]], "everyone": [[10], [11]]}
_SEEDS = ["s1", "s2", "s3"]
_PLANS: dict = {}
_MODELS: dict = {}


def _stratified_release(column, n, eps, seed, ledger):
    key = (column, eps)
    if key not in _MODELS:
        _MODELS[key] = _design(column, eps, int(sum(_DESIGNS[column][0])))
    model = _MODELS[key]
    if (key, tuple(n)) not in _PLANS:
        _PLANS[key, tuple(n)] = plan_stratified(model, np.array(n))
    sample = draw_stratified(FRAME, model, np.array(n), strata=column, id="id", seed=seed)
    rel = release_stratified(model, sample, sample.values(FRAME, "y"), ledger=ledger, plan=_PLANS[key, tuple(n)])
    return {"column": column, "n": dict(zip(model.labels, n)), "seed": seed, "record": rel.record}


def _mean_release(n, eps, seed, ledger):
    program = SampleSizeProgram(N_POP, 0.08, eps, value_range=1.0)
    sample = draw_srs(FRAME, n, id="id", seed=seed)
    rel = release_mean(program, sample, sample.values(FRAME, "y"), (0.0, 1.0), ledger=ledger)
    return {"column": "everyone", "n": {"all": n}, "seed": seed, "record": rel.record}


_BRANCHES = {"nested": 0, "nominal": 0}


def _oracle(releases):
    """Largest per-person charge, from the people themselves (docs/release.md §6)."""
    def cell_of(rel, person):
        label = FRAME[rel["column"]][person]
        cells = rel["record"].parts[0].cells
        cell = cells[0] if len(cells) == 1 else next(c for c in cells if c.name == label)
        members = frozenset(i for i in range(N_POP) if FRAME[rel["column"]][i] == label)
        return members, cell, rel["n"][label if len(cells) > 1 else next(iter(rel["n"]))]

    def all_sets(rel):
        return [frozenset(i for i in range(N_POP) if FRAME[rel["column"]][i] == v)
                for v in sorted(set(FRAME[rel["column"]]))]

    worst = mpmath.mpf(0)
    for person in range(N_POP):
        total = mpmath.mpf(0)
        for seed in _SEEDS:
            group = [r for r in releases if r["seed"] == seed]
            if not group:
                continue
            mine = [cell_of(r, person) for r in group]
            sets = {m for m, _, _ in mine}
            X = next(iter(sets))
            nested = len(sets) == 1 and all(s == X or not (s & X) for r in group for s in all_sets(r))
            nominals = [e for _, c, _ in mine for e in _nominal(c)]
            _BRANCHES["nested" if nested else "nominal"] += 1
            if nested:
                total += _amplified(nominals, max(n for _, _, n in mine), len(X))
            else:
                total += mpmath.fsum(mpmath.mpf(e) for e in nominals)
        worst = max(worst, total)
    return worst


def test_fuzz_overlapping_samples_against_per_person_oracle(tmp_path):
    rnd = random.Random(1818)
    for case in range(30):
        ledger = PrivacyLedger(1e6)
        releases = []
        for _ in range(rnd.randint(1, 4)):
            seed = rnd.choice(_SEEDS[: rnd.randint(1, 3)])
            eps = rnd.choice([0.3, 1.0])
            if rnd.random() < 0.15:
                releases.append(_mean_release(rnd.choice([10, 11]), eps, seed, ledger))
            else:
                column = rnd.choice(list(_DESIGNS))
                releases.append(_stratified_release(column, rnd.choice(_DESIGNS[column]), eps, seed, ledger))
            if rnd.random() < 0.2:      # repeat the same release on the same sample
                r = releases[-1]
                releases.append(dict(r))
                ledger.charge(r["record"])
        exact = _oracle(releases)
        spent = ledger.epsilon_spent
        assert spent >= exact, (case, spent, exact)                      # never below the truth
        assert float(exact) == pytest.approx(spent, rel=1e-12), (case, spent, exact)   # and not above it
        # the audit round-trips and re-verifies
        path = ledger.write_audit(tmp_path / f"audit{case}.json")
        assert PrivacyLedger.from_audit(path).epsilon_spent == spent
        # a ledger whose total is just below the charge refuses the last release
        tight = PrivacyLedger(spent * (1 - 1e-9))
        tight.records = ledger.records[:-1]
        if PrivacyLedger.compose(tight.records)[0] < tight.epsilon_total:
            with pytest.raises(ValueError, match="refused"):
                tight.charge(ledger.records[-1])
    assert _BRANCHES["nested"] > 100 and _BRANCHES["nominal"] > 100     # both rules were exercised


# ---------------------------------------------------------------------------------- fuzz: tampered audits
_REMOVE = object()
_BAD = [float("nan"), float("inf"), -float("inf"), -1.0, 0, "x", True, None, [], {}, _REMOVE]
# fields an audit may change without changing the accounting: descriptive text, and free-form details
_FREE = ("composition", "software", "details", "fingerprint", "name", "kind", "ledger")
_OPTIONAL = {"noise_variance": (None,), "target_epsilon": (None, _REMOVE), "delta_total": (0, _REMOVE),
             "delta": (0,), "fingerprint": (_REMOVE,), "details": (_REMOVE, {}), "ledger": (_REMOVE,)}


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _text(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _base_audit():
    ledger = PrivacyLedger(50.0)
    _stratified_release("region", [6, 5, 7], 1.0, "s1", ledger)
    _stratified_release("region", [10, 10, 10], 0.3, "s1", ledger)
    _stratified_release("age", [5, 5], 1.0, "s2", ledger)
    _mean_release(10, 0.3, "s3", ledger)
    return ledger, json.loads(json.dumps(ledger.audit()))


def test_fuzz_tampered_audits_are_refused_naming_the_field():
    ledger, audit = _base_audit()
    spent = ledger.epsilon_spent
    assert PrivacyLedger.from_audit(copy.deepcopy(audit)).epsilon_spent == spent     # untouched: round-trips
    tried = refused = 0
    for path in list(_paths(audit)):
        if not path:
            continue
        parent = audit
        for p in path[:-1]:
            parent = parent[p]
        old = parent[path[-1]]
        mutations = list(_BAD)
        if isinstance(old, (int, float)) and not isinstance(old, bool):
            mutations += [old + 1 if isinstance(old, int) else old * (1 + 1e-6) + 1e-9, float(old) + 0.5]
        if isinstance(old, list) and old:
            mutations.append(old[:-1])                  # a measurement, cell, part or release removed
        for new in mutations:
            bad = copy.deepcopy(audit)
            target = bad
            for p in path[:-1]:
                target = target[p]
            if new is _REMOVE:
                if isinstance(target, list):
                    continue
                del target[path[-1]]
            else:
                target[path[-1]] = new
            tried += 1
            try:
                rebuilt = PrivacyLedger.from_audit(bad)
            except (ValueError, TypeError) as exc:
                refused += 1
                msg = str(exc)
                # the reason names the field (or, for a changed measurement or a removed element, the
                # cell/part/release whose recorded totals no longer recompute)
                names = [_text(path[:i]) for i in range(len(path), 0, -1)]
                assert (any(nm and nm in msg for nm in names) or (len(path) == 1 and path[0] in msg)
                        or (path[0] == "releases" and "_spent is" in msg and "the recorded releases" in msg)), \
                    (path, new, msg)
                continue
            free = any(isinstance(p, str) and p in _FREE for p in path)
            optional = isinstance(path[-1], str) and new in _OPTIONAL.get(path[-1], ()) and new is not True
            harmless = (type(new) is type(old) and new == old) or (
                {type(new), type(old)} <= {int, float} and new == old)
            # the declared totals are the ledger's policy, not derived from anything: a valid value is a valid ledger
            declared = (path in (("epsilon_total",), ("delta_total",)) or path[-1] == "target_epsilon") and \
                isinstance(new, float) and new > 0
            assert free or optional or harmless or declared, (f"tampered audit accepted: {_text(path)} = {new!r}")
            # whatever was accepted books exactly what the untouched audit booked
            assert rebuilt.compose(rebuilt.records) == ledger.compose(ledger.records), (path, new)
    assert tried > 1000 and refused > 800


def test_from_audit_refuses_non_audits_and_the_old_format(tmp_path):
    for text, words in (("[1, 2]", "a JSON list"), ("{\"a\": 1}", "not a dpopt privacy audit"),
                        ("not json", "not valid JSON"), ("{\"format\": \"dpopt-privacy-audit/1\"}", "older dpopt")):
        path = tmp_path / "x.json"
        path.write_text(text)
        with pytest.raises(ValueError, match=words):
            PrivacyLedger.from_audit(path)
    for value in (None, 3, [1]):
        with pytest.raises((TypeError, ValueError)):
            PrivacyLedger.from_audit({"format": "dpopt-privacy-audit/3", "epsilon_total": 1.0, "releases": value,
                                      "epsilon_spent": 0.0, "delta_spent": 0.0, "within_budget": True})


def test_cli_ledger_with_a_non_audit_is_one_error_line(tmp_path, capsys):
    from test_cli_release import _write_frame
    frame = _write_frame(tmp_path / "frame.csv", n=400)
    model_path = tmp_path / "model.toml"
    assert main(["design", str(frame), "--strata", "region", "--y", "income", "--total", "40", "--epsilon", "1",
                 "--value-range", "0", "100", "--id", "person", "--out", str(model_path)]) == 0
    for i, text in enumerate(("[1, 2, 3]", "{\"format\": \"dpopt-privacy-audit/3\", \"epsilon_total\": NaN}",
                              "not json at all")):
        bad = tmp_path / f"bad{i}.json"
        bad.write_text(text)
        capsys.readouterr()
        rc = main(["release", str(model_path), "--frame", str(frame), "--ledger", str(bad),
                   "--out", str(tmp_path / f"out{i}")])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("dpopt: error: ") and str(bad) in lines[0], err
        assert not (tmp_path / f"out{i}").exists()
