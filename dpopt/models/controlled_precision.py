"""Multi-domain controlled precision: the largest weighted domain variance, minimised (docs/controlled_precision.md).

At the design's fixed total (and with every bound, linear constraint and precision target it declares) choose
integer sample sizes to minimise

    T(n) = max_d V_d(n) / ρ_d²,

where V_d(n) is the variance of an estimate over domain d (its total, its mean, or the design's objective
restricted to it: a precision target's row of :meth:`StratifiedDesign.add_precision_target`, DP noise and
finite-population correction included) and ρ_d = t_d·√κ_d is the domain's scale (its total t_d times the
square root of its priority κ_d). Without noise this is stratallo's ``dopt`` (Wójciak's RDCA); with noise
and integers it is a min-max over separable convex rows, which the ``exact`` backend solves by a search on T
with a certificate.

This module imports no other model module: :class:`ControlledPrecisionDesign` takes any stratified design
(duck-typed on the pieces it uses) and :meth:`StratifiedDesign.controlled_precision` builds one.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from .. import _validate as V
from ..feasibility import FEASIBILITY_TOL, Row, row_holds
from ..result import Solution, Status
from .base import DesignDelegate, Model, honest_status

#: the domain estimates a controlled-precision design can weigh (the precision targets' ``estimate``)
CP_ESTIMATES = ("total", "mean", "objective")


class ControlledPrecisionDesign(DesignDelegate, Model):
    """Minimise max_d V_d(n)/ρ_d² over the integer designs of ``design`` (stratallo's ``dopt`` with DP noise).

    Parameters
    ----------
    design : the :class:`~dpopt.StratifiedDesign` whose strata, total, mechanism, bounds, linear constraints and
        precision targets are used (they stay constraints). Its later changes are not seen: they are copied here.
    domains : which strata form each domain. None: the design's ``domains`` column; a sequence of k domain
        names (one per stratum); or a mapping ``{domain name: strata}`` (strata as
        :meth:`StratifiedDesign.strata_index` reads them; domains may then overlap or leave strata out).
    rho : the domain scales ρ_d > 0 (a sequence in domain order, or a mapping by domain name), or
    totals, priorities : ρ_d = totals_d · √priorities_d (stratallo's t_d and κ_d; priorities default to 1).
        Give ``rho`` or ``totals``, not both.
    variable : the study variable (default: the only one)
    estimate : ``"total"`` (V_d is the variance of the domain total Σ_{h∈d} N_h ȳ_h, as in ``dopt``),
        ``"mean"`` (of the domain mean) or ``"objective"`` (the design's objective restricted to d)
    """

    default_backend = "exact"

    def __init__(self, design, domains=None, *, rho=None, totals=None, priorities=None, variable=None,
                 estimate: str = "total", name: str = ""):
        if not (isinstance(design, Model) and hasattr(design, "_precision_target") and hasattr(design, "total")):
            raise TypeError(f"design must be a StratifiedDesign, got {type(design).__name__}")
        self.design = design
        self.estimate = V.choice("estimate", estimate, CP_ESTIMATES)
        self.domain_names, self.domain_strata = self._domains(domains)
        D = len(self.domain_names)
        self.rho = self._rho(rho, totals, priorities, D)
        # one row per domain: a precision target of the design with bound ρ_d² (the row's scale c_d)
        self.rows = [design._precision_target(float(self.rho[d] ** 2), self.domain_strata[d], variable, "variance",
                                              None, self.estimate, f"domain {self.domain_names[d]}")
                     for d in range(D)]
        self.variable = self.rows[0].variable
        self.constraints = list(design.constraints)
        self.precision_targets = list(design.precision_targets)
        self.name = str(name or design.name)

    # ------------------------------------------------------------------ set-up
    def _domains(self, domains):
        d = self.design
        if domains is None:
            if d.domains is None:
                raise ValueError("domains: the design has no domains column; give domains= (k names or a "
                                 "mapping {domain: strata})")
            domains = d.domains
        if isinstance(domains, Mapping):
            if not domains:
                raise ValueError("domains must name at least one domain")
            names = [str(k) for k in domains]
            strata = [d.strata_index(v, f"domains[{k!r}]") for k, v in domains.items()]
            return names, strata
        if isinstance(domains, (str, bytes)) or not hasattr(domains, "__len__"):
            raise TypeError(f"domains must be a sequence of {d.k} domain names or a mapping {{domain: strata}}, "
                            f"got {type(domains).__name__}")
        labels = [str(v) for v in domains]
        if len(labels) != d.k:
            raise ValueError(f"domains must have {d.k} entries (one per stratum), got {len(labels)}")
        names = list(dict.fromkeys(labels))
        arr = np.array(labels)
        return names, [np.flatnonzero(arr == nm) for nm in names]

    def _rho(self, rho, totals, priorities, D):
        if (rho is None) == (totals is None):
            raise ValueError("give the domain scales as rho= or as totals= (with optional priorities=), exactly one")
        if rho is not None:
            if priorities is not None:
                raise ValueError("priorities= goes with totals= (rho = total·sqrt(priority)); rho= is the scale itself")
            out = V.positive_vector("rho", self._by_domain("rho", rho, D), length=D)
            with np.errstate(over="ignore"):
                finite = bool(np.all(np.isfinite(out * out)))
            if not finite:
                raise ValueError(f"rho must be finite when squared (rho² overflows at domain {self._first_overflow(out)!r}); "
                                 "rescale it")
            return out
        t = V.positive_vector("totals", self._by_domain("totals", totals, D), length=D)
        kappa = (np.ones(D) if priorities is None
                 else V.positive_vector("priorities", self._by_domain("priorities", priorities, D), length=D))
        out = t * np.sqrt(kappa)
        with np.errstate(over="ignore"):
            finite = bool(np.all(np.isfinite(out * out)))
        if not finite:
            raise ValueError("totals·sqrt(priorities) must be finite when squared (rho² overflows at domain "
                             f"{self._first_overflow(out)!r}); rescale the totals")
        return out

    def _first_overflow(self, rho) -> str:
        with np.errstate(over="ignore"):
            return self.domain_names[int(np.argmax(~np.isfinite(rho * rho)))]

    def _by_domain(self, field, values, D):
        if isinstance(values, Mapping):
            unknown = [k for k in values if str(k) not in self.domain_names]
            if unknown:
                raise ValueError(f"{field}: unknown domain(s) {', '.join(map(repr, unknown[:5]))} "
                                 f"(domains: {', '.join(self.domain_names[:10])})")
            missing = [nm for nm in self.domain_names if nm not in {str(k) for k in values}]
            if missing:
                raise ValueError(f"{field}: no value for domain(s) {', '.join(map(repr, missing[:5]))}")
            by = {str(k): v for k, v in values.items()}
            # each value checked on its own, so an error names the domain it belongs to
            return [V.positive(f"{field}[{nm!r}]", by[nm]) for nm in self.domain_names]
        if np.ndim(values) == 0:
            raise TypeError(f"{field} must have one value per domain ({D}), got a scalar")
        return values

    # ------------------------------------------------------------------ delegated data
    @property
    def D(self) -> int:
        return len(self.rows)

    @property
    def total(self) -> int:
        return self.design.total

    @property
    def mechanism(self):
        return self.design.mechanism

    @property
    def is_plain(self) -> bool:
        return False

    def extended_features(self) -> list[str]:
        """What this model has beyond the plain design (routes that cannot model it refuse it)."""
        return [f"controlled precision over {self.D} domain(s)", *self.design.extended_features()]

    def __repr__(self) -> str:
        return (f"ControlledPrecisionDesign(k={self.k}, domains={self.D}, total={self.total}, "
                f"estimate={self.estimate!r}, epsilon={self.design.epsilon:g}, "
                f"mechanism={self.design.mechanism.name!r})")

    # ------------------------------------------------------------------ evaluation
    def domain_variances(self, n) -> np.ndarray:
        """V_d(n) for every domain (DP noise and, when the design has ``fpc``, the correction included)."""
        return np.array([self.design.precision_value(t, n) for t in self.rows])

    def ratios(self, n) -> np.ndarray:
        """V_d(n)/ρ_d² for every domain."""
        return self.domain_variances(n) / (self.rho * self.rho)

    def objective_value(self, n) -> float:
        """T(n) = max_d V_d(n)/ρ_d², the value minimised."""
        return float(np.max(self.ratios(n)))

    def domain_rows(self) -> tuple[list[Row], np.ndarray, np.ndarray]:
        """``(rows, scales, offsets)``: row d is R_d(n) = Σ_i W_d,i t_i(n_i) (the domain's precision-target row),
        its scale c_d = ρ_d² and its offset the fpc constant, so that (R_d − offset_d)/c_d = V_d(n)/ρ_d²: the
        rows of the min-max engine (:class:`dpopt.models.minmax.MinMaxDesign`)."""
        d = self.design
        rows = []
        for t in self.rows:
            W = np.zeros((d.k, d.J))
            W[:, t.variable] = t.weights
            rows.append(Row(t.name, "precision", W, None, t.bound + t.fpc_const, "<=", t))
        return rows, self.rho * self.rho, np.array([t.fpc_const for t in self.rows])

    def constraint_design(self):
        """A copy of the design with this model's own lists of linear constraints and precision targets (the
        ones copied when it was made): its :meth:`program_rows` are the rows every design must meet."""
        out = copy.copy(self.design)            # same data and terms (and convexity verdict); own row lists
        out.constraints = list(self.constraints)
        out.precision_targets = list(self.precision_targets)
        return out

    def program_rows(self):
        """The design's objective row and the rows every design must meet (total, linear constraints, precision
        targets); the min-max objective is :meth:`domain_rows` (see :meth:`StratifiedDesign.program_rows`)."""
        return self.constraint_design().program_rows()

    def is_feasible(self, n, tol: float | None = None) -> bool:
        """Does ``n`` meet the design's bounds, total, linear constraints and precision targets (the one
        feasibility test, :meth:`StratifiedDesign.is_feasible`)? The domain rows are the objective, not constraints."""
        return self.constraint_design().is_feasible(n, tol)

    def at_level(self, T: float):
        """A copy of the design with every domain row bounded by T·ρ_d² as a precision target: its feasible
        designs are exactly the designs of this model with T(n) ≤ T (up to the feasibility tolerance)."""
        if not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
            raise ValueError(f"T must be a positive finite number, got {T!r}")
        out = self.constraint_design()
        out.precision_targets = out.precision_targets + [
            dataclasses.replace(t, bound=float(T) * t.bound, target=float(T) * t.bound) for t in self.rows]
        return out

    def level_met(self, n, T: float) -> bool:
        """Is T(n) ≤ T by the one feasibility test (each domain row against T·ρ_d² + fpc_d)?"""
        v = self.domain_variances(n)
        return all(row_holds(v[d] + t.fpc_const, T * t.bound + t.fpc_const, tol=FEASIBILITY_TOL)
                   for d, t in enumerate(self.rows))

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: the objective is T(n); details hold each domain's variance, ρ_d and
        ratio, and the index of the domains that attain the maximum."""
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.design.labels))
        if pt is not None:
            v = self.domain_variances(pt)
            r = v / (self.rho * self.rho)
            sol.objective = float(np.max(r))
            sol.variance = float(np.max(v))
            sol.details.setdefault("domains", [
                {"name": self.domain_names[d], "strata": int(self.domain_strata[d].size), "variance": float(v[d]),
                 "rho": float(self.rho[d]), "ratio": float(r[d])} for d in range(self.D)])
            sol.details.setdefault("worst_domain", self.domain_names[int(np.argmax(r))])
        return honest_status(sol, rel_gap)
