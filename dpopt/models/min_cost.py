"""Minimum-cost stratified design under DP (stratallo's ``optcost`` with the DP variance of SPEC §2).

Choose integer sample sizes ``lower ≤ n ≤ upper`` to

    minimise  Σ_i cost_i · n_i     subject to   g(n) ≤ V0   (and the design's linear constraints),

where ``g`` is the DP variance objective of a :class:`~dpopt.models.stratified.StratifiedDesign`
(the same strata, mechanism, weights, ε and finite-population choice). There is no fixed total.
Build it with ``StratifiedDesign.min_cost(cost, variance_target)`` or the model-file family
``"stratified_min_cost"``.

Which backends solve it: ``enumerate`` (tiny instances, the oracle), ``pyomo`` (SCIP MINLP with the
variance as a nonlinear constraint; HiGHS on the incremental MILP), ``cvxpy`` (DLap/TuLap with Δ=1,
where the variance is DCP), ``scipy`` (continuous relaxation). The ``exact`` backend does not (the
min-cost problem is a convex knapsack, not a sum-and-bounds problem).
"""

from __future__ import annotations

import numpy as np

from .. import _validate as V
from ..result import Solution
from .base import Model
from .stratified import LinearConstraint, StratifiedDesign


class MinCostDesign(Model):
    """Minimise Σ cost_i n_i s.t. the DP variance objective g(n) ≤ ``variance_target``.

    Parameters
    ----------
    design : the StratifiedDesign whose strata, mechanism, weights, bounds and linear constraints are
        used (its ``total`` is ignored). The constraints are copied when this model is made: add later
        ones with :meth:`add_constraint` here (changing the design afterwards does not change this model)
    cost : positive cost per sampled unit in each stratum
    variance_target : V0 > 0, the bound on g(n) (the same scale as ``design.objective_value``; for the
        population-mean objective V0 = (ΣN)²·Var(μ̂) target)
    """

    default_backend = "enumerate"

    def __init__(self, design: StratifiedDesign, cost, variance_target, name: str = ""):
        if not isinstance(design, StratifiedDesign):
            raise TypeError(f"design must be a StratifiedDesign, got {type(design).__name__}")
        self.design = design
        self.cost = V.positive_vector("cost", cost, length=design.k)
        self.variance_target = V.positive("variance_target", variance_target)
        self.constraints: list[LinearConstraint] = list(design.constraints)
        self.name = str(name or design.name)

    # ------------------------------------------------------------------ delegated data
    @property
    def k(self) -> int:
        return self.design.k

    @property
    def lower(self) -> np.ndarray:
        return self.design.lower

    @property
    def upper(self) -> np.ndarray:
        return self.design.upper

    @property
    def N(self) -> np.ndarray:
        return self.design.N

    @property
    def mechanism(self):
        return self.design.mechanism

    @property
    def is_plain(self) -> bool:
        return False

    @property
    def objective_kind(self) -> str:
        return self.design.objective_kind

    def __repr__(self) -> str:
        return (f"MinCostDesign(k={self.k}, variance_target={self.variance_target:.6g}, "
                f"epsilon={self.design.epsilon:g}, mechanism={self.design.mechanism.name!r}, "
                f"objective={self.design.objective_kind!r}"
                f"{', constraints=' + str(len(self.constraints)) if self.constraints else ''})")

    def add_constraint(self, A, b, sense: str = "<=", name: str = "") -> "MinCostDesign":
        """Add linear constraints ``A n (sense) b`` (validated as in StratifiedDesign). Returns self."""
        self.constraints.append(LinearConstraint.make(self.k, A, b, sense, name or f"c{len(self.constraints)}"))
        return self

    # ------------------------------------------------------------------ evaluation
    def objective_value(self, n) -> float:
        """Σ cost_i n_i."""
        x = V.vector("n", n, length=self.k)
        return float(self.cost @ x)

    def variance_value(self, n) -> float:
        """g(n), the DP variance objective of the design (compared with ``variance_target``)."""
        return self.design.objective_value(n)

    def constraint_terms(self, x) -> np.ndarray:
        """f_i(x_i) per stratum, so that ``variance_value = Σ terms − fpc constant``."""
        return self.design.terms(x)

    @property
    def variance_budget(self) -> float:
        """Bound on Σ f_i(n_i) (``variance_target`` plus the fpc constant when ``fpc``)."""
        return self.variance_target + self.design._fpc_const

    def is_feasible(self, n, tol: float = 1e-9) -> bool:
        n = np.asarray(n)
        if n.shape != (self.k,) or np.any(n < self.lower) or np.any(n > self.upper):
            return False
        if self.variance_value(n) > self.variance_target * (1 + tol):
            return False
        for con in self.constraints:
            if np.any(con.residual(n) > tol * (1 + np.abs(con.b))):
                return False
        return True

    def make_solution(self, n=None, x=None, **kw) -> Solution:
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__, **kw)
        if pt is not None:
            sol.objective = self.objective_value(pt)
            g = self.variance_value(pt)
            sol.variance = self.design.variance_of_mean(g)
            sol.details.setdefault("variance_objective", g)
            sol.details.setdefault("variance_target", self.variance_target)
        return sol

    def report(self, solution: Solution) -> str:
        from ..report import header, table
        lines = header(self, solution)
        pt = solution.point
        if pt is None:
            return "\n".join(lines)
        d = self.design
        br = d.variance_breakdown(pt)
        integer = solution.n is not None
        rows = [[i + 1, int(d.N[i]), float(d.sigma2[i]), float(self.cost[i]), pt[i],
                 br["sampling"][i], br["noise"][i]] for i in range(self.k)]
        lines.append("")
        lines.append(table(["stratum", "N", "sigma2", "cost", "n" if integer else "x", "sampling var", "noise var"],
                           rows, ["d", "d", ".4g", ".4g", "d" if integer else ".4f", ".5g", ".5g"]))
        lines.append("")
        lines.append(f"total cost          : {solution.objective:.10g}")
        lines.append(f"sample size         : {float(np.sum(pt)):.10g}")
        lines.append(f"variance g(n)       : {br['total']:.10g}  (target {self.variance_target:.10g})")
        if d.objective_kind == "mean":
            lines.append(f"Var(mean estimate)  : {br['variance_of_mean']:.6g}")
        if solution.certificate is not None:
            lines.append(f"certificate         : {solution.certificate}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- model files
from ..modelfile import ModelFileError, register_family, take  # noqa: E402


@register_family("stratified_min_cost")
def _load_min_cost(data: dict, base) -> MinCostDesign:
    """Like the "stratified" family, with ``variance_target`` instead of ``total`` and ``strata.cost`` required."""
    take(data, {"name", "epsilon", "variance_target", "mechanism", "objective", "sensitivity", "fpc", "strata",
                "constraint"}, {"epsilon", "variance_target", "strata"})
    strata = data["strata"]
    if not isinstance(strata, dict):
        raise ModelFileError("[strata] must be a table with arrays N, sigma2, cost (and optional lower, upper, weights)")
    take(strata, {"N", "sigma2", "lower", "upper", "weights", "cost"}, {"N", "sigma2", "cost"}, "[strata]")
    objective = data.get("objective", "mean")
    if objective == "weights":
        if "weights" not in strata:
            raise ModelFileError("objective = 'weights' needs strata.weights")
        objective = strata["weights"]
    elif "weights" in strata:
        raise ModelFileError("strata.weights is given but objective is not 'weights'")
    k = len(strata["N"]) if isinstance(strata["N"], list) else 1
    lower = strata.get("lower")
    total = int(np.sum(lower)) if lower is not None else k   # any feasible total; the min-cost model ignores it
    design = StratifiedDesign(N=strata["N"], sigma2=strata["sigma2"], total=total,
                              epsilon=data["epsilon"], mechanism=data.get("mechanism", "laplace"),
                              objective=objective, sensitivity=data.get("sensitivity", 1.0),
                              lower=lower, upper=strata.get("upper"),
                              fpc=data.get("fpc", False), name=data.get("name", ""))
    model = MinCostDesign(design, strata["cost"], data["variance_target"])
    for i, con in enumerate(data.get("constraint", [])):
        take(con, {"coefficients", "sense", "rhs", "name"}, {"coefficients", "rhs"}, f"[[constraint]] #{i + 1}")
        model.add_constraint(con["coefficients"], con["rhs"], con.get("sense", "<="), con.get("name", ""))
    return model
