"""Sample size versus privacy: the SRS program of Hu, Drechsler & Kim (docs/sample_size.md).

An agency holds a population of ``N`` records with population variance ``S²`` and must release a
statistic with a central (ε, δ) guarantee. Releasing it from a simple random sample without
replacement of size ``n`` lets the mechanism spend the amplified nominal budget

    ε_n = log1p((N/n)·expm1(ε)),   δ_n = (N/n)·δ,

so with the Laplace mechanism and sensitivity Δ(n) the released estimate has variance

    V_n = (1 − n/N)·S²/n + 2·(Δ(n)/ε_n)²,      V_N = 2·(Δ(N)/ε)².

:class:`SampleSizeProgram` declares ``min_n V_n`` over the integers ``n_min ≤ n ≤ N`` (``n_min`` = ⌈N·δ⌉,
where δ_n ≤ 1 starts; 1 when δ = 0); backends
(``exact``: interval branch and bound or a vectorised scan; ``pyomo``: SCIP; ``scipy``: bounded
scalar search + rounding) solve it. The module also offers the paper's analysis functions: the noise
ratio r(ε, n/N) (eq. 8), the q-bound (eq. 5) and its inverse, and the "no gain" bound.

Sensitivity models (``sensitivity=``):

* ``"mean"`` — global sensitivity of the mean, ``Δ(n) = R/n`` (needs ``value_range=R``). Then both
  terms of V_n decrease in n and the optimum is always ``n* = N`` (the paper's "no gain").
* a positive number — constant Δ (the best case for sampling; an interior optimum may exist).
* a callable ``n -> Δ(n)`` (called with a float array of sizes when it accepts one, else element
  by element). Declare ``sensitivity_trend="nonincreasing"`` or ``"nondecreasing"`` to let the exact
  backend use branch and bound for any N; without a trend it scans every n (exact, up to a limit).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .. import _validate as V
from ..numerics import NotBracketed, bisect, widen
from ..privacy.amplification import nominal_epsilon
from ..privacy.mechanisms import get_mechanism, laplace_variance
from ..result import Certificate, Solution, Status
from .base import Model, honest_status

TRENDS = ("nonincreasing", "nondecreasing")
SAMPLE_SIZE_MECHANISMS = ("laplace", "gaussian")
MAX_N = 2 ** 53


# ---------------------------------------------------------------------------------- analysis
def _rate_array(rate, name="rate"):
    r = V._as_float_array(name, rate)
    if not np.all(np.isfinite(r)) or np.any(r <= 0) or np.any(r > 1):
        raise ValueError(f"{name} (sampling rate n/N) must be in (0, 1], got {rate!r}")
    return r


def _eps_array(epsilon, name="epsilon"):
    e = V._as_float_array(name, epsilon)
    if not np.all(np.isfinite(e)) or np.any(e <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")
    return e


def _out(x):
    return x[()] if np.ndim(x) == 0 else x


def noise_ratio(epsilon, rate):
    """Paper eq. (8): r(ε, n/N) = (n·ε_n / (N·ε))², the population-to-sample noise-variance ratio
    of the mean with global sensitivity.

    r < 1 means the sample mean needs *more* noise than the population mean. In exact arithmetic
    ``r < 1`` for every ε > 0 and rate < 1 (``q·log1p(c/q)`` increases in q), with r → 1 as ε → 0
    and r → rate² as ε → ∞; for small ε, ``r ≈ 1 − ε(1 − q)/q``. Vectorised.
    """
    e = _eps_array(epsilon)
    q = _rate_array(rate)
    en = nominal_epsilon(e, q)
    return _out((q * en / e) ** 2)


def epsilon_for_noise_ratio(rate, ratio=1.0, *, rtol: float = 1e-13):
    """The ε > 0 at which r(ε, rate) equals ``ratio`` (the r = 1 threshold curve of the paper's Fig. 5).

    r(·, q) decreases strictly from 1 (ε → 0) to q² (ε → ∞), so for ``q² < ratio < 1`` the answer is
    unique (found by bisection in log ε). For ``ratio = 1`` and ``rate < 1`` **there is no finite
    solution**: r < 1 for every ε > 0. The paper's Figure 5 curve (ε ≈ 2e-9 at rate 1e-4) comes from
    evaluating ``log(1 + (N/n)(e^ε − 1))`` naively, whose rounding error (~1e-16/ε) makes r wobble
    around 1; this function raises instead of reproducing that artefact. At ``rate = 1``, r ≡ 1 and
    every ε qualifies (raises too, with that explanation).
    """
    q = V.real("rate", rate)
    _rate_array(q)
    ratio = V.real("ratio", ratio)
    if q == 1.0:
        raise ValueError("at rate = 1 the noise ratio is identically 1 for every epsilon; no unique solution")
    if not q * q < ratio < 1.0:
        if ratio >= 1.0:
            raise ValueError(f"no epsilon > 0 gives noise ratio r = {ratio:g} at rate {q:g}: r(eps, q) < 1 for "
                             "every eps > 0 when q < 1 (r -> 1 only as eps -> 0; for small eps, "
                             "1 - r ~ eps*(1 - q)/q). Ask for a ratio slightly below 1 instead.")
        raise ValueError(f"ratio must be in (rate², 1) = ({q * q:g}, 1), got {ratio:g}")
    f = lambda le: float(noise_ratio(math.exp(le), q)) - ratio  # noqa: E731  decreasing in log eps
    above = lambda le: f(le) > 0  # noqa: E731  r still above the target: a larger eps is needed
    try:    # steps of 8 in log eps, up from 0 and then down
        lo, hi = widen(above, -8.0, 0.0, limit=690.0, step=8.0, grow=0.0)
        lo, hi = widen(above, lo, hi, up=False, limit=-690.0, step=8.0, grow=0.0)
    except NotBracketed as e:
        if e.side == "upper":
            raise ValueError("the epsilon for this ratio exceeds e**690") from None
        raise ValueError(f"at rate {q:g} the epsilon for ratio {ratio:g} is below e**-690 (outside double "
                         "precision)") from None
    lo, hi = bisect(above, lo, hi, xtol=rtol, max_iter=400)
    return math.exp(0.5 * (lo + hi))


def q_bound(epsilon, rate):
    """Paper eq. (5): q = 1 − ε²/ε_n² — with constant sensitivity, sampling can only help when the
    sampling variance is below q·V_N. Vectorised."""
    e = _eps_array(epsilon)
    t = e / nominal_epsilon(e, _rate_array(rate))
    return _out((1.0 - t) * (1.0 + t))


def rate_for_q_bound(epsilon, q, *, rtol: float = 1e-14):
    """The sampling rate at which eq. (5)'s bound equals ``q``: sampling variance ``q·V_N`` can only be
    beaten by rates *below* this value (paper: ε=3, q=0.6 → 16.77 %; ε=0.1 → 61.4 %).

    ``q_bound`` decreases strictly from 1 (rate → 0) to 0 (rate = 1); solved by bisection in log rate.
    """
    e = V.real("epsilon", epsilon)
    _eps_array(e)
    q = V.real("q", q)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q:g}")
    lo, hi = -745.0, 0.0   # log rate
    f = lambda lr: float(q_bound(e, math.exp(lr))) - q  # noqa: E731  decreasing in log rate
    if f(lo) <= 0:
        raise ValueError(f"q = {q:g} is not reached for any rate >= 1e-323 at epsilon = {e:g}")
    lo, hi = bisect(lambda lr: f(lr) > 0, lo, hi, xtol=rtol, max_iter=400)
    return math.exp(0.5 * (lo + hi))


def no_gain_bound(epsilon, rate, sensitivity_N):
    """Paper §4.1: no accuracy gain is possible (Laplace mechanism, any statistic, sensitivity not
    smaller in the sample than in the population) whenever the sampling variance is at least
    ``2·Δ_N²·(ε⁻² − ε_n⁻²)``. Returns that threshold. Vectorised."""
    e = _eps_array(epsilon)
    d = V._as_float_array("sensitivity_N", sensitivity_N)
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise ValueError(f"sensitivity_N must be finite and > 0, got {sensitivity_N!r}")
    en = nominal_epsilon(e, _rate_array(rate))
    with np.errstate(over="ignore", invalid="ignore"):
        out = 2.0 * d * d * (1.0 / e - 1.0 / en) * (1.0 / e + 1.0 / en)
    if not np.all(np.isfinite(out)):
        raise ValueError("the bound overflows double precision: epsilon too small or sensitivity_N too large")
    return _out(out)


# ---------------------------------------------------------------------------------- the model
class SampleSizeProgram(Model):
    """Optimal sample size when sampling amplifies privacy (SRS without replacement; docs/sample_size.md).

    Parameters
    ----------
    N : population size (integer, 1 ≤ N ≤ 2**53)
    S2 : population variance S² (≥ 0)
    epsilon : central ε > 0 every population member must receive
    delta : central δ in [0, 1); the release at n spends δ_n = N·δ/n ≤ 1, so only n ≥ N·δ is feasible (``n_min``)
    sensitivity : ``"mean"`` (Δ(n) = R/n, needs ``value_range``), a positive number, or a callable n → Δ(n)
    value_range : R, the known range of the values (only with ``sensitivity="mean"``)
    sensitivity_trend : for a callable: ``"nonincreasing"`` / ``"nondecreasing"`` in n, or None (unknown)
    mechanism : ``"laplace"`` (pure ε-DP noise, δ only bounds n) or ``"gaussian"`` (the analytic Gaussian at the
        amplified (ε_n, δ_n), δ > 0; docs/gaussian.md): V_n's noise term is then Δ(n)²/μ(ε_n, δ_n)², and only
        n > N·δ (δ_n < 1) is feasible
    """

    def __init__(self, N, S2, epsilon, delta=0.0, sensitivity="mean", value_range=None,
                 sensitivity_trend=None, name="", mechanism="laplace"):
        self.N = V.integer("N", N, minimum=1, maximum=MAX_N)
        self.S2 = V.real("S2", S2)
        if self.S2 < 0:
            raise ValueError(f"S2 (population variance) must be >= 0, got {self.S2:g}")
        self.epsilon = V.epsilon("epsilon", epsilon)
        self.delta = V.probability("delta", delta)
        self.mechanism = V.choice("mechanism", mechanism, SAMPLE_SIZE_MECHANISMS)
        self._gauss = None
        if self.mechanism == "gaussian":
            if not 0.0 < self.delta < 1.0:
                raise ValueError(f"delta must be in (0, 1) with mechanism 'gaussian', got {self.delta!r}")
            # the one definition of the amplified Gaussian noise (δ_n = N·δ/n follows ε_n), as the designs use it
            self._gauss = get_mechanism("gaussian", self.delta).for_design(self.epsilon, 1.0)
        self.value_range = None
        self.sensitivity_trend = None
        self._fn: Callable | None = None
        if isinstance(sensitivity, str):
            key = V.choice("sensitivity", sensitivity, ("mean",))
            if value_range is None:
                raise ValueError("sensitivity='mean' (global sensitivity R/n) needs value_range=R > 0, "
                                 "the known range of the values")
            self.value_range = V.positive("value_range", value_range)
            self.kind = key
            self.constant = None
        elif callable(sensitivity):
            self.kind = "callable"
            self.constant = None
            self._fn = sensitivity
            if sensitivity_trend is not None:
                self.sensitivity_trend = V.choice("sensitivity_trend", sensitivity_trend, TRENDS)
        else:
            self.kind = "constant"
            self.constant = V.real("sensitivity", sensitivity)
            if self.constant <= 0:
                raise ValueError(f"sensitivity must be > 0 (a constant Delta), 'mean', or a callable; "
                                 f"got {self.constant:g}")
        if self.kind != "mean" and value_range is not None:
            raise ValueError("value_range is only used with sensitivity='mean'")
        if self.kind != "callable" and sensitivity_trend is not None:
            raise ValueError("sensitivity_trend is only used with a callable sensitivity")
        self.name = str(name)
        if self.kind != "callable":
            # both parts of V_n are largest at n = 1 (sampling term decreasing; noise term decreasing for
            # 'mean', increasing only through eps_n for a constant Delta), so a finite V_1 bounds them all
            n1 = float(self.n_min) if self._gauss is not None else 1.0      # the smallest n that can be evaluated
            with np.errstate(over="ignore"):
                v1 = float(self.sampling_variance(n1) + self.noise_variance_at(n1))
            if not math.isfinite(v1):
                raise ValueError(f"V_n overflows double precision at n = 1 (S2 = {self.S2:g}, "
                                 f"{'value_range' if self.kind == 'mean' else 'sensitivity'} too large for "
                                 f"epsilon = {self.epsilon:g}); rescale the data")

    @property
    def n_min(self) -> int:
        """Smallest feasible sample size: the release at n spends δ_n = N·δ/n, which must be ≤ 1, so
        n ≥ N·δ (1 when δ = 0). Every backend searches [n_min, N]."""
        if self.delta == 0:
            return 1
        if self._gauss is not None:      # the Gaussian needs δ_n < 1 strictly: n > N·δ
            n = int(math.floor(self.N * self.delta)) + 1
            while n > 1 and self.N * self.delta / (n - 1) < 1.0:    # bounded: at most a step or two of rounding
                n -= 1
            while n < self.N and not self.N * self.delta / n < 1.0:
                n += 1
            return n
        n = min(self.N, max(1, math.ceil(self.N * self.delta)))
        for _ in range(4):      # agree with delta_n's own rounding of N·δ/n
            if n > 1 and self.N * self.delta / (n - 1) <= 1.0:
                n -= 1
            elif self.N * self.delta / n > 1.0 and n < self.N:
                n += 1
        return n

    @property
    def x_min(self) -> float:
        """Smallest real sample size of the relaxation: max(1, N·δ); with the Gaussian N·δ·(1 + 1e-12) (δ_n < 1
        strictly, with room for the round-off of δ_n = δ·expm1(ε_n)/expm1(ε))."""
        x = float(self.N) * self.delta
        if self._gauss is not None:
            x = x * (1.0 + 1e-12)
        return max(1.0, x)

    def __repr__(self) -> str:
        if self.kind == "mean":
            sens = f"'mean', value_range={self.value_range:g}"
        elif self.kind == "constant":
            sens = f"{self.constant:g}"
        else:
            sens = f"<callable{', ' + self.sensitivity_trend if self.sensitivity_trend else ''}>"
        return (f"SampleSizeProgram(N={self.N}, S2={self.S2:g}, epsilon={self.epsilon:g}, "
                f"delta={self.delta:g}, sensitivity={sens}"
                + (f", mechanism={self.mechanism!r})" if self.mechanism != "laplace" else ")"))

    # ------------------------------------------------------------------ the math (vectorised in n)
    def _n(self, n) -> np.ndarray:
        x = V._as_float_array("n", n)
        if not np.all(np.isfinite(x)) or np.any(x < 1) or np.any(x > self.N):
            raise ValueError(f"n must satisfy 1 <= n <= N = {self.N}")
        return x

    def sensitivity_at(self, n) -> np.ndarray:
        """Δ(n) (validated: finite and > 0)."""
        x = np.asarray(n, dtype=float)
        if self.kind == "mean":
            return self.value_range / x
        if self.kind == "constant":
            return np.full_like(x, self.constant)
        out = None
        try:
            out = np.asarray(self._fn(x), dtype=float)
            if out.shape != x.shape:
                out = None
        except Exception:  # not vectorised: call it element by element
            out = None
        if out is None:
            try:
                out = np.array([float(self._fn(float(v))) for v in np.ravel(x)]).reshape(x.shape)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"sensitivity callable failed or returned a non-number: {exc}") from None
        ok = np.isfinite(out) & (out > 0)
        if not np.all(ok):
            j = int(np.flatnonzero(~ok.ravel())[0])
            raise ValueError(f"sensitivity must be finite and > 0; the callable returned {out.ravel()[j]!r} "
                             f"at n = {np.ravel(x)[j]:g}")
        return out

    def epsilon_n(self, n) -> np.ndarray:
        """Nominal budget ε_n = log1p((N/n)·expm1(ε)) a sample of n may spend (via the privacy layer)."""
        x = np.asarray(n, dtype=float)
        return nominal_epsilon(self.epsilon, x / self.N)

    def delta_n(self, n) -> np.ndarray:
        """δ_n = N·δ/n (must be ≤ 1 for the release to be meaningful)."""
        return self.N * self.delta / np.asarray(n, dtype=float)

    def sampling_variance(self, n) -> np.ndarray:
        """(1 − n/N)·S²/n, written as S²·(N − n)/(n·N) (exactly 0 at n = N)."""
        x = np.asarray(n, dtype=float)
        return self.S2 * ((self.N - x) / x) / self.N

    def noise_variance_at(self, n) -> np.ndarray:
        """The noise variance at the amplified budget: 2·(Δ(n)/ε_n)² (Laplace), Δ(n)²·u(n) with
        u(n) = 1/μ(ε_n, δ_n)² (Gaussian)."""
        x = np.asarray(n, dtype=float)
        if self._gauss is not None:
            return self.sensitivity_at(x) ** 2 * self._unit_gaussian(x)
        return laplace_variance(self.epsilon_n(x), self.sensitivity_at(x))[0]

    def _unit_gaussian(self, x) -> np.ndarray:
        """u(n) = Var at Δ = 1 of the Gaussian at (ε_n, δ_n): increasing in n, since ε_n and δ_n both decrease
        in n and the calibrated σ decreases in each (docs/gaussian.md)."""
        x = np.asarray(x, dtype=float)
        if np.any(self.N * self.delta / x >= 1.0):
            raise ValueError(f"n must exceed N·delta = {self.N * self.delta:g} with the Gaussian mechanism (delta_n = "
                             f"N·delta/n < 1); feasible sample sizes are n >= n_min = {self.n_min}")
        return np.asarray(self._gauss.variance(self.epsilon_n(x), 1.0), dtype=float)

    def variance(self, n) -> np.ndarray:
        """V_n = sampling variance + noise variance (vectorised; n may be real in [1, N])."""
        x = self._n(n)
        return self.sampling_variance(x) + self.noise_variance_at(x)

    @property
    def V_N(self) -> float:
        """Variance of the full-population release, 2·(Δ(N)/ε)²."""
        return float(self.variance(float(self.N)))

    def noise_lower_bound(self, a, b) -> np.ndarray:
        """A lower bound of the noise term on every integer n in [a, b] (vectorised over intervals).

        mean: 2R²/(n ε_n)² decreases in n (n·ε_n increases) → value at b; constant: increases → at a;
        callable: Δ(n)²·ε_n⁻² with ε_n⁻² increasing → 2Δ(b)²/ε_a² (nonincreasing Δ) or value at a
        (nondecreasing Δ). Without a declared trend no bound exists (raises).
        """
        a = np.asarray(a, dtype=float)
        b = np.asarray(b, dtype=float)
        if self._gauss is not None:
            # Δ(n)²·u(n) with u increasing in n (docs/gaussian.md): the smallest Δ² on [a, b] times u(a)
            if self.kind == "mean" or self.sensitivity_trend == "nonincreasing":
                d = self.sensitivity_at(b)
            elif self.kind == "constant" or self.sensitivity_trend == "nondecreasing":
                d = self.sensitivity_at(a)
            else:
                raise ValueError("no interval bound for a callable sensitivity without sensitivity_trend")
            return d ** 2 * self._unit_gaussian(a)
        if self.kind == "mean":
            return self.noise_variance_at(b)
        if self.kind == "constant" or self.sensitivity_trend == "nondecreasing":
            return self.noise_variance_at(a)
        if self.sensitivity_trend == "nonincreasing":
            return laplace_variance(self.epsilon_n(a), self.sensitivity_at(b))[0]
        raise ValueError("no interval bound for a callable sensitivity without sensitivity_trend")

    @property
    def bounded(self) -> bool:
        """True when the exact backend can branch and bound (monotone noise parts known)."""
        return self.kind != "callable" or self.sensitivity_trend is not None

    def no_gain(self, n) -> np.ndarray:
        """True where the paper's §4.1 bound already rules out a gain at n (sampling var ≥ 2Δ_N²(ε⁻²−ε_n⁻²));
        Laplace noise only."""
        if self._gauss is not None:
            raise ValueError("no_gain is the paper's Laplace bound; with mechanism 'gaussian' compare variance(n) "
                             "with V_N instead")
        x = self._n(n)
        bound = 2.0 * self.sensitivity_at(float(self.N)) ** 2 * (1 / self.epsilon ** 2 - 1 / self.epsilon_n(x) ** 2)
        return self.sampling_variance(x) >= bound

    def curve(self, n=None, rates=None, points: int = 200) -> dict[str, np.ndarray]:
        """V_n and its parts over sample sizes (``n``), sampling rates (``rates``) or ``points`` log-spaced rates."""
        if n is None:
            if rates is None:
                x = np.unique(np.clip(np.round(np.geomspace(1.0, self.N, int(points))), 1, self.N))
            else:
                x = np.clip(np.round(_rate_array(rates) * self.N), 1, self.N)
        else:
            x = np.asarray(n, dtype=float)
        x = self._n(x)
        samp, noise = self.sampling_variance(x), self.noise_variance_at(x)
        return {"n": x, "rate": x / self.N, "variance": samp + noise, "sampling": samp, "noise": noise,
                "epsilon_n": self.epsilon_n(x), "gain": self.V_N / (samp + noise)}

    # ------------------------------------------------------------------ shared by the backends
    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate: Certificate | None = None,
                      rel_gap: float | None = None, backend: str = "", solver: str = "", message: str = "",
                      details: dict[str, Any] | None = None) -> Solution:
        """See :meth:`Model.make_solution`: an integer sample size ``n`` (or a real one ``x``, the relaxation)
        with V_n, V_N, gain, ε_n, δ_n, ...

        Raises ValueError when δ_n = N·δ/n > 1 (the (ε, δ) target cannot be met by that sample).
        """
        if (n is None) == (x is None):
            raise TypeError("give the sample size as n (an integer) or x (real, a relaxation)")
        n_star = int(n) if n is not None else float(x)
        if not 1 <= n_star <= self.N:
            raise ValueError(f"n = {n_star} outside [1, N]")
        dn = float(self.delta_n(n_star))
        if dn > 1.0:
            raise ValueError(f"delta_n = N*delta/n = {dn:.6g} > 1 at n = {n_star} (N = {self.N}, delta = "
                             f"{self.delta:g}): the sample cannot carry the (epsilon, delta) target; feasible "
                             f"sample sizes are n >= n_min = {self.n_min}")
        vn = float(self.variance(n_star))
        if not math.isfinite(vn):
            raise ValueError(f"V_n = {vn} at n = {n_star} is not finite (a callable sensitivity too large?)")
        vN = self.V_N
        details_in, details = details, {
            "n_star": n_star, "rate": n_star / self.N, "V_n": vn, "V_N": vN,
            "gain": vN / vn if vn > 0 else float("inf"),
            "helps": bool(n_star < self.N and vn < vN),
            "epsilon_n": float(self.epsilon_n(n_star)), "delta_n": dn,
            "sensitivity_n": float(self.sensitivity_at(float(n_star))),
            "sampling_variance": float(self.sampling_variance(n_star)),
            "noise_variance": float(self.noise_variance_at(float(n_star))),
        }
        details.update(details_in or {})
        return honest_status(Solution(status=status, objective=vn, n=n_star if n is not None else None,
                                      x=n_star if n is None else None, variance=vn, certificate=certificate,
                                      backend=backend, solver=solver, model="SampleSizeProgram",
                                      message=message, details=details), rel_gap)

