"""The Solution contract of docs/api.md: scalar decisions are ints, budgets are the ``epsilon`` field,
certificate kinds form a closed set, ``to_frame()`` and ``_repr_html_``."""

import json
import sys

import numpy as np
import pytest

import dpopt
from dpopt.result import Certificate, CertificateKind, Solution, Status


def table1():
    return dpopt.datasets.chen_table1(epsilon=1.0)


# ------------------------------------------------------------------ scalar decisions
def test_sample_size_decision_is_a_python_int():
    sol = dpopt.SampleSizeProgram(N=10 ** 6, S2=1.0, epsilon=1.0, sensitivity=1e-3).solve()
    assert type(sol.n) is int and int(sol.n) == sol.n == sol.details["n_star"]
    assert sol.n == pytest.approx(sol.rate * 10 ** 6)
    assert json.loads(json.dumps(sol.to_dict()))["n"] == sol.n
    for backend in ("scipy", "pyomo"):
        other = dpopt.SampleSizeProgram(N=2000, S2=1.0, epsilon=1.0, sensitivity=0.01).solve(backend=backend)
        assert other.n is None or type(other.n) is int, backend


def test_sample_size_study_decision_is_a_python_int():
    pop = dpopt.simulate.sample_size.lognormal_population(401, seed=0)
    sol = dpopt.SampleSizeStudy(pop, 0.1, rates=[0.2, 0.5], draws=20).solve()
    assert type(sol.n) is int and 1 <= sol.n <= 401
    assert "n = " + str(sol.n) in dpopt.SampleSizeStudy(pop, 0.1, rates=[0.2, 0.5], draws=20).report(sol)


def test_numpy_scalar_decision_becomes_int():
    assert type(Solution(Status.OPTIMAL, n=np.int64(7)).n) is int
    assert type(Solution(Status.OPTIMAL, n=np.array(7)).n) is int
    one_stratum = Solution(Status.OPTIMAL, n=np.array([7]))          # a vector of one stratum stays a vector
    assert isinstance(one_stratum.n, np.ndarray) and one_stratum.n.shape == (1,)


# ------------------------------------------------------------------ budgets
def test_hierarchy_budgets_are_the_epsilon_field_not_a_detail():
    sol = dpopt.HierarchyBudget(dpopt.datasets.toy_hierarchy(), 1.0).solve()
    assert "epsilon" in Solution.__dataclass_fields__
    assert "epsilon" not in sol.details
    assert np.array_equal(sol.epsilon, sol.x)
    assert np.allclose(sol.epsilon, [0.2519, 0.3174, 0.4307], atol=6e-5)     # Ko et al.'s toy tree
    assert sol.to_dict()["epsilon"] == pytest.approx(list(sol.x))
    assert "epsilon" not in sol.to_dict()["details"]
    # the other families have no budget decision
    assert table1().solve().epsilon is None
    assert dpopt.ImportanceSampling(1.0, slopes=[0.5]).solve().epsilon is None


# ------------------------------------------------------------------ certificate kinds
def test_certificate_kinds_are_a_closed_set():
    with pytest.raises(ValueError, match="certificate kind must be one of exchange, gap, kkt, scan, enumeration"):
        Certificate("dual", True)
    c = Certificate("gap", True, gap=0.0)
    assert c.kind is CertificateKind.GAP and c.kind == "gap" and f"{c.kind}" == "gap"
    assert c.to_dict()["kind"] == "gap" and json.dumps(c.to_dict())
    assert Certificate(CertificateKind.EXCHANGE, True, slack=1.0).kind == "exchange"


def test_every_backend_certificate_has_a_known_kind():
    models = [table1(), dpopt.HierarchyBudget(dpopt.datasets.toy_hierarchy(), 1.0),
              dpopt.SampleSizeProgram(N=500, S2=1.0, epsilon=1.0, sensitivity=0.01),
              dpopt.ImportanceSampling(1.0, slopes=[0.05, 0.2])]
    seen = set()
    for m in models:
        for task in ("solve", "relax"):
            for backend in m.backends(task):
                opts = {"time_limit": 20} if backend == "pyomo" else {}
                sol = (m.solve if task == "solve" else m.relax)(backend=backend, **opts)
                if sol.certificate is not None:
                    assert isinstance(sol.certificate.kind, CertificateKind), (m, backend, task)
                    seen.add(sol.certificate.kind)
    assert {CertificateKind.EXCHANGE, CertificateKind.GAP, CertificateKind.KKT} <= seen


