"""The release path at census scale, checked for correctness (speed is benchmarks/bench_release.py):

* the plan's scales (closed form, one OpenDP certification per distinct scale, strata of equal (N_h, n_h)
  sharing one plan) are certified by OpenDP's own measurement built here, map(Δ) ≤ the variable's share of the
  stratum's nominal target, with the amplified ε ≤ ε by an independent mpmath evaluation, and equal to the scale
  OpenDP's ``binary_search_param`` finds for the same target within a few ulps;
* the permanent random numbers equal hashlib's keyed BLAKE2b one id at a time (integer ids of every width),
  the stratified SRS equals the brute-force "n_h smallest numbers per stratum", and the members' names equal
  SHA-256 of the sorted, length-prefixed ids written out here;
* a release whose strata share scales records one measurement per stratum at the plan's scales.
"""

import hashlib
import math

import numpy as np
import pytest

import dpopt
from dpopt.sampling import _members_by_stratum, _numbers, draw_stratified, sample_key

dp = pytest.importorskip("opendp.prelude")
mpmath = pytest.importorskip("mpmath")
dp.enable_features("contrib")

from dpopt.release import plan_stratified, release_stratified  # noqa: E402
from dpopt.release._opendp import closed_form_scale  # noqa: E402


def _oracle_measurement(mechanism, scale):
    """OpenDP's measurement built here from OpenDP alone (not through dpopt)."""
    if mechanism == "laplace":
        return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float),
                                 scale=scale)
    return dp.m.make_geometric(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)


