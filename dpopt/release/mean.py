"""The sample-size family's release: the mean of an SRS of n out of N with OpenDP's bounded mean and Laplace
noise, amplified to the population by OpenDP's population amplification (Hu, Drechsler & Kim).

The whole measurement is OpenDP's: ``sized bounded mean >> Laplace(scale)`` wrapped in
``make_population_amplification(·, N)``; ``binary_search`` finds the smallest scale whose amplified map
at a substitution (symmetric distance 2) is ≤ ε by OpenDP's arithmetic and by dpopt's rounded-up accountant.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .. import _validate as V
from . import _opendp
from .ledger import Cell, Measurement, Part, PrivacyLedger, ReleaseRecord, amplify_up, sample_identity


@dataclass
class MeanRelease:
    estimate: float
    se: float
    ci: tuple[float, float]
    confidence: float
    n: int
    N: int
    scale: float
    epsilon_nominal: float
    epsilon_spent: float
    record: ReleaseRecord
    ledger: PrivacyLedger

    def to_dict(self) -> dict:
        return {"estimate": self.estimate, "se": self.se, "ci": list(self.ci), "confidence": self.confidence,
                "n": self.n, "N": self.N, "epsilon_spent": self.epsilon_spent}


def _chains(dp, n, N, lo, hi):
    """(inner, amplified): OpenDP's sized bounded mean with Laplace noise, and its population amplification."""
    space = dp.vector_domain(dp.atom_domain(bounds=(lo, hi), nan=False), size=n), dp.symmetric_distance()

    def inner(scale):
        return space >> dp.t.then_mean() >> dp.m.then_laplace(scale=scale)

    def amplified(scale):
        return dp.c.make_population_amplification(inner(scale), population_size=N) if n < N else inner(scale)
    return inner, amplified


@functools.lru_cache(maxsize=256)
def _search_scale(n: int, N: int, lo: float, hi: float, eps: float, nominal_guess: float) -> float:
    """The smallest scale whose amplified map is ≤ ε by OpenDP's arithmetic and by dpopt's rounded-up
    accountant (cached: the search is deterministic and repeated releases reuse it)."""
    dp = _opendp.require_opendp()
    inner, amplified = _chains(dp, n, N, lo, hi)
    guess = (hi - lo) / n / nominal_guess
    with _opendp.honest_but_curious(dp):
        def fits(scale):
            return bool(amplified(scale).check(2, eps)) and amplify_up(float(inner(scale).map(2)), n, N) <= eps
        return float(dp.binary_search(fits, bounds=(guess * 0.5, guess * 2.0), T=float))


def release_mean(model, sample, values, bounds, *, ledger: PrivacyLedger | None = None, confidence: float = 0.95,
                 name: str = "", mechanism: str = "laplace") -> MeanRelease:
    """Release the mean of ``values`` (an SRS of the model's population, e.g. ``draw_srs``) clamped to
    ``bounds = (lo, hi)`` with hi − lo equal to the model's ``value_range``. The SE combines the sampling
    variance at the model's (public) S² and the known noise variance: the sample's own variance is not
    released.

    ``mechanism="gaussian"`` adds Gaussian noise under the model's (ε, δ) (δ > 0): the analytic σ at the nominal
    (ε_n, δ_n) = (log1p(expm1(ε)·N/n), δ·N/n) and Δ = R/n, certified as the stratified release does
    (docs/release.md §4). The model's n* is the Laplace program's; the release is exact for the n it is given."""
    from scipy.special import ndtri     # the normal quantile (scipy.stats would seed a numpy RNG on import)

    dp = _opendp.require_opendp()
    mechanism = V.choice("mechanism", mechanism, ("laplace", "gaussian"))
    if getattr(model, "kind", None) != "mean":
        raise ValueError("release_mean needs a SampleSizeProgram with sensitivity='mean' (a bounded mean); "
                         "other sensitivities do not say which statistic to release")
    lo, hi = (float(b) for b in V.vector("bounds", bounds, length=2))
    if not lo < hi or abs((hi - lo) - model.value_range) > 1e-12 * model.value_range:
        raise ValueError(f"bounds must be (lo, hi) with hi - lo = value_range = {model.value_range:g}, got {bounds!r}")
    if sample.scheme != "srswor" or len(sample.labels) != 1 or int(sample.N[0]) != model.N:
        raise ValueError(f"sample must be one SRS without replacement from the model's population of N = {model.N}")
    vals = V.vector("values", values, length=sample.size)
    n, N = sample.size, int(model.N)
    confidence = V.probability("confidence", confidence)
    eps = float(model.epsilon)
    if mechanism == "gaussian":
        return _release_gaussian_mean(dp, model, sample, vals, lo, hi, n, N, ledger, confidence, name, ndtri)
    inner, amplified = _chains(dp, n, N, lo, hi)
    scale = _search_scale(n, N, lo, hi, eps, float(model.epsilon_n(n)))
    with _opendp.honest_but_curious(dp):
        meas = amplified(scale)
        spent_opendp = float(meas.map(2))
    nominal = float(inner(scale).map(2))
    ours = amplify_up(nominal, n, N)
    if not (ours <= eps and spent_opendp <= eps):   # pragma: no cover - the search guarantees OpenDP's side
        raise RuntimeError(f"mean release: amplified epsilon {ours!r} / {spent_opendp!r} above {eps!r}")
    noise_var = _opendp.variance_at_scale("laplace", scale)
    # the cell is named by its members (the whole frame), so a stratified release of the same people is
    # recognised as the same cell whatever its label
    cell = Cell("population", [Measurement("mean", "laplace", (hi - lo) / n, scale, nominal, 0.0, noise_var)], N, n,
                members=sample.members[0])
    record = ReleaseRecord(name or "mean", "mean", [Part("population", [cell], partition=sample.partition)],
                           sample=sample_identity(sample),
                           target_epsilon=eps, details={"N": N, "n": n, "bounds": [lo, hi],
                                                        "epsilon_central_opendp": spent_opendp})
    ledger = ledger if ledger is not None else PrivacyLedger(eps, name=name)
    ledger.charge(record)
    clamped = [min(max(float(v), lo), hi) for v in vals]
    est = float(meas(clamped))
    var = model.S2 * (N - n) / (n * N) + noise_var
    se = math.sqrt(var)
    z = float(ndtri(0.5 + confidence / 2.0))
    return MeanRelease(est, se, (est - z * se, est + z * se), confidence, n, N, scale, nominal, record.epsilon,
                       record, ledger)