# ------------------------------------------------------------------ to_frame and _repr_html_
def test_to_frame_one_row_per_stratum_level_record():
    pd = pytest.importorskip("pandas")
    m = dpopt.StratifiedDesign(N=[50, 60, 70], sigma2=[1.0, 2.0, 3.0], total=30, epsilon=1.0,
                               labels=["north", "south", "east"])
    sol = m.solve()
    f = sol.to_frame()
    assert isinstance(f, pd.DataFrame) and f.index.name == "stratum"
    assert list(f.index) == ["north", "south", "east"] and list(f["n"]) == list(sol.n)
    assert f.attrs["status"] == "optimal" and f.attrs["objective"] == sol.objective

    h = dpopt.HierarchyBudget(dpopt.datasets.toy_hierarchy(), 1.0).solve()
    f = h.to_frame()
    assert f.index.name == "level" and list(f.index) == [1, 2, 3]
    assert np.allclose(f["epsilon"], h.epsilon) and np.allclose(f["mse_per_level"], h.mse_per_level)

    q = dpopt.ImportanceSampling(1.0, slopes=[0.05, 0.2, 0.5]).solve()
    f = q.to_frame()
    assert f.index.name == "record" and len(f) == 3
    assert np.allclose(f["x"], q.x) and np.allclose(f["weights"], 1 / q.x)

    s = dpopt.SampleSizeProgram(N=10 ** 6, S2=1.0, epsilon=1.0, sensitivity=1e-3).solve()
    f = s.to_frame()
    assert len(f) == 1 and f["n"].iloc[0] == s.n and f["gain"].iloc[0] == s.gain

    failed = Solution(Status.UNSUPPORTED, model="StratifiedDesign", message="no")
    assert failed.to_frame().empty and failed.to_frame().index.name == "stratum"


def test_to_frame_without_pandas_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)      # import pandas now fails
    with pytest.raises(ImportError, match="pip install pandas"):
        table1().solve().to_frame()


def test_repr_html_escapes_and_needs_no_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    sol = table1().solve()
    out = sol._repr_html_()
    assert "<table>" in out and "optimal" in out and "exchange certificate holds" in out
    for label, n in zip(sol.labels, sol.n):
        assert f"<td>{label}</td><td>{n}</td>" in out
    bad = Solution(Status.ERROR, message="<script>alert(1)</script>")
    assert "<script>" not in bad._repr_html_() and "&lt;script&gt;" in bad._repr_html_()
    big = dpopt.StratifiedDesign(N=[100] * 30, sigma2=[1.0] * 30, total=300, epsilon=1.0).solve()
    assert "10 more rows" in big._repr_html_()


def test_stratified_to_frame_carries_the_reports_columns():
    """One row per stratum with what the report shows, each column checked against its formula."""
    import dpopt
    N, s2 = np.array([100, 200, 300]), np.array([1.0, 2.0, 3.0])
    m = dpopt.StratifiedDesign(N, s2, 30, 1.0, labels=["a", "b", "c"], domains=["x", "x", "y"])
    sol = m.solve()
    f = sol.to_frame()
    assert list(f.index) == ["a", "b", "c"] and list(f["domain"]) == ["x", "x", "y"]
    n = sol.n.astype(float)
    eps_n = np.log1p(np.expm1(1.0) * N / n)                      # amplified nominal budget (docs/privacy.md)
    np.testing.assert_allclose(f["rate"], n / N, rtol=1e-15)
    np.testing.assert_allclose(f["epsilon_nominal"], eps_n, rtol=1e-12)
    np.testing.assert_allclose(f["noise_scale"], 1.0 / eps_n, rtol=1e-12)       # Laplace scale Δ/ε, Δ = 1
    np.testing.assert_allclose(f["sampling_var"], N ** 2 * s2 / n, rtol=1e-12)
    np.testing.assert_allclose(f["noise_var"], N ** 2 * 2 / eps_n ** 2 / n, rtol=1e-12)
    np.testing.assert_allclose(f["share"].sum(), 1.0, rtol=1e-12)
    assert f.attrs["objective"] == pytest.approx(float((f["sampling_var"] + f["noise_var"]).sum()), rel=1e-12)


def test_every_public_callable_has_a_docstring():
    """help(model.solve) says what it does and which options it takes (issue 21): every class and function
    dpopt exports, and every public method of its classes, has a docstring."""
    import inspect

    import dpopt
    from dpopt.options import COMMON

    missing = []
    for name in dpopt.__all__:
        obj = getattr(dpopt, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for member in dir(obj):
                f = getattr(obj, member)
                if not member.startswith("_") and callable(f) and not inspect.isclass(f) \
                        and not (getattr(f, "__doc__", "") or "").strip():
                    missing.append(f"{name}.{member}")
    assert not missing, missing
    for option in COMMON:
        assert option in dpopt.StratifiedDesign.solve.__doc__ and option in dpopt.HierarchyBudget.relax.__doc__
