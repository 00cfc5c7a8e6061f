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
from typing import Callable

import numpy as np
from scipy.special import lambertw

from .. import _validate as V
from ..options import default_rel_gap
from ..privacy.amplification import log_expm1
from ..result import Certificate, Solution, Status
from ..numerics import NotBracketed, bisect, widen
from .base import Model

_MAX_LOG2_W = 1000  # doubling bracket stops at w = 2**1000
#: smallest linear loss c_i = ε(1, x_i): q* ≥ c_i/(2·log(expm1(ε*)/c_i)) stays a normal double above it
MIN_SLOPE = 1e-300
#: a point is private when every ψ_i ≤ ε*·(1 + FEASIBILITY_RTOL) (a few ulps of evaluating ψ)
FEASIBILITY_RTOL = 1e-12
#: a private point is reported optimal when its proven relative gap is at most this (backend option rel_gap)
DEFAULT_REL_GAP = default_rel_gap("exact", "ImportanceSampling")   # dpopt.options.FAMILY_REL_GAP


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


def _check_slopes(c: np.ndarray, eps: float) -> None:
    if np.any(c < MIN_SLOPE):
        i = int(np.argmin(c))
        raise ValueError(f"slopes must be >= {MIN_SLOPE:g} (smaller losses give probabilities q* below the "
                         f"double-precision range; a zero-loss record has no minimum q > 0), "
                         f"got slopes[{i}] = {c[i]:g}")
    if np.any(c > eps):
        i = int(np.argmax(c))
        raise ValueError(f"Problem 7 is infeasible: slopes[{i}] = eps(1, x_{i}) = {c[i]:g} exceeds "
                         f"eps* = {eps:g}; even q = 1 violates the target (Assumption 8)")


def log_target(epsilon: float, c: np.ndarray) -> np.ndarray:
    """L = log(expm1(ε*)/c), accurate also when c is close to ε* (then a/c − 1 is tiny and
    log_expm1(ε*) − log c would keep only the absolute accuracy of ~1e-16·|log c|): there
    a/c − 1 = ((ε* − c) + (expm1(ε*) − ε*))/c, with ε* − c exact and expm1(ε*) − ε* from its series."""
    eps = float(epsilon)
    c = np.asarray(c, dtype=float)
    if eps < 0.1:
        k = np.arange(2, 12)
        tail = math.fsum(eps ** int(j) / math.factorial(int(j)) for j in k)   # expm1(eps) − eps
    else:
        tail = math.expm1(min(eps, 700.0)) - eps if eps < 30 else math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        rel = ((eps - c) + tail) / c
        near = rel < 0.5
        out = np.where(near, np.log1p(np.where(near, rel, 0.0)), float(log_expm1(eps)) - np.log(c))
    return out


def linear_optimal_weights(slopes, epsilon, *, polish: bool = True) -> np.ndarray:
    """Problem 7 for linear profiles ε(w, x_i) = c_i·w: the optimal weights w_i* ≥ 1 (vectorised).

    Lambert-W closed form, then (``polish=True``) safeguarded Newton steps in log-space on the same
    equation log h(s) = L, h(s) = expm1(s)/s, L = log(expm1(ε*)/c), to restore the digits lost near the
    branch point. The root lies in [L, 2L] for every L > 0 (s/2 ≤ log h(s) ≤ s), which brackets the
    iteration: at most 200 steps, each halving the bracket when Newton leaves it.
    Requires MIN_SLOPE ≤ c_i ≤ ε* (raises otherwise).
    """
    eps = V.epsilon("epsilon", epsilon)
    c = V.vector("slopes", slopes, scalar_ok=True)
    _check_slopes(c, eps)
    L = log_target(eps, c)            # log(a/c) > 0, the target of log h(s)
    # Lambert W start where representable
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        r = np.exp(-L)
        z = -np.exp(-L - r)
        s0 = np.where(z < 0, -lambertw(z, -1).real - r, np.nan)
    lo, hi = L.copy(), 2.0 * L
    start = np.clip(L + np.log1p(L), lo, hi)       # large-L asymptote, kept inside the bracket
    s = np.where(np.isfinite(s0) & (s0 > 0), s0, start)
    if polish:
        s = np.clip(s, lo, hi)
        for _ in range(200):
            g = _log_h(s) - L
            lo = np.where(g <= 0, np.maximum(lo, s), lo)
            hi = np.where(g >= 0, np.minimum(hi, s), hi)
            with np.errstate(divide="ignore", invalid="ignore"):
                sn = s - g / _dlog_h(s)
            bad = ~np.isfinite(sn) | (sn <= lo) | (sn >= hi)
            sn = np.where(bad, 0.5 * (lo + hi), sn)
            done = (np.abs(sn - s) <= 4e-16 * s) | (hi - lo <= 4e-16 * hi)
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
    eps = V.epsilon("epsilon", epsilon)
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
    # bisection in log2 w, elementwise
    lo, _ = bisect(lambda m: phi(np.exp2(m), all_idx) <= 0, lo, hi, rtol=rtol / math.log(2), max_iter=200)
    return np.exp2(lo)


