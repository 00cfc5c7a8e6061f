"""The min-max engine (docs/robust.md, "The min-max engine") against brute force: every integer design of small
instances enumerated, the worst ratio computed from the unit terms written out here, with each constraint kind
(total, cost budget, ≥ row, precision target) and several variables."""

import itertools
import math

import numpy as np
import pytest

import dpopt
from dpopt.feasibility import Row
from dpopt.models.minmax import MinMaxDesign, scenario_terms, widen


def _laplace_term(sigma2, N, n, eps, share=1.0, delta=1.0):
    """t(n) = (σ² + 2Δ²/ε_n²)/n with ε_n = share·log(1 + (e^ε − 1)N/n) (docs/stratified.md), written out."""
    e = share * math.log1p(math.expm1(eps) * N / n)
    return (sigma2 + 2 * delta ** 2 / e ** 2) / n


def _brute(N, lower, upper, eps, scen, weights, scales, feasible_fn, shares=None):
    """min over integer designs of max_s Σ_ij weights[s]_ij t_s,ij(n_i) / scales[s], designs filtered by
    feasible_fn(n, terms)."""
    k = len(N)
    J = scen[0].shape[1]
    shares = np.ones(J) / J if shares is None else shares
    best, arg = math.inf, None
    for n in itertools.product(*[range(int(lower[i]), int(upper[i]) + 1) for i in range(k)]):
        T = [np.array([[_laplace_term(S[i, j], N[i], n[i], eps, shares[j]) for j in range(J)] for i in range(k)])
             for S in scen]
        if not feasible_fn(np.array(n), T[0]):
            continue
        w = max(float(np.sum(weights[s] * T[s])) / scales[s] for s in range(len(scen)))
        if w < best:
            best, arg = w, n
    return best, arg


def _instance(seed, kind):
    rng = np.random.default_rng(seed)
    k = 3 if kind != "two variables" else 2
    J = 2 if kind == "two variables" else 1
    N = rng.integers(4, 8, k)
    total = int(rng.integers(k + 1, N.sum()))
    S = int(rng.integers(2, 4))
    eps = float(rng.choice([0.5, 1.0, 3.0]))
    scen = [rng.uniform(0.1, 8, (k, J)) for _ in range(S)]
    design = dpopt.StratifiedDesign(N, scen[0], total, eps, variables=None if J == 1 else ["a", "b"])
    feas = lambda n, T: int(n.sum()) == total
    if kind == "cost":
        cost = rng.uniform(1, 3, k)
        budget = float(cost @ np.full(k, total / k)) * 1.02
        design.add_cost_budget(cost, budget)
        feas = lambda n, T, c=cost, b=budget: int(n.sum()) == total and c @ n <= b * (1 + 1e-9)
    elif kind == "at least":
        design.add_constraint({design.labels[0]: 1}, 2, ">=")
        feas = lambda n, T: int(n.sum()) == total and n[0] >= 2
    elif kind == "precision":
        # the mean over the first two strata's variance, bound between its best and a middling design
        beta2 = np.zeros(k)
        beta2[:2] = (N[:2] / N[:2].sum()) ** 2
        mid = np.maximum(1, np.round(N * total / N.sum())).astype(int)
        T0 = np.array([_laplace_term(scen[0][i, 0], N[i], mid[i], eps) for i in range(k)])
        bound = float(beta2 @ T0) * 1.1
        design.add_precision_target(bound, strata=[0, 1])
        feas = lambda n, T, b=bound, w=beta2: int(n.sum()) == total and w @ T[:, 0] <= b * (1 + 1e-9)
    terms = scenario_terms(design, scen)
    W = design.alpha2[:, None] * design.variable_weights[None, :]
    rows = [Row(f"s{s}", "precision", widen(W, terms.J, s), None) for s in range(S)]
    scales = rng.uniform(0.5, 2.0, S) * 1e3
    _, cons, _ = design.program_rows()
    cons = [Row(r.name, r.kind, widen(r.W, terms.J, 0), r.a, r.rhs, r.sense, r.target) for r in cons]
    model = MinMaxDesign(terms, rows, scales, constraints=cons)
    return model, (N, design.lower, design.upper, eps, scen, [W] * S, scales, feas)


KINDS = ["total", "cost", "at least", "precision", "two variables"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", KINDS)
def test_minmax_equals_brute_force(kind, seed):
    model, args = _instance(seed, kind)
    sol = model.solve(time_limit=30, rel_gap=1e-6)
    best, _ = _brute(*args)
    if not math.isfinite(best):
        assert sol.status == "infeasible"
        return
    assert sol.status == "optimal", sol.message
    assert sol.objective == pytest.approx(best, rel=2e-6)
    assert sol.certificate.lower_bound <= best * (1 + 1e-12)
    assert model.is_feasible(sol.n)


def test_minmax_one_row_is_the_plain_design():
    """One row with the design's own objective: the min-max design is the plain optimum (marginal allocation)."""
    d = dpopt.StratifiedDesign([40, 70, 25, 90], [2.0, 5.0, 1.0, 3.0], 60, 1.0)
    objective, _, _ = d.program_rows()
    mm = MinMaxDesign.from_design(d, [objective], [1.0])
    sol = mm.solve(rel_gap=1e-9)
    plain = d.solve()
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(plain.objective, rel=1e-9)


def test_minmax_infeasible_other_rows_and_bad_input():
    d = dpopt.StratifiedDesign([5, 5], [1.0, 2.0], 6, 1.0)
    d.add_constraint([1, 0], 5, ">=").add_constraint([0, 1], 3, ">=")
    obj, _, _ = d.program_rows()
    assert MinMaxDesign.from_design(d, [obj], [1.0]).solve().status == "infeasible"
    with pytest.raises(ValueError, match="scales"):
        MinMaxDesign.from_design(d, [obj], [0.0])
    with pytest.raises(ValueError, match="rows"):
        MinMaxDesign.from_design(d, [], [])
    with pytest.raises(ValueError, match="scenario 0 sigma2"):
        scenario_terms(d, [np.ones(3)])


def test_a_levels_row_minima_serve_every_level():
    """The min-max computes its level rows' minima once (.checks.row_minima): levels differ only in their
    right-hand sides, so the minima of one serve all, and the unreachable-row test with them gives each level's
    own answer, unreachable below the least worst ratio and not above it."""
    from dpopt.backends.exact.constrained.checks import row_minima, unreachable_rows
    from dpopt.formulations.minmax import minmax_program
    from dpopt.models.robust import RobustDesign

    rng = np.random.default_rng(5)
    k = 12
    s2 = rng.uniform(1, 50, k)
    d = dpopt.StratifiedDesign(rng.integers(50, 400, k), s2, 10 * k, 1.0)
    mp = minmax_program(RobustDesign(d, [s2 * np.exp(rng.normal(0, 0.5, k)) for _ in range(4)]).minmax())
    mu = np.full(mp.m, 1.0 / mp.m)
    first = row_minima(mp.level(1.5, mu))
    answers = set()
    for t in (1e-6, 0.5, 0.999, 1.0, 1.2, 3.0):
        level = mp.level(t, mu)
        assert row_minima(level) == first
        own = unreachable_rows(level)
        assert unreachable_rows(level, minima=first) == own
        answers.add(own is None)
    assert answers == {True, False}      # some levels below every design's worst ratio, some above
