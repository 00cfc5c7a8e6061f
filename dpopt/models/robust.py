"""Designs robust to uncertain stratum variances: min-max regret over S² scenarios (docs/robust.md).

A :class:`RobustDesign` holds a stratified design (fixed total, or its min-cost variant) and S scenarios of its
σ² matrix. For a fixed total it asks for the integer design minimising the worst relative regret

    max_s g(n; S²_s) / g*_s,     g*_s = the design's certified optimum under scenario s alone,

(``objective="absolute"``: the worst variance max_s g(n; S²_s)) subject to every constraint of the design, its
precision targets holding in *every* scenario. For a min-cost design it asks for the cheapest design whose
variance target and precision targets hold in every scenario. Both are built on the min-max engine
(:class:`~dpopt.models.minmax.MinMaxDesign`) or the constrained route, over :func:`scenario_terms`.

Scenarios come from :func:`scenarios_from_pilot` (bootstrap of a pilot within strata, seeded) or
:func:`scenarios_from_release` (a DP-released pilot: its released variances and the noise of that release).
"""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

from .. import _validate as V
from ..feasibility import Row
from ..result import Solution, Status
from .base import Model
from .minmax import MinMaxDesign, scenario_terms, widen
from .stratified import MinCostDesign, StratifiedDesign, _requirement_rows

ROBUST_OBJECTIVES = ("regret", "absolute")


# ---------------------------------------------------------------------------------- scenarios
def scenarios_from_pilot(values, strata, labels, draws: int = 50, seed=None, floor: float = 0.0,
                         include_estimate: bool = True) -> list[np.ndarray]:
    """σ² scenarios from a pilot sample by the bootstrap within strata: each draw resamples every stratum's pilot
    values with replacement (as many as it has) and takes their sample variance (ddof = 1), floored at ``floor``.
    ``values``: pilot responses (a vector, or an m×J matrix for several variables); ``strata``: each value's
    stratum label; ``labels``: the design's stratum labels (every one needs ≥ 2 pilot values). The first
    scenario is the pilot's own estimate when ``include_estimate``. Seeded: ``seed`` (an int) fixes the draws."""
    y = V._as_float_array("pilot values", values)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[0] == 0 or not np.all(np.isfinite(y)):
        raise ValueError("pilot values must be a non-empty finite vector or matrix (one row per pilot unit)")
    strata = [str(s) for s in strata]
    if len(strata) != y.shape[0]:
        raise ValueError(f"pilot strata has {len(strata)} entries, expected {y.shape[0]} (one per pilot value)")
    draws = V.integer("draws", draws, minimum=1)
    if draws > 100_000:
        raise ValueError(f"draws must be in [1, 100000], got {draws}")
    floor = V.nonnegative("floor", floor) if floor else 0.0
    labels = [str(v) for v in labels]
    groups = []
    for lab in labels:
        idx = np.array([i for i, s in enumerate(strata) if s == lab], dtype=np.int64)
        if idx.size < 2:
            raise ValueError(f"pilot has {idx.size} value(s) in stratum {lab!r}; each stratum needs at least 2")
        groups.append(y[idx])
    unknown = sorted(set(strata) - set(labels))
    if unknown:
        raise ValueError(f"pilot strata names {unknown[0]!r}, which is not a stratum label")
    rng = np.random.default_rng(seed)
    out = []
    if include_estimate:
        out.append(np.maximum(np.array([g.var(axis=0, ddof=1) for g in groups]), floor))
    for _ in range(draws):
        out.append(np.maximum(np.array([g[rng.integers(0, g.shape[0], g.shape[0])].var(axis=0, ddof=1)
                                        for g in groups]), floor))
    return out


def scenarios_from_release(released, noise_scale, mechanism="laplace", draws: int = 50, seed=None,
                           floor: float = 0.0, include_release: bool = True) -> list[np.ndarray]:
    """σ² scenarios from a DP-released pilot: ``released`` are the noisy variances (k, or k×J) and
    ``noise_scale`` the scale of the noise the release added to each (same shape, or one number). The noise is
    symmetric, so the true variance given the release is distributed as release − noise: each scenario draws
    one noise vector (``mechanism``: ``"laplace"`` with scale b, or ``"gaussian"`` with standard deviation b)
    and clamps at ``floor`` (a variance is never below it; give a positive floor to keep the design's terms
    away from zero). The first scenario is the clamped release itself when ``include_release``."""
    rel = V._as_float_array("released", released)
    if rel.ndim == 1:
        rel = rel[:, None]
    if rel.ndim != 2 or not np.all(np.isfinite(rel)):
        raise ValueError("released must be a finite vector (one variance per stratum) or a k×J matrix")
    b = V._as_float_array("noise_scale", noise_scale)
    if b.size not in (1, rel.size):
        raise ValueError(f"noise_scale must be one number or one per released variance ({rel.size}), got {b.size}")
    b = np.full(rel.shape, float(b.ravel()[0])) if b.size == 1 else b.reshape(rel.shape)
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"noise_scale must be >= 0 and finite, one number or one per released variance {rel.shape}")
    mechanism = V.choice("mechanism", mechanism, ("laplace", "gaussian"))
    draws = V.integer("draws", draws, minimum=1)
    if draws > 100_000:
        raise ValueError(f"draws must be in [1, 100000], got {draws}")
    floor = V.nonnegative("floor", floor) if floor else 0.0
    rng = np.random.default_rng(seed)
    out = [np.maximum(rel, floor)] if include_release else []
    for _ in range(draws):
        z = rng.laplace(0.0, 1.0, rel.shape) if mechanism == "laplace" else rng.standard_normal(rel.shape)
        out.append(np.maximum(rel - b * z, floor))
    return out


