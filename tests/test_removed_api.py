"""Code that was never read is gone; the one public argument among it warns before it goes."""

import tomllib
from pathlib import Path

import pytest

import dpopt
from dpopt import privacy

ROOT = Path(__file__).resolve().parent.parent


def test_unused_methods_and_attributes_are_removed():
    assert not hasattr(dpopt.Hierarchy, "children_index")
    assert not hasattr(dpopt.HierarchyBudget, "level_mse")
    assert not hasattr(dpopt.SampleSizeProgram, "noise_ratio_at")
    for mech in (privacy.Mechanism, privacy.Laplace, privacy.DiscreteLaplace, privacy.TuLap):
        assert not hasattr(mech, "integer_valued"), mech


def test_scheme_has_no_effect_and_is_deprecated():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                         # no warning without the argument
        base = privacy.central_epsilon(1.0, 0.5), privacy.nominal_epsilon(1.0, 0.5)
    for scheme in ("srswor", "poisson"):
        with pytest.warns(DeprecationWarning, match="scheme= has no effect"):
            assert privacy.central_epsilon(1.0, 0.5, scheme=scheme) == base[0]
        with pytest.warns(DeprecationWarning, match="scheme= has no effect"):
            assert privacy.nominal_epsilon(1.0, 0.5, scheme=scheme) == base[1]


def test_packaging_names_no_missing_data():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = cfg.get("tool", {}).get("setuptools", {}).get("package-data", {})
    for package, globs in package_data.items():
        for g in globs:
            assert list((ROOT / package.replace(".", "/")).glob(g)), f"package-data {package}: {g} matches nothing"
