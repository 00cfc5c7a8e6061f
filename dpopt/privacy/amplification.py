"""Privacy amplification by subsampling (docs/privacy.md), computed in log-space.

Vocabulary (docs/privacy.md#vocabulary): the *nominal* budget is what the mechanism spends on a
sampled record's data (large); the *central* budget is the guarantee for the population after
amplification (small). Sampling a fraction ``q`` of the records (SRS without replacement with substitution neighbours, or
Poisson sampling with add/remove neighbours) and running an ``eps_nom``-DP mechanism on the sample
gives ``log1p(q * expm1(eps_nom))``-DP. Both directions are evaluated as ``logaddexp(0, ...)`` of
log-quantities so that eps from 1e-6 to 700 and rates down to 1e-9 neither overflow nor lose
precision.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as V

def log_expm1(eps):
    """log(expm1(eps)) for eps > 0 without overflow (eps up to ~1e308) or underflow (eps ~ 1e-300)."""
    eps = np.asarray(eps, dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        big = eps > 1.0
        out = np.where(big, eps + np.log(-np.expm1(-np.where(big, eps, 1.0))),
                       np.log(np.expm1(np.where(big, 1.0, eps))))
    return out[()] if out.ndim == 0 else out


def _check_eps(name, eps):
    arr = V._as_float_array(name, eps)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {eps!r}")
    return arr


def _check_rate(q):
    arr = V._as_float_array("q (sampling rate)", q)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > 1):
        raise ValueError(f"q (sampling rate) must be in (0, 1], got {q!r}")
    return arr


def central_epsilon(epsilon_nominal, q):
    """Central budget of an ``epsilon_nominal``-DP mechanism run on a ``q``-subsample.

    ``log1p(q * expm1(epsilon_nominal))``; identical for SRS without replacement (substitution
    neighbours) and Poisson sampling (add/remove neighbours). Vectorised.
    """
    e = _check_eps("epsilon_nominal", epsilon_nominal)
    qq = _check_rate(q)
    out = np.logaddexp(0.0, np.log(qq) + log_expm1(e))
    return out[()] if np.ndim(out) == 0 else out


def nominal_epsilon(epsilon, q):
    """Nominal budget that a ``q``-subsample may spend so the release is ``epsilon``-DP.

    Inverse of :func:`central_epsilon`: ``log1p(expm1(epsilon) / q)``. Vectorised.
    """
    e = _check_eps("epsilon", epsilon)
    qq = _check_rate(q)
    out = np.logaddexp(0.0, log_expm1(e) - np.log(qq))
    return out[()] if np.ndim(out) == 0 else out


def central_delta(delta_nominal, q):
    """delta amplifies linearly: a ``delta_nominal`` mechanism on a ``q``-subsample is ``q*delta_nominal``."""
    d = V._as_float_array("delta_nominal", delta_nominal)
    if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(d > 1):
        raise ValueError(f"delta_nominal must be in [0, 1], got {delta_nominal!r}")
    out = _check_rate(q) * d
    return out[()] if np.ndim(out) == 0 else out


def nominal_delta(delta, q):
    """Nominal delta ``delta/q`` a ``q``-subsample may spend; raises when it would exceed 1."""
    d = V._as_float_array("delta", delta)
    if not np.all(np.isfinite(d)) or np.any(d < 0) or np.any(d >= 1):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    out = d / _check_rate(q)
    if np.any(out > 1):
        raise ValueError(f"nominal delta = delta/q exceeds 1 (delta={delta!r}, q={q!r}); "
                         "the (epsilon, delta) target is unreachable at this sampling rate")
    return out[()] if np.ndim(out) == 0 else out


def central_epsilon_delta(epsilon_nominal, delta_nominal, q):
    """The central (epsilon, delta) pair: ``(log1p(q expm1(eps_nom)), q delta_nom)``."""
    return central_epsilon(epsilon_nominal, q), central_delta(delta_nominal, q)


def nominal_epsilon_delta(epsilon, delta, q):
    """Nominal (eps, delta) pair for a ``q``-subsample; raises if delta/q > 1."""
    return nominal_epsilon(epsilon, q), nominal_delta(delta, q)

