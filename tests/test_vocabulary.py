"""One vocabulary (issue 12, docs/privacy.md#vocabulary): the new names give the closed forms, and every
old name still works for one release with a DeprecationWarning naming its replacement."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt import privacy
from dpopt.io import modelfile


def test_central_and_nominal_budgets_are_the_closed_forms():
    eps, q = 0.7, 0.03
    nominal = privacy.nominal_epsilon(eps, q)
    assert nominal == pytest.approx(math.log1p(math.expm1(eps) / q), rel=1e-15)
    assert privacy.central_epsilon(nominal, q) == pytest.approx(eps, rel=1e-14)
    assert privacy.central_delta(1e-4, q) == pytest.approx(3e-6, rel=1e-15)
    assert privacy.central_epsilon_delta(nominal, 1e-4, q) == pytest.approx((eps, 3e-6), rel=1e-14)


@pytest.mark.parametrize("old,new,args", [
    (lambda *a: privacy.amplified_epsilon(*a), privacy.central_epsilon, (2.0, 0.1)),
    (lambda *a: privacy.amplified_delta(*a), privacy.central_delta, (1e-3, 0.1)),
    (lambda *a: privacy.amplified_epsilon_delta(*a), privacy.central_epsilon_delta, (2.0, 1e-3, 0.1)),
    (lambda *a: dpopt.amplified_nominal_epsilon(*a), privacy.nominal_epsilon, (1.0, 0.01)),
], ids=["amplified_epsilon", "amplified_delta", "amplified_epsilon_delta", "amplified_nominal_epsilon"])
def test_old_function_names_warn_and_agree(old, new, args):
    with pytest.warns(DeprecationWarning, match=new.__name__):
        got = old(*args)
    assert np.allclose(got, new(*args), rtol=1e-15)


def test_old_method_keyword_and_function_names_warn():
    s = dpopt.SampleSizeProgram(1000, 2.0, 1.0, sensitivity=1.0)
    with pytest.warns(DeprecationWarning, match="noise_variance_at"):
        assert s.noise_variance(50.0) == s.noise_variance_at(50.0)
    h = dpopt.toy_hierarchy()
    with pytest.warns(DeprecationWarning, match="loss="):
        old = dpopt.HierarchyBudget(h, 2.0, objective="laplace-variance")
    new = dpopt.HierarchyBudget(h, 2.0, loss="laplace-variance")
    assert old.objective_value(old.uniform_split()) == new.objective_value(new.uniform_split())
    with pytest.warns(DeprecationWarning, match="HierarchyBudget.loss"):
        assert new.objective_kind == new.loss == "laplace-variance"
    with pytest.raises(TypeError, match="loss= only"):
        dpopt.HierarchyBudget(h, 2.0, loss="laplace-variance", objective="laplace-variance")
    with pytest.warns(DeprecationWarning, match="simulate_hierarchy"):
        mc = dpopt.monte_carlo(h, new.uniform_split(), trials=200, seed=1)
    ref = dpopt.simulate_hierarchy(h, new.uniform_split(), trials=200, seed=1)
    assert np.array_equal(mc["mse"], ref["mse"])


def test_hierarchy_model_file_key_loss_and_its_old_name():
    base = {"family": "hierarchy", "epsilon_total": 2.0, "dataset": "toy"}
    m, _ = modelfile.from_dict({**base, "loss": "laplace-variance"})
    assert m.loss == "laplace-variance"
    with pytest.warns(DeprecationWarning, match="'loss'"):
        m2, _ = modelfile.from_dict({**base, "objective": "laplace-variance"})
    assert m2.loss == "laplace-variance"
    with pytest.raises(modelfile.ModelFileError, match="loss only"):
        modelfile.from_dict({**base, "objective": "laplace-variance", "loss": "laplace-variance"})


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privacy.central_epsilon(1.0, 0.5)
        dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 2.0, loss="truncated-laplace-mse")
        dpopt.SampleSizeProgram(1000, 2.0, 1.0, sensitivity=1.0).noise_variance_at(10.0)
