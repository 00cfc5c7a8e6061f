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
                 name: str = "") -> MeanRelease:
    """Release the mean of ``values`` (an SRS of the model's population, e.g. ``draw_srs``) clamped to
    ``bounds = (lo, hi)`` with hi − lo equal to the model's ``value_range``. The SE combines the sampling
    variance at the model's (public) S² and the known noise variance: the sample's own variance is not
    released."""
    from scipy.special import ndtri     # the normal quantile (scipy.stats would seed a numpy RNG on import)

    dp = _opendp.require_opendp()
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