def amplified_loss(q, slopes=None, profile: Callable | None = None, points=None) -> np.ndarray:
    """ψ_i = log1p(q_i·expm1(ε(1/q_i, x_i))) (Theorem 6), for any probabilities q in (0, 1].

    Give ``slopes`` (linear profiles ε = c_i·w) or ``profile`` and ``points``. Computed in log-space.
    """
    q = V.vector("q", q, scalar_ok=True)
    if np.any(q <= 0) or np.any(q > 1):
        raise ValueError("q (sampling probabilities) must be in (0, 1]")
    if slopes is not None:
        c = V.nonnegative_vector("slopes", slopes, length=q.size, scalar_ok=True)
        e = c / q
    elif profile is not None and points is not None:
        if len(points) != q.size:
            raise ValueError(f"points has {len(points)} records, q has {q.size}")
        e = _eval_profile(profile, 1.0 / q, points)
    else:
        raise ValueError("give slopes, or profile and points")
    with np.errstate(divide="ignore", over="ignore"):
        le = np.where(e > 0, log_expm1(np.where(e > 0, e, 1.0)), -np.inf)
        psi = np.logaddexp(0.0, np.log(q) + le)
    if not np.all(np.isfinite(psi)):
        j = int(np.flatnonzero(~np.isfinite(psi))[0])
        raise ValueError(f"psi overflows double precision at record {j} (q = {q[j]:g}, loss before sampling "
                         f"{e[j]:g}): q too small for its slope")
    return psi


def uniform_probabilities(n, m) -> np.ndarray:
    """q_i = m/n for n records and expected size m (0 < m ≤ n)."""
    n = V.integer("n", n, minimum=1, maximum=10**8)
    m = V.positive("m", m, upper=float(n))
    return np.full(n, m / n)


