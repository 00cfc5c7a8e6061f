"""Stratified release: clamp, privatise every sampled response through OpenDP, estimate the mean.

Stratum h's sampled responses (SRS of n_h out of N_h) are clamped to the design's ``value_range`` and each
gets OpenDP noise at the stratum's nominal budget, so every population member is ε-DP after
amplification (:mod:`dpopt.release.ledger`). With several study variables, variable j uses the share
``shares[j]`` of the nominal budget (sequential composition) before the amplification.

The estimator (docs/release.md) of the population mean is Ȳ̂ = Σ_h W_h z̄_h with W_h = N_h/N and z̄_h the mean of
the noisy responses; its variance (1 − f_h)·S_h²/n_h + γ_h²/n_h per stratum is estimated without bias by

    v_h = (1 − f_h)·s_zh²/n_h + f_h·γ_h²/n_h,

s_zh² the sample variance of the noisy responses (E s_zh² = S_h² + γ_h²) and γ_h² the known noise variance;
the confidence interval is Ȳ̂ ± z·√(Σ W_h² v_h). Everything after the noise is post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..progress import progress_iter
from . import _opendp
from .ledger import BudgetExceeded, Cell, Measurement, Part, PrivacyLedger, ReleaseRecord, nominal_within, sample_identity

_MAX_SHRINK = 60


@dataclass
class StratumPlan:
    """Scales and budgets of one stratum (one measurement per study variable), and the design they were made
    for (``release_stratified`` refuses a plan whose design is not exactly the release's)."""

    label: str
    N: int
    n: int
    epsilon_target: float
    nominal_target: float
    scales: list[float]
    nominal_spent: list[float]
    noise_variance: list[float]
    epsilon_central: float
    epsilon_central_opendp: float
    mechanism: str = ""
    sensitivity: float | list[float] = float("nan")   # a list when each variable has its own Δ_j
    shares: list[float] = field(default_factory=list)
    # Gaussian noise (docs/release.md §4): the guarantee, per variable the nominal δ, the ρ OpenDP certifies,
    # OpenDP's own (CKS) ε at that δ, and the σ the design calibrated (the scale is it, or an ulp or two above)
    guarantee: str = "pure"
    nominal_delta: list[float] = field(default_factory=list)
    rho: list[float] = field(default_factory=list)
    epsilon_opendp: list[float] = field(default_factory=list)
    sigma_design: list[float] = field(default_factory=list)


def plan_stratified(model, n, *, dp=None, progress: bool = False) -> list[StratumPlan]:
    """OpenDP noise scales for every stratum and variable of ``model`` at integer design ``n``.

    Per stratum the nominal budget is the largest whose amplification, rounded up, is ≤ the design's ε;
    variable j's scale is OpenDP's smallest certified for ``shares[j]`` of it. The stratum's composed and
    amplified ε is computed by dpopt's accountant and by OpenDP's composition and population
    amplification; both must be ≤ ε (a shrink step repeats the search otherwise) and agree to 1e-9.
    """
    dp = dp or _opendp.require_opendp()
    mechanism = _opendp.releasable(model.mechanism)     # refused here, with the reason, without an OpenDP form
    if mechanism.guarantee.kind != "pure":
        return _plan_gaussian(dp, model, n, mechanism, progress)
    mech = mechanism.name
    n = np.asarray(n, dtype=np.int64)
    eps = float(model.epsilon)
    deltas = [model.sensitivity_of(j) for j in range(model.J)]     # Δ_j: variable j's own sensitivity
    shares = [float(x) for x in model.shares]
    sens = _sensitivity_record(model)
    cache: dict = {}               # one OpenDP certification per distinct scale (docs/release.md §3)
    done: dict[tuple[int, int], tuple] = {}     # strata of equal (N_h, n_h) share one plan: it depends on nothing else
    plans = []
    for h in progress_iter(range(model.k), "plan", progress):
        Nh, nh = int(model.N[h]), int(n[h])
        if nh < 1:
            raise ValueError(f"stratum {model.labels[h]!r} has n = 0: every stratum needs a sample to be estimated")
        if (Nh, nh) not in done:
            done[Nh, nh] = _plan_cell(dp, model, mechanism, deltas, Nh, nh, model.labels[h], cache)
        target, scales, spent, variance, ours, theirs = done[Nh, nh]
        plans.append(StratumPlan(model.labels[h], Nh, nh, eps, target, list(scales), list(spent), list(variance),
                                 ours, theirs, mech, sens, list(shares)))
    return plans


def _plan_cell(dp, model, mechanism, deltas, Nh, nh, label, cache) -> tuple:
    """(nominal target, scales, spent, noise variances, dpopt's amplified ε, OpenDP's) of a stratum of N_h units
    with n_h sampled: the largest nominal budget whose amplification is ≤ ε, each variable's scale from the closed
    form certified by OpenDP's map (:func:`_opendp.search_scale`), both accountants' amplified ε ≤ ε (a shrink
    step repeats the search otherwise) and agreeing to 1e-9."""
    eps, mech = float(model.epsilon), mechanism.name
    target = nominal_within(eps, nh, Nh)
    shrink = 1.0
    for _ in range(_MAX_SHRINK):
        goal = target * shrink
        scales, spent = [], []
        for j in range(model.J):
            s, e = _opendp.search_scale(dp, mechanism, deltas[j], goal * float(model.shares[j]), cache=cache)
            scales.append(s)
            spent.append(e)
        cell = Cell(label, [Measurement("", mech, d, s, e) for d, s, e in zip(deltas, scales, spent)], Nh, nh)
        ours = cell.epsilon
        theirs = _opendp.amplified_by_opendp(dp, _opendp.composed_by_opendp(dp, spent), nh, Nh)
        if ours <= eps and theirs <= eps:
            break
        shrink *= 1.0 - 2.0 ** -40
    else:  # pragma: no cover - the shrink step is far larger than any rounding
        raise RuntimeError(f"stratum {label!r}: could not fit the budget under epsilon={eps!r}")
    if abs(ours - theirs) > 1e-9 * max(ours, theirs):
        raise RuntimeError(f"stratum {label!r}: dpopt's accountant ({ours!r}) and OpenDP's ({theirs!r}) disagree")
    return target, scales, spent, [_opendp.variance_at_scale(mechanism, s) for s in scales], ours, theirs


def _gaussian_measurements(dp, model, mechanism, h, nh, scales, nominal_delta):
    """The stratum's measurements at the given scales: ρ from OpenDP's map; under (ε, δ) the analytic ε at that
    ρ and the variable's nominal δ (confirmed by dp-accounting) and OpenDP's own conversion."""
    integer = mechanism.integer_data
    approx = mechanism.guarantee.kind == "approx"
    out = []
    for j, s in enumerate(scales):
        d = model.sensitivity_of(j)
        rho = _opendp.gaussian_rho(dp, integer, s, d)
        var = _opendp.gaussian_variance(integer, s)
        name = f"{model.variables[j]} in stratum {model.labels[h]!r}"
        if approx:
            eps = _opendp.gaussian_certified_epsilon(rho, nominal_delta[j])
            out.append(Measurement(name, mechanism.name, d, s, eps, nominal_delta[j], var, "approx", rho,
                                   _opendp.ANALYTIC,
                                   _opendp.zcdp_to_approx_by_opendp(dp, integer, s, d, nominal_delta[j])))
        else:
            out.append(Measurement(name, mechanism.name, d, s, 0.0, 0.0, var, "zcdp", rho))
    return out


def _plan_gaussian(dp, model, n, mechanism, progress) -> list[StratumPlan]:
    """Scales for Gaussian noise at the design's own calibration (docs/release.md §4): σ of variable j is the σ
    the design assumed (``model.noise_mechanisms[j]``, the analytic Gaussian at the nominal (ε, δ) under (ε, δ),
    Δ/√(2ρ_j) under zCDP), raised by an ulp or two until the guarantee OpenDP's map certifies fits:

    * (ε, δ): stratum h's nominal budget L_h is the largest whose amplification is ≤ ε; variable j gets
      E_j = s_j·L_h and δ_j = s_j·δ·N_h/n_h, and its measurement's ε (the analytic curve at the ρ OpenDP
      certifies) must be ≤ E_j; dp-accounting confirms each (ε_j, δ_j), and the amplified (Σε_j, Σδ_j) is
      cross-checked with OpenDP's population amplification;
    * ρ-zCDP: ρ_j = s_j·ρ, no amplification; OpenDP's ρ must be ≤ ρ_j."""
    from ..privacy.gaussian import sigma_from_rho
    n = np.asarray(n, dtype=np.int64)
    eps = float(model.epsilon)
    approx = mechanism.guarantee.kind == "approx"
    delta = float(model.delta) if approx else 0.0
    shares = [float(x) for x in model.shares]
    if approx:
        _opendp.confirm_gaussian(1.0, 1.0, 1.0)           # dp-accounting present, or ImportError with the hint
    plans = []
    for h in progress_iter(range(model.k), "plan", progress):
        Nh, nh = int(model.N[h]), int(n[h])
        if nh < 1:
            raise ValueError(f"stratum {model.labels[h]!r} has n = 0: every stratum needs a sample to be estimated")
        target = nominal_within(eps, nh, Nh) if approx else eps
        shrink = 1.0
        for _ in range(_MAX_SHRINK):
            goal = target * shrink
            # δ_j = s_j·δ·N/n, a hair below so that Σ_j δ_j·n/N ≤ δ in floating point
            ndelta = [sj * delta * Nh / nh * (1.0 - 2.0 ** -40) * shrink for sj in shares] if approx else []
            scales, sig = [], []
            for j, sj in enumerate(shares):
                d = model.sensitivity_of(j)
                if approx:
                    sigma = math.sqrt(float(model.noise_mechanisms[j].variance(sj * target, d)))
                    budget = sj * goal

                    def fits(rho, budget=budget, dj=ndelta[j]):
                        return _opendp.gaussian_certified_epsilon(rho, dj) <= budget
                else:
                    sigma = float(sigma_from_rho(sj * eps, d))
                    fits = (lambda rho, budget=sj * goal: rho <= budget)      # noqa: E731
                s, _ = _opendp.search_gaussian_scale(dp, mechanism.integer_data, d, sigma, fits)
                scales.append(s)
                sig.append(sigma)
            ms = _gaussian_measurements(dp, model, mechanism, h, nh, scales, ndelta)
            cell = Cell(model.labels[h], ms, Nh, nh)
            if approx:
                ours = (cell.epsilon, cell.delta)
                theirs = _opendp.amplified_approx_by_opendp(dp, cell.epsilon_nominal, cell.delta_nominal, nh, Nh)
                ok = ours[0] <= eps and ours[1] <= delta and theirs[0] <= eps and theirs[1] <= delta
            else:
                ours = theirs = (cell.rho, 0.0)
                ok = cell.rho <= eps
            if ok:
                break
            shrink *= 1.0 - 2.0 ** -40
        else:  # pragma: no cover - the shrink step is far larger than any rounding
            raise RuntimeError(f"stratum {model.labels[h]!r}: could not fit the budget under {eps!r}")
        if abs(ours[0] - theirs[0]) > 1e-9 * max(ours[0], theirs[0]):
            raise RuntimeError(f"stratum {model.labels[h]!r}: dpopt's accountant ({ours!r}) and OpenDP's "
                               f"({theirs!r}) disagree")
        if approx:
            for m in ms:       # the vetted accountant confirms every (ε, δ) recorded
                _opendp.confirm_gaussian(m.rho, m.epsilon, m.delta)
        plans.append(StratumPlan(model.labels[h], Nh, nh, eps, target, scales,
                                 [m.epsilon if approx else m.rho for m in ms], [m.noise_variance for m in ms],
                                 ours[0], theirs[0], mechanism.name, _sensitivity_record(model), shares,
                                 mechanism.guarantee.kind, ndelta, [m.rho for m in ms],
                                 [m.epsilon_opendp for m in ms] if approx else [], sig))
    return plans


def _sensitivity_record(model):
    """The design's Δ as recorded: one number when every variable shares it, else one per variable."""
    s = [float(x) for x in model.sensitivities]
    return s[0] if all(x == s[0] for x in s) else s


def _range_record(model):
    """The design's value range as recorded: one (lo, hi) when every variable shares it, else one per variable
    (None without one)."""
    if model.value_ranges is None:
        return None
    r = [[float(a), float(b)] for a, b in model.value_ranges]
    return r[0] if all(x == r[0] for x in r) else r


@dataclass
class StratifiedRelease:
    """A released stratified estimate: per variable the estimate, standard error and confidence interval,
    per stratum the noisy means, and the privacy record (also in the ledger).

    ``estimate``, ``se`` and ``ci`` are a number, a number and a (low, high) pair for one study variable, and
    dicts by variable name for several; ``estimates``, ``ses`` and ``cis`` always hold the arrays (J, J, J×2).
    """

    variables: list[str]
    estimates: np.ndarray
    ses: np.ndarray
    cis: np.ndarray
    confidence: float
    labels: list[str]
    N: np.ndarray
    n: np.ndarray
    stratum_mean: np.ndarray        # k × J noisy means
    stratum_se: np.ndarray          # k × J
    epsilon_spent: float
    record: ReleaseRecord
    ledger: PrivacyLedger
    clamped: np.ndarray             # k × J counts of clamped responses (confidential: not written out)
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def _per_variable(self, values):
        return values[0] if len(self.variables) == 1 else dict(zip(self.variables, values))

    @property
    def estimate(self):
        return self._per_variable([float(x) for x in self.estimates])

    @property
    def se(self):
        return self._per_variable([float(x) for x in self.ses])

    @property
    def ci(self):
        return self._per_variable([(float(lo), float(hi)) for lo, hi in self.cis])

    def __repr__(self) -> str:
        v = self.variables[0]
        return (f"StratifiedRelease({v}: estimate={self.estimates[0]:.6g}, se={self.ses[0]:.3g}, "
                f"{int(round(100 * self.confidence))}% ci=[{self.cis[0, 0]:.6g}, {self.cis[0, 1]:.6g}], "
                f"epsilon_spent={self.epsilon_spent:.6g}, n={int(self.n.sum())})")

    def to_dict(self) -> dict[str, Any]:
        """The public release (``estimate.json``, schema ``dpopt-stratified-estimate/1`` in docs/release.md):
        the same keys for one variable or several; no sampled ids, no clamping counts. Numbers that are not
        finite (an SE that cannot be estimated) are null."""
        ranges = self.details.get("value_ranges")
        if ranges is None and self.details.get("value_range") is not None:
            ranges = [self.details["value_range"]] * len(self.variables)
        out: dict[str, Any] = {
            "format": ESTIMATE_FORMAT,
            "variables": [{"variable": v, "estimate": _num(self.estimates[j]), "se": _num(self.ses[j]),
                           "ci": [_num(self.cis[j, 0]), _num(self.cis[j, 1])],
                           "value_range": None if ranges is None else [float(x) for x in ranges[j]]}
                          for j, v in enumerate(self.variables)],
            "confidence": self.confidence, "epsilon_spent": _num(self.epsilon_spent),
            "epsilon_target": self.record.target_epsilon, "n": int(self.n.sum()), "N": int(self.N.sum()),
            "mechanism": self.details.get("mechanism"),
            "guarantee": self.record.parts[0].cells[0].measurements[0].guarantee,
            "delta_spent": self.record.delta, "rho_spent": _num(self.record.rho),
            "strata": [{"stratum": lab, "N": int(self.N[h]), "n": int(self.n[h]),
                        "mean": {v: _num(self.stratum_mean[h, j]) for j, v in enumerate(self.variables)},
                        "se": {v: _num(self.stratum_se[h, j]) for j, v in enumerate(self.variables)}}
                       for h, lab in enumerate(self.labels)],
            "message": self.message or None}
        return out

    def to_frame(self):
        """Per stratum and variable: label, N, n, noisy mean and its SE (a pandas DataFrame)."""
        from ..frames import to_pandas
        rows: dict[str, list] = {"stratum": [], "variable": [], "N": [], "n": [], "mean": [], "se": []}
        for h, lab in enumerate(self.labels):
            for j, v in enumerate(self.variables):
                rows["stratum"].append(lab)
                rows["variable"].append(v)
                rows["N"].append(int(self.N[h]))
                rows["n"].append(int(self.n[h]))
                rows["mean"].append(float(self.stratum_mean[h, j]))
                rows["se"].append(float(self.stratum_se[h, j]))
        return to_pandas(rows)


#: the schema of StratifiedRelease.to_dict / estimate.json (docs/release.md)
ESTIMATE_FORMAT = "dpopt-stratified-estimate/1"


def _num(x):
    x = float(x)
    return x if math.isfinite(x) else None


def _check_sample(model, sample, n):
    if sample.scheme != "srswor":
        raise ValueError(f"a stratified release needs a stratified SRS without replacement, got a "
                         f"{sample.scheme!r} sample")
    if list(sample.labels) != list(model.labels):
        raise ValueError("the sample's strata labels differ from the model's (draw it with this model)")
    if not np.array_equal(sample.N, model.N):
        raise ValueError("the sample was drawn from a frame whose N_h differ from the model's")
    if n is not None and not np.array_equal(np.asarray(getattr(n, "n", n)), sample.n):
        raise ValueError("the sample's n_h differ from the design n given")


def _values(model, sample, values) -> np.ndarray:
    Y = np.asarray(values, dtype=float) if not isinstance(values, np.ndarray) else values.astype(float)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.shape != (sample.size, model.J):
        raise ValueError(f"values must have one row per sampled unit and one column per study variable: "
                         f"expected ({sample.size}, {model.J}), got {np.shape(values)}")
    if not np.all(np.isfinite(Y)):
        j = int(np.argmax(~np.all(np.isfinite(Y), axis=0)))
        raise ValueError(f"values of variable {model.variables[j]!r} must be finite (no NaN or infinity)")
    if model.mechanism.integer_data:
        from ..frames import check_integer_values
        for j, v in enumerate(model.variables):
            check_integer_values(Y[:, j], v, model.mechanism.name, where="sample")
    return Y


def release_stratified(model, sample, values, *, ledger: PrivacyLedger | None = None, confidence: float = 0.95,
                       name: str = "", progress: bool = False, plan: list[StratumPlan] | None = None
                       ) -> StratifiedRelease:
    """Release the stratified mean of ``values`` (the sampled units' responses, one column per variable).

    ``sample`` comes from :func:`dpopt.sampling.draw_stratified` with this ``model``; the design needs
    ``value_range`` (responses are clamped to it: the sensitivity is only guaranteed after clamping).
    ``ledger`` (default: a new one with total ``model.epsilon``) is charged before any noise is drawn and
    refuses a release that would exceed its total. ``plan`` reuses scales from :func:`plan_stratified`.
    """
    dp = _opendp.require_opendp()
    from .. import _validate as V
    confidence = V.probability("confidence", confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if model.value_ranges is None:
        raise ValueError("the design needs value_range=(lo, hi) to be released: responses are clamped to it and "
                         "its width is the sensitivity (a bare sensitivity cannot be enforced on the data)")
    lo, hi = model.value_ranges[:, 0], model.value_ranges[:, 1]      # per variable
    mechanism = _opendp.releasable(model.mechanism)     # before any check of the data: the reason comes first
    mech = mechanism.name
    for j, v in enumerate(model.variables):
        if mechanism.integer_data and (lo[j] != round(lo[j]) or hi[j] != round(hi[j])):
            what = "" if model.J == 1 else f" of variable {v!r}"
            raise ValueError(f"value_range{what} ({lo[j]:g}, {hi[j]:g}) must have integer ends for mechanism {mech!r}")
    _check_sample(model, sample, None)
    Y = _values(model, sample, values)
    n = sample.n
    _refuse_unestimable_se(model, n)
    if plan is None:
        plan = plan_stratified(model, n, dp=dp, progress=progress)
    else:
        plan = _check_plan(dp, model, n, plan)
    _warn_if_useless(model, n, plan, confidence)
    if ledger is None:
        kind = mechanism.guarantee.kind
        ledger = (PrivacyLedger(rho_total=model.epsilon, name=name or model.name) if kind == "zcdp" else
                  PrivacyLedger(model.epsilon, model.delta if kind == "approx" else 0.0, name=name or model.name))
    identity = sample_identity(sample)
    cells = []
    gaussian = mechanism.guarantee.kind != "pure"
    for h, p in enumerate(plan):
        if gaussian:
            ms = _gaussian_measurements(dp, model, mechanism, h, p.n, p.scales, p.nominal_delta)
        else:
            ms = [Measurement(f"{v} in stratum {p.label!r}", mech, model.sensitivity_of(j), s, e, 0.0, g)
                  for j, (v, s, e, g) in enumerate(zip(model.variables, p.scales, p.nominal_spent, p.noise_variance))]
        # the cell is named by who is in it (sample.members), which is what the ledger composes by
        cells.append(Cell(p.label, ms, p.N, p.n, members=sample.members[h]))
    record = ReleaseRecord(name or f"stratified mean of {', '.join(model.variables)}", "stratified",
                           [Part("strata", cells, partition=sample.partition)], sample=identity,
                           target_epsilon=float(model.epsilon), details=_design_details(model, n, plan))
    ledger.charge(record)             # raises BudgetExceeded before any noise is drawn
    # clamp, then noise (every draw by OpenDP)
    Yc = np.clip(Y, lo[None, :], hi[None, :])         # variable j to its own [lo_j, hi_j]
    clamped = np.stack([np.bincount(sample.stratum, weights=Yc[:, j] != Y[:, j], minlength=model.k)
                        for j in range(model.J)], axis=1).astype(np.int64)
    Z = np.empty_like(Yc)
    order = np.argsort(sample.stratum, kind="stable")
    bounds = np.searchsorted(sample.stratum[order], np.arange(model.k + 1))
    # one OpenDP measurement per distinct scale, applied to the responses of every stratum that has it (the
    # noise is drawn independently per value, so this is the same release as one measurement per stratum)
    groups: dict[tuple[int, float], list[int]] = {}
    for h, p in enumerate(plan):
        for j in range(model.J):
            groups.setdefault((j, p.scales[j]), []).append(h)
    for (j, scale), strata in progress_iter(list(groups.items()), "release", progress):
        rows = np.concatenate([order[bounds[h]:bounds[h + 1]] for h in strata])
        vals = Yc[rows, j]
        Z[rows, j] = _opendp.privatise(dp, mechanism, scale, vals.astype(np.int64).tolist()
                                       if mechanism.integer_data else vals.tolist())
    est = estimate_stratified(Z, sample.stratum, model.N, n, np.array([p.noise_variance for p in plan]), confidence)
    return StratifiedRelease(list(model.variables), est["estimate"], est["se"], est["ci"], confidence,
                             list(model.labels), model.N.copy(), np.asarray(n).copy(), est["stratum_mean"],
                             est["stratum_se"], record.epsilon, record, ledger, clamped, est["message"],
                             {"mechanism": mech, "value_range": _range_record(model),
                              "value_ranges": [[float(a), float(b)] for a, b in model.value_ranges]})


def _warn_if_useless(model, n, plan, confidence: float) -> None:
    """Before any budget is spent: warn when the planned SE (the design's S_h², OpenDP's noise variance)
    gives a confidence interval wider than the value range itself, i.e. an estimate that says less than
    the range the responses are clamped to."""
    import warnings
    from scipy.special import ndtri     # the normal quantile (scipy.stats costs seconds to import)

    n = np.asarray(n, dtype=float)
    W, f = model.N / model.N.sum(), n / model.N
    gamma2 = np.array([p.noise_variance for p in plan])                    # k × J
    S2 = model.sigma2_matrix
    se = np.sqrt(np.sum((W ** 2 / n)[:, None] * ((1 - f)[:, None] * S2 + gamma2), axis=0))
    width = 2 * float(ndtri(0.5 + confidence / 2)) * se
    for j, v in enumerate(model.variables):
        lo, hi = model.value_range_of(j)        # each variable against its own range
        if width[j] > hi - lo:
            warnings.warn(f"variable {v!r}: the planned {confidence:.0%} interval is {width[j]:.4g} wide (SE "
                          f"{se[j]:.4g}), wider than its value range [{lo:g}, {hi:g}]: the release would tell "
                          "less than the range itself. A narrower value_range, a larger sample or budget, or a "
                          "larger share of the budget for this variable helps", UserWarning, stacklevel=3)


def _refuse_unestimable_se(model, n) -> None:
    """Before any budget is spent: a stratum with one sampled unit out of several has no estimable sampling
    variance, so the release would spend ε and publish an estimate without SE or CI."""
    n = np.asarray(n)
    single = np.flatnonzero((n == 1) & (model.N > 1))
    if single.size:
        names = ", ".join(repr(model.labels[i]) for i in single[:5]) + (", ..." if single.size > 5 else "")
        raise ValueError(f"stratum/strata {names} would have 1 sampled unit: the sampling variance of such a stratum "
                         "cannot be estimated, so the release would spend its budget and report no SE or CI. "
                         "Nothing was spent. Design with min_per_stratum=2 (model file: min_per_stratum = 2; "
                         "dpopt design --min-per-stratum 2) and draw the sample again")


def _check_plan(dp, model, n, plan) -> list[StratumPlan]:
    """``plan`` if it was made for exactly this design (labels, N_h, n_h, ε, mechanism, sensitivity, shares),
    with every measurement's ε re-read from OpenDP's map at its scale and the stratum's amplified ε ≤ ε;
    otherwise ValueError naming what differs. A plan for another N_h or ε has the wrong noise scale."""
    if not isinstance(plan, (list, tuple)) or not all(isinstance(p, StratumPlan) for p in plan):
        raise TypeError("plan must be the list of StratumPlan that plan_stratified returns")
    if len(plan) != model.k:
        raise ValueError(f"plan has {len(plan)} strata but the design has {model.k}")
    mechanism = _opendp.releasable(model.mechanism)
    if mechanism.guarantee.kind != "pure":
        return _check_gaussian_plan(dp, model, n, plan, mechanism)
    mech, sens, eps = mechanism.name, _sensitivity_record(model), float(model.epsilon)
    shares = [float(x) for x in model.shares]
    deltas = [model.sensitivity_of(j) for j in range(model.J)]
    d_in = [mechanism.sensitivity_argument(d) for d in deltas]
    cache: dict = {}                  # OpenDP's map read once per distinct scale
    out = []
    for h, p in enumerate(plan):
        want = {"label": model.labels[h], "N": int(model.N[h]), "n": int(n[h]), "epsilon_target": eps,
                "mechanism": mech, "sensitivity": sens, "shares": shares}
        for key, value in want.items():
            got = getattr(p, key)
            if got != value:
                raise ValueError(f"plan[{h}].{key} is {got!r} but the design has {value!r}: the plan was made "
                                 "for another design (make it with plan_stratified(model, n))")
        if not (len(p.scales) == len(p.nominal_spent) == len(p.noise_variance) == model.J):
            raise ValueError(f"plan[{h}] has {len(p.scales)} scales but the design has {model.J} variable(s)")
        spent = []
        for j, s in enumerate(p.scales):
            if not (isinstance(s, float) and math.isfinite(s) and s > 0):
                raise ValueError(f"plan[{h}].scales[{j}] must be a finite float > 0, got {s!r}")
            spent.append(_opendp.certified_spend(dp, mechanism, s, d_in[j], cache))
        cell = Cell(p.label, [Measurement("", mech, d, s, e) for d, s, e in zip(deltas, p.scales, spent)], p.N, p.n)
        if spent != [float(e) for e in p.nominal_spent] or not cell.epsilon <= eps:
            raise ValueError(f"plan[{h}] (stratum {p.label!r}): its scales spend nominal epsilon {spent!r}, "
                             f"amplified {cell.epsilon!r}, not what it records or above epsilon {eps!r}")
        out.append(p)
    return out


def _check_gaussian_plan(dp, model, n, plan, mechanism) -> list[StratumPlan]:
    """A Gaussian plan re-verified as :func:`_check_plan` does a pure one: made for this design, every ρ re-read
    from OpenDP's map at its scale, every (ε, δ) recomputed and the stratum's total within the design's."""
    eps = float(model.epsilon)
    approx = mechanism.guarantee.kind == "approx"
    shares = [float(x) for x in model.shares]
    for h, p in enumerate(plan):
        want = {"label": model.labels[h], "N": int(model.N[h]), "n": int(n[h]), "epsilon_target": eps,
                "mechanism": mechanism.name, "sensitivity": _sensitivity_record(model), "shares": shares,
                "guarantee": mechanism.guarantee.kind}
        for key, value in want.items():
            if getattr(p, key) != value:
                raise ValueError(f"plan[{h}].{key} is {getattr(p, key)!r} but the design has {value!r}: the plan was "
                                 "made for another design (make it with plan_stratified(model, n))")
        if not (len(p.scales) == model.J and (not approx or len(p.nominal_delta) == model.J)):
            raise ValueError(f"plan[{h}] has {len(p.scales)} scales but the design has {model.J} variable(s)")
        if approx and any(not 0 < dj < 1 for dj in p.nominal_delta):
            raise ValueError(f"plan[{h}].nominal_delta must be in (0, 1), got {p.nominal_delta!r}")
        ms = _gaussian_measurements(dp, model, mechanism, h, p.n, p.scales, p.nominal_delta)
        cell = Cell(p.label, ms, p.N, p.n)
        spent = [m.epsilon if approx else m.rho for m in ms]
        within = (cell.epsilon <= eps and cell.delta <= float(model.delta)) if approx else cell.rho <= eps
        if spent != [float(e) for e in p.nominal_spent] or not within:
            raise ValueError(f"plan[{h}] (stratum {p.label!r}): its scales spend {spent!r}, not what it records or "
                             f"above the design's budget {eps!r}")
    return list(plan)


def estimate_stratified(Z, stratum, N, n, noise_variance, confidence: float = 0.95) -> dict:
    """The stratified mean of noisy responses ``Z`` (rows: units, columns: variables), its SE and CI.

    ``stratum`` gives each row's stratum, ``noise_variance`` (k × J) the known noise variance γ² of each
    stratum and variable. Strata with n_h = 1 < N_h leave the SE undefined (nan; say so in ``message``).
    """
    from scipy.special import ndtri     # the normal quantile (scipy.stats would seed a numpy RNG on import)

    Z = np.asarray(Z, dtype=float)
    if Z.ndim == 1:
        Z = Z[:, None]
    N = np.asarray(N, dtype=float)
    n = np.asarray(n, dtype=float)
    k, J = N.size, Z.shape[1]
    gam = np.asarray(noise_variance, dtype=float).reshape(k, J)
    W = N / N.sum()
    mean = np.zeros((k, J))
    var = np.zeros((k, J))
    short = []
    for h in range(k):
        rows = Z[stratum == h]
        mean[h] = rows.mean(axis=0)
        f = n[h] / N[h]
        if rows.shape[0] >= 2:
            s2 = rows.var(axis=0, ddof=1)
            var[h] = (1.0 - f) * s2 / n[h] + f * gam[h] / n[h]
        elif f == 1.0:
            var[h] = gam[h] / n[h]
        else:
            var[h] = np.nan
            short.append(h)
    est = W @ mean
    v = (W ** 2) @ var
    se = np.sqrt(v)
    z = float(ndtri(0.5 + confidence / 2.0))
    ci = np.column_stack([est - z * se, est + z * se])
    msg = ""
    if short:
        msg = (f"{len(short)} stratum(s) with one sampled unit (out of more): their sampling variance cannot be "
               "estimated, so the SE and CI are undefined; design with min_per_stratum=2")
    return {"estimate": est, "se": se, "ci": ci, "stratum_mean": mean, "stratum_se": np.sqrt(var), "message": msg}


def _design_details(model, n, plan) -> dict:
    return {"design": {"labels": list(model.labels), "N": model.N.tolist(), "n": [int(x) for x in n],
                       "epsilon": float(model.epsilon), "mechanism": model.mechanism.name,
                       "guarantee": model.mechanism.guarantee.kind, "delta": model.delta,
                       "value_range": _range_record(model),
                       "sensitivity": _sensitivity_record(model), "variables": list(model.variables),
                       "shares": [float(s) for s in model.shares]},
            "amplification": [{"stratum": p.label, "N": p.N, "n": p.n, "rate": p.n / p.N,
                               "nominal_target": p.nominal_target, "nominal_spent": p.nominal_spent,
                               "scales": p.scales, "epsilon_central": p.epsilon_central,
                               "epsilon_central_opendp": p.epsilon_central_opendp,
                               **({"nominal_delta": p.nominal_delta, "rho": p.rho, "sigma_design": p.sigma_design,
                                   "epsilon_opendp": p.epsilon_opendp} if p.guarantee != "pure" else {})}
                              for p in plan]}


__all__ = ["plan_stratified", "release_stratified", "estimate_stratified", "StratifiedRelease", "StratumPlan",
           "BudgetExceeded"]
