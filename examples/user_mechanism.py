"""A user-defined noise mechanism in the DP stratified design: the staircase mechanism (Geng & Viswanath).

    python examples/user_mechanism.py --out DIR [--quick]

Chen, Pasupathy & Awan name the staircase mechanism as future work. It is the epsilon-DP additive noise with
the smallest variance: its density is a symmetric staircase, constant on [k, k + gamma)*Delta and
[k + gamma, k + 1)*Delta with heights falling by b = e^(-epsilon) per step. Being pure epsilon-DP, it is
amplified by subsampling like Laplace, so the stratified design applies unchanged: a subclass of
``dpopt.privacy.Mechanism`` only has to give the noise variance at a nominal budget (``variance``) and, to be
released, a sampler (``sample``); derivatives default to finite differences, which is enough for a smooth
closed form.

The variance at the optimal gamma (Geng & Viswanath, cost x^2):
    gamma* = -b/(1 - b) + (b - 2b^2 + 2b^4 - b^5)^(1/3) / (2^(1/3) (1 - b)^2),
    Var = Delta^2 (E[G^2] + 2 E[G] E[R] + E[R^2]),
from the sampling representation X = S*Delta*(G + R): S a fair sign, G ~ Geometric(1 - b) on {0, 1, ...},
R ~ U(0, gamma) with probability p0 = gamma/(gamma + (1 - gamma) b), else U(gamma, 1).
It tends to Laplace's 2 Delta^2/epsilon^2 as epsilon -> 0 and decays like e^(-2 epsilon/3) as epsilon grows.

The script solves the Table 1 design of the paper with the staircase mechanism (backend exact), checks it
against brute-force enumeration of all designs, runs ``dpopt.compare`` to show which backends take a user
mechanism, checks the variance formula by simulation, and plots the variance ratios against Laplace.
"""

import numpy as np

import dpopt
from dpopt.plots import example_args, report_written, save, pyplot
from dpopt.privacy import Mechanism

TABLE1 = dpopt.datasets.CHEN_TABLE1     # Chen et al.'s Table 1 strata: N, sigma2 and the total 200


class Staircase(Mechanism):
    """Staircase mechanism with the variance-optimal gamma (pure epsilon-DP, any sensitivity > 0)."""

    name = "staircase"

    @staticmethod
    def gamma(epsilon):
        eps = np.asarray(epsilon, dtype=float)
        b = np.exp(-eps)
        omb = -np.expm1(-eps)                                    # 1 - b without cancellation
        g = -b / omb + np.cbrt(b - 2 * b ** 2 + 2 * b ** 4 - b ** 5) / (2 ** (1 / 3) * omb ** 2)
        return np.clip(g, 0.0, 1.0)

    @staticmethod
    def _parts(epsilon, gamma):
        eps = np.asarray(epsilon, dtype=float)
        b = np.exp(-eps)
        omb = -np.expm1(-eps)
        den = gamma + (1 - gamma) * b
        p0, p1 = gamma / den, (1 - gamma) * b / den              # P(R in [0, gamma)), P(R in [gamma, 1))
        return b, omb, p0, p1

    def variance(self, epsilon, sensitivity=1.0):
        g = self.gamma(epsilon)
        b, omb, p0, p1 = self._parts(epsilon, g)
        EG, EG2 = b / omb, b * (1 + b) / omb ** 2
        ER = p0 * g / 2 + p1 * (1 + g) / 2
        ER2 = p0 * g ** 2 / 3 + p1 * (1 + g + g ** 2) / 3
        return sensitivity ** 2 * (EG2 + 2 * EG * ER + ER2)

    def sample(self, epsilon, sensitivity=1.0, size=None, rng=None):
        rng = np.random.default_rng(rng)
        eps = np.asarray(epsilon, dtype=float)
        g = self.gamma(eps)
        _, omb, p0, _ = self._parts(eps, g)
        G = rng.geometric(omb, size=size) - 1                    # numpy's geometric starts at 1
        U = rng.uniform(size=size)
        R = np.where(rng.uniform(size=size) < p0, g * U, g + (1 - g) * U)
        S = rng.choice([-1.0, 1.0], size=size)
        return S * sensitivity * (G + R)


