"""One vocabulary (issue 12, docs/privacy.md#vocabulary): the names give the closed forms; the old names are
gone (issue 19: the package is unreleased, so nothing is deprecated)."""

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


def test_old_names_are_gone():
    # the package is unreleased: the names before issue 12's vocabulary are removed, not deprecated
    for name in ("amplified_epsilon", "amplified_delta", "amplified_epsilon_delta"):
        assert not hasattr(privacy, name), name
    for name in ("amplified_nominal_epsilon", "monte_carlo"):
        assert not hasattr(dpopt, name), name
    assert not hasattr(dpopt.SampleSizeProgram, "noise_variance")
    assert not hasattr(dpopt.HierarchyBudget, "objective_kind")
    with pytest.raises(TypeError, match="objective"):
        dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 2.0, objective="laplace-variance")
    with pytest.raises(TypeError):
        dpopt.release(dpopt.toy_hierarchy(), [1.0, 1.0, 1.0])


def test_hierarchy_model_file_key_is_loss():
    base = {"family": "hierarchy", "epsilon_total": 2.0, "dataset": "toy"}
    m, _ = modelfile.from_dict({**base, "loss": "laplace-variance"})
    assert m.loss == "laplace-variance"
    with pytest.raises(modelfile.ModelFileError, match="objective"):
        modelfile.from_dict({**base, "objective": "laplace-variance"})


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privacy.central_epsilon(1.0, 0.5)
        dpopt.HierarchyBudget(dpopt.toy_hierarchy(), 2.0, loss="truncated-laplace-mse")
        dpopt.SampleSizeProgram(1000, 2.0, 1.0, sensitivity=1.0).noise_variance_at(10.0)
