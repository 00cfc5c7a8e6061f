"""The one-row subset search (dpopt/backends/exact/constrained/subset.py) on designs of fixed size: one inequality
row beside the total Σ n = η (a cost budget on a design of η units). Its meet-in-the-middle pairs only
combinations whose units cancel; checked against brute force over every pair, the solves against brute force over
every design, and a benchmark-sized instance against the cores' own route."""

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.backends.exact.constrained import subset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_constrained_exact import _check, _oracle  # noqa: E402  (the brute-force oracle, written from the formulas)


def _all_pairs(FL, GL, CL, FR, GR, CR, slack, with_total):
    """The least summed objective change below zero over every pair that fits the slack (and cancels its
    units), by enumeration."""
    best = 0.0
    for i, j in itertools.product(range(FL.size), range(FR.size)):
        if with_total and int(CL[i].sum()) - CL.shape[1] + int(CR[j].sum()) - CR.shape[1] != 0:
            continue
        if GL[i] + GR[j] <= slack and FL[i] + FR[j] < best:
            best = FL[i] + FR[j]
    return best


@pytest.mark.parametrize("with_total", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_best_pair_is_the_best_of_all_pairs(seed, with_total):
    rs = np.random.default_rng(seed)
    h = int(rs.integers(1, 4))
    df = rs.normal(0.0, 1.0, size=(2 * h, 3))
    dg = rs.normal(0.0, 1.0, size=(2 * h, 3))
    df[:, 1] = dg[:, 1] = 0.0                       # the middle column is "no move"
    out = rs.random((2 * h, 3)) < 0.15              # moves out of the box
    out[:, 1] = False
    df[out] = dg[out] = np.inf
    FL, GL, CL = subset._combinations(df[:h], dg[:h])
    FR, GR, CR = subset._combinations(df[h:], dg[h:])
    slack = float(rs.normal(0.0, 1.0))
    want = _all_pairs(FL, GL, CL, FR, GR, CR, slack, with_total)
    i, j = subset._best_pair(FL, GL, CL, FR, GR, CR, slack, with_total)
    if want == 0.0:
        assert i is None and j is None
        return
    assert FL[i] + FR[j] == pytest.approx(want, abs=1e-12)
    assert GL[i] + GR[j] <= slack
    if with_total:
        assert int(CL[i].sum()) + int(CR[j].sum()) == CL.shape[1] + CR.shape[1]


def test_a_budget_beside_the_total_is_served():
    d = StratifiedDesign([30, 40, 50], [1.0, 2.0, 3.0], 20, 1.0)
    base = d.solve()
    cost = np.array([1.0, 2.0, 3.0])
    assert subset.applies(_program(d.add_cost_budget(cost, float(cost @ base.n))))
    d.add_constraint({d.labels[0]: 1.0}, 3, ">=")
    assert not subset.applies(_program(d))          # two inequality rows: the cores' route


def _program(model):
    from dpopt.formulations.separable import program_of
    return program_of(model)


@pytest.mark.parametrize("seed", range(30))
def test_cost_budget_with_a_total_equals_brute_force(seed):
    """Up to six strata, each with up to six values, a cost budget a little under the free design's cost:
    the answer is brute force's optimum (value, bound, gap), for every mechanism."""
    rs = np.random.default_rng(1000 + seed)
    k = int(rs.integers(3, 7))
    N = rs.integers(10, 60, size=k)
    S2 = rs.uniform(0.05, 4.0, size=k)
    mech = ("laplace", "dlap", "tulap")[seed % 3]
    eps = float(rs.choice([0.3, 1.0, 3.0]))
    lower = rs.integers(1, 3, size=k)
    upper = lower + rs.integers(2, 6, size=k)
    total = int(rs.integers(lower.sum() + 1, upper.sum()))
    d = StratifiedDesign(N, S2, total, eps, mechanism=mech, lower=lower, upper=upper,
                         labels=[f"s{i}" for i in range(k)])
    base = d.solve()
    cost = rs.uniform(1.0, 9.0, size=k)
    d.add_cost_budget(cost, float(cost @ base.n) * rs.uniform(0.85, 1.0))
    _check(d, _oracle(d, mech, eps, "mean"))


@pytest.mark.parametrize("mech", ["laplace", "dlap", "tulap"])
def test_benchmark_instance_within_the_cores_route(monkeypatch, mech):
    """Case (a) of benchmarks/bench_constrained.py at k = 1 000 (a cost budget at 95 % of the free design's cost,
    η = 50 k): the subset search runs, and its proven answer lies within the proving gap of the design the cores'
    route alone proves (and above that route's bound); the design keeps Σ n = η and the budget."""
    from dpopt.backends.exact.constrained import block

    rng = np.random.default_rng(0)
    k = 1000
    N = np.clip(np.round(rng.lognormal(np.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    S = 10.0 ** rng.uniform(-1.0, 3.0, k)
    cost = rng.uniform(10.0, 100.0, k)
    d = StratifiedDesign(N, S ** 2, 50 * k, 1.0, mechanism=mech)
    base = d.solve()
    d.add_cost_budget(cost, 0.95 * float(cost @ base.n))
    new = d.solve(backend="exact", time_limit=60)
    assert new.status == dpopt.Status.OPTIMAL
    assert any("subset search" in s for s in new.details["steps"])
    assert d.is_feasible(new.n) and int(new.n.sum()) == 50 * k and float(cost @ new.n) <= 0.95 * float(cost @ base.n)
    with monkeypatch.context() as mp:
        mp.setattr(block, "improve_one_row", lambda *a, **kw: None)
        old = d.solve(backend="exact", time_limit=60)
    assert old.status == dpopt.Status.OPTIMAL
    assert not any("subset search" in s for s in old.details["steps"])
    assert new.objective <= old.objective * (1 + new.certificate.gap + 1e-12)
    assert old.objective <= new.objective * (1 + old.certificate.gap + 1e-12)
    assert old.certificate.lower_bound <= new.objective * (1 + 1e-12)