def check_discrete_convexity(model):
    """True if every f_i has non-decreasing unit increments on [lower_i, upper_i] (what exact relies on)."""
    for i in range(model.k):
        m = np.arange(model.lower[i], min(model.upper[i], model.total), dtype=float)
        d = model.increments(m, np.full(m.size, i))
        if np.any(np.diff(d) < -1e-12 * np.abs(d[1:]).max()):
            return False
    return True


def main(argv=None):
    out, quick = example_args(__doc__, argv)
    stair = Staircase()

    # 1. the variance formula against simulation
    rng = np.random.default_rng(1)
    for e in (0.5, 2.0, 5.0):
        draws = stair.sample(e, size=400_000 if quick else 4_000_000, rng=rng)
        se = np.std(draws ** 2) / np.sqrt(draws.size)
        print(f"eps = {e}: staircase variance {stair.variance(e):.6g} (simulated {np.mean(draws ** 2):.6g}), "
              f"Laplace {2 / e ** 2:.6g}")
        assert abs(np.mean(draws ** 2) - stair.variance(e)) < 5 * se

    # 2. the design with the user mechanism: exact backend vs brute-force enumeration
    for e in (0.1, 1.0, 10.0):
        model = dpopt.StratifiedDesign(**TABLE1, epsilon=e, mechanism=stair)
        assert check_discrete_convexity(model), "exact's marginal allocation needs discretely convex f_i"
        ex, en = model.solve(backend="exact"), model.solve(backend="enumerate")
        lap = dpopt.StratifiedDesign(**TABLE1, epsilon=e, mechanism="laplace").solve()
        print(f"eps = {e}: staircase n* = {ex.n.tolist()} (enumerate {en.n.tolist()}), g* = {ex.objective:.6g}; "
              f"Laplace n* = {lap.n.tolist()}, g* = {lap.objective:.6g}")
        assert ex.status == en.status == dpopt.Status.OPTIMAL
        assert np.array_equal(ex.n, en.n) or np.isclose(ex.objective, en.objective, rtol=1e-12)

    model = dpopt.StratifiedDesign(**TABLE1, epsilon=1.0, mechanism=stair)
    print("\nWhich backends take a user mechanism (epsilon = 1):")
    print(dpopt.compare(model, backends=["exact", "enumerate", "algorithm1", "pyomo:highs", "pyomo:scip", "cvxpy"],
                        time_limit=30, progress=False).table())

    # 3. variance ratios against Laplace
    eps_nom = np.logspace(-2, 1.5, 36 if quick else 141)
    mech_ratio = (2 / eps_nom ** 2) / stair.variance(eps_nom)
    eps_t = np.logspace(-2, 2, 9 if quick else 41)
    gain, ney = [], {"laplace": [], "staircase": []}
    for e in eps_t:
        ms = dpopt.StratifiedDesign(**TABLE1, epsilon=float(e), mechanism=stair)
        ml = dpopt.StratifiedDesign(**TABLE1, epsilon=float(e), mechanism="laplace")
        gs, gl = ms.solve().objective, ml.solve().objective
        gain.append(gl / gs)
        ney["staircase"].append(ms.objective_value(ms.baseline("neyman")) / gs)
        ney["laplace"].append(ml.objective_value(ml.baseline("neyman")) / gl)
    print("\nTable 1 strata: g*(Laplace)/g*(staircase) at eps = " +
          ", ".join(f"{e:.3g}: {r:.3f}" for e, r in zip(eps_t, gain)))

    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    ax.loglog(eps_nom, mech_ratio)
    ax.set_xlabel("nominal ε of the mechanism")
    ax.set_ylabel("Var(Laplace) / Var(staircase)")
    ax.set_title("Noise variance, Δ = 1")
    ax.grid(alpha=0.3, which="both")
    marker = "o" if quick else None
    bx.semilogx(eps_t, gain, marker=marker, label="g*(Laplace) / g*(staircase)")
    bx.semilogx(eps_t, ney["laplace"], marker=marker, ls="--", label="Neyman / optimal, Laplace")
    bx.semilogx(eps_t, ney["staircase"], marker=marker, ls=":", label="Neyman / optimal, staircase")
    bx.set_xlabel("central target ε")
    bx.set_ylabel("variance ratio")
    bx.set_title("Optimal DP design, Chen et al. Table 1 strata")
    bx.legend(fontsize=8)
    bx.grid(alpha=0.3)
    return report_written([save(fig, out, "user_mechanism_staircase.png")])


if __name__ == "__main__":
    main()
