"""Domain precision targets under the population-mean objective (stratallo's dopt with DP noise) are solved
by nested marginal allocation (dpopt/backends/exact/domains.py). Oracles: brute force over the box on
small instances (the plain formulas of tests/test_constrained_exact.py), and on mid-size instances the
general constrained route's proven lower bound and its own feasible point."""

from __future__ import annotations

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign
from dpopt.backends.exact import constrained as C
from dpopt.backends.exact.domains import domain_structure
from dpopt.formulations.separable import program_of

from test_constrained_exact import _check, _oracle


def _instance(rs, k, domains, eps, mech, tight, total_range=None):
    N = rs.integers(8, 30, size=k)
    S2 = rs.uniform(0.05, 4.0, size=k)
    upper = np.minimum(N, rs.integers(5, 14, size=k))
    lower = np.minimum(rs.integers(1, 3, size=k), upper)
    total = int(rs.integers(lower.sum(), upper.sum() + 1))
    d = StratifiedDesign(N, S2, total, eps, mechanism=mech, lower=lower, upper=upper,
                         labels=[f"s{i}" for i in range(k)], fpc=bool(rs.integers(2)))
    base = d.solve()
    parts = np.array_split(rs.permutation(k), domains)
    for part in parts[:domains]:
        dom = [d.labels[i] for i in sorted(part)]
        d.add_precision_target(1.0, strata=dom)
        v = d.precision_value(d.precision_targets[-1], base.n)
        d.precision_targets[-1] = d._precision_target(v * rs.uniform(*tight), dom, None, "variance", None,
                                                      "mean", "")
    return d, mech, eps


@pytest.mark.parametrize("seed", range(6))
def test_domain_targets_equal_brute_force(seed):
    """20 instances per seed (120 in all): 1-3 disjoint domains, every mechanism, ε from noise-dominated
    (0.2: more sample can mean more noise, so targets also cap a domain's size) to 4."""
    rs = np.random.default_rng(1000 + seed)
    outcomes = []
    for _ in range(20):
        k = int(rs.integers(2, 5))
        domains = int(rs.integers(1, min(3, k) + 1))
        mech = ("laplace", "dlap", "tulap")[int(rs.integers(3))]
        eps = float(rs.choice([0.2, 0.7, 1.5, 4.0]))
        d, mech, eps = _instance(rs, k, domains, eps, mech, (0.92, 1.2) if rs.integers(4) else (0.3, 0.8))
        # the route found exactly the domains the instance was built with (the targets' own strata)
        found = domain_structure(program_of(d))
        got = None if found is None else sorted(tuple(sorted(p)) for p, _, _ in found)
        assert got == sorted(tuple(sorted(t.strata)) for t in d.precision_targets)
        ref = _oracle(d, mech, eps, "mean")
        outcomes.append(_check(d, ref))
        if outcomes[-1] == "optimal":
            assert d.solve().details.get("method") == "domains"
    assert outcomes.count("optimal") >= 8 and outcomes.count("infeasible") >= 1


def test_other_structures_keep_the_general_route():
    rs = np.random.default_rng(7)
    d, *_ = _instance(rs, 4, 2, 1.0, "laplace", (0.9, 1.0))
    d2 = StratifiedDesign(d.N, d.sigma2, d.total, 1.0, objective="a-optimal", lower=d.lower, upper=d.upper)
    d2.add_precision_target(1.0, strata=[0, 1])
    assert domain_structure(program_of(d2)) is None        # weights not proportional to the objective's
    d3 = StratifiedDesign(d.N, d.sigma2, d.total, 1.0, lower=d.lower, upper=d.upper)
    d3.add_precision_target(1.0, strata=[0, 1])
    d3.add_precision_target(1.0, strata=[1, 2])
    assert domain_structure(program_of(d3)) is None        # overlapping domains
    d4 = StratifiedDesign(d.N, d.sigma2, d.total, 1.0, lower=d.lower, upper=d.upper)
    d4.add_precision_target(1.0, strata=[0, 1])
    d4.add_cost_budget(np.ones(d.k), float(d.total) + 5)
    assert domain_structure(program_of(d4)) is None        # a second linear row


