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
from ..privacy.truncated_gaussian import truncated_discrete_gaussian_moments, truncated_discrete_gaussian_mse_sum
from ..privacy.gaussian import zcdp_epsilon
from ..numerics import bisect, fill_cheapest, water_fill
from .base import Model, honest_status
from .tree import Hierarchy

LOSSES = ("truncated-laplace-mse", "laplace-variance")
NOISES = ("laplace", "discrete_gaussian")
EPS_MAX = 700.0          # largest budget of one level (docs/privacy.md: ε ranges over [1e-6, 700])
DEFAULT_EPS_MIN = 1e-6
RHO_MAX = 700.0          # largest ρ of one level (the discrete Gaussian's noise is then below 1e-300)
DEFAULT_RHO_MIN = 1e-6   # σ = Δ/√(2ρ) ≤ 707Δ: the support summed has at most 28 300 terms per pass
#: the grid of each level's box on which the discrete-Gaussian level sums are checked convex (docs/hierarchy.md)
CONVEXITY_GRID = 129


def rho_for_epsilon(epsilon, delta) -> float:
    """The largest ρ whose ρ-zCDP guarantee converts to (ε, δ)-DP by :func:`dpopt.privacy.gaussian.zcdp_epsilon`
    (Canonne, Kamath & Steinke's conversion, the one OpenDP applies): bisection in log ρ (zcdp_epsilon increases
    in ρ), 200 halvings, the private side kept."""
    e = V.positive("epsilon_total", epsilon, upper=1e4)
    d = V.real("delta", delta)
    if not 0.0 < d < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    lo, hi = 1e-300, e + 1.0                # zcdp_epsilon(ρ) ≥ ρ, so ρ ≤ ε
    for _ in range(200):
        mid = math.sqrt(lo * hi) if hi / lo > 4 else 0.5 * (lo + hi)
        if zcdp_epsilon(mid, d) <= e:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * hi:
            break
    return lo


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
                 sensitivity=1.0, epsilon_min=DEFAULT_EPS_MIN, loss: str | None = None, name: str = "",
                 noise: str = "laplace", rho_total=None, delta=None, rho_min=DEFAULT_RHO_MIN):
        if not isinstance(hierarchy, Hierarchy):
            raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
        self.noise = V.choice("noise", noise, NOISES)
        if self.noise == "discrete_gaussian":
            self._init_gaussian(hierarchy, epsilon_total, mse_target, weights, sensitivity, loss, name, rho_total,
                                delta, rho_min)
            return
        if rho_total is not None or delta is not None:
            raise ValueError("rho_total and delta are for noise='discrete_gaussian' (Laplace noise takes "
                             "epsilon_total)")
        loss = "truncated-laplace-mse" if loss is None else loss
        self.hierarchy = hierarchy
        L = hierarchy.n_levels
        self.loss = V.choice("loss", loss, LOSSES)
        self.budget_name, self.delta, self.rho_total = "epsilon", None, None
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
        self.budget_total, self.budget_min, self.budget_max = self.epsilon_total, self.epsilon_min, EPS_MAX
        self._check_range()

    def _init_gaussian(self, hierarchy, epsilon_total, mse_target, weights, sensitivity, loss, name, rho_total,
                       delta, rho_min):
        """noise="discrete_gaussian": a ρ (zCDP) per level, σ_ℓ² = Δ²/(2ρ_ℓ), counts truncated at zero."""
        self.hierarchy = hierarchy
        L = hierarchy.n_levels
        if loss not in (None, "truncated-discrete-gaussian-mse"):
            raise ValueError(f"loss must be 'truncated-discrete-gaussian-mse' (or None) for discrete Gaussian "
                             f"noise, got {loss!r}")
        self.loss = "truncated-discrete-gaussian-mse"
        self.budget_name = "rho"
        self.sensitivity = V.positive("sensitivity", sensitivity, upper=1e6)
        for l, c in enumerate(hierarchy.counts):
            if np.any(c != np.floor(c)):
                raise ValueError(f"counts of level {l + 1} must be integers for discrete Gaussian noise")
        self.epsilon_min = None
        self.rho_min = V.positive("rho_min", rho_min, upper=1.0)
        self.budget_min, self.budget_max = self.rho_min, RHO_MAX
        self.weights = np.ones(L) if weights is None else V.positive_vector("weights", weights, length=L)
        self.name = str(name)
        self._z = list(hierarchy.counts)            # the noise lives on the integers: counts, not N/Δ
        self._compressed = None
        if mse_target is not None:
            raise ValueError("mse_target (program 7) is not offered for discrete Gaussian noise: give rho_total, or "
                             "epsilon_total with delta (program 6)")
        if (rho_total is None) == (epsilon_total is None):
            raise ValueError("give exactly one of rho_total (zCDP) or epsilon_total with delta ((epsilon, delta) "
                             "through the zCDP conversion) for noise='discrete_gaussian'")
        if rho_total is not None:
            if delta is not None:
                raise ValueError("delta goes with epsilon_total; with rho_total the guarantee is rho-zCDP (its "
                                 "(epsilon, delta) is reported as epsilon_at_delta)")
            self.rho_total = V.positive("rho_total", rho_total)
            self.delta = None
            self.epsilon_total = None
        else:
            if delta is None:
                raise ValueError("epsilon_total with noise='discrete_gaussian' needs delta in (0, 1)")
            self.epsilon_total = V.positive("epsilon_total", epsilon_total, upper=1e4)
            self.delta = float(delta)
            self.rho_total = rho_for_epsilon(self.epsilon_total, self.delta)
        lo, hi = L * self.rho_min, L * RHO_MAX
        if not lo * (1 - 1e-12) <= self.rho_total <= hi:
            raise ValueError(f"rho_total must be in [L*rho_min, 700*L] = [{lo:g}, {hi:g}] for L={L} levels, got "
                             f"{self.rho_total:g}")
        self.program = "budget"
        self.mse_target = None
        self.budget_total = self.rho_total
        self._check_range()

    def epsilon_at(self, delta: float, rho=None) -> float:
        """The ε at which a ρ-zCDP total (default: this model's ρ_total) is (ε, δ)-DP (zcdp_epsilon)."""
        return float(zcdp_epsilon(self.rho_total if rho is None else rho, delta))

    def _check_range(self):
        lo, hi = self.level_bounds()
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            worst = self.objective_value(lo)      # the largest MSE: every level at its floor
            least = self.level_breakdown(hi)["weighted"]
        if not math.isfinite(worst):
            raise ValueError("the weighted MSE overflows double precision at epsilon_min (weights × "
                             "(sensitivity/epsilon_min)² × nodes): rescale the weights or the sensitivity, or "
                             "raise epsilon_min")
        if self.noise == "laplace" and np.any(least < 1e-280):
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
        prog = (f"{self.budget_name}_total={self.budget_total:g}" if self.program == "budget"
                else f"mse_target={self.mse_target:g}")
        return (f"HierarchyBudget(levels={self.n_levels}, sizes={self.hierarchy.sizes}, {prog}, "
                f"loss={self.loss!r})")

    def level_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Box of each ε_ℓ: [epsilon_min, min(700, epsilon_total − (L−1)·epsilon_min)] (ρ_ℓ likewise with rho_min,
        700 and rho_total for discrete Gaussian noise)."""
        L = self.n_levels
        hi = self.budget_max
        if self.program == "budget":
            hi = min(hi, self.budget_total - (L - 1) * self.budget_min)
        return np.full(L, self.budget_min), np.full(L, max(hi, self.budget_min))

    def _check_eps(self, eps) -> np.ndarray:
        e = V.positive_vector(f"{self.budget_name} per level", eps, length=self.n_levels)
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
                    scale = 1.0 if self.noise == "discrete_gaussian" else self.sensitivity
                    out.append((vals / scale, h[vals].astype(float)))
                elif n > 64 and self.noise == "discrete_gaussian":
                    vals, mult = np.unique(c, return_counts=True)
                    out.append((vals, mult.astype(float)))
                else:
                    out.append((z, None))
            self._compressed = out
        return self._compressed

    def level_terms(self, eps, level: int, order: int = 2, z=None, m=None):
        """(F, F', F'') of the unweighted level sum Σ_j MSE(ε, N_j) at scalar ε (order 0: F only)."""
        e = float(eps)
        if z is None:
            z, m = self._z[level], None
        if self.noise == "discrete_gaussian":
            return truncated_discrete_gaussian_mse_sum(e, z, self.sensitivity, order, m)
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
            if self.noise == "discrete_gaussian":
                mom = truncated_discrete_gaussian_moments(e[l], self.hierarchy.counts[l], self.sensitivity)
                mse.append(float(mom["mse"].sum()))
                b2.append(float(mom["bias2"].sum()))
            elif self.loss == "laplace-variance":
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
        e = V.positive(self.budget_name, eps, upper=self.budget_max)
        level = V.integer("level", level, minimum=0, maximum=self.n_levels - 1)
        if self.noise == "discrete_gaussian":
            return truncated_discrete_gaussian_moments(e, self.hierarchy.counts[level], self.sensitivity)["mse"]
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
            return np.full(L, self.budget_total / L)
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
        if E is None or self.noise != "laplace":
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
            if total > self.budget_total * (1 + 1e-12):
                return Certificate("gap", False, message=f"budget violated: sum({self.budget_name}) = {total!r}")
            obj = float(F.sum())
            best = fill_cheapest(g, lo, hi, min(self.budget_total, float(hi.sum())))   # all g < 0: fill to E
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
        if self.noise == "discrete_gaussian":
            convex, note = self.convexity_verified()
            if not convex:
                return Certificate("gap", False, lower_bound=None, gap=gap, tolerance=tol,
                                   message=f"supporting-hyperplane bound not valid: {note}")
            return Certificate("gap", bool(gap <= tol), lower_bound=lb, gap=gap, tolerance=tol,
                               message=f"supporting-hyperplane bound; {note}")
        return Certificate("gap", bool(gap <= tol), lower_bound=lb, gap=gap, tolerance=tol,
                           message="supporting-hyperplane bound")

    def convexity_verified(self) -> tuple[bool, str]:
        """Discrete Gaussian noise: whether every level sum F_ℓ(ρ) has F_ℓ'' > 0 at the CONVEXITY_GRID points of
        a geometric grid of its box (F_ℓ'' = Σ κ(q, u, u), docs/hierarchy.md). The continuous-noise limit is
        proven convex in the docs; for the discrete Gaussian this per-instance check is what the certificate
        rests on (the supporting hyperplane needs convexity). Cached."""
        if getattr(self, "_convex", None) is None:
            lo, hi = self.level_bounds()
            bad = []
            for l, (z, m) in enumerate(self.compressed_levels()):
                for r in np.geomspace(lo[l], hi[l], CONVEXITY_GRID):
                    F, _, F2 = self.level_terms(r, l, 2, z, m)
                    if not (F2 > 0 or F == 0.0):
                        bad.append((l + 1, float(r)))
                        break
            self._convex = (not bad, f"convexity checked on a {CONVEXITY_GRID}-point grid per level" if not bad
                            else f"level sums not convex at (level, rho) = {bad}")
        return self._convex

    def make_feasible(self, eps) -> np.ndarray:
        """Repair the last ulps of a solver's point (privacy must never be exceeded).

        Program (6): clip to the box and make the exact Σε ≤ ε_total (scaling down, then ulp steps).
        Program (7): clip and scale ε up by the smallest factor (1 + 2^k·1e-16) meeting the MSE target."""
        lo, hi = self.level_bounds()
        e = np.clip(np.asarray(eps, dtype=float), lo, hi)
        if self.program == "budget":
            E = self.budget_total
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
        details = {f"{self.budget_name}_total_used": math.fsum(e), "mse_per_level": br["mse"],
                   "bias2_per_level": br["bias2"], "variance_per_level": br["variance"],
                   "weighted_mse": wmse, "total_mse": float(br["mse"].sum()),
                   f"uniform_{self.budget_name}": u, "uniform_mse_per_level": bu["mse"],
                   "uniform_weighted_mse": wmse_u, "program": self.program, "noise": self.noise}
        if self.noise == "discrete_gaussian":
            details["rho_per_level"] = e
            details["sigma_per_level"] = self.sensitivity / np.sqrt(2.0 * e)
            details["epsilon_at_delta"] = {d: self.epsilon_at(d, math.fsum(e)) for d in
                                           sorted({1e-10, 1e-6} | ({self.delta} if self.delta else set()))}
        if self.program == "budget":
            objective = wmse
            details["ratio_uniform"] = wmse_u / wmse if wmse > 0 else float("nan")
        else:
            objective = math.fsum(e)
            details["mse_target"] = self.mse_target
            details["ratio_uniform"] = float(u.sum()) / objective
        details.update(details_in)
        cert = self.certificate(e) if certificate is None else certificate
        eps_field = None if self.noise == "discrete_gaussian" else e     # ρ is not an ε: x holds it
        return honest_status(Solution(status=status, objective=objective, x=e, epsilon=eps_field, certificate=cert,
                                      model=type(self).__name__, details=details, backend=backend,
                                      solver=solver, message=message), rel_gap)