def _scenario_design(design: StratifiedDesign, S: np.ndarray) -> StratifiedDesign:
    """``design`` with σ² = S (constraints kept, precision targets' fpc constants recomputed): the design as
    scenario s alone sees it (its optimum is g*_s)."""
    d = copy.copy(design)
    S = np.asarray(S, dtype=float).reshape(design.k, design.J)
    d.sigma2_matrix = S
    d.sigma2 = S[:, 0] if design.J == 1 else S
    d._fpc_const = (float(np.sum(d.alpha2 * ((S / d.N[:, None]) @ d.variable_weights))) if d.fpc else 0.0)
    d.precision_targets = [dataclasses.replace(t, fpc_const=float(np.sum(t.weights * S[:, t.variable] / d.N))
                                               if d.fpc else 0.0) for t in design.precision_targets]
    d.constraints = list(design.constraints)
    d._convexity = None
    return d


class RobustDesign(Model):
    """A stratified design robust to its σ² scenarios (see the module docstring and docs/robust.md).

    Parameters
    ----------
    design : a StratifiedDesign (min-max over the scenarios) or a MinCostDesign (cheapest design meeting its
        requirements in every scenario); its own σ² is the *nominal* scenario of the reports
    scenarios : a list of S σ² matrices (k-vectors with one variable), e.g. from :func:`scenarios_from_pilot`
    objective : ``"regret"`` (worst g_s(n)/g*_s, the default) or ``"absolute"`` (worst g_s(n))
    names : one name per scenario (default "s1".."sS")
    """

    default_backend = "exact"

    def __init__(self, design, scenarios, objective: str = "regret", names=None, name: str = ""):
        if isinstance(design, MinCostDesign):
            self.min_cost, base = design, design.design
        elif isinstance(design, StratifiedDesign):
            self.min_cost, base = None, design
        else:
            raise TypeError(f"design must be a StratifiedDesign or MinCostDesign, got {type(design).__name__}")
        self.design = base
        scenarios = list(scenarios)
        if not scenarios:
            raise ValueError("scenarios must hold at least one sigma2 matrix")
        if len(scenarios) > 10_000:
            raise ValueError(f"scenarios must hold at most 10000 matrices, got {len(scenarios)}")
        self.terms = scenario_terms(base, scenarios)      # validates every scenario's shape and values
        J = base.J
        self.scenarios = [self.terms.sigma2_matrix[:, s * J:(s + 1) * J].copy() for s in range(len(scenarios))]
        self.objective = V.choice("objective", objective, ROBUST_OBJECTIVES)
        self.names = [f"s{s + 1}" for s in range(len(scenarios))] if names is None else [str(v) for v in names]
        if len(self.names) != len(scenarios):
            raise ValueError(f"names has {len(self.names)} entries, expected {len(scenarios)} (one per scenario)")
        self.name = str(name or base.name)
        self._optima = None

    @property
    def S(self) -> int:
        return len(self.scenarios)

    @property
    def k(self) -> int:
        return self.design.k

    def __repr__(self) -> str:
        what = "min-cost" if self.min_cost is not None else self.objective
        return f"RobustDesign(k={self.k}, scenarios={self.S}, {what})"

    # ------------------------------------------------------------------ the scenarios' designs
    def scenario_design(self, s: int) -> StratifiedDesign:
        """The design under scenario ``s`` alone (σ² replaced, every constraint kept)."""
        return _scenario_design(self.design, self.scenarios[s])

    def variances(self, n) -> np.ndarray:
        """g(n; S²_s) per scenario (the design's objective, fpc constant included when ``fpc``)."""
        return np.array([self.scenario_design(s).objective_value(n) for s in range(self.S)])

    def scenario_optima(self, backend: str = "exact", **options) -> np.ndarray:
        """g*_s, each scenario's certified optimum (cached); a scenario whose design cannot be solved to a
        certified optimum raises ValueError (its regret would have no reference)."""
        if self._optima is None:
            out = np.empty(self.S)
            for s in range(self.S):
                sol = self.scenario_design(s).solve(backend, **options)
                if sol.status != Status.OPTIMAL or sol.objective is None or not sol.objective > 0:
                    raise ValueError(f"scenario {self.names[s]!r}: its own optimum is {sol.status} "
                                     f"({sol.message}); the regret needs a certified g*_s > 0")
                out[s] = sol.objective
            self._optima = out
        return self._optima

    def regrets(self, n) -> np.ndarray:
        """g(n; S²_s)/g*_s per scenario."""
        return self.variances(n) / self.scenario_optima()

    # ------------------------------------------------------------------ the compiled forms
    def _replicated_targets(self):
        """The design's precision targets, one copy per scenario over :attr:`terms`' columns."""
        out = []
        for s in range(self.S):
            d = self.scenario_design(s)
            targets = self.min_cost.precision_targets if self.min_cost is not None else d.precision_targets
            for t in targets:
                fpc = float(np.sum(t.weights * self.scenarios[s][:, t.variable] / d.N)) if d.fpc else 0.0
                out.append(dataclasses.replace(t, name=f"{t.name} [{self.names[s]}]",
                                               variable=s * self.design.J + t.variable, fpc_const=fpc))
        return out

    def _objective_W(self, s: int) -> np.ndarray:
        d = self.design
        return widen(d.alpha2[:, None] * d.variable_weights[None, :], self.terms.J, s)

    def minmax(self) -> MinMaxDesign:
        """The min-max design this robust design is (fixed total only): rows g_s, scales g*_s (regret) or 1
        (absolute), offsets the fpc constants, the design's constraints and the replicated precision targets."""
        if self.min_cost is not None:
            raise ValueError("a min-cost robust design is not a min-max design: solve() it")
        d = self.design
        rows = [Row(f"g [{self.names[s]}]", "variance", self._objective_W(s), None) for s in range(self.S)]
        offsets = [self.scenario_design(s)._fpc_const for s in range(self.S)]
        scales = self.scenario_optima() if self.objective == "regret" else np.ones(self.S)
        cons = [Row("total", "total", None, np.ones(d.k), float(d.total), "==")]
        cons += _requirement_rows(self.terms, d.constraints, self._replicated_targets())
        return MinMaxDesign(self.terms, rows, scales, offsets, cons, names=list(self.names), name=self.name)

    def min_cost_model(self) -> MinCostDesign:
        """The min-cost design whose variance target and precision targets hold in every scenario."""
        if self.min_cost is None:
            raise ValueError("min_cost_model needs a robust MinCostDesign")
        return _ScenarioMinCost(self)

    # ------------------------------------------------------------------ reports
    def report_details(self, n, nominal=None) -> dict:
        """Per-scenario variance and regret of ``n`` (regret only with a fixed total) and, with ``nominal`` (the
        nominal design's n), the price of robustness: the worst regret of each and the loss of ``n`` under the
        design's own σ² (g_nom(n)/g_nom(nominal) − 1)."""
        out = {"scenario_names": list(self.names), "scenario_variance": self.variances(n)}
        if self.min_cost is None:
            reg = self.regrets(n)
            out.update(scenario_optimum=self.scenario_optima(), scenario_regret=reg, worst_regret=float(reg.max()))
            if nominal is not None:
                g_nom = self.design.objective_value
                reg_nom = self.regrets(nominal)
                out.update(nominal_n=np.asarray(nominal, dtype=np.int64), nominal_worst_regret=float(reg_nom.max()),
                           nominal_scenario_regret=reg_nom,
                           price_of_robustness=float(g_nom(n) / g_nom(nominal) - 1.0),
                           worst_case_saving=float(1.0 - reg.max() / reg_nom.max()))
        return out

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: the objective is the worst regret (or variance; the cost for a
        min-cost robust design); details carry every scenario's variance and regret."""
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.design.labels))
        if n is not None:
            sol.details.update(self.report_details(n, sol.details.get("nominal_n")))
            if self.min_cost is not None:
                sol.objective = self.min_cost.objective_value(n)
            elif self.objective == "regret":
                sol.objective = sol.details["worst_regret"]
            else:
                sol.objective = float(np.max(sol.details["scenario_variance"]))
            sol.variance = float(np.max(sol.details["scenario_variance"]))
        from .base import honest_status
        return honest_status(sol, rel_gap)


