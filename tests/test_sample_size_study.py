"""SampleSizeStudy (Monte Carlo over rates) against the closed form of the mean, the paper's median claims,
and its model-file loader."""

import numpy as np
import pytest

import dpopt
from dpopt.io import modelfile
from dpopt.models.sample_size import SampleSizeProgram
from dpopt.models.sample_size_study import SampleSizeStudy
from dpopt.simulate.sample_size import lognormal_population


def test_mean_matches_closed_form_and_never_gains():
    """Mean with global sensitivity R/n: the estimated MSE at every rate is the closed-form V_n of docs/sample_size.md
    within 4 Monte Carlo standard errors, and the answer is the population release (Hu et al.: no gain)."""
    pop = np.random.default_rng(3).uniform(0, 1, 2001)
    study = SampleSizeStudy(pop, 0.5, rates=[0.02, 0.1, 0.3, 0.6, 0.9], statistic="mean", draws=400, seed=5)
    sol = study.solve()
    R = float(pop.max() - pop.min())
    closed = SampleSizeProgram(N=pop.size, S2=float(np.var(pop, ddof=1)), epsilon=0.5, sensitivity="mean",
                               value_range=R)
    v = closed.variance(sol.n_grid.astype(float))
    assert np.all(np.abs(sol.mse - v) <= 4 * sol.se)
    assert sol.mse_population == pytest.approx(closed.V_N, rel=1e-12)
    assert sol.status == dpopt.Status.FEASIBLE and not sol.helps and sol.n == pop.size


@pytest.mark.parametrize("eps, helps", [(0.1, True), (5.0, False)])
def test_median_gain_only_at_small_epsilon(eps, helps):
    """Hu et al. Fig. 8 (lognormal(5, 0.5), δ = 1/(2N)): at ε = 0.1 a small sample beats the population median
    by far more than the Monte Carlo error; at ε = 5 every sample is worse than the population release."""
    study = SampleSizeStudy(lognormal_population(2001, seed=0), eps, rates=[0.05, 0.2, 0.5, 0.9], draws=150)
    sol = study.solve()
    assert sol.helps is helps
    if helps:
        assert sol.z_score > 5 and sol.rate < 0.5 and sol.objective < sol.mse_population
        assert "not a proven optimum" in sol.message
    else:
        assert np.all(sol.mse - 4 * sol.se > sol.mse_population) and sol.objective == sol.mse_population


def test_bad_input_names_the_field():
    pop = np.arange(10.0)
    with pytest.raises(ValueError, match="rates"):
        SampleSizeStudy(pop, 1.0, rates=[0.5, 1.0])
    with pytest.raises(ValueError, match="epsilon"):
        SampleSizeStudy(pop, -1.0)
    with pytest.raises(ValueError, match="statistic"):
        SampleSizeStudy(pop, 1.0, statistic="mode")
    with pytest.raises(ValueError, match="population"):
        SampleSizeStudy([1.0], 1.0)
    with pytest.raises(ValueError, match="delta"):
        SampleSizeStudy(pop, 1.0, delta=0.0)
    with pytest.raises(ValueError, match="population"):
        SampleSizeStudy([1.0, np.nan, 2.0], 1.0)


def test_model_file_populations(tmp_path):
    (tmp_path / "pop.csv").write_text("id,income\n1,3.0\n2,5.0\n3,4.0\n4,10.0\n5,1.0\n")
    model, _ = modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0, "statistic": "mean",
                                    "population": {"kind": "csv", "csv": "pop.csv", "column": "income"}},
                                   base=tmp_path)
    assert np.array_equal(model.population, [1.0, 3.0, 4.0, 5.0, 10.0])
    model, _ = modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0,
                                    "population": {"kind": "values", "values": [3, 1, 2]}})
    assert model.N == 3 and model.delta == pytest.approx(1 / 6)
    for bad, match in (({"kind": "poisson", "N": 5}, "kind"), ({"kind": "lognormal"}, "missing key"),
                       ({"kind": "csv", "csv": "nope.csv"}, "no such file"),
                       ({"kind": "csv", "csv": "pop.csv", "column": "age"}, "no column")):
        with pytest.raises(modelfile.ModelFileError, match=match):
            modelfile.from_dict({"family": "sample_size_study", "epsilon": 1.0, "population": bad}, base=tmp_path)


def test_rate_is_the_grid_rate_asked_for():
    """N = 2001 and rate 0.05: the sample is round(0.05·2001) = 100 records (fraction 0.049975); the answer's
    rate is the 0.05 the user gave, and the realised fraction is reported beside it."""
    study = SampleSizeStudy(lognormal_population(2001, seed=0), 0.1, rates=[0.05, 0.2], draws=60)
    sol = study.solve()
    assert sol.helps and sol.rate in (0.05, 0.2)
    assert sol.sample_fraction == sol.n / 2001 and sol.n == round(sol.rate * 2001)