@pytest.mark.parametrize("mech,eps", [("laplace", 1.0), ("tulap", 0.5), ("laplace", 0.05)])
def test_mid_size_agrees_with_the_general_route(monkeypatch, mech, eps):
    """k = 60 in 6 domains: the general route (Lagrangian bound, cores, HiGHS) bounds the answer from below
    and its own point from above."""
    rs = np.random.default_rng(11)
    k = 60
    N = rs.integers(200, 3000, size=k)
    S2 = 10.0 ** rs.uniform(-1, 2, size=k)
    d = StratifiedDesign(N, S2, 1500, eps, mechanism=mech, labels=[f"s{i}" for i in range(k)])
    base = d.solve()
    for p, part in enumerate(np.array_split(rs.permutation(k), 6)):
        dom = [d.labels[i] for i in sorted(part)]
        d.add_precision_target(1.0, strata=dom)
        v = d.precision_value(d.precision_targets[-1], base.n)
        factor = 0.98 if p < 2 else rs.uniform(1.03, 1.08)     # two domains ask for more than the optimum
        d.precision_targets[-1] = d._precision_target(v * factor, dom, None, "variance", None, "mean", "")
    fast = d.solve()
    assert fast.status == dpopt.Status.OPTIMAL and fast.details["method"] == "domains"
    assert d.is_feasible(fast.n) and int(fast.n.sum()) == d.total
    monkeypatch.setattr(C.solve, "domain_structure", lambda prog: None)
    general = d.solve(time_limit=60)
    assert general.details.get("method") != "domains"
    assert general.certificate.lower_bound <= fast.objective * (1 + 1e-9)
    assert fast.objective <= general.objective * (1 + 1e-12)


def test_binding_targets_are_those_that_move_the_optimum():
    """A target is reported binding exactly when dropping it lowers the optimum (re-solved without it)."""
    rs = np.random.default_rng(5)
    k = 40
    N = rs.integers(200, 3000, size=k)
    S2 = 10.0 ** rs.uniform(-1, 2, size=k)
    parts = np.array_split(rs.permutation(k), 5)
    factors = [0.97, 1.5, 0.98, 1.2, 1.04]

    def design(skip=None):
        d = StratifiedDesign(N, S2, 1200, 1.0, labels=[f"s{i}" for i in range(k)])
        base = d.solve()
        for p, part in enumerate(parts):
            if p == skip:
                continue
            dom = [d.labels[i] for i in sorted(part)]
            d.add_precision_target(1.0, strata=dom)
            v = d.precision_value(d.precision_targets[-1], base.n)
            d.precision_targets[-1] = d._precision_target(v * factors[p], dom, None, "variance", None, "mean", "")
        return d

    sol = design().solve()
    assert sol.status == dpopt.Status.OPTIMAL and sol.details["method"] == "domains"
    rows = program_of(design()).rows
    flags = [bool(b) for r, b in zip(rows, sol.details["binding_rows"]) if r.kind == "precision"]
    moved = [design(skip=p).solve().objective < sol.objective * (1 - 1e-12) for p in range(len(parts))]
    assert flags == moved and any(flags) and not all(flags)


@pytest.mark.parametrize("mech", ["laplace", "dlap", "tulap"])
def test_increments_served_in_growing_blocks_equal_the_terms_differences(mech):
    """The nested allocation reads each stratum's increments from blocks that double on each refill
    (domains._Increments): walked up through several refills and back down, every increment equals
    φ_i(v + 1) − φ_i(v) from the unit terms themselves, and inf at the upper bound."""
    from dpopt.backends.exact.domains import _BLOCK, _Increments

    rs = np.random.default_rng(7)
    k = 4
    N = rs.integers(3000, 9000, size=k)
    d = StratifiedDesign(N, rs.uniform(0.5, 5.0, size=k), 2000, 1.0, mechanism=mech)
    prog = program_of(d)
    inc = _Increments(prog, prog.lower.copy())
    W = prog.objective.W

    def phi(i, v):
        x = np.array([float(v)])
        return float(np.sum(W[i] * prog.unit_matrix(x, np.array([i]))[0]))

    for i in range(k):
        top = int(prog.upper[i])
        walk = list(range(1, 7 * _BLOCK + 5)) + list(range(7 * _BLOCK + 3, 0, -37)) + [top - 1, top, top + 3]
        for v in walk:
            got = inc.at(i, v)
            if v >= top:
                assert got == np.inf
            else:
                want = phi(i, v + 1) - phi(i, v)
                assert got == pytest.approx(want, rel=1e-7, abs=1e-12 * abs(phi(i, v)))
        # the walk up took doubling refills: the last block is longer than the first
        assert len(inc.block[i]) > _BLOCK
