"""Privacy-constrained Poisson importance sampling (Fay, Mair & Sjölund; docs/importance.md).

Record i is kept independently with probability q_i and weighted by w_i = 1/q_i. If the weighted
mechanism has the individual (PDP) loss profile ε(w, x), the sampled mechanism gives record i the loss

    ψ_i = log1p(q_i · expm1(ε(1/q_i, x_i)))                               (Theorem 6)

Problem 7 chooses the smallest expected sample size Σ q_i with every ψ_i ≤ ε*. It is separable: each
w_i is the largest w ≥ 1 with expm1(ε(w, x_i)) ≤ a·w, a = expm1(ε*).

* Linear profiles ε(w, x_i) = c_i·w (``slopes=c``): with s = c·w the condition is expm1(s)/s = a/c,
  whose non-trivial root is s* = −W₋₁(−r e^{−r}) − r, r = c/a (Lambert W, lower branch), i.e.
  ``w* = −W₋₁(−(c/a)e^{−c/a})/c − 1/a`` (w* = 1 when c = ε*). Near the branch point (ε* → 0) and
  for extreme r the Lambert value loses digits, so it is polished by safeguarded Newton steps on
  log(expm1(s)/s) = log(a/c) (same root).
* General profiles (``profile=f, points=X``; f(w, x) ≥ 0): under the paper's Assumption 11
  (exp∘ε convex in w) the feasible w form an interval [1, w*]; w* is found by log-space bisection
  on ``log expm1(ε(w, x)) − log w − log a`` with a doubling bracket (no derivative, no strong
  convexity constant: the paper's printed bracket and case test are not needed, docs/paper_errors.md).

Calibrations: :func:`calibrate_epsilon` (ε* giving expected size m) and :func:`calibrate_noise_scale`
(noise scale b of a linear profile ε = s_i·w/b giving expected size m at ε*). Comparison
distributions: :func:`uniform_probabilities`, :func:`coreset_probabilities`; ψ of any probabilities:
:func:`amplified_loss`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy.special import lambertw

from .. import _validate as V
from ..privacy.amplification import log_expm1
from ..result import Certificate, Solution, Status
from .base import Model

_MAX_LOG2_W = 1000  # doubling bracket stops at w = 2**1000


# ---------------------------------------------------------------------------------- helpers
def _log_h(s):
    """log(expm1(s)/s) for s > 0 (series below 1e-3)."""
    s = np.asarray(s, dtype=float)
    small = s < 1e-3
    ss = np.where(small, s, 1.0)
    series = ss / 2 + ss ** 2 / 24 - ss ** 4 / 2880
    big = np.where(small, 1.0, s)
    closed = log_expm1(big) - np.log(big)
    return np.where(small, series, closed)


def _dlog_h(s):
    """d/ds log(expm1(s)/s) = 1/(1 − e^{−s}) − 1/s (series below 1e-3)."""
    s = np.asarray(s, dtype=float)
    small = s < 1e-3
    ss = np.where(small, s, 1.0)
    series = 0.5 + ss / 12 - ss ** 3 / 720
    big = np.where(small, 1.0, s)
    closed = -1.0 / np.expm1(-big) - 1.0 / big
    return np.where(small, series, closed)


def linear_optimal_weights(slopes, epsilon, *, polish: bool = True) -> np.ndarray:
    """Problem 7 for linear profiles ε(w, x_i) = c_i·w: the optimal weights w_i* ≥ 1 (vectorised).

    Lambert-W closed form, then (``polish=True``) Newton steps in log-space on the same equation to
    restore the digits lost near the branch point. Requires 0 < c_i ≤ ε* (raises otherwise).
    """
    eps = V.positive("epsilon", epsilon)
    c = V.vector("slopes", np.atleast_1d(slopes))
    if np.any(c <= 0):
        raise ValueError(f"slopes must be > 0 (a zero-loss record has no optimal q > 0), got min {c.min():g}")
    if np.any(c > eps):
        i = int(np.argmax(c))
        raise ValueError(f"Problem 7 is infeasible: record {i} has eps(1, x) = {c[i]:g} > eps* = {eps:g}, "
                         "so even q = 1 violates the target (Assumption 8)")
    log_a = float(log_expm1(eps))
    L = log_a - np.log(c)             # log(a/c) > 0, the target of log h(s)
    log_r = -L
    # Lambert W start where representable
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        r = np.exp(log_r)
        z = -np.exp(log_r - r)
        s0 = np.where(z < 0, -lambertw(z, -1).real - r, np.nan)
    asym = L + np.log(np.maximum(L, 1e-300))          # large-L asymptote of the root
    s = np.where(np.isfinite(s0) & (s0 > 0), s0, np.maximum(asym, 2 * np.expm1(L)))
    if polish:
        lo = np.zeros_like(s)
        hi = np.maximum(2 * s, 2 * (L + np.log1p(L)) + 2.0)
        while True:   # make sure g(hi) > 0
            g_hi = _log_h(hi) - L
            if np.all(g_hi > 0):
                break
            hi = np.where(g_hi > 0, hi, 2 * hi)
        s = np.clip(s, lo, hi)
        for _ in range(100):
            g = _log_h(np.maximum(s, 1e-300)) - L
            lo = np.where(g <= 0, np.maximum(lo, s), lo)
            hi = np.where(g > 0, np.minimum(hi, s), hi)
            step = g / _dlog_h(np.maximum(s, 1e-300))
            sn = s - step
            bad = ~np.isfinite(sn) | (sn <= lo) | (sn >= hi)
            sn = np.where(bad, 0.5 * (lo + hi), sn)
            done = np.abs(sn - s) <= 4e-16 * np.abs(s)
            s = sn
            if np.all(done):
                break
    w = s / c
    # c = eps* exactly: the root is w = 1 (the target is met with q = 1, "sampling for free")
    return np.where(c >= eps, 1.0, np.maximum(w, 1.0))


def _eval_profile(profile: Callable, w: np.ndarray, points, idx=None) -> np.ndarray:
    """ε(w_i, x_i) for the records ``idx`` (vectorised call first, element-wise fallback)."""
    pts = points if idx is None else _take(points, idx)
    out = None
    try:
        out = np.asarray(profile(w, pts), dtype=float)
        if out.shape != w.shape:
            out = None
    except Exception:
        out = None
    if out is None:
        seq = list(pts) if not isinstance(pts, np.ndarray) else pts
        out = np.array([float(profile(float(wi), xi)) for wi, xi in zip(w, seq)], dtype=float)
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        j = int(np.flatnonzero(~(np.isfinite(out) & (out >= 0)))[0])
        raise ValueError(f"the privacy profile must return finite values >= 0; got {out[j]!r} at w = {w[j]:g}")
    return out


def _take(points, idx):
    if isinstance(points, np.ndarray):
        return points[idx]
    return [points[i] for i in np.atleast_1d(idx)]


def bisect_optimal_weights(profile: Callable, points, epsilon, *, rtol: float = 1e-15) -> np.ndarray:
    """Problem 7 for a general profile: the largest w_i ≥ 1 with ψ_i ≤ ε* (log-space bisection).

    φ_i(w) = log expm1(ε(w, x_i)) − log w − log expm1(ε*) ≤ 0 is the constraint. Bracket: w = 1
    (feasible, checked) and the first w = 2^k with φ > 0 (doubling); bisection in log w keeps a
    feasible lower end, which is returned (so every ψ_i ≤ ε*). Exact for profiles satisfying the
    paper's Assumption 11 (then the feasible set is an interval); otherwise it returns a feasible
    point at a sign change, not necessarily the largest one.
    """
    eps = V.positive("epsilon", epsilon)
    n = len(points)
    if n == 0:
        raise ValueError("points must not be empty")
    log_a = float(log_expm1(eps))

    def phi(w, idx):
        e = _eval_profile(profile, w, points, idx)
        with np.errstate(divide="ignore"):
            return np.where(e > 0, log_expm1(np.where(e > 0, e, 1.0)), -np.inf) - np.log(w) - log_a

    all_idx = np.arange(n)
    e1 = _eval_profile(profile, np.ones(n), points, all_idx)
    if np.any(e1 > eps * (1 + 1e-15)):
        i = int(np.argmax(e1))
        raise ValueError(f"Problem 7 is infeasible: record {i} has eps(1, x) = {e1[i]:g} > eps* = {eps:g} "
                         "(Assumption 8)")
    lo = np.zeros(n)             # log2 w, feasible
    hi = np.ones(n)
    active = np.ones(n, dtype=bool)
    while np.any(active):        # doubling bracket
        idx = np.flatnonzero(active)
        f = phi(np.exp2(hi[idx]), idx)
        feas = f <= 0
        lo[idx[feas]] = hi[idx[feas]]
        hi[idx[feas]] = hi[idx[feas]] + 1.0      # w doubles
        active[idx[~feas]] = False
        if np.any(hi[active] > _MAX_LOG2_W):
            i = int(np.flatnonzero(active & (hi > _MAX_LOG2_W))[0])
            raise ValueError(f"Problem 7 is unbounded for record {i}: its loss stays below log1p(expm1(eps*)·w)"
                             f" up to w = 2**{_MAX_LOG2_W} (the profile grows too slowly; Assumption 9)")
    # bisection in log2 w
    tol = rtol / math.log(2)
    for _ in range(200):
        gap = hi - lo
        act = gap > tol * np.maximum(1.0, np.abs(hi))
        if not np.any(act):
            break
        idx = np.flatnonzero(act)
        mid = 0.5 * (lo[idx] + hi[idx])
        f = phi(np.exp2(mid), idx)
        feas = f <= 0
        lo[idx[feas]] = mid[feas]
        hi[idx[~feas]] = mid[~feas]
    return np.exp2(lo)


def amplified_loss(q, slopes=None, profile: Callable | None = None, points=None) -> np.ndarray:
    """ψ_i = log1p(q_i·expm1(ε(1/q_i, x_i))) (Theorem 6), for any probabilities q in (0, 1].

    Give ``slopes`` (linear profiles ε = c_i·w) or ``profile`` and ``points``. Computed in log-space.
    """
    q = V.vector("q", np.atleast_1d(q))
    if np.any(q <= 0) or np.any(q > 1):
        raise ValueError("q (sampling probabilities) must be in (0, 1]")
    if slopes is not None:
        c = V.nonnegative_vector("slopes", np.atleast_1d(slopes), length=q.size)
        e = c / q
    elif profile is not None and points is not None:
        if len(points) != q.size:
            raise ValueError(f"points has {len(points)} records, q has {q.size}")
        e = _eval_profile(profile, 1.0 / q, points)
    else:
        raise ValueError("give slopes, or profile and points")
    with np.errstate(divide="ignore"):
        le = np.where(e > 0, log_expm1(np.where(e > 0, e, 1.0)), -np.inf)
    return np.logaddexp(0.0, np.log(q) + le)


def uniform_probabilities(n, m) -> np.ndarray:
    """q_i = m/n for n records and expected size m (0 < m ≤ n)."""
    n = V.integer("n", n, minimum=1)
    m = V.positive("m", m, upper=float(n))
    return np.full(n, m / n)


def coreset_probabilities(points, m, lam: float = 0.5) -> np.ndarray:
    """The coreset-based distribution of Fay et al. §4 (after Bachem et al.'s lightweight coreset):
    ``q(x) = λ·m/n + (1 − λ)·m·‖x‖₂² / (n·mean‖x‖₂²)`` (data assumed centred), Σ q = m.

    Raises when some q would exceed 1 (m too large for this data).
    """
    X = np.asarray(points, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or X.shape[0] == 0 or not np.all(np.isfinite(X)):
        raise ValueError("points must be a finite (n, d) array")
    n = X.shape[0]
    m = V.positive("m", m, upper=float(n))
    lam = V.probability("lam", lam, closed_upper=True)
    sq = np.sum(X * X, axis=1)
    mean_sq = float(np.mean(sq))
    if mean_sq == 0:
        return np.full(n, m / n)
    q = lam * m / n + (1 - lam) * m * sq / (n * mean_sq)
    if np.any(q > 1 + 1e-12):
        raise ValueError(f"coreset probabilities exceed 1 (max {q.max():.4g}); choose m <= "
                         f"{m / q.max():.6g} or a larger lam")
    return np.minimum(q, 1.0)


# ---------------------------------------------------------------------------------- the model
class ImportanceSampling(Model):
    """Problem 7 of Fay et al.: minimum expected sample size with every record's loss ψ_i ≤ ε*.

    Parameters
    ----------
    epsilon : the target ε* > 0
    slopes : linear profiles ε(w, x_i) = c_i·w, 0 < c_i ≤ ε* (e.g. ‖x_i‖₁/b for the Laplace weighted sum)
    profile, points : a general profile ``profile(w, x) -> ε ≥ 0`` and the records (a sequence or an
        array whose first axis indexes records); ``profile`` may be vectorised over (w array, points).
    """

    def __init__(self, epsilon, slopes=None, profile: Callable | None = None, points=None, name=""):
        self.epsilon = V.positive("epsilon", epsilon)
        if (slopes is None) == (profile is None):
            raise ValueError("give exactly one of slopes (linear profiles) or profile (with points)")
        self.slopes = None
        self.profile = None
        self.points = None
        if slopes is not None:
            if points is not None:
                raise ValueError("points are only used with a general profile")
            c = V.vector("slopes", np.atleast_1d(slopes))
            if np.any(c <= 0):
                raise ValueError(f"slopes must be > 0, got min {c.min():g} (a record with zero loss has no "
                                 "minimum q > 0)")
            if np.any(c > self.epsilon):
                i = int(np.argmax(c))
                raise ValueError(f"Problem 7 is infeasible: slopes[{i}] = eps(1, x_{i}) = {c[i]:g} exceeds "
                                 f"eps* = {self.epsilon:g}; even q = 1 violates the target")
            self.slopes = c
            self.n = c.size
        else:
            if not callable(profile):
                raise TypeError("profile must be callable as profile(w, x)")
            if points is None or len(points) == 0:
                raise ValueError("a general profile needs points (the records), non-empty")
            self.profile = profile
            self.points = points
            self.n = len(points)
            e1 = _eval_profile(profile, np.ones(self.n), points)
            if np.any(e1 > self.epsilon * (1 + 1e-15)):
                i = int(np.argmax(e1))
                raise ValueError(f"Problem 7 is infeasible: record {i} has eps(1, x) = {e1[i]:g} > eps* = "
                                 f"{self.epsilon:g}; even q = 1 violates the target")
        self.name = str(name)

    @classmethod
    def laplace_sum(cls, points, noise_scale, epsilon, norm: float = 1, name: str = "") -> "ImportanceSampling":
        """The Laplace weighted-sum mechanism: ε(w, x) = w·‖x‖_p / b (Fay et al. §3.3)."""
        X = np.asarray(points, dtype=float)
        if X.ndim == 1:
            X = X[:, None]
        b = V.positive("noise_scale", noise_scale)
        return cls(epsilon, slopes=np.linalg.norm(X, ord=norm, axis=1) / b, name=name)

    @property
    def linear(self) -> bool:
        return self.slopes is not None

    def __repr__(self) -> str:
        kind = "linear" if self.linear else "general"
        return f"ImportanceSampling(n={self.n}, epsilon={self.epsilon:g}, profile={kind})"

    # ------------------------------------------------------------------ evaluation
    def loss(self, w) -> np.ndarray:
        """ε(w_i, x_i) per record before sampling."""
        w = V.vector("w", np.atleast_1d(w), length=self.n)
        if self.linear:
            return self.slopes * w
        return _eval_profile(self.profile, w, self.points)

    def amplified_loss(self, q) -> np.ndarray:
        """ψ_i for probabilities q (Theorem 6)."""
        if self.linear:
            return amplified_loss(q, slopes=self.slopes)
        return amplified_loss(q, profile=self.profile, points=self.points)

    def optimal_weights(self, method: str = "auto") -> np.ndarray:
        """w* per record: ``"lambert"`` (linear only), ``"bisection"``, or ``"auto"``."""
        method = V.choice("method", method, ("auto", "lambert", "bisection"))
        if method == "lambert" and not self.linear:
            raise ValueError("method 'lambert' needs linear profiles (slopes)")
        if self.linear and method in ("auto", "lambert"):
            return linear_optimal_weights(self.slopes, self.epsilon)
        if self.linear:
            c = self.slopes
            return bisect_optimal_weights(lambda w, x: np.asarray(x) * w, c, self.epsilon)
        return bisect_optimal_weights(self.profile, self.points, self.epsilon)

    def make_solution(self, q, *, status=Status.OPTIMAL, backend="", solver="", message="",
                      extra: dict[str, Any] | None = None) -> Solution:
        q = np.asarray(q, dtype=float)
        psi = self.amplified_loss(q)
        viol = float(np.max(psi) - self.epsilon)
        details = {"weights": 1.0 / q, "expected_size": float(q.sum()), "psi": psi,
                   "max_psi": float(np.max(psi)), "max_violation": max(0.0, viol), "epsilon_star": self.epsilon}
        details.update(extra or {})
        cert = Certificate(kind="kkt", optimal=status == Status.OPTIMAL and viol <= 1e-9 * self.epsilon,
                           tolerance=1e-9, slack=-viol,
                           message=f"max psi - eps* = {viol:.3e}")
        return Solution(status=status, objective=float(q.sum()), x=q, certificate=cert, backend=backend,
                        solver=solver, model="ImportanceSampling", message=message, details=details)

    def report(self, solution: Solution) -> str:
        from ..report import header, table
        lines = header(self, solution)
        if solution.x is None:
            return "\n".join(lines)
        q = solution.x
        uni = uniform_probabilities(self.n, float(q.sum()))
        psi_u = self.amplified_loss(uni)
        rows = [["privacy-constrained", float(q.sum()), float(q.min()), float(q.max()),
                 float(np.max(solution.details["psi"]))],
                ["uniform (same size)", float(uni.sum()), float(uni[0]), float(uni[0]), float(np.max(psi_u))]]
        lines.append("")
        lines.append(table(["sampling", "E[size]", "min q", "max q", "max psi"], rows,
                           ["s", ".6g", ".4g", ".4g", ".6g"]))
        lines.append("")
        lines.append(f"records             : {self.n}")
        lines.append(f"target eps*         : {self.epsilon:g}")
        if solution.certificate is not None:
            lines.append(f"certificate         : {solution.certificate}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------- calibrations
def _expected_size(eps, slopes=None, profile=None, points=None) -> float:
    if slopes is not None:
        return float(np.sum(1.0 / linear_optimal_weights(slopes, eps)))
    return float(np.sum(1.0 / bisect_optimal_weights(profile, points, eps)))


def _bisect_decreasing(f, lo, target, what):
    """Find x ≥ lo (log-space) with f(x) = target for f non-increasing, f(lo) ≥ target."""
    llo = math.log(lo)
    lhi = llo + 1.0
    while f(math.exp(lhi)) > target:
        llo = lhi
        lhi += max(1.0, 2 * (lhi - math.log(lo)))
        if lhi > 700:
            raise ValueError(f"no {what} below e**700 reaches the target expected size")
    for _ in range(200):
        mid = 0.5 * (llo + lhi)
        if f(math.exp(mid)) > target:
            llo = mid
        else:
            lhi = mid
        if lhi - llo <= 1e-14 * max(1.0, abs(lhi)):
            break
    return math.exp(lhi)


def calibrate_epsilon(m, slopes=None, profile: Callable | None = None, points=None) -> float:
    """The target ε* whose privacy-constrained distribution has expected size ``m``.

    Σ q_i(ε*) is non-increasing in ε*; the smallest admissible ε* is max_i ε(1, x_i) (Assumption 8),
    where the expected size is largest. Raises if m exceeds that size or m ≤ 0. The returned ε* gives
    Σ q ≤ m (upper end of the final bisection bracket).
    """
    if slopes is not None:
        c = V.positive_vector("slopes", np.atleast_1d(slopes))
        n, e0 = c.size, float(c.max())
        size = lambda e: _expected_size(e, slopes=c)  # noqa: E731
    elif profile is not None and points is not None:
        n = len(points)
        e1 = _eval_profile(profile, np.ones(n), points)
        e0 = float(e1.max())
        if e0 <= 0:
            raise ValueError("every record has zero loss at w = 1; epsilon* cannot be calibrated")
        size = lambda e: _expected_size(e, profile=profile, points=points)  # noqa: E731
    else:
        raise ValueError("give slopes, or profile and points")
    m = V.positive("m", m, upper=float(n))
    m0 = size(e0)
    if m > m0 * (1 + 1e-12):
        raise ValueError(f"expected size m = {m:g} is unreachable: the smallest admissible eps* = {e0:g} "
                         f"(max eps(1, x)) already gives {m0:.6g}; choose m <= {m0:.6g}")
    if m >= m0:
        return e0
    return _bisect_decreasing(size, e0, m, "epsilon*")


def calibrate_noise_scale(epsilon, m, sensitivities) -> float:
    """Noise scale b of a linear profile ε(w, x_i) = s_i·w/b (e.g. s_i = ‖x_i‖₁ for the Laplace sum)
    whose privacy-constrained distribution at ε* has expected size ``m``.

    Σ q_i is non-increasing in b; the smallest admissible b is max s_i/ε*. Raises when m is larger than
    the expected size there, or m ≤ 0.
    """
    eps = V.positive("epsilon", epsilon)
    s = V.positive_vector("sensitivities", np.atleast_1d(sensitivities))
    m = V.positive("m", m, upper=float(s.size))
    b0 = float(s.max()) / eps
    size = lambda b: _expected_size(eps, slopes=np.minimum(s / b, eps))  # noqa: E731
    m0 = size(b0)
    if m > m0 * (1 + 1e-12):
        raise ValueError(f"expected size m = {m:g} is unreachable at eps* = {eps:g}: the smallest admissible "
                         f"noise scale b = {b0:g} already gives {m0:.6g}")
    if m >= m0:
        return b0
    return _bisect_decreasing(size, b0, m, "noise scale")


# ---------------------------------------------------------------------------------- model files
from ..modelfile import ModelFileError, register_family, take  # noqa: E402


@register_family("importance_sampling")
def _load_importance(data: dict, base) -> ImportanceSampling:
    """``family = "importance_sampling"``: epsilon and either ``slopes`` (linear profiles) or
    ``points`` + ``noise_scale`` [+ ``norm``] (Laplace weighted sum, slopes ‖x‖_p/b)."""
    take(data, {"name", "epsilon", "slopes", "points", "noise_scale", "norm"}, {"epsilon"})
    if "slopes" in data:
        if "points" in data or "noise_scale" in data:
            raise ModelFileError("give either slopes, or points and noise_scale")
        return ImportanceSampling(data["epsilon"], slopes=data["slopes"], name=data.get("name", ""))
    if "points" not in data or "noise_scale" not in data:
        raise ModelFileError("importance_sampling needs slopes, or points and noise_scale")
    return ImportanceSampling.laplace_sum(data["points"], data["noise_scale"], data["epsilon"],
                                          norm=data.get("norm", 1), name=data.get("name", ""))
