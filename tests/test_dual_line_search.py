"""The continuous dual's 1-D search (``line_raise`` in dpopt/backends/exact/constrained/dual.py): along one
multiplier it must land where that row's slope g_l changes sign, whatever the scale guess it starts from. The
oracle is scipy's brentq on the same slope (an independent root finder), on min-cost designs in the classical
regime (the row a power of λ) and with Laplace, DLap and TuLap noise (not one)."""

import numpy as np
import pytest
from scipy.optimize import brentq

import dpopt
from dpopt.backends.exact.constrained.dual import Dual, line_raise
from dpopt.formulations.separable import program_of


def _min_cost(k=40, seed=0, eps=700.0, mechanism="laplace"):
    rng = np.random.default_rng(seed)
    N = rng.integers(2000, 50000, k)
    S2 = (10.0 ** rng.uniform(0, 2, k)) ** 2
    cost = rng.uniform(1.0, 20.0, k)
    d = dpopt.StratifiedDesign(N, S2, 50 * k, eps, mechanism=mechanism, sensitivity=1e-6 if eps == 700.0 else 1.0)
    V = 1.5 * d.objective_value(d.solve().n)        # a target the plain optimum beats: the row binds inside the box
    return program_of(d.min_cost(cost, variance_target=V)), cost


@pytest.mark.parametrize("guess_factor", [1e-4, 1.0, 1e4])
@pytest.mark.parametrize("case", [(700.0, "laplace"), (1.0, "laplace"), (1.0, "dlap"), (0.5, "tulap")])
def test_line_raise_finds_the_rows_root_from_any_scale(case, guess_factor):
    eps, mech = case
    prog, _ = _min_cost(eps=eps, mechanism=mech)
    dual = Dual(prog)
    l = next(i for i, r in enumerate(prog.rows) if r.kind != "total")
    p = dual.at(np.zeros(prog.m))
    assert p.g[l] > 0                                   # the row is violated at λ = 0: the search raises λ_l

    def slope(v):
        lam = np.zeros(prog.m)
        lam[l] = v
        return dual.at(lam).g[l]

    hi = 1.0
    while slope(hi) > 0:
        hi *= 10.0
    root = brentq(slope, 0.0, hi, xtol=1e-14 * hi, rtol=1e-12)
    calls = {"n": 0}
    at = dual.at

    def counted(lam):
        calls["n"] += 1
        return at(lam)

    dual.at = counted
    res = line_raise(dual, p, l, guess_factor * root)
    assert res.lam[l] == pytest.approx(root, rel=2e-3)   # the search's width (rtol 1e-3), Newton takes it from there
    assert res.q >= p.q
    assert calls["n"] <= 40                             # bounded; regula falsi from a guess 10^4 off took ~25