def _release_gaussian_mean(dp, model, sample, vals, lo, hi, n, N, ledger, confidence, name, ndtri) -> MeanRelease:
    """The bounded mean with Gaussian noise under (ε, δ): OpenDP's sized bounded mean >> Gaussian at the analytic
    σ (raised by ulps until the analytic ε at OpenDP's ρ fits ε_n), the (ε, δ) confirmed by dp-accounting and
    its amplification cross-checked with OpenDP's population amplification of an approx-DP measurement."""
    from ..privacy.amplification import nominal_delta
    from ..privacy.gaussian import gaussian_sigma
    from .ledger import nominal_within

    eps, delta = float(model.epsilon), float(model.delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"mechanism='gaussian' needs the model's delta in (0, 1), got {model.delta!r}")
    _opendp.confirm_gaussian(1.0, 1.0, 1.0)           # dp-accounting present, or ImportError with the hint
    space = dp.vector_domain(dp.atom_domain(bounds=(lo, hi), nan=False), size=n), dp.symmetric_distance()
    sens = (hi - lo) / n
    e_nom = nominal_within(eps, n, N)
    d_nom = float(nominal_delta(delta, n / N)) * (1.0 - 2.0 ** -40)
    sigma = float(gaussian_sigma(e_nom, d_nom, sens))

    def chain(scale):
        return space >> dp.t.then_mean() >> dp.m.then_gaussian(scale=scale)

    def fits(rho):
        return _opendp.gaussian_certified_epsilon(rho, d_nom) <= e_nom

    scale, rho = _opendp.search_gaussian_scale(dp, False, sens, sigma, fits,
                                               rho_of=lambda s: float(chain(s).map(2)))
    e_rec = _opendp.gaussian_certified_epsilon(rho, d_nom)
    _opendp.confirm_gaussian(rho, e_rec, d_nom)
    amp = _opendp.amplified_approx_by_opendp(dp, e_rec, d_nom, n, N)
    ours = amplify_up(e_rec, n, N)
    if not (ours <= eps and amp[0] <= eps and amp[1] <= delta):   # pragma: no cover - the search guarantees it
        raise RuntimeError(f"mean release: amplified (epsilon, delta) {ours!r}, {amp!r} above ({eps!r}, {delta!r})")
    theirs = float(dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(chain(scale)), d_nom).map(2)[0])
    meas = Measurement("mean", "gaussian", sens, scale, e_rec, d_nom, scale * scale, "approx", rho,
                       _opendp.ANALYTIC, theirs)
    cell = Cell("population", [meas], N, n, members=sample.members[0])
    record = ReleaseRecord(name or "mean", "mean", [Part("population", [cell], partition=sample.partition)],
                           sample=sample_identity(sample), target_epsilon=eps,
                           details={"N": N, "n": n, "bounds": [lo, hi], "mechanism": "gaussian",
                                    "sigma_design": sigma, "epsilon_central_opendp": amp[0],
                                    "delta_central_opendp": amp[1]})
    ledger = ledger if ledger is not None else PrivacyLedger(eps, delta, name=name)
    ledger.charge(record)
    clamped = [min(max(float(v), lo), hi) for v in vals]
    est = float(chain(scale)(clamped))
    se = math.sqrt(model.S2 * (N - n) / (n * N) + scale * scale)
    z = float(ndtri(0.5 + confidence / 2.0))
    return MeanRelease(est, se, (est - z * se, est + z * se), confidence, n, N, scale, e_rec, record.epsilon,
                       record, ledger)
