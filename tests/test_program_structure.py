"""The separable program's structure helpers against independent oracles: the blocks of strata that rows link
(SeparableProgram.components, against scipy's connected components of the strata-rows graph), each row's
integer minimum over the bounds (checks.row_minima, against per-stratum enumeration), the reduced-cost cores
(fixing.reduced_ranges, against every integer of every stratum's range) and a core's table narrowed to a cut
(cores.narrow, against every design of the core)."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from dpopt import StratifiedDesign
from dpopt.backends.exact.constrained.checks import row_minima
from dpopt.backends.exact.constrained.cores import dynamic_programme, final_test, narrow, tabulate
from dpopt.backends.exact.constrained.fixing import reduced_ranges
from dpopt.backends.exact.constrained.inner import inner_integer, phi
from dpopt.formulations.separable import SeparableProgram, program_of


def _blocks_by_graph(prog):
    """The blocks from scipy's connected components of the bipartite strata-rows graph, in order of each block's
    first stratum; rows touching no stratum and strata in no row left out."""
    touch = []
    for r in prog.rows:
        t = np.zeros(prog.k, dtype=bool)
        if r.W is not None:
            t |= np.any(r.W != 0, axis=1)
        if r.a is not None:
            t |= r.a != 0
        touch.append(np.flatnonzero(t))
    src = np.concatenate(touch + [np.zeros(0, dtype=np.int64)])
    dst = np.concatenate([np.full(t.size, prog.k + l) for l, t in enumerate(touch)] + [np.zeros(0, dtype=np.int64)])
    n = prog.k + prog.m
    _, label = connected_components(coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n)), directed=False)
    out = []
    for c in np.unique(label[prog.k:]) if prog.m else []:
        rows = [l for l in range(prog.m) if label[prog.k + l] == c and touch[l].size]
        pos = np.flatnonzero(label[:prog.k] == c)
        if rows and pos.size:
            out.append((pos, rows))
    return sorted(out, key=lambda b: int(b[0][0]))


def _same_blocks(a, b):
    assert len(a) == len(b)
    for (p1, r1), (p2, r2) in zip(a, b):
        assert np.array_equal(p1, p2) and r1 == r2


@pytest.mark.parametrize("seed", range(40))
def test_components_match_the_graphs_connected_components(seed):
    """Random rows (dense, sparse, empty; quadratic, linear or both parts) on up to 40 strata: 50 programs per
    seed. Only ``k``, ``m`` and the rows' W and a are read, so plain namespaces stand in for programs."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        k, m = int(rng.integers(1, 40)), int(rng.integers(0, 14))
        rows = []
        for _ in range(m):
            dens = float(rng.choice([0.0, 0.03, 0.1, 0.4]))
            W = (rng.random((k, 2)) < dens) * rng.random((k, 2)) if rng.random() < 0.7 else None
            a = (rng.random(k) < dens) * rng.uniform(-1, 1, k) if rng.random() < 0.5 else None
            rows.append(SimpleNamespace(W=W, a=a))
        prog = SimpleNamespace(k=k, m=m, rows=rows)
        _same_blocks(SeparableProgram.components(prog), _blocks_by_graph(prog))


