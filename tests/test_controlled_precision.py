"""Multi-domain controlled precision (docs/controlled_precision.md) against independent oracles: brute force over
every integer design, written from the formulas (Laplace noise γ² = 2Δ²/ε_i², ε_i = log1p(expm1(ε)·N_i/n_i));
the classical continuous optimum in closed form (each domain's Neyman value equalised, a root in T); and
scipy's SLSQP on the continuous min-max with DP noise."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

import dpopt
from dpopt import ControlledPrecisionDesign, StratifiedDesign, Status
from dpopt.io.modelfile import ModelFileError, from_dict


# ------------------------------------------------------------------ oracles written from the formulas

def laplace_unit(N, s2, n, eps, delta):
    """(σ² + 2Δ²/ε_i²)/n with ε_i = log1p(expm1(ε)·N/n): the privatised stratum mean's variance per unit weight."""
    n = np.asarray(n, dtype=float)
    ei = np.log1p(np.expm1(eps) * N / n)
    return (s2 + 2 * delta ** 2 / ei ** 2) / n


def domain_variances(N, s2, n, eps, delta, dom, D, estimate="total", fpc=True):
    t = laplace_unit(N, s2, n, eps, delta)
    out = np.zeros(D)
    for d in range(D):
        m = dom == d
        w = N[m].astype(float) ** 2 if estimate == "total" else (N[m] / N[m].sum()) ** 2
        out[d] = np.sum(w * t[m]) - (np.sum(w * s2[m] / N[m]) if fpc else 0.0)
    return out


def compositions(total, lo, hi):
    """Every integer n with lo ≤ n ≤ hi and Σ n = total."""
    k = len(lo)
    if k == 1:
        if lo[0] <= total <= hi[0]:
            yield (total,)
        return
    rest_lo, rest_hi = sum(lo[1:]), sum(hi[1:])
    for v in range(max(lo[0], total - rest_hi), min(hi[0], total - rest_lo) + 1):
        for tail in compositions(total - v, lo[1:], hi[1:]):
            yield (v, *tail)


def brute_force(N, s2, total, eps, delta, dom, rho, lo, hi, extra=lambda n: True, **kw):
    best, arg = math.inf, None
    D = len(rho)
    for n in compositions(total, list(lo), list(hi)):
        n = np.array(n)
        if not extra(n):
            continue
        T = float(np.max(domain_variances(N, s2, n, eps, delta, dom, D, **kw) / rho ** 2))
        if T < best:
            best, arg = T, n
    return best, arg


def classical_continuous_T(N, S, dom, rho, total):
    """No noise, finite-population corrected domain totals, no bound active: domain d's least variance with m
    units is A_d²/m − B_d (A_d = Σ N_h S_h, B_d = Σ N_h S_h²; Neyman within the domain), so the min-max equalises
    them at T: Σ_d A_d²/(T ρ_d² + B_d) = total, one root in T."""
    D = len(rho)
    A = np.array([np.sum(N[dom == d] * S[dom == d]) for d in range(D)])
    B = np.array([np.sum(N[dom == d] * S[dom == d] ** 2) for d in range(D)])
    f = lambda T: np.sum(A ** 2 / (T * rho ** 2 + B)) - total
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    return brentq(f, 0.0 if f(0.0) > 0 else -np.min(B / rho ** 2) * (1 - 1e-12), hi, xtol=1e-14, rtol=1e-14)


def random_instance(rs, k, D, eps, small=True):
    N = rs.integers(4, 12 if small else 400, size=k)
    s2 = rs.uniform(0.2, 9.0, size=k)
    dom = np.concatenate([np.arange(D), rs.integers(0, D, size=k - D)])
    rs.shuffle(dom)
    rho = rs.uniform(0.5, 3.0, size=D) * np.array([N[dom == d].sum() for d in range(D)])
    return N, s2, dom, rho


def design_of(N, s2, total, eps, delta, dom, **kw):
    return StratifiedDesign(N, s2, total, eps, sensitivity=delta, fpc=True,
                            domains=[f"d{v}" for v in dom], **kw)


# ------------------------------------------------------------------ the model