def coreset_probabilities(points, m, lam: float = 0.5) -> np.ndarray:
    """The coreset-based distribution of Fay et al. §4 (after Bachem et al.'s lightweight coreset):
    ``q(x) = λ·m/n + (1 − λ)·m·‖x‖₂² / (n·mean‖x‖₂²)`` (data assumed centred), Σ q = m.

    Raises when some q would exceed 1 (m too large for this data).
    """
    X = V._as_float_array("points", points)
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
        self.epsilon = V.epsilon("epsilon", epsilon)
        if (slopes is None) == (profile is None):
            raise ValueError("give exactly one of slopes (linear profiles) or profile (with points)")
        self.slopes = None
        self.profile = None
        self.points = None
        if slopes is not None:
            if points is not None:
                raise ValueError("points are only used with a general profile")
            c = V.vector("slopes", slopes, scalar_ok=True)
            _check_slopes(c, self.epsilon)
            self.slopes = c
            self.n = c.size
        else:
            if not callable(profile):
                raise TypeError("profile must be callable as profile(w, x)")
            if isinstance(points, (str, bytes, dict)) or not hasattr(points, "__len__"):
                raise TypeError(f"points must be a sequence or an array of records, got {type(points).__name__}")
            if len(points) == 0:
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
        """The Laplace weighted-sum mechanism: ε(w, x) = w·‖x‖_p / b (Fay et al. §3.3).

        ``norm`` is p ≥ 1 (``math.inf`` for the max norm); p < 1 is not a norm and would understate ‖x‖.
        """
        X = V._as_float_array("points", points)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.size == 0:
            raise ValueError(f"points must be a non-empty (records, dimensions) table, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("points must be finite (no NaN or infinity)")
        p = V.real("norm", norm) if not (isinstance(norm, float) and norm == math.inf) else math.inf
        if not p >= 1:
            raise ValueError(f"norm must be a number >= 1 (p of the l_p norm, or inf), got {p:g}")
        b = V.positive("noise_scale", noise_scale)
        with np.errstate(over="ignore", under="ignore"):
            norms = np.linalg.norm(X, ord=p, axis=1)
            slopes = norms / b
        small = np.flatnonzero((slopes < MIN_SLOPE) & (norms > 0))
        if small.size:
            raise ValueError(f"noise_scale = {b:g} is too large for points[{int(small[0])}]: its loss "
                             f"‖x‖/noise_scale = {slopes[small[0]]:g} is below {MIN_SLOPE:g}")
        zero = np.flatnonzero(slopes == 0)
        if zero.size:
            raise ValueError(f"points[{int(zero[0])}] has norm 0: a record with zero privacy loss has no "
                             "minimum sampling probability q > 0 (drop it or give it q = 0 yourself)")
        if not np.all(np.isfinite(slopes)):
            raise ValueError("points: a record's norm divided by noise_scale overflows; rescale the data")
        return cls(epsilon, slopes=slopes, name=name)

    @property
    def linear(self) -> bool:
        return self.slopes is not None

    def __repr__(self) -> str:
        kind = "linear" if self.linear else "general"
        return f"ImportanceSampling(n={self.n}, epsilon={self.epsilon:g}, profile={kind})"

    # ------------------------------------------------------------------ evaluation
    def loss(self, w) -> np.ndarray:
        """ε(w_i, x_i) per record before sampling."""
        w = V.vector("w", w, length=self.n, scalar_ok=True)
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

    def _psi_at(self, q: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """ψ of the records ``idx`` at probabilities ``q`` (one per record of ``idx``)."""
        if self.linear:
            return amplified_loss(q, slopes=self.slopes[idx])
        return amplified_loss(q, profile=self.profile, points=_take(self.points, idx))

    def repair(self, q) -> np.ndarray:
        """Raise each q_i whose ψ_i exceeds ε*(1 + FEASIBILITY_RTOL) just enough that ψ_i ≤ ε*.

        First the steps q_i·(1 + τ), τ = 1e-15, 1e-14, ..., 1e308 (capped at q_i = 1, which meets the target
        by Assumption 8, checked when the model is built), then 60 bisection steps in τ between the last
        failing and the first private step. At most ~385 vectorised evaluations of ψ."""
        q = np.clip(np.asarray(q, dtype=float), np.finfo(float).tiny, 1.0)
        bad = np.flatnonzero(self.amplified_loss(q) > self.epsilon * (1 + FEASIBILITY_RTOL))
        if not bad.size:
            return q
        base = q[bad].copy()
        lo = np.zeros(bad.size)                 # τ known to fail
        hi = np.full(bad.size, np.inf)          # τ known to be private
        for k in range(-15, 309):
            todo = np.flatnonzero(np.isinf(hi))
            if not todo.size:
                break
            tau = 10.0 ** k
            ok = self._psi_at(np.minimum(1.0, base[todo] * (1.0 + tau)), bad[todo]) <= self.epsilon
            hi[todo[ok]] = tau
            lo[todo[~ok]] = tau
        hi = np.where(np.isinf(hi), 1.0 / base, hi)     # q = 1
        lo, hi = bisect(lambda t: self._psi_at(np.minimum(1.0, base * (1.0 + t)), bad) > self.epsilon, lo, hi,
                        max_iter=60)
        q[bad] = np.minimum(1.0, base * (1.0 + hi))
        return q

    def lower_bounds(self, q) -> np.ndarray:
        """Per record, a proven lower bound on the optimal q_i*: the largest q_i·f (f = 1, 1 − 1e-15, ...,
        1 − 0.1, then 10^-k) whose ψ_i exceeds ε*. The private q_i form the interval [q_i*, 1] (ψ_i
        decreases in q_i for linear profiles; under the paper's Assumption 11 for a general profile), so a
        q with ψ > ε* lies below q_i*. 0 when no step is found."""
        q = np.asarray(q, dtype=float)
        out = np.zeros_like(q)
        todo = np.arange(q.size)
        factors = np.concatenate([[1.0], 1.0 - 10.0 ** np.arange(-15.0, 0.0), 10.0 ** -np.arange(1.0, 320.0)])
        for f in factors:
            if not todo.size:
                break
            cand = q[todo] * f
            live = cand >= np.finfo(float).tiny
            todo, cand = todo[live], cand[live]
            if not todo.size:
                break
            above = self._psi_at(cand, todo) > self.epsilon
            out[todo[above]] = cand[above]
            todo = todo[~above]
        return out

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: check a backend's probabilities ``x`` against the model itself
        and package them (the model proves the gap, so a backend's ``certificate`` is not accepted;
        ``rel_gap`` defaults to DEFAULT_REL_GAP).

        The point must lie in (0, 1] with every ψ_i ≤ ε*(1 + FEASIBILITY_RTOL); otherwise the Solution is
        ``error`` with the violation stated and no point (a backend should :meth:`repair` first). A
        private point is certified by :meth:`lower_bounds`: it is ``optimal`` when the proven relative
        gap is at most ``rel_gap``, else ``feasible`` (a ``time_limit`` status is kept).
        """
        if n is not None or x is None or certificate is not None:
            raise TypeError("importance sampling's answer is probabilities: make_solution(x=q); the model "
                            "certifies them itself (no certificate argument)")
        rel_gap = DEFAULT_REL_GAP if rel_gap is None else rel_gap
        extra = details
        q = np.asarray(x, dtype=float)
        base = dict(backend=backend, solver=solver, model="ImportanceSampling")
        if q.shape != (self.n,) or not np.all(np.isfinite(q)) or np.any(q <= 0) or np.any(q > 1):
            return Solution(status=Status.ERROR, message=f"{message}; the backend returned probabilities "
                            "outside (0, 1] (or of the wrong length)".lstrip("; "), **base)
        psi = self.amplified_loss(q)
        excess = float(np.max(psi / self.epsilon - 1.0))
        details = {"weights": 1.0 / q, "expected_size": math.fsum(q), "psi": psi,
                   "max_psi": float(np.max(psi)), "max_violation": max(0.0, float(np.max(psi)) - self.epsilon),
                   "epsilon_star": self.epsilon}
        details.update(extra or {})
        if excess > FEASIBILITY_RTOL:
            i = int(np.argmax(psi))
            details["rejected_q"] = q
            return Solution(status=Status.ERROR, details=details, **base,
                            message=(f"{message}; " if message else "") +
                            f"the point breaks the privacy target: psi[{i}] = {psi[i]:.17g} > eps* = "
                            f"{self.epsilon:.17g} (relative excess {excess:.3e} > {FEASIBILITY_RTOL:g}); not returned")
        objective = math.fsum(q)
        bound = math.fsum(self.lower_bounds(q))
        gap = max(0.0, (objective - bound) / objective)
        note = "" if self.linear else " (valid under the paper's Assumption 11: exp(eps(w, x)) convex in w)"
        cert = Certificate(kind="gap", optimal=bool(gap <= rel_gap), lower_bound=bound, gap=gap, tolerance=rel_gap,
                           slack=-excess, message=f"max psi/eps* - 1 = {excess:.3e}; lower bound from private-"
                                                  f"probability intervals{note}")
        if status in (Status.OPTIMAL, Status.FEASIBLE):
            status = Status.OPTIMAL if cert.optimal else Status.FEASIBLE
            if not cert.optimal:
                message = (f"{message}; " if message else "") + f"proven relative gap {gap:.3e} > rel_gap {rel_gap:g}"
        return Solution(status=status, objective=objective, x=q, certificate=cert, message=message,
                        details=details, **base)


# ---------------------------------------------------------------------------------- calibrations
def _expected_size(eps, slopes=None, profile=None, points=None) -> float:
    if slopes is not None:
        return float(np.sum(1.0 / linear_optimal_weights(slopes, eps)))
    return float(np.sum(1.0 / bisect_optimal_weights(profile, points, eps)))


def _calibrate(f, lo, hi, target, what, where="", why_lo=""):
    """x in [lo, hi] with f(x) = target for f non-increasing (log-space bisection); ``lo`` itself when
    f(lo) ≤ target, and an error when even f(lo) is short of the target (``lo`` is the smallest admissible x).

    The bracket grows geometrically in log x from ``lo`` but never beyond ``hi`` (where the model stops
    being defined); raises when even f(hi) exceeds the target. Returns the upper end of the final bracket,
    so f(x) ≤ target there. At most ~12 expansion and 200 bisection steps."""
    f_lo = f(lo)
    if target > f_lo * (1 + 1e-12):
        raise ValueError(f"expected size m = {target:g} is unreachable{where}: the smallest admissible {what} = "
                         f"{lo:g}{why_lo} already gives {f_lo:.6g}; choose m <= {f_lo:.6g}")
    if target >= f_lo:
        return lo
    above = lambda lx: f(math.exp(lx)) > target  # noqa: E731
    llo, top = math.log(lo), math.log(hi)
    try:
        llo, lhi = widen(above, llo, min(llo + 1.0, top), limit=top, step=1.0, grow=2.0)
    except NotBracketed:
        raise ValueError(f"the target expected size {target:g} is unreachable: even {what} = {hi:g} (the "
                         f"largest supported) gives {f(hi):.6g}") from None
    llo, lhi = bisect(above, llo, lhi, rtol=1e-14, max_iter=200)
    return math.exp(lhi)


def calibrate_epsilon(m, slopes=None, profile: Callable | None = None, points=None) -> float:
    """The target ε* whose privacy-constrained distribution has expected size ``m``.

    Σ q_i(ε*) is non-increasing in ε*; the smallest admissible ε* is max_i ε(1, x_i) (Assumption 8),
    where the expected size is largest. Raises if m exceeds that size or m ≤ 0. The returned ε* gives
    Σ q ≤ m (upper end of the final bisection bracket).
    """
    if slopes is not None:
        c = V.positive_vector("slopes", slopes, scalar_ok=True)
        n, e0 = c.size, float(c.max())
        _check_slopes(c, V.EPS_MAX)
        size = lambda e: _expected_size(e, slopes=c)  # noqa: E731
    elif profile is not None and points is not None:
        n = len(points)
        e1 = _eval_profile(profile, np.ones(n), points)
        e0 = float(e1.max())
        if e0 <= 0:
            raise ValueError("every record has zero loss at w = 1; epsilon* cannot be calibrated")
        if e0 > V.EPS_MAX:
            raise ValueError(f"a record has eps(1, x) = {e0:g} > {V.EPS_MAX:g}: no supported eps* admits it")
        size = lambda e: _expected_size(e, profile=profile, points=points)  # noqa: E731
    else:
        raise ValueError("give slopes, or profile and points")
    m = V.positive("m", m, upper=float(n))
    return _calibrate(size, max(e0, V.EPS_MIN), V.EPS_MAX, m, "epsilon*", why_lo=" (max eps(1, x))")


def calibrate_noise_scale(epsilon, m, sensitivities) -> float:
    """Noise scale b of a linear profile ε(w, x_i) = s_i·w/b (e.g. s_i = ‖x_i‖₁ for the Laplace sum)
    whose privacy-constrained distribution at ε* has expected size ``m``.

    Σ q_i is non-increasing in b; the smallest admissible b is max s_i/ε*. Raises when m is larger than
    the expected size there, or m ≤ 0.
    """
    eps = V.epsilon("epsilon", epsilon)
    s = V.positive_vector("sensitivities", sensitivities, scalar_ok=True)
    m = V.positive("m", m, upper=float(s.size))
    b0 = float(s.max()) / eps
    b_max = float(s.min()) / MIN_SLOPE          # beyond it some slope s_i/b falls below MIN_SLOPE
    if not b0 < b_max:
        raise ValueError(f"sensitivities span more than {eps / MIN_SLOPE:g}x (max/min); no noise scale keeps "
                         f"every slope s_i/b in [{MIN_SLOPE:g}, eps*]")
    size = lambda b: _expected_size(eps, slopes=np.minimum(s / b, eps))  # noqa: E731
    return _calibrate(size, b0, b_max, m, "noise scale", where=f" at eps* = {eps:g}")
