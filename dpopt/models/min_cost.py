"""Minimum-cost stratified design under DP (stratallo's ``optcost`` and Bethel–Chromy with DP noise).

Choose integer sample sizes ``lower ≤ n ≤ upper`` to

    minimise  Σ_i cost_i · n_i     subject to   every precision requirement   (and the linear constraints),

where the requirements are the objective bound ``g(n) ≤ V0`` of a
:class:`~dpopt.models.stratified.StratifiedDesign` (same strata, mechanism, weights, ε and finite-population
choice) and any number of domain/variable precision targets (SE, CV or variance of a domain mean). There is
no fixed total. Build it with ``StratifiedDesign.min_cost(cost, ...)`` or the model-file family
``"stratified_min_cost"``; the mathematics is in docs/constrained.md.

``exact`` (the default) solves it with a certificate; ``enumerate`` (tiny instances), ``pyomo``, ``cvxpy``
and ``scipy`` solve the forms they can model.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as V
from ..result import Solution, Status
from .base import Model, honest_status
from .stratified import LinearConstraint, PrecisionTarget, StratifiedDesign


class MinCostDesign(Model):
    """Minimise Σ cost_i n_i s.t. precision requirements on the DP variance.

    Parameters
    ----------
    design : the StratifiedDesign whose strata, mechanism, weights, bounds, linear constraints and precision
        targets are used (its ``total`` is ignored). They are copied when this model is made: add later
        ones here with :meth:`add_constraint` / :meth:`add_precision_target`
    cost : positive cost per sampled unit in each stratum
    variance_target : optional bound V0 > 0 on the objective g(n) (the scale of ``design.objective_value``)
    se, cv : optional bound on the standard error / coefficient of variation of the population-mean estimate
        (``cv`` needs ``mean``; with several variables, ``variable`` names the one meant)
    At least one requirement must be given (here or as a precision target of the design).
    """

    default_backend = "exact"

    def __init__(self, design: StratifiedDesign, cost, variance_target=None, *, se=None, cv=None, mean=None,
                 variable=None, name: str = ""):
        if not isinstance(design, StratifiedDesign):
            raise TypeError(f"design must be a StratifiedDesign, got {type(design).__name__}")
        self.design = design
        self.cost = V.positive_vector("cost", cost, length=design.k)
        self.variance_target = None if variance_target is None else V.positive("variance_target", variance_target)
        self.constraints: list[LinearConstraint] = list(design.constraints)
        self.precision_targets: list[PrecisionTarget] = list(design.precision_targets)
        if se is not None and cv is not None:
            raise ValueError("give se or cv for the population mean, not both")
        if se is not None or cv is not None:
            kind, value = ("se", se) if se is not None else ("cv", cv)
            value = V.positive(kind, value)
            self.precision_targets.append(design._precision_target(value, None, variable, kind, mean, "mean",
                                                                   f"population mean ({kind})"))
        if self.variance_target is None and not self.precision_targets:
            raise ValueError("a min-cost design needs a precision requirement: variance_target, se, cv or "
                             "a precision target")
        self.name = str(name or design.name)

    def add_precision_target(self, target, strata=None, variable=None, kind: str = "variance", mean=None,
                             estimate: str = "mean", name: str = "") -> "MinCostDesign":
        """Add a domain precision target (see :meth:`StratifiedDesign.add_precision_target`). Returns self."""
        self.precision_targets.append(self.design._precision_target(target, strata, variable, kind, mean,
                                                                    estimate, name))
        return self

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

    def extended_features(self) -> list[str]:
        """What this model has beyond one variable, one objective-variance bound and linear constraints."""
        out = [f for f in self.design.extended_features() if "precision" not in f]
        if self.precision_targets:
            out.append(f"{len(self.precision_targets)} precision target(s)")
        if self.variance_target is None:
            out.append("no objective-variance bound (precision targets only)")
        return out

    @property
    def objective_kind(self) -> str:
        return self.design.objective_kind

    def __repr__(self) -> str:
        vt = "None" if self.variance_target is None else f"{self.variance_target:.6g}"
        return (f"MinCostDesign(k={self.k}, variance_target={vt}, targets={len(self.precision_targets)}, "
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

    @property
    def variance_budget(self) -> float:
        """Bound on Σ f_i(n_i) (``variance_target`` plus the fpc constant when ``fpc``), or None."""
        return None if self.variance_target is None else self.variance_target + self.design._fpc_const

    def is_feasible(self, n, tol: float | None = None) -> bool:
        """Does ``n`` meet the bounds, g(n) ≤ V0, the precision targets and the linear constraints? The one
        feasibility test of every stratified model (see :meth:`StratifiedDesign.is_feasible`)."""
        from ..formulations.separable import FEASIBILITY_TOL, program_of
        n = np.asarray(n)
        if n.shape != (self.k,):
            return False
        return program_of(self).feasible(n, FEASIBILITY_TOL if tol is None else max(float(tol), FEASIBILITY_TOL))

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: the cost, g(n), Var(μ̂) and each precision target at the point."""
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.design.labels))
        if pt is not None:
            sol.objective = self.objective_value(pt)
            g = self.variance_value(pt)
            sol.variance = self.design.variance_of_mean(g)
            sol.details.setdefault("variance_objective", g)
            sol.details.setdefault("variance_target", self.variance_target)
            if self.precision_targets:
                sol.details.setdefault("precision", [
                    {"name": t.name, "variable": self.design.variables[t.variable], "kind": t.kind,
                     "target": t.target, "variance": self.design.precision_value(t, pt), "bound": t.bound}
                    for t in self.precision_targets])
        return honest_status(sol, rel_gap)