def _design(mechanism, k=120, seed=3, J=1):
    rng = np.random.default_rng(seed)
    N = rng.integers(20, 400, k)
    N[k // 2:] = N[: k - k // 2]                    # half the strata repeat another's N_h: shared keys
    s2 = rng.uniform(1.0, 30.0, (k, J)) if J > 1 else rng.uniform(1.0, 30.0, k)
    vr = (0.0, 10.0) if mechanism != "tulap" else (0.0, 1.0)
    kw = {"shares": [0.3, 0.7], "variables": ["a", "b"]} if J > 1 else {}
    model = dpopt.StratifiedDesign(N, s2, int(N.sum()) // 5, 0.7, mechanism=mechanism, value_range=vr,
                                   min_per_stratum=2, **kw)
    return model, np.asarray(model.solve(backend="exact").n)


def _amplified(eps_nominal, n, N):
    """log1p((n/N)·expm1(ε)) at 50 digits (the population amplification, independently of dpopt)."""
    with mpmath.workdps(50):
        return float(mpmath.log1p(mpmath.mpf(n) / N * mpmath.expm1(mpmath.mpf(eps_nominal))))


@pytest.mark.parametrize("mechanism,J", [("laplace", 1), ("dlap", 1), ("tulap", 1), ("laplace", 2)])
def test_plan_scales_certified_by_opendp_and_equal_to_its_binary_search(mechanism, J):
    model, n = _design(mechanism, J=J)
    plan = plan_stratified(model, n)
    assert len({(p.N, p.n) for p in plan}) < model.k           # the design does share (N_h, n_h) keys
    kind = "laplace" if mechanism == "laplace" else "geometric"
    rng = np.random.default_rng(0)
    searched = set(rng.choice(model.k, 6, replace=False).tolist())
    for h, p in enumerate(plan):
        assert (p.N, p.n) == (int(model.N[h]), int(n[h]))
        for j, scale in enumerate(p.scales):
            delta = model.sensitivity_of(j)
            d_in = float(delta) if kind == "laplace" else int(delta)
            goal = p.nominal_target * float(model.shares[j])
            spent = float(_oracle_measurement(kind, scale).map(d_in))
            assert spent <= goal and spent == p.nominal_spent[j]
            if h in searched:          # the old per-stratum route: OpenDP's own bisection for the same target
                old = dp.binary_search_param(lambda s: _oracle_measurement(kind, s), d_in=d_in, d_out=goal, T=float)
                assert abs(scale - old) <= 4 * math.ulp(old)
        total = math.fsum(p.nominal_spent)
        assert _amplified(total, p.n, p.N) <= model.epsilon * (1 + 1e-15)
        assert p.epsilon_central <= model.epsilon and p.epsilon_central_opendp <= model.epsilon


@pytest.mark.parametrize("delta,epsilon", [(1.0, 3.0), (200.0, 1.2345), (7.0, 1e-6), (1.0, 700.0), (3.0, 0.1)])
def test_closed_form_scale_is_the_smallest_float_passing_exactly(delta, epsilon):
    """Δ/s ≤ ε holds exactly (rational arithmetic) at the closed-form scale and fails one float below it."""
    from fractions import Fraction
    s = closed_form_scale(delta, epsilon)
    assert Fraction(delta) <= Fraction(epsilon) * Fraction(s)
    below = math.nextafter(s, 0.0)
    assert Fraction(delta) > Fraction(epsilon) * Fraction(below)
    assert float(_oracle_measurement("laplace", s).map(float(delta))) <= epsilon


def test_numbers_equal_hashlib_one_id_at_a_time_for_integer_ids_of_every_width():
    key = sample_key("census")
    ids_list = [np.array([0, 1, 9, 10, 99, 100, -1, -10, 2 ** 63 - 1, -2 ** 63], dtype=np.int64),
                np.array([0, 7, 2 ** 64 - 1, 10 ** 19], dtype=np.uint64),
                np.arange(-300, 300, dtype=np.int32), np.arange(200, dtype=np.uint8)]
    for ids in ids_list:
        want = [int.from_bytes(hashlib.blake2b(str(u).encode(), key=key, digest_size=8,
                                               person=b"dpopt-prn").digest(), "big") for u in ids.tolist()]
        assert [int(x) for x in _numbers(key, ids)] == want


def _members_oracle(ids):
    h = hashlib.sha256(b"dpopt members\0")
    for t in sorted(str(u) for u in ids):
        b = t.encode()
        h.update(len(b).to_bytes(8, "big") + b)
    return h.hexdigest()[:32]


def test_members_and_srs_equal_brute_force():
    rng = np.random.default_rng(7)
    k, rows = 9, 3000
    codes = rng.integers(0, k, rows)
    codes[:k] = np.arange(k)
    for ids in (rng.permutation(rows) * 37 - 5000, np.array([f"u{i}" for i in range(rows)], dtype=object)):
        assert _members_by_stratum(ids, codes, k) == [_members_oracle(ids[codes == h]) for h in range(k)]
    frame = {"stratum": codes + 100, "id": rng.permutation(rows) * 11, "y": rng.random(rows)}
    N = np.bincount(codes, minlength=k)
    model = dpopt.StratifiedDesign(N, np.ones(k), 400, 1.0, labels=[str(100 + h) for h in range(k)],
                                   value_range=(0.0, 1.0))
    n = np.minimum(N, rng.integers(2, 80, k))
    sample = draw_stratified(frame, model, n, strata="stratum", id="id", seed="s")
    key = sample_key("s")
    u = np.array([int.from_bytes(hashlib.blake2b(str(i).encode(), key=key, digest_size=8,
                                                 person=b"dpopt-prn").digest(), "big") for i in frame["id"].tolist()],
                 dtype=object)
    want = []
    for h in range(k):
        members = [r for r in range(rows) if codes[r] == h]
        want += sorted(sorted(members, key=lambda r: (u[r], r))[: n[h]])
    assert sample.rows.tolist() == want
    assert sample.members == [_members_oracle(frame["id"][codes == h]) for h in range(k)]


def test_release_with_shared_scales_records_the_plans_certified_spend():
    model, n = _design("laplace", k=40, seed=5)
    N = model.N
    codes = np.repeat(np.arange(model.k), N)
    rng = np.random.default_rng(1)
    frame = {"stratum": codes, "y": rng.uniform(0, 10, codes.size)}
    model = dpopt.StratifiedDesign(N, model.sigma2_matrix[:, 0], int(n.sum()), model.epsilon, mechanism="laplace",
                                   value_range=(0.0, 10.0), labels=[str(h) for h in range(model.k)])
    sample = draw_stratified(frame, model, n, strata="stratum", seed=2)
    plan = plan_stratified(model, sample.n)
    rel = release_stratified(model, sample, sample.values(frame, "y"), plan=plan)
    cells = rel.record.parts[0].cells
    assert [c.n for c in cells] == [int(x) for x in n]
    for c, p in zip(cells, plan):
        (m,) = c.measurements
        assert m.scale == p.scales[0]
        assert m.epsilon == float(_oracle_measurement("laplace", m.scale).map(10.0)) <= p.nominal_target
    want = max(_amplified(p.nominal_spent[0], p.n, p.N) for p in plan)
    assert rel.epsilon_spent <= model.epsilon and abs(rel.epsilon_spent - want) <= 1e-12
