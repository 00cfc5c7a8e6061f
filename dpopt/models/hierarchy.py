"""Hierarchical DP release: the budget-allocation programs of Ko, Ziani & Fioretto (docs/hierarchy.md).

A :class:`Hierarchy` is a tree of regions with counts, levels ℓ = 1..L (root level first). Every node of
level ℓ is released as ``max(0, N_j + Lap(Δ/ε_ℓ))``; levels compose sequentially (Σ ε_ℓ ≤ ε_total),
nodes of one level in parallel. With ``x = ε N/Δ`` the truncated release has

    Bias = (Δ/2ε) e^{−x},   MSE(ε, N) = (Δ/ε)² (2 − (1+x) e^{−x}),   Δ²/ε² ≤ MSE < 2Δ²/ε².

:class:`HierarchyBudget` declares program (6) (``epsilon_total=``: minimise the weighted MSE
Σ_ℓ w_ℓ Σ_{j∈R_ℓ} MSE(ε_ℓ, N_j) subject to Σ ε_ℓ ≤ ε_total, ε_ℓ ≥ ε_min) or program (7)
(``mse_target=τ``: minimise Σ ε_ℓ subject to the weighted MSE ≤ τ). Solving is the business of the
backends (``solve(backend="exact"|"cvxpy"|"pyomo"|"scipy")``).

**Privacy note (paper §3.2).** The optimiser reads the counts. To keep the release ε_total-DP the counts
given to :class:`HierarchyBudget` must be public or previously released data (e.g. the last census or an
earlier DP release), *not* the confidential counts that will then be released with the chosen budgets.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as V
from ..result import Certificate, Solution, Status
from ..privacy.mechanisms import laplace_variance
from ..privacy.truncated_laplace import truncated_laplace_moments, truncated_laplace_mse_sum
from ..numerics import bisect, fill_cheapest, water_fill
from .base import Model, honest_status
from .tree import Hierarchy

LOSSES = ("truncated-laplace-mse", "laplace-variance")
EPS_MAX = 700.0          # largest budget of one level (docs/privacy.md: ε ranges over [1e-6, 700])
DEFAULT_EPS_MIN = 1e-6


# =================================================================================== the model
class HierarchyBudget(Model):
    """Budget allocation across the levels of a hierarchical release (docs/hierarchy.md; Ko, Ziani & Fioretto).

    Parameters
    ----------
    hierarchy : :class:`Hierarchy` — counts must be **public or previously released** (paper §3.2).
    epsilon_total : program (6): total budget, ``L·epsilon_min ≤ epsilon_total ≤ 700·L``.
    mse_target : program (7) instead: minimise Σ ε_ℓ s.t. weighted MSE ≤ τ (give exactly one of the two).
    weights : w_ℓ > 0 per level (default 1 each: the objective is then the total MSE over all nodes).
    sensitivity : Δ > 0 of one count (default 1; add/remove one person).
    epsilon_min : lower bound on every ε_ℓ (> 0; default 1e-6). Each ε_ℓ is also ≤ 700.
    loss : the error of one released count, ``"truncated-laplace-mse"`` (released counts truncated at 0) or
        ``"laplace-variance"`` (no truncation: MSE = 2Δ²/ε², closed form ε_ℓ ∝ (w_ℓ |R_ℓ|)^{1/3}).
    """

    def __init__(self, hierarchy: Hierarchy, epsilon_total=None, *, mse_target=None, weights=None,
                 sensitivity=1.0, epsilon_min=DEFAULT_EPS_MIN, loss: str | None = None, name: str = ""):
        loss = "truncated-laplace-mse" if loss is None else loss
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
        self.hierarchy = hierarchy
        L = hierarchy.n_levels
        self.loss = V.choice("loss", loss, LOSSES)
        self.sensitivity = V.positive("sensitivity", sensitivity, upper=1e100)
        if self.sensitivity < 1e-100:
            raise ValueError(f"sensitivity must be in [1e-100, 1e100], got {self.sensitivity:g}")
        self.epsilon_min = V.epsilon("epsilon_min", epsilon_min)
        self.epsilon_max = EPS_MAX
        self.weights = np.ones(L) if weights is None else V.positive_vector("weights", weights, length=L)
        if (epsilon_total is None) == (mse_target is None):
            raise ValueError("give exactly one of epsilon_total (program 6) or mse_target (program 7)")
        self.name = str(name)
        self._z = [c / self.sensitivity for c in hierarchy.counts]     # N/Δ per level
        self._compressed = None
        if epsilon_total is not None:
            self.program = "budget"
            self.epsilon_total = V.positive("epsilon_total", epsilon_total)
            lo, hi = L * self.epsilon_min, L * EPS_MAX
            if not lo * (1 - 1e-12) <= self.epsilon_total <= hi:
                raise ValueError(f"epsilon_total must be in [L*epsilon_min, 700*L] = [{lo:g}, {hi:g}] "
                                 f"for L={L} levels, got {self.epsilon_total:g}")
            self.mse_target = None
        else:
            self.program = "target"
            self.epsilon_total = None
            self.mse_target = V.positive("mse_target", mse_target)
            with np.errstate(over="ignore"):
                best = self.objective_value(np.full(L, EPS_MAX))
            if self.mse_target < best:
                raise ValueError(f"mse_target {self.mse_target:g} is unattainable: the weighted MSE is at least "
                                 f"{best:.6g} even with epsilon = 700 on every level (raise mse_target or lower "
                                 f"the weights or the sensitivity)")
        lo, hi = self.level_bounds()
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            worst = self.objective_value(lo)      # the largest MSE: every level at its floor
            least = self.level_breakdown(hi)["weighted"]
        if not math.isfinite(worst):
            raise ValueError("the weighted MSE overflows double precision at epsilon_min (weights × "
                             "(sensitivity/epsilon_min)² × nodes): rescale the weights or the sensitivity, or "
                             "raise epsilon_min")
        if np.any(least < 1e-280):
            raise ValueError("a level's weighted MSE underflows double precision (weights × (sensitivity/epsilon)² "
                             "below 1e-280): rescale the weights or the sensitivity")

    # ------------------------------------------------------------------ basics
    @property
    def n_levels(self) -> int:
        return self.hierarchy.n_levels

    @property
    def sizes(self) -> np.ndarray:
        return np.asarray(self.hierarchy.sizes, dtype=float)

    def __repr__(self) -> str:
        prog = (f"epsilon_total={self.epsilon_total:g}" if self.program == "budget"
                else f"mse_target={self.mse_target:g}")
        return (f"HierarchyBudget(levels={self.n_levels}, sizes={self.hierarchy.sizes}, {prog}, "
                f"loss={self.loss!r})")

    def level_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Box of each ε_ℓ: [epsilon_min, min(700, epsilon_total − (L−1)·epsilon_min)]."""
        L = self.n_levels
        hi = EPS_MAX
        if self.program == "budget":
            hi = min(hi, self.epsilon_total - (L - 1) * self.epsilon_min)
        return np.full(L, self.epsilon_min), np.full(L, max(hi, self.epsilon_min))

    def _check_eps(self, eps) -> np.ndarray:
        e = V.positive_vector("epsilon per level", eps, length=self.n_levels)
        return e

    # ------------------------------------------------------------------ per-level math
    def compressed_levels(self):
        """Per level ``(z, m)``: distinct values of N/Δ with multiplicities (``m=None``: no compression).

        Integer counts are compressed with a histogram (O(n)) when the largest count is small enough;
        otherwise the raw counts are kept. Used by the solvers (values are exact, only regrouped)."""
        if self._compressed is None:
            out = []
            for c, z in zip(self.hierarchy.counts, self._z):
                n = c.size
                cmax = float(c.max())
                if n > 64 and cmax <= 4 * n + 100_000 and np.all(c == np.floor(c)):
                    h = np.bincount(c.astype(np.int64))
                    vals = np.flatnonzero(h)
                    out.append((vals / self.sensitivity, h[vals].astype(float)))
                else:
                    out.append((z, None))
            self._compressed = out
        return self._compressed

    def level_terms(self, eps, level: int, order: int = 2, z=None, m=None):
        """(F, F', F'') of the unweighted level sum Σ_j MSE(ε, N_j) at scalar ε (order 0: F only)."""
        e = float(eps)
        if z is None:
            z, m = self._z[level], None
        if self.loss == "laplace-variance":
            n = float(z.size if m is None else m.sum())
            v = laplace_variance(e, self.sensitivity, order=2 if order else 0)
            return tuple(n * t for t in v) if order else (n * v[0],)
        return truncated_laplace_mse_sum(e, z, self.sensitivity, order, m)

    def level_breakdown(self, eps) -> dict:
        """Per level: MSE, bias² and variance sums over the level's nodes (closed forms)."""
        e = self._check_eps(eps)
        mse, b2 = [], []
        for l in range(self.n_levels):
            if self.loss == "laplace-variance":
                mse.append(laplace_variance(e[l], self.sensitivity)[0] * self._z[l].size)
                b2.append(0.0)
            else:
                mom = truncated_laplace_moments(e[l], self.hierarchy.counts[l], self.sensitivity)
                mse.append(float(mom["mse"].sum()))
                b2.append(float(mom["bias2"].sum()))
        mse, b2 = np.array(mse), np.array(b2)
        return {"mse": mse, "bias2": b2, "variance": mse - b2, "weighted": self.weights * mse}

    def node_mse(self, eps, level: int) -> np.ndarray:
        """MSE of every node of ``level`` (0-based, 0 ≤ level < n_levels) at budget ε."""
        e = V.positive("epsilon", eps, upper=EPS_MAX)
        level = V.integer("level", level, minimum=0, maximum=self.n_levels - 1)
        if self.loss == "laplace-variance":
            return np.full(self._z[level].size, laplace_variance(e, self.sensitivity)[0])
        return truncated_laplace_moments(e, self.hierarchy.counts[level], self.sensitivity)["mse"]

    def objective_value(self, eps) -> float:
        """Weighted MSE Σ_ℓ w_ℓ Σ_j MSE(ε_ℓ, N_j) (one vectorised pass over all nodes)."""
        e = self._check_eps(eps)
        return float(sum(self.weights[l] * self.level_terms(e[l], l, 0)[0] for l in range(self.n_levels)))

    def gradient(self, eps) -> np.ndarray:
        """∂(weighted MSE)/∂ε_ℓ per level at the budgets ``eps`` (docs/hierarchy.md)."""
        e = self._check_eps(eps)
        return np.array([self.weights[l] * self.level_terms(e[l], l, 1)[1] for l in range(self.n_levels)])

    def hessian_diagonal(self, eps) -> np.ndarray:
        """∂²(weighted MSE)/∂ε_ℓ² per level at ``eps`` (the Hessian is diagonal: levels are separable)."""
        e = self._check_eps(eps)
        return np.array([self.weights[l] * self.level_terms(e[l], l, 2)[2] for l in range(self.n_levels)])

    # ------------------------------------------------------------------ baselines and certificates
    def uniform_split(self) -> np.ndarray:
        """Uniform baseline: ε_total/L per level (program 6), or the smallest uniform ε meeting τ (program 7)."""
        L = self.n_levels
        if self.program == "budget":
            return np.full(L, self.epsilon_total / L)
        lo = self.epsilon_min
        if self.objective_value(np.full(L, lo)) <= self.mse_target:
            return np.full(L, lo)
        # G(u·1) decreases in u: bisection in log u; the upper end meets the target
        _, hi = bisect(lambda lu: self.objective_value(np.full(L, math.exp(lu))) > self.mse_target,
                       math.log(lo), math.log(EPS_MAX), xtol=1e-15, max_iter=200)
        return np.full(L, math.exp(hi))

    def laplace_variance_split(self) -> np.ndarray:
        """Closed form of the untruncated problem (6): ε_ℓ ∝ (w_ℓ |R_ℓ|)^{1/3}, clipped to the box by
        water-filling (exact for ``loss="laplace-variance"``, program 6)."""
        a = (self.weights * self.sizes) ** (1 / 3)
        lo, hi = self.level_bounds()
        E = self.epsilon_total
        if E is None:
            raise ValueError("laplace_variance_split is for program (6) (epsilon_total)")
        return water_fill(a, lo, hi, E)

    def certificate(self, eps, tol: float = 1e-7) -> Certificate:
        """Gap certificate from one supporting hyperplane of the convex objective at ``eps``.

        Program (6): ``LB = F(ε̂) + min_{ε feasible} ∇F(ε̂)·(ε − ε̂)`` (a fractional knapsack);
        program (7): ``F(ε) ≥ F(ε̂) + ∇F(ε̂)(ε − ε̂)`` relaxes the MSE constraint to one linear
        inequality whose LP over the box is solved in closed form. Valid for any ε̂; tight at the optimum.
        """
        e = self._check_eps(eps)
        L = self.n_levels
        lo, hi = self.level_bounds()
        if np.any(e < lo * (1 - 1e-12)) or np.any(e > hi * (1 + 1e-12)):
            return Certificate("gap", False, message="point outside the bounds epsilon_min ≤ ε ≤ max")
        terms = [self.level_terms(e[l], l, 1) for l in range(L)]
        F = np.array([t[0] for t in terms]) * self.weights
        g = np.array([t[1] for t in terms]) * self.weights   # all < 0
        if self.program == "budget":
            total = math.fsum(e)
            if total > self.epsilon_total * (1 + 1e-12):
                return Certificate("gap", False, message=f"budget violated: sum(eps) = {total!r}")
            obj = float(F.sum())
            best = fill_cheapest(g, lo, hi, min(self.epsilon_total, float(hi.sum())))   # all g < 0: fill to E
            lb = obj + float(np.dot(g, best - e))
        else:
            G = float(F.sum())
            if G > self.mse_target * (1 + 1e-12):
                return Certificate("gap", False, message=f"MSE target violated: {G!r} > {self.mse_target!r}")
            obj = math.fsum(e)
            a = -g                                  # a·ε ≥ b is implied by feasibility
            b = G - self.mse_target + float(np.dot(a, e))
            need = b - float(np.dot(a, lo))
            lb = float(lo.sum())
            for l in np.argsort(-a):
                if need <= 0:
                    break
                step = min(need / a[l], hi[l] - lo[l])
                lb += step
                need -= step * a[l]
        gap = max(obj - lb, 0.0) / max(abs(obj), np.finfo(float).tiny)
        return Certificate("gap", bool(gap <= tol), lower_bound=lb, gap=gap, tolerance=tol,
                           message="supporting-hyperplane bound")

    def make_feasible(self, eps) -> np.ndarray:
        """Repair the last ulps of a solver's point (privacy must never be exceeded).

        Program (6): clip to the box and make the exact Σε ≤ ε_total (scaling down, then ulp steps).
        Program (7): clip and scale ε up by the smallest factor (1 + 2^k·1e-16) meeting the MSE target."""
        lo, hi = self.level_bounds()
        e = np.clip(np.asarray(eps, dtype=float), lo, hi)
        if self.program == "budget":
            E = self.epsilon_total
            tot = math.fsum(e)
            if tot > E:
                e = np.maximum(e * (E / tot), lo)
            for _ in range(10000):
                if math.fsum(list(e) + [-E]) <= 0:   # the exact Σε ≤ E (math.fsum(e) <= E can round an excess away)
                    break
                e = np.maximum(np.nextafter(e, 0.0), lo)
        else:
            step = 1e-16
            base = e
            while self.objective_value(e) > self.mse_target and step < 1e6:
                step *= 2.0
                e = np.minimum(base * (1.0 + step), hi)
        return e

    # ------------------------------------------------------------------ solution builder for backends
    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: ``x`` are the budgets per level (also the documented ``epsilon``
        field); per-level MSE/bias²/variance, totals, uniform baseline, ratio. Without a certificate the
        model's own KKT certificate is attached."""
        if n is not None or x is None:
            raise TypeError("a hierarchy's answer is real budgets per level: make_solution(x=eps)")
        details_in = dict(details or {})
        e = np.asarray(x, dtype=float)
        br = self.level_breakdown(e)
        u = self.uniform_split()
        bu = self.level_breakdown(u)
        wmse = float(np.sum(br["weighted"]))
        wmse_u = float(np.sum(bu["weighted"]))
        details = {"epsilon_total_used": math.fsum(e), "mse_per_level": br["mse"],
                   "bias2_per_level": br["bias2"], "variance_per_level": br["variance"],
                   "weighted_mse": wmse, "total_mse": float(br["mse"].sum()),
                   "uniform_epsilon": u, "uniform_mse_per_level": bu["mse"], "uniform_weighted_mse": wmse_u,
                   "program": self.program}
        if self.program == "budget":
            objective = wmse
            details["ratio_uniform"] = wmse_u / wmse if wmse > 0 else float("nan")
        else:
            objective = math.fsum(e)
            details["mse_target"] = self.mse_target
            details["ratio_uniform"] = float(u.sum()) / objective
        details.update(details_in)
        cert = self.certificate(e) if certificate is None else certificate
        return honest_status(Solution(status=status, objective=objective, x=e, epsilon=e, certificate=cert,
                                      model=type(self).__name__, details=details, backend=backend,
                                      solver=solver, message=message), rel_gap)
