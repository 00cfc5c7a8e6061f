"""Min-cost designs in the classical regime (ε = 700, Δ = 1e-6: no noise) through exact's one-row route (the
subset search of dpopt/backends/exact/constrained/subset.py, then the cores), against brute force over every
design in the box written from the classical formulas (Σ c_h n_h subject to Σ N_h² S_h²/n_h − Σ N_h S_h² ≤ V),
and a Bethel-type instance (one CV target per domain) against the same brute force per domain."""

import itertools

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign

EPS, DELTA = 700.0, 1e-6


def _brute(N, S, c, V, lo, hi):
    best, arg = np.inf, None
    for n in itertools.product(*[range(a, b + 1) for a, b in zip(lo, hi)]):
        n = np.array(n, dtype=float)
        var = float(np.sum(N ** 2 * S ** 2 / n) - np.sum(N * S ** 2))
        if var <= V * (1 + 1e-12):
            cost = float(c @ n)
            if cost < best:
                best, arg = cost, n
    return best, arg


def _random_instance(seed, k_lo, k_hi):
    """A random min-cost instance (k in [k_lo, k_hi)) with V between the box's least and largest variance, and
    its brute-force optimum."""
    rs = np.random.default_rng(seed)
    k = int(rs.integers(k_lo, k_hi))
    N = rs.integers(8, 40, size=k)
    S = rs.uniform(0.5, 20.0, size=k)
    c = rs.uniform(1.0, 10.0, size=k)
    hi = np.minimum(N, rs.integers(4, 12, size=k))
    lo = np.ones(k, dtype=np.int64)
    v_lo = float(np.sum(N ** 2 * S ** 2 / hi) - np.sum(N * S ** 2))
    v_hi = float(np.sum(N ** 2 * S ** 2 / lo) - np.sum(N * S ** 2))
    V = v_lo + rs.uniform(0.05, 0.7) * (v_hi - v_lo)
    best, _ = _brute(N, S, c, V, lo, hi)
    d = StratifiedDesign(N, S ** 2, int(k), EPS, sensitivity=DELTA, fpc=True, upper=hi)
    return d.min_cost(c, variance_target=V), best


@pytest.mark.parametrize("seed", range(40))
def test_min_cost_matches_brute_force(seed):
    model, best = _random_instance(seed, 2, 5)
    sol = model.solve(backend="exact", time_limit=20)
    _proven_as_brute_force(sol, best)


def _proven_as_brute_force(sol, best):
    assert sol.status == dpopt.Status.OPTIMAL
    # the design meets the bound within the one feasibility test's tolerance, so it can be a whisker cheaper
    assert sol.objective == pytest.approx(best, rel=1e-9) or sol.objective <= best
    assert sol.objective >= best * (1 - 1e-8)
    assert sol.certificate.lower_bound <= best * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_bethel_type_domains_match_brute_force(seed):
    """Two domains, one CV target each, min cost: the domains are independent, so brute force per domain."""
    rs = np.random.default_rng(100 + seed)
    k = 6
    N = rs.integers(10, 40, size=k)
    S = rs.uniform(1.0, 10.0, size=k)
    M = rs.uniform(20.0, 60.0, size=k)
    c = rs.uniform(1.0, 5.0, size=k)
    dom = np.array(["A", "A", "A", "B", "B", "B"])
    hi = np.minimum(N, 9)
    d = StratifiedDesign(N, S ** 2, k, EPS, sensitivity=DELTA, fpc=True, upper=hi, domains=list(dom))
    total = 0.0
    for D in ("A", "B"):
        i = np.flatnonzero(dom == D)
        Nd = N[i].sum()
        mean = float(np.sum(N[i] * M[i]) / Nd)
        v_lo = float(np.sum(N[i] ** 2 * S[i] ** 2 / hi[i]) - np.sum(N[i] * S[i] ** 2)) / Nd ** 2
        v_hi = float(np.sum(N[i] ** 2 * S[i] ** 2) - np.sum(N[i] * S[i] ** 2)) / Nd ** 2
        var = v_lo + rs.uniform(0.1, 0.6) * (v_hi - v_lo)
        cv = float(np.sqrt(var)) / mean
        d.add_precision_target(cv, strata=D, kind="cv", mean=mean)
        best, _ = _brute(N[i], S[i], c[i], var * Nd ** 2, np.ones(3, dtype=np.int64), hi[i])
        total += best
    sol = d.min_cost(c).solve(backend="exact", time_limit=20)
    assert sol.status == dpopt.Status.OPTIMAL
    assert sol.objective == pytest.approx(total, rel=1e-8)
    assert sol.certificate.lower_bound <= total * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_min_cost_on_a_cost_lattice_matches_brute_force(seed):
    """Costs in tenths (like stratallo's pop507/pop969): the bound is rounded up to the lattice of costs; the
    answer and the bound must still agree with brute force (a bound above the optimum would be a false proof)."""
    rs = np.random.default_rng(500 + seed)
    k = int(rs.integers(2, 5))
    N = rs.integers(8, 40, size=k)
    S = rs.uniform(0.5, 20.0, size=k)
    c = np.round(rs.uniform(1.0, 10.0, size=k), 1) if seed % 2 else rs.integers(1, 6, size=k).astype(float)
    hi = np.minimum(N, rs.integers(4, 12, size=k))
    lo = np.ones(k, dtype=np.int64)
    v_lo = float(np.sum(N ** 2 * S ** 2 / hi) - np.sum(N * S ** 2))
    v_hi = float(np.sum(N ** 2 * S ** 2 / lo) - np.sum(N * S ** 2))
    V = v_lo + rs.uniform(0.05, 0.7) * (v_hi - v_lo)
    best, _ = _brute(N, S, c, V, lo, hi)
    d = StratifiedDesign(N, S ** 2, int(k), EPS, sensitivity=DELTA, fpc=True, upper=hi)
    sol = d.min_cost(c, variance_target=V).solve(backend="exact", time_limit=20)
    assert sol.status == dpopt.Status.OPTIMAL
    assert sol.objective == pytest.approx(best, rel=1e-12)
    assert sol.certificate.lower_bound <= best * (1 + 1e-12)
    # every core to HiGHS instead of the enumeration: its tolerance-level bounds must not be rounded up to
    # the lattice into a false proof
    from dpopt.backends.exact.constrained import solve_constrained

    via = solve_constrained(d.min_cost(c, variance_target=V), time_limit=20, max_states=0)
    assert via.certificate.lower_bound <= best * (1 + 1e-12)
    if via.status == dpopt.Status.OPTIMAL:
        assert via.objective == pytest.approx(best, rel=1e-12)


