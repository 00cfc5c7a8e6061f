"""An analyst's own nonlinear constraint on a DP stratified design, added to dpopt's Pyomo model and solved by SCIP.

    python examples/custom_pyomo_constraint.py --out DIR [--quick]

Setting: Chen, Pasupathy & Awan's Table 1 strata (N = 7000..10000, sigma2 = 0.08^1..0.08^4, eta = 200),
population mean, Laplace, epsilon = 1. The survey also publishes a *domain* estimate: the mean of region A =
strata 1 and 2, and requires its standard error to be at most ``se_target``:

    Var(mean_A) = sum_{i in A} N_i^2 (sigma_i^2 + gamma_i^2(n_i)) / n_i / (sum_{i in A} N_i)^2  <=  se_target^2,

with gamma_i^2(n) = 2 / log(1 + (e^eps - 1) N_i / n)^2 the Laplace noise variance at the amplified local budget.
(The same requirement is built in as ``model.add_precision_target(se_target, strata=[0, 1], kind="se")``; it is
written by hand here to show how an analyst adds a row of their own.) The constraint is nonlinear and couples two
strata, so it is not one of the package's linear constraints (``StratifiedDesign.add_constraint``); it goes into
``m.extra``, the empty ``ConstraintList`` that ``dpopt.build_pyomo_model`` leaves for analysts. The per-stratum
variance (sigma_i^2 + gamma_i^2(n_i)) / n_i is not re-derived: ``dpopt.backends.pyomo.term_expression(model, i,
m.n[i])`` is the Pyomo expression of the model's own unit term, mechanism and budget included. (Binary variables work the same way: add ``pe.Var(within=pe.Binary)``
components and big-M rows to ``m.extra`` for either-or rules.)

The script solves the unconstrained and the constrained design with SCIP, checks both against a brute-force
enumeration of all C(199, 3) = 1,293,699 designs, and plots them per stratum, plus the price of the domain
target (optimal objective relative to the unconstrained one) over a range of targets.
"""

import numpy as np

import dpopt
from dpopt.plots import example_args, report_written, save, pyplot
from dpopt.backends.pyomo import solve_pyomo_model, term_expression

TOTAL = dpopt.datasets.CHEN_TABLE1["total"]
EPSILON = 1.0
DOMAIN = [0, 1]          # region A = strata 1 and 2 (0-based indices)
SE_TARGET = 0.028        # the unconstrained optimum gives SE(mean_A) = 0.0312


def design_model():
    return dpopt.datasets.chen_table1(epsilon=EPSILON, mechanism="laplace")


def domain_variance(model, n):
    """Var(mean_A) of a design (numpy, via the package's noise variance)."""
    n = np.asarray(n, dtype=float)
    Nf = model.N.astype(float)
    per = (model.sigma2 + model.noise_variance_at(n)) / n          # variance of each stratum mean
    return float(np.sum(Nf[DOMAIN] ** 2 * per[DOMAIN]) / Nf[DOMAIN].sum() ** 2)


def solve_with_scip(model, se_target=None, time_limit=60.0):
    """The integer design from SCIP, with the domain-precision constraint when ``se_target`` is given."""
    m = dpopt.build_pyomo_model(model)                  # m.n[i], m.total, m.extra, m.obj (= m.g / scale)
    if se_target is not None:
        NA = float(model.N[DOMAIN].sum())
        # (N_i/N_A)^2 (sigma_i^2 + gamma_i^2(n_i)) / n_i, the unit term from the package (no formula re-derived)
        terms = [(float(model.N[i]) / NA) ** 2 * term_expression(model, i, m.n[i]) for i in DOMAIN]
        # scaled to O(1) so that SCIP's feasibility tolerance is meaningful
        m.extra.add(sum(terms) / se_target ** 2 <= 1.0)
    sol = solve_pyomo_model(m, solver="scip", time_limit=time_limit)   # a dpopt Solution (gap certificate)
    n = sol.n if sol.n is not None else np.array([round(m.n[i].value or 0) for i in m.S], dtype=np.int64)
    return n, sol.status, sol.message