def test_objective_is_the_largest_weighted_domain_variance():
    rs = np.random.default_rng(1)
    N, s2, dom, rho = random_instance(rs, 6, 3, 1.0, small=False)
    d = design_of(N, s2, 60, 0.7, 2.0, dom)
    names = [f"d{v}" for v in range(3)]
    cp = d.controlled_precision(rho={nm: r for nm, r in zip(names, rho)})
    n = rs.integers(1, 20, size=6)
    want = domain_variances(N, s2, n, 0.7, 2.0, dom, 3)
    order = [int(nm[1:]) for nm in cp.domain_names]           # the model's domains in first-seen order
    np.testing.assert_allclose(cp.domain_variances(n), want[order], rtol=1e-12)
    assert cp.objective_value(n) == pytest.approx(np.max(want / rho ** 2), rel=1e-12)
    mean = d.controlled_precision(rho=dict(zip(names, rho)), estimate="mean")
    np.testing.assert_allclose(mean.domain_variances(n),
                               domain_variances(N, s2, n, 0.7, 2.0, dom, 3, estimate="mean")[order], rtol=1e-12)


def test_rho_from_totals_and_priorities_is_stratallos():
    d = design_of(np.array([140, 110, 135, 190, 200, 40, 70]), np.array([180, 20, 5, 4, 35, 9, 40.]) ** 2, 828,
                  700.0, 1e-6, np.array([0, 0, 1, 1, 2, 2, 2]))
    cp = d.controlled_precision(totals=[2, 3, 5], priorities=[0.5, 0.2, 0.3])
    np.testing.assert_allclose(cp.rho, np.array([2, 3, 5]) * np.sqrt([0.5, 0.2, 0.3]), rtol=1e-15)


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "exactly one"),
    (dict(rho=[1, 2], totals=[1, 2]), "exactly one"),
    (dict(rho=[1, -2]), "rho"),
    (dict(rho=[1, 2, 3]), "rho"),
    (dict(rho=3.0), "one value per domain"),
    (dict(totals=[1, 2], priorities=[1, 0]), "priorities"),
    (dict(rho=[1, 2], priorities=[1, 1]), "priorities= goes with totals="),
    (dict(rho={"d0": 1, "zz": 2}), "unknown domain"),
    (dict(rho={"d0": 1}), "no value for domain"),
    (dict(rho=[1, 2], estimate="median"), "estimate"),
    (dict(rho=[1, 2], domains=["a"]), "4 entries"),
    (dict(rho=[1, 2], domains=5), "sequence"),
])
def test_bad_input_names_the_field(kwargs, match):
    d = design_of(np.array([10, 20, 30, 40]), np.ones(4), 20, 1.0, 1.0, np.array([0, 0, 1, 1]))
    with pytest.raises((ValueError, TypeError), match=match):
        d.controlled_precision(**kwargs)


def test_no_domains_column_is_refused():
    d = StratifiedDesign([10, 20], [1.0, 1.0], 10, 1.0)
    with pytest.raises(ValueError, match="domains"):
        d.controlled_precision(rho=[1.0])
    with pytest.raises(TypeError, match="StratifiedDesign"):
        ControlledPrecisionDesign(object(), rho=[1.0])


def test_model_file_form():
    data = {"family": "stratified_controlled_precision", "epsilon": 1.0, "total": 20, "fpc": True,
            "strata": {"N": [10, 20, 30, 40], "sigma2": [1.0, 2.0, 3.0, 4.0], "domain": ["a", "a", "b", "b"]},
            "controlled_precision": {"totals": {"a": 10.0, "b": 30.0}, "priorities": [1.0, 2.0]}}
    model, _ = from_dict(dict(data))
    assert isinstance(model, ControlledPrecisionDesign)
    np.testing.assert_allclose(model.rho, [10.0, 30.0 * math.sqrt(2.0)])
    bad = dict(data, controlled_precision={"totals": [1.0, 2.0], "colour": 1})
    with pytest.raises(ModelFileError, match="colour"):
        from_dict(bad)
    with pytest.raises(ModelFileError, match=r"\[controlled_precision\]"):
        from_dict({k: v for k, v in data.items() if k != "controlled_precision"})
    with pytest.raises(ModelFileError, match="rho"):
        from_dict(dict(data, controlled_precision={"rho": [1.0, -1.0]}))