class _ScenarioMinCost(MinCostDesign):
    """A min-cost design over :func:`scenario_terms` whose rows are the variance target and precision targets
    of every scenario (the constrained route solves it as any min-cost design: its rows are its program)."""

    def __init__(self, robust: RobustDesign):
        mc = robust.min_cost
        # (the requirement check of MinCostDesign is the robust design's: mc has one)
        super().__init__(robust.terms, mc.cost, 1.0 if mc.variance_target is None else mc.variance_target,
                         name=mc.name)
        self.variance_target = mc.variance_target
        self.robust = robust
        self.constraints = list(mc.constraints)
        self.precision_targets = robust._replicated_targets()

    def extended_features(self) -> list[str]:
        return [f"{self.robust.S} variance scenarios"] + super().extended_features()

    def program_rows(self):
        r = self.robust
        rows = []
        if self.variance_target is not None:
            for s in range(r.S):
                budget = self.variance_target + r.scenario_design(s)._fpc_const
                rows.append(Row(f"variance g(n) [{r.names[s]}]", "variance", r._objective_W(s), None, budget, "<="))
        return (Row("cost", "objective", None, self.cost.astype(float)),
                rows + _requirement_rows(self.design, self.constraints, self.precision_targets), 0.0)

    def variance_value(self, n) -> float:
        return float(np.max(self.robust.variances(n)))
