"""dpopt.datasets: the papers' instances, and the names they had before (still importable)."""

import numpy as np
import pytest

import dpopt
from dpopt import datasets


def test_chen_section54_is_the_papers_k10_instance():
    # Chen et al. §5.4 prints the k = 10 strata: N = 20000, 19000, ..., 11000 and σ_i² = 0.08^(1 + i/10)
    m = datasets.chen_section54(10, 1000)
    assert m.N.tolist() == list(range(20000, 10000, -1000)) and m.N.sum() == 155_000
    assert np.allclose(m.sigma2, 0.08 ** (1 + np.arange(1, 11) / 10), rtol=1e-15)
    assert m.objective_kind == "mean" and m.total == 1000 and m.mechanism.name == "laplace"
    big = datasets.chen_section54(10, 10 ** 6, scale_to_fit=True)      # η > Σ N: N scaled by 10
    assert big.N.tolist() == (10 * m.N).tolist()
    with pytest.raises(ValueError, match="total"):
        datasets.chen_section54(10, 10 ** 6)
    with pytest.raises(ValueError, match="k"):
        datasets.chen_section54(0, 100)


def test_chen_settings_are_read_only_and_build_models():
    with pytest.raises(TypeError):
        datasets.CHEN_TABLE1["total"] = 100
    m = datasets.chen_table1(epsilon=0.5, mechanism="tulap", objective="a-optimal")
    assert (m.epsilon, m.mechanism.name, m.objective_kind, m.total) == (0.5, "tulap", "a-optimal", 200)
    same = dpopt.StratifiedDesign(**datasets.CHEN_TABLE1, epsilon=0.5, mechanism="tulap", objective="a-optimal")
    assert np.array_equal(m.N, same.N) and np.array_equal(m.sigma2, same.sigma2)
    s52 = datasets.chen_section52(epsilon=2.0)
    assert s52.N.tolist() == list(datasets.CHEN_SECTION52["N"]) and s52.total == 200
    assert "epsilon = 2" in s52.name and datasets.chen_table1(name="mine").name == "mine"
    with pytest.raises(TypeError, match="epsilon"):          # bad input is named by the model's validator
        datasets.chen_table1(epsilon="one")


def test_old_names_still_import():
    from dpopt.datasets import load_gapminder, toy_hierarchy
    from dpopt.plots import stratified as figs
    assert toy_hierarchy is datasets.toy_hierarchy is dpopt.toy_hierarchy
    assert load_gapminder is datasets.load_gapminder is dpopt.load_gapminder
    assert figs.section54 is datasets.chen_section54
    assert figs.TABLE1 is datasets.CHEN_TABLE1 and figs.SECTION52 is datasets.CHEN_SECTION52
    h = toy_hierarchy()
    assert h.sizes == [1, 2, 5] and h.total == 450 and h.consistent
    import dpopt.models.hierarchy as hm       # the models never reach up to the datasets built on them
    assert not hasattr(hm, "toy_hierarchy") and not hasattr(hm, "load_gapminder")
    with pytest.raises(AttributeError):
        hm.no_such_name


def test_hierarchy_model_file_datasets_still_load(tmp_path):
    f = tmp_path / "toy.toml"
    f.write_text('family = "hierarchy"\nepsilon_total = 1.0\ndataset = "toy"\n')
    from dpopt.io.modelfile import load
    sol = load(f)[0].solve()
    assert np.allclose(sol.epsilon, [0.2519, 0.3174, 0.4307], atol=6e-5)