def brute_force(model, se_targets):
    """Best design over all compositions of TOTAL (n_i >= 1), for no constraint and for each target."""
    k, T = model.k, model.total
    grid = np.arange(1, T - k + 2, dtype=float)                  # every feasible n_i
    X = np.repeat(grid[:, None], k, axis=1)
    f = model.terms(X)                                           # f[j, i] = f_i(grid[j])
    Nf = model.N.astype(float)
    per = (model.sigma2 + model.noise_variance_at(X)) / X
    w = Nf ** 2 / Nf[DOMAIN].sum() ** 2
    dv = np.where(np.isin(np.arange(k), DOMAIN), w * per, 0.0)  # domain-variance contribution of each stratum
    limits = [np.inf] + [t ** 2 for t in se_targets]
    best = [(np.inf, None) for _ in limits]
    m = grid.size
    j2, j3 = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    for j1 in range(m):                                          # n1 = j1 + 1; n2, n3 on a grid; n4 implied
        n4 = T - (j1 + 1) - (j2 + 1) - (j3 + 1)
        ok = n4 >= 1
        j4 = np.clip(n4 - 1, 0, m - 1)
        g = f[j1, 0] + f[j2, 1] + f[j3, 2] + f[j4, 3]
        v = dv[j1, 0] + dv[j2, 1] + dv[j3, 2] + dv[j4, 3]
        for t, lim in enumerate(limits):
            gm = np.where(ok & (v <= lim), g, np.inf)
            idx = np.unravel_index(np.argmin(gm), gm.shape)
            if gm[idx] < best[t][0]:
                best[t] = (float(gm[idx]), np.array([j1 + 1, idx[0] + 1, idx[1] + 1, n4[idx]], dtype=np.int64))
    return best


def main(argv=None):
    out, quick = example_args(__doc__, argv, quick_help="fewer targets in the price curve (for tests)")

    model = design_model()
    n0, st0, msg0 = solve_with_scip(model)
    n1, st1, msg1 = solve_with_scip(model, SE_TARGET)
    g0, g1 = model.objective_value(n0), model.objective_value(n1)
    print(f"unconstrained (SCIP, {st0.value}): n = {n0.tolist()}, g = {g0:.6f}, "
          f"SE(mean_A) = {np.sqrt(domain_variance(model, n0)):.5f}")
    print(f"SE(mean_A) <= {SE_TARGET} (SCIP, {st1.value}): n = {n1.tolist()}, g = {g1:.6f}, "
          f"SE(mean_A) = {np.sqrt(domain_variance(model, n1)):.5f}")
    print(f"price of the domain target: g rises by {100 * (g1 / g0 - 1):.2f}%")

    targets = np.linspace(0.0255, 0.0315, 4 if quick else 13)
    checks = [SE_TARGET] + targets.tolist()
    brute = brute_force(model, checks)
    exact = model.solve()                                        # dpopt's own exact backend (no constraint)
    assert np.array_equal(n0, exact.n) and np.array_equal(n0, brute[0][1]), (n0, exact.n, brute[0][1])
    assert np.array_equal(n1, brute[1][1]), (n1, brute[1][1])
    assert st0 == dpopt.Status.OPTIMAL and st1 == dpopt.Status.OPTIMAL, (msg0, msg1)
    print(f"brute force over all designs agrees: {brute[0][1].tolist()} and {brute[1][1].tolist()}")

    price = []
    for t, (gb, nb) in zip(targets, brute[2:]):
        ns, st, _ = solve_with_scip(model, float(t))
        if nb is None:                                           # the target is out of reach for every design
            assert st == dpopt.Status.INFEASIBLE, (t, st)
            price.append(np.nan)
            continue
        assert st == dpopt.Status.OPTIMAL and np.isclose(model.objective_value(ns), gb, rtol=1e-12), (t, ns, nb)
        price.append(gb / g0)
    print("price curve (SCIP = brute force at every target): " +
          ", ".join(f"{t:.4f}: {p:.4f}" for t, p in zip(targets, price)))

    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    idx = np.arange(model.k)
    ax.bar(idx - 0.2, n0, 0.4, label=f"unconstrained, g = {g0:.4g}")
    ax.bar(idx + 0.2, n1, 0.4, label=f"SE(mean_A) ≤ {SE_TARGET}, g = {g1:.4g}")
    ax.set_xticks(idx, [f"stratum {i + 1}" + (" (A)" if i in DOMAIN else "") for i in idx])
    ax.set_ylabel("sample size n_i")
    ax.set_title("Optimal DP design (Laplace, ε = 1, η = 200)")
    ax.legend(fontsize=8)
    bx.plot(targets, price, marker="o")
    bx.axvline(np.sqrt(domain_variance(model, n0)), color="grey", ls=":", label="unconstrained SE(mean_A)")
    bx.set_xlabel("target SE of the domain mean (strata 1 + 2)")
    bx.set_ylabel("g(constrained) / g(unconstrained)")
    bx.set_title("Price of the domain precision target")
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3)
    return report_written([save(fig, out, "custom_pyomo_constraint.png")])


if __name__ == "__main__":
    main()