def _domain_design(seed, k=12, mech="dlap"):
    rng = np.random.default_rng(seed)
    N = rng.integers(30, 300, size=k)
    S2 = rng.uniform(0.1, 5.0, size=(k, 2))
    domains = [f"D{int(v)}" for v in rng.integers(0, 4, size=k)]
    d = StratifiedDesign(N, S2, int(N.sum() // 6), 1.0, mechanism=mech, variables=["y1", "y2"], domains=domains)
    ref = d.solve().n
    for D in sorted(set(domains)):
        idx = d.strata_index(D)
        w = (N[idx] / N[idx].sum()) ** 2
        for j, v in enumerate(d.variables):
            se = math.sqrt(float(np.sum(w * d.unit_terms(ref, j)[idx])))
            d.add_precision_target(1.02 * se, strata=D, variable=v, kind="se", name=f"{D}:{v}")
    return d.min_cost(rng.uniform(1.0, 10.0, size=k))


@pytest.mark.parametrize("seed", range(6))
def test_components_of_real_programs_and_row_minima_by_enumeration(seed):
    """Min-cost designs with two SE targets per domain: one block per domain (the graph's), and each row's
    integer minimum a safe lower bound within 1e-9 of the minimum found by enumerating every stratum's range."""
    prog = program_of(_domain_design(seed, mech=("laplace", "dlap", "tulap")[seed % 3]))
    blocks = prog.components()
    _same_blocks(blocks, _blocks_by_graph(prog))
    assert sum(len(r) for _, r in blocks) == prog.m
    minima = row_minima(prog)
    for l, r in enumerate(prog.rows):
        best = []
        for i in range(prog.k):
            v = np.arange(prog.lower[i], prog.upper[i] + 1, dtype=float)
            idx = np.full(v.size, i)
            best.append(float(np.min(prog.row_terms(r, prog.unit_matrix(v, idx), v, idx))))
        brute = math.fsum(best)
        assert minima[l] <= brute
        assert brute - minima[l] <= 1e-9 * max(abs(brute), 1e-300)


def _at_random_multipliers(seed, k, lo_exp, hi_exp):
    """A domain design's program at random multipliers λ (scales 10^lo_exp .. 10^hi_exp): (program, λ, Ω, ℓ, the
    Lagrangian's integer minimiser n_λ, φ at n_λ)."""
    prog = program_of(_domain_design(seed, k=k, mech=("laplace", "dlap", "tulap")[seed % 3]))
    rng = np.random.default_rng(seed)
    lam = np.abs(rng.normal(size=prog.m)) * 10.0 ** rng.uniform(lo_exp, hi_exp, size=prog.m)
    Om, ell = prog.combine(lam)
    n_lam = inner_integer(prog, Om, ell)
    return prog, lam, Om, ell, n_lam, phi(prog, Om, ell, n_lam.astype(float))


@pytest.mark.parametrize("seed", range(6))
def test_reduced_ranges_hold_exactly_the_values_within_the_budget(seed):
    """Per stratum, the core [r_lo, r_hi] is every integer v of the range with φ(v) − φ(n_λ) ≤ budget, checked
    against each value of the range, at budgets from 0 to above every value's reduced cost."""
    prog, _lam, Om, ell, n_lam, base = _at_random_multipliers(100 + seed, 10, -2, 4)
    r_all = []
    for i in range(prog.k):
        v = np.arange(prog.lower[i], prog.upper[i] + 1, dtype=float)
        r_all.append((v, phi(prog, Om, ell, v, np.full(v.size, i)) - base[i]))
    top = max(float(np.max(r)) for _, r in r_all)
    for budget in (0.0, 1e-9 * abs(base.sum()), 1e-4 * top, 1e-2 * top, 0.3 * top, 2.0 * top):
        lo, hi = reduced_ranges(prog, Om, ell, n_lam, budget)
        for i, (v, r) in enumerate(r_all):
            inside = v[r <= budget]
            assert lo[i] == int(inside.min()) and hi[i] == int(inside.max()), (i, budget)
            # an interval: φ is convex, so the values within the budget are contiguous
            assert inside.size == hi[i] - lo[i] + 1


@pytest.mark.parametrize("seed", range(8))
def test_a_narrowed_core_keeps_every_design_within_its_cut(seed):
    """Cores of up to ~20 000 designs at random multipliers: at cuts from 0 to the whole core's, every design of
    the core whose reduced costs sum to at most the cut is one of the narrowed table (its values there, n_λ on
    the strata dropped), every value kept fits the cut or is its stratum's cheapest, and the dynamic programme
    on the narrowed table finds the same least excess as on the whole one."""
    prog, lam, Om, ell, n_lam, base = _at_random_multipliers(200 + seed, 8, -1, 3)
    budget = 1.0
    for _ in range(60):          # the widest budget whose core has at most 20 000 designs
        lo, hi = reduced_ranges(prog, Om, ell, n_lam, budget * 2)
        if np.prod((hi - lo + 1).astype(float)) > 20_000:
            break
        budget *= 2
    lo, hi = reduced_ranges(prog, Om, ell, n_lam, budget)
    tab = tabulate(prog, Om, ell, lam, n_lam, lo, hi)
    r_of = [dict(zip(range(lo[i], hi[i] + 1),
                     phi(prog, Om, ell, np.arange(lo[i], hi[i] + 1, dtype=float), np.full(hi[i] - lo[i] + 1, i))
                     - base[i])) for i in range(prog.k)]
    designs = list(itertools.product(*[range(lo[i], hi[i] + 1) for i in range(prog.k)]))
    costs = np.array([math.fsum(max(r_of[i][v], 0.0) for i, v in enumerate(d)) for d in designs])
    for frac in (0.0, 1e-3, 0.05, 0.3, 1.0):
        cut = frac * budget
        nt = narrow(tab, cut, n_lam)
        values = {int(i): set(nt.v[nt.starts[t]:nt.starts[t + 1]].tolist()) for t, i in enumerate(nt.free)}
        for t, i in enumerate(nt.free):
            r = nt.r_all[nt.starts[t]:nt.starts[t + 1]]
            assert nt.sizes[t] >= 1 and np.all(r[1:] <= cut)
        for d, c in zip(designs, costs):
            if c <= cut:
                for i, v in enumerate(d):
                    assert v in values[i] if i in values else v == n_lam[i], (frac, i, v)
        whole = dynamic_programme(tab, cut, 10 ** 7, None, False)
        part = dynamic_programme(nt, cut, 10 ** 7, None, False)
        best = [float(np.min(np.where(f, e, np.inf))) if e.size else math.inf
                for f, e in (final_test(tab, whole), final_test(nt, part))]
        assert best[0] == pytest.approx(best[1], rel=1e-12, abs=1e-300) or best[0] == best[1] == math.inf