def test_lattice_bound_rounds_up_only_on_a_lattice():
    """The lattice bound: costs 0.5 and 1.5 → every design costs a multiple of 0.5; real costs → unchanged."""
    from dpopt.backends.exact.constrained.bound import cost_unit, lattice_bound
    from dpopt.formulations.separable import program_of

    d = StratifiedDesign([50, 60], [4.0, 9.0], 10, EPS, sensitivity=DELTA, fpc=True)
    prog = program_of(d.min_cost([0.5, 1.5], variance_target=2000.0))
    assert cost_unit(prog)[0] == pytest.approx(0.5)
    assert 10.5 - 1e-9 <= lattice_bound(prog, 10.01) <= 10.5
    assert lattice_bound(prog, 10.5) <= 10.5 and lattice_bound(prog, 10.5) >= 10.0
    prog = program_of(d.min_cost([0.5, np.pi], variance_target=2000.0))
    assert cost_unit(prog) is None and lattice_bound(prog, 10.01) == 10.01


def _generated(k, seed=0, tenths=False):
    rng = np.random.default_rng(seed)
    N = np.clip(np.round(rng.lognormal(np.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    S = 10.0 ** rng.uniform(-1.0, 3.0, k)
    c = rng.uniform(10.0, 100.0, k)
    return N, S, (np.round(c, 1) if tenths else c)


@pytest.mark.parametrize("frac, tenths", [(0.3, False), (0.1, True)])
def test_benchmark_instances_within_the_cores_route_bounds(monkeypatch, frac, tenths):
    """k = 1 000 instances of benchmarks/bench_classical.py: the answer of the one-row route (subset search,
    lattice bound) lies between the lower bound and the design that the cores route alone (subset search and
    lattice off, a short time limit) proves with its own machinery."""
    from dpopt.backends.exact.constrained import block, search

    N, S, c = _generated(1000, tenths=tenths)
    V = float(np.sum((N * S) ** 2 / np.maximum(frac * N, 1.0)) - np.sum(N * S ** 2))
    d = StratifiedDesign(N, S ** 2, int(N.sum() // 10), EPS, sensitivity=DELTA, fpc=True)
    new = d.min_cost(c, variance_target=V).solve(backend="exact", time_limit=30)
    assert new.status == dpopt.Status.OPTIMAL
    with monkeypatch.context() as mp:
        mp.setattr(block, "improve_one_row", lambda *a, **k: None)
        mp.setattr(search, "lattice_step", lambda prog: (0.0, 0.0))
        mp.setattr(search, "lattice_bound", lambda prog, lb: lb)
        old = d.min_cost(c, variance_target=V).solve(backend="exact", time_limit=3)
    lb_old = old.certificate.lower_bound if old.certificate is not None else old.details["lower_bound"]
    assert np.isfinite(lb_old) and lb_old <= new.objective * (1 + 1e-12)
    assert new.objective <= lb_old * (1 + 1e-6)         # and close to it (the cores' bound is near-tight)
    if old.n is not None:                               # the cores route may find no point in 3 s
        assert d.min_cost(c, variance_target=V).is_feasible(old.n)
        # 'optimal' means within the proving gap (rel_gap, 1e-9 by default) of the best design: not better than any
        assert new.objective <= old.objective * (1 + new.certificate.gap + 1e-12)
        assert new.certificate.lower_bound <= old.objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_highs_optimum_no_accepted_design_is_solved_again_tight(monkeypatch, seed):
    """HiGHS's optimum on a core may use its feasibility tolerance (1e-6 of a row's scale): its value then lies
    below every design the feasibility test accepts (even below the Lagrangian bound), its bound proves
    nothing, and the core goes to HiGHS again with tolerances of 1e-9 (search.CoreSearch.milp). Simulated here
    by lowering every default-tolerance optimum's value and bound far below the Lagrangian bound (cores on HiGHS
    only: max_states=0, no subset search); the answer must still be proven and agree with brute force. Without
    the retry the lowered bound stops the search unproven."""
    import dataclasses

    from dpopt.backends.exact.constrained import block, search

    model, best = _random_instance(100 + seed, 3, 6)
    real, calls = search.highs_solve, []

    def loose(milp, *args, tight=False, **kw):
        res = real(milp, *args, tight=tight, **kw)
        calls.append(tight)
        if not tight and res.status == "optimal":
            low = res.bound - 10.0 * abs(res.bound)
            return dataclasses.replace(res, bound=low, objective=low)
        return res

    monkeypatch.setattr(search, "highs_solve", loose)
    monkeypatch.setattr(block, "improve_one_row", lambda *a, **kw: None)
    sol = model.solve(backend="exact", time_limit=20, max_states=0)
    _proven_as_brute_force(sol, best)
    if False in calls:                  # the cores reached HiGHS (the Lagrangian bound alone did not prove it)
        assert True in calls
