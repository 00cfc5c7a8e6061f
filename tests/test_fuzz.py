"""Seeded, time-bounded fuzz of every family, the public helpers and the model-file keys (issue 14 acceptance).

Every case is either

* refused with a ValueError or TypeError whose message names the field (model files: the key; the CLI:
  exactly one ``dpopt: error:`` line, exit code 2), or
* accepted, solved with the family's default backend, and checked against an oracle written here
  (brute force / dynamic programming for integer designs, bisection per record for importance sampling,
  random feasible budget splits for hierarchies, closed forms for sample sizes).

Any other exception (ZeroDivisionError, IndexError, OverflowError, ...), a NaN or infinite result, a hang
(each group runs in a forked child with a time bound), or an unchecked 'optimal' fails the test.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

import dpopt
from bounded import run_bounded
from dpopt.io import modelfile
from dpopt.models.hierarchy import Hierarchy

ROOT = Path(__file__).resolve().parent.parent
GROUP_TIMEOUT = 60.0

# ---------------------------------------------------------------------------------- bad values
SCALAR_BAD = {
    "none": None, "numeric-string": "1.0", "string": "x", "true": True, "complex": 1 + 1j, "nan": math.nan,
    "inf": math.inf, "-inf": -math.inf, "negative": -1, "zero": 0, "empty-list": [], "dict": {},
    "bytes": b"\xff", "huge-int": 2 ** 70, "huge": 1e308, "subnormal": 5e-324, "list": [1.0, 2.0],
}
VECTOR_BAD = {
    **{k: v for k, v in SCALAR_BAD.items() if k != "list"},
    "nan-entry": [1.0, math.nan, 2.0], "inf-entry": [1.0, math.inf, 2.0], "string-entry": [1.0, "2", 3.0],
    "bool-entry": [1.0, True, 3.0], "complex-entry": [1.0, 2j, 3.0], "negative-entry": [1.0, -2.0, 3.0],
    "zero-entry": [1.0, 0.0, 3.0], "short": [1.0, 2.0], "long": [1.0, 2.0, 3.0, 4.0], "2-d": [[1.0, 2.0, 3.0]],
    "ragged": [[1.0], [2.0, 3.0]], "huge-entry": [1.0, 2.0 ** 70, 3.0], "subnormal-entry": [1.0, 5e-324, 3.0],
}
ALLOWED = (ValueError, TypeError)


def _names_field(exc: Exception, names) -> bool:
    text = str(exc).lower()
    return any(re.search(rf"(?<![a-z0-9_]){re.escape(n.lower())}(?![a-z0-9_])", text) for n in names)


def _check_refusal(exc, names, where):
    if not isinstance(exc, ALLOWED):
        raise AssertionError(f"{where}: {type(exc).__name__} (not ValueError/TypeError): {exc}")
    if not _names_field(exc, names):
        raise AssertionError(f"{where}: the message does not name {names}: {exc}")
    if "\n" in str(exc).strip():
        raise AssertionError(f"{where}: multi-line message: {exc!r}")


def _finite(x) -> bool:
    try:
        return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------------- oracles
def _stratified_oracle(model):
    """min of g over every feasible integer design, g written independently (laplace/dlap/tulap)."""
    from test_stratified_exact import oracle_objective
    N, lo, hi = model.N.tolist(), model.lower.tolist(), model.upper.tolist()
    best = math.inf
    for head in itertools.product(*[range(lo[i], hi[i] + 1) for i in range(model.k - 1)]):
        last = int(model.total) - sum(head)
        if lo[-1] <= last <= hi[-1]:
            best = min(best, oracle_objective(N, model.sigma2, model.alpha, model.epsilon, model.mechanism.name,
                                              model.sensitivity, head + (last,)))
    return best


def check_stratified(model, sol, where):
    from test_stratified_exact import oracle_objective
    assert sol.status in ("optimal", "feasible", "unsupported", "infeasible"), f"{where}: {sol.status} {sol.message}"
    if sol.status in ("optimal", "feasible"):
        assert _finite(sol.objective) and model.is_feasible(sol.n), where
    if sol.status == "optimal" and model.mechanism.name in ("laplace", "dlap", "tulap") and model.is_plain \
            and model.k <= 4 and model.total <= 80:
        got = oracle_objective(model.N.tolist(), model.sigma2, model.alpha, model.epsilon, model.mechanism.name,
                               model.sensitivity, sol.n.tolist())
        ref = _stratified_oracle(model)
        assert got <= ref * (1 + 1e-9) + 1e-300, f"{where}: {got} > brute force {ref}"


def _v_n(model, n):
    eps_n = math.log1p(model.N / n * math.expm1(model.epsilon))
    sens = model.value_range / n if model.kind == "mean" else model.constant
    return (1 - n / model.N) * model.S2 / n + 2 * (sens / eps_n) ** 2


def check_sample_size(model, sol, where):
    assert sol.status in ("optimal", "feasible"), f"{where}: {sol.status} {sol.message}"
    lo = next(n for n in range(1, model.N + 1) if model.N * model.delta / n <= 1)
    vals = [_v_n(model, n) for n in range(lo, model.N + 1)]
    assert sol.objective == pytest.approx(min(vals), rel=1e-9), where
    assert sol.n == lo + int(np.argmin(vals)), where


def _q_star(c, eps):
    """Smallest q in (0, 1] with log1p(q expm1(c/q)) <= eps, by 200 bisections in log q (psi decreases in q)."""
    psi = lambda q: math.log1p(q * math.expm1(c / q)) if c / q < 700 else c / q + math.log(q)  # noqa: E731
    if c >= eps:
        return 1.0
    lo, hi = math.log(c) - 10.0, 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if psi(math.exp(mid)) > eps else (lo, mid)
    return math.exp(hi)


def check_importance(model, sol, where):
    assert sol.status == "optimal", f"{where}: {sol.status} {sol.message}"
    ref = np.array([_q_star(float(c), model.epsilon) for c in model.slopes])
    assert np.allclose(sol.x, ref, rtol=1e-6), where


def _truncated_mse(eps, counts, d):
    x = eps * np.asarray(counts, dtype=float) / d
    return (d / eps) ** 2 * (2.0 - (1.0 + x) * np.exp(-x))


def check_hierarchy(model, sol, where):
    assert sol.status in ("optimal", "feasible"), f"{where}: {sol.status} {sol.message}"
    eps = np.asarray(sol.x, dtype=float)
    lo, hi = model.level_bounds()
    assert np.all(eps >= lo * (1 - 1e-12)) and np.all(eps <= hi * (1 + 1e-12)), where
    if model.loss != "truncated-laplace-mse":
        return
    f = lambda e: sum(model.weights[l] * float(np.sum(_truncated_mse(e[l], model.hierarchy.counts[l],  # noqa: E731
                                                                      model.sensitivity))) for l in range(len(e)))
    rng = np.random.default_rng(0)
    if model.program == "budget":
        assert math.fsum(eps) <= model.epsilon_total * (1 + 1e-12), where
        for _ in range(100):
            w = rng.dirichlet(np.ones(eps.size))
            cand = np.clip(lo + w * (model.epsilon_total - lo.sum()), lo, hi)
            if math.fsum(cand) <= model.epsilon_total:
                assert f(eps) <= f(cand) * (1 + 1e-9), where
    else:
        assert f(eps) <= model.mse_target * (1 + 1e-9), where


def check_study(model, sol, where):
    assert sol.status == "feasible" and _finite(sol.objective) and _finite(sol.mse), f"{where}: {sol.message}"
    if model.statistic == "mean":
        R = model.value_range or float(model.population[-1] - model.population[0])
        for n, mse, se in zip(sol.n_grid, sol.mse, sol.se):
            S2 = float(np.var(model.population, ddof=1))
            eps_n = math.log1p(model.N / n * math.expm1(model.epsilon))
            closed = (1 - n / model.N) * S2 / n + 2 * (R / n / eps_n) ** 2
            assert abs(mse - closed) <= 6 * se + 1e-12 * closed, where


def check_min_cost(model, sol, where):
    assert sol.status in ("optimal", "feasible", "infeasible", "unsupported"), f"{where}: {sol.message}"
    if sol.status == "optimal":
        assert model.is_feasible(sol.n), where


CHECKS = {"StratifiedDesign": check_stratified, "SampleSizeProgram": check_sample_size,
          "ImportanceSampling": check_importance, "HierarchyBudget": check_hierarchy,
          "SampleSizeStudy": check_study, "MinCostDesign": check_min_cost}


def solve_and_check(model, where):
    sol = model.solve()
    CHECKS[type(model).__name__](model, sol, where)


# ---------------------------------------------------------------------------------- family constructors
def _tree(counts=None, parents=None):
    counts = [[60.0], [25.0, 35.0], [5.0, 20.0, 15.0, 20.0]] if counts is None else counts
    parents = [None, [0, 0], [0, 0, 1, 1]] if parents is None else parents
    return Hierarchy(counts, parents)


FAMILIES = {
    "stratified": (dpopt.StratifiedDesign,
                   dict(N=[40, 30, 20], sigma2=[1.0, 4.0, 0.5], total=18, epsilon=1.0),
                   {"N": "vector", "sigma2": "vector", "total": "scalar", "epsilon": "scalar",
                    "mechanism": "scalar", "objective": "scalar", "sensitivity": "scalar", "lower": "vector",
                    "upper": "vector", "fpc": "scalar"}),
    "sample_size": (dpopt.SampleSizeProgram, dict(N=300, S2=2.0, epsilon=1.0, delta=0.0, sensitivity=0.5),
                    {"N": "scalar", "S2": "scalar", "epsilon": "scalar", "delta": "scalar", "sensitivity": "scalar",
                     "value_range": "scalar", "sensitivity_trend": "scalar"}),
    "importance": (dpopt.ImportanceSampling, dict(epsilon=1.0, slopes=[0.1, 0.5, 1.0]),
                   {"epsilon": "scalar", "slopes": "vector", "points": "vector"}),
    "study": (dpopt.SampleSizeStudy,
              dict(population=list(np.linspace(0.0, 1.0, 60)), epsilon=1.0, rates=[0.2, 0.5], statistic="mean",
                   draws=10, seed=1),
              {"population": "vector", "epsilon": "scalar", "rates": "vector", "statistic": "scalar",
               "delta": "scalar", "draws": "scalar", "seed": "scalar", "value_range": "scalar"}),
    "hierarchy": (lambda **kw: dpopt.HierarchyBudget(_tree(), **kw), dict(epsilon_total=1.0),
                  {"epsilon_total": "scalar", "mse_target": "scalar", "weights": "vector", "sensitivity": "scalar",
                   "epsilon_min": "scalar", "loss": "scalar"}),
    "tree": (lambda **kw: dpopt.HierarchyBudget(_tree(**kw), 1.0), dict(),
             {"counts": "vector", "parents": "vector"}),
    "min_cost": (lambda **kw: dpopt.MinCostDesign(dpopt.StratifiedDesign(N=[40, 30, 20], sigma2=[1.0, 4.0, 0.5],
                                                                         total=18, epsilon=1.0), **kw),
                 dict(cost=[1.0, 2.0, 3.0], variance_target=0.5),
                 {"cost": "vector", "variance_target": "scalar", "se": "scalar", "cv": "scalar"}),
}
#: extra words a message may use for a field
ALIASES = {"sigma2": ["sigma2", "variance"], "S2": ["S2", "population variance"], "total": ["total", "eta"],
           "N": ["N", "population", "stratum size"], "slopes": ["slopes", "slope"], "points": ["points", "points"],
           "counts": ["counts", "count", "level"], "parents": ["parents", "parent", "level"],
           "mechanism": ["mechanism"], "objective": ["objective", "weights"]}


#: open findings in files other sessions own (named in the hand-over report); a case listed here that passes
#: fails the test, so the list shrinks as they are fixed
KNOWN_OPEN = {
    # the stratified model-file loader reports these keys by their Python names (labels, domains, A, b, ...)
    # or leaks numpy/Python messages ('float' object is not iterable, unhashable type, resolved dtypes)
}


def _known(where, check, failures):
    """Run ``check``; a failure matching a KNOWN_OPEN pattern is tolerated, any other is appended to
    ``failures``. An exact entry (no ``*``) that passes is a failure too, so the list shrinks as the findings
    are fixed. Returns True for a tolerated failure."""
    import fnmatch
    hit = next((k for k in KNOWN_OPEN if fnmatch.fnmatchcase(where, k)), None)
    try:
        check()
    except AssertionError as exc:
        if hit is not None:
            return True
        failures.append(str(exc))
        return False
    if hit is not None and "*" not in hit:
        failures.append(f"{where} passes now: remove it from KNOWN_OPEN ({KNOWN_OPEN[hit]})")
    return False


def _raise_all(failures):
    if failures:
        raise AssertionError(f"{len(failures)} failing case(s):\n" + "\n".join(failures))


def _fuzz_family(family, field):
    ctor, base, fields = FAMILIES[family]
    bad = SCALAR_BAD if fields[field] == "scalar" else VECTOR_BAD
    outcomes = {"refused": 0, "solved": 0, "known": 0}
    failures = []
    for label, value in bad.items():
        # a length mismatch may be reported on either field
        names = list(fields) + ["length", "entries"] if label in ("short", "long") else ALIASES.get(field, [field])
        kwargs = dict(base)
        kwargs[field] = value
        if family == "importance" and field == "points":
            kwargs.pop("slopes")
        where = f"{family}.{field}={label}"

        def case():
            try:
                model = ctor(**kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below
                _check_refusal(exc, names, where)
                outcomes["refused"] += 1
                return
            solve_and_check(model, where)
            outcomes["solved"] += 1
        outcomes["known"] += _known(where, case, failures)
    _raise_all(failures)
    return outcomes


FAMILY_FIELDS = [(f, k) for f, (_, _, fields) in FAMILIES.items() for k in fields]


@pytest.mark.parametrize("family,field", FAMILY_FIELDS, ids=[f"{f}.{k}" for f, k in FAMILY_FIELDS])
def test_family_inputs(family, field):
    out = run_bounded(_fuzz_family, family, field, timeout=GROUP_TIMEOUT)
    assert out["refused"] + out["known"] >= 5          # most of the bad values must be refused


def test_family_random_valid_instances():
    """Seeded random instances inside the supported ranges: solved and checked by the oracles."""
    def run():
        rng = np.random.default_rng(2024)
        for i in range(25):
            k = int(rng.integers(2, 4))
            N = rng.integers(3, 25, size=k)
            model = dpopt.StratifiedDesign(N=N, sigma2=rng.choice([0.0, 0.3, 5.0], size=k),
                                           total=int(rng.integers(k, N.sum() + 1)),
                                           epsilon=float(10 ** rng.uniform(-6, math.log10(700))),
                                           mechanism=str(rng.choice(["laplace", "dlap", "tulap"])),
                                           objective=str(rng.choice(["mean", "a-optimal"])))
            solve_and_check(model, f"random stratified {i}")
            m = dpopt.SampleSizeProgram(int(rng.integers(1, 400)), float(rng.choice([0.0, 1.0, 1e6])),
                                        float(10 ** rng.uniform(-6, math.log10(700))),
                                        delta=float(rng.choice([0.0, 0.3])), sensitivity=float(rng.uniform(0.1, 3)))
            solve_and_check(m, f"random sample size {i}")
            eps = float(10 ** rng.uniform(-6, math.log10(700)))
            solve_and_check(dpopt.ImportanceSampling(eps, slopes=eps * 10 ** rng.uniform(-12, 0, 5)),
                            f"random importance {i}")
            solve_and_check(dpopt.HierarchyBudget(_tree(), float(rng.uniform(3e-6, 2000))), f"random hierarchy {i}")
        return True
    assert run_bounded(run, timeout=GROUP_TIMEOUT)


# ---------------------------------------------------------------------------------- public helpers
H = _tree()
PUBLIC = [
    # (callable, valid positional args, names of the arguments)
    (dpopt.noise_ratio, (1.0, 0.5), ("epsilon", "rate")),
    (dpopt.q_bound, (1.0, 0.5), ("epsilon", "rate")),
    (dpopt.no_gain_bound, (1.0, 0.5, 1.0), ("epsilon", "rate", "sensitivity_N")),
    (dpopt.epsilon_for_noise_ratio, (0.5, 0.9), ("rate", "ratio")),
    (dpopt.rate_for_q_bound, (1.0, 0.5), ("epsilon", "q")),
    (dpopt.amplified_loss, (0.5, [0.3]), ("q", "slopes")),
    (dpopt.calibrate_epsilon, (1.0, [0.1, 0.3]), ("m", "slopes")),
    (dpopt.calibrate_noise_scale, (1.0, 1.0, [0.1, 0.3]), ("epsilon", "m", "sensitivities")),
    (dpopt.uniform_probabilities, (10, 3.0), ("n", "m")),
    (dpopt.coreset_probabilities, ([[1.0, 2.0], [0.5, 0.1], [2.0, 1.0]], 1.5), ("points", "m")),
    (dpopt.linear_optimal_weights, ([0.1, 0.3], 1.0), ("slopes", "epsilon")),
    (dpopt.truncated_laplace_moments, (1.0, [3.0, 5.0]), ("epsilon", "N")),
    (dpopt.simulate_hierarchy, (H, [1.0, 1.0, 1.0], 20), ("hierarchy", "epsilon_per_level", "trials")),
    (dpopt.smooth_sensitivity_median, ([1.0, 2.0, 3.0], 0.5, 0.0, 4.0), ("sorted_values", "beta", "lower", "upper")),
    (dpopt.privacy.central_epsilon, (1.0, 0.5), ("epsilon_nominal", "q")),
    (dpopt.privacy.nominal_epsilon, (1.0, 0.5), ("epsilon", "q")),
    (dpopt.privacy.central_delta, (1e-5, 0.5), ("delta_nominal", "q")),
    (dpopt.privacy.nominal_delta, (1e-5, 0.5), ("delta", "q")),
    (dpopt.privacy.noise_variance, ("laplace", 1.0, 1.0), ("mechanism", "epsilon", "sensitivity")),
    (dpopt.privacy.Laplace().variance, (1.0, 1.0), ("epsilon", "sensitivity")),
    (dpopt.privacy.DiscreteLaplace().variance, (1.0, 1.0), ("epsilon", "sensitivity")),
    (dpopt.privacy.TuLap().variance, (1.0, 1.0), ("epsilon", "sensitivity")),
    (dpopt.datasets.chen_section54, (4, 30), ("k", "total")),
    (Hierarchy.from_levels, ([[3.0], [1.0, 2.0]], [None, [0, 0]]), ("counts", "parents")),
]


def _fuzz_public(index):
    fn, args, names = PUBLIC[index]
    refused = 0
    for pos in range(len(args)):
        for label, value in SCALAR_BAD.items():
            a = list(args)
            a[pos] = value
            where = f"{getattr(fn, '__qualname__', fn)}[{names[pos]}={label}]"
            try:
                out = fn(*a)
            except Exception as exc:  # noqa: BLE001
                _check_refusal(exc, [names[pos]] + ALIASES.get(names[pos], []) + _EXTRA.get(names[pos], []), where)
                refused += 1
                continue
            _check_output(out, where)
    return refused


_EXTRA = {"rate": ["rate", "sampling rate"], "q": ["q", "sampling rate", "probabilities"],
          "sorted_values": ["sorted_values", "values"], "epsilon_per_level": ["epsilon_per_level", "epsilon"],
          "k": ["k"], "m": ["m", "expected size"], "N": ["N", "counts"], "hierarchy": ["hierarchy"],
          "sensitivity_N": ["sensitivity_N", "sensitivity"], "ratio": ["ratio", "noise ratio"],
          "sensitivities": ["sensitivities"], "n": ["n"], "trials": ["trials"]}


def _check_output(out, where):
    if isinstance(out, dict):
        for v in out.values():
            _check_output(v, where)
    elif isinstance(out, (list, tuple)):
        for v in out:
            _check_output(v, where)
    elif isinstance(out, (float, int, np.ndarray, np.floating)):
        assert _finite(out), f"{where}: non-finite result {out!r}"


@pytest.mark.parametrize("index", range(len(PUBLIC)), ids=[getattr(p[0], "__qualname__", str(p[0])) for p in PUBLIC])
def test_public_helpers(index):
    assert run_bounded(_fuzz_public, index, timeout=GROUP_TIMEOUT) >= 1


# ---------------------------------------------------------------------------------- model files
BLOCKS = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)]
_TREE = {"counts": [[60.0], [25.0, 35.0], [5.0, 20.0, 15.0, 20.0]], "parents": [[0, 0], [0, 0, 1, 1]]}
#: keys the README's snippets do not show; files they name are written next to the model file
EXTRA_BLOCKS = [
    {"family": "hierarchy", "mse_target": 400.0, "weights": [1.0, 2.0, 3.0], "sensitivity": 1.0,
     "epsilon_min": 1e-6, "loss": "truncated-laplace-mse", "allow_inconsistent": False, "tree": _TREE},
    {"family": "hierarchy", "epsilon_total": 1.0, "tree_csv": "tree.csv"},
    {"family": "hierarchy", "epsilon_total": 1.0, "dataset": "toy"},
    {"family": "sample_size", "N": 1000, "S2": 1.0, "epsilon": 1.0, "delta": 1e-4, "sensitivity": "mean",
     "value_range": 2.0},
    {"family": "sample_size_study", "epsilon": 1.0, "statistic": "mean", "value_range": 1.0, "delta": 0.0,
     "seed": 3, "draws": 10, "rates": [0.3], "population": {"kind": "values", "values": [0.1, 0.5, 0.9, 0.3, 0.7]}},
    {"family": "sample_size_study", "epsilon": 1.0, "draws": 10, "rates": [0.3],
     "population": {"kind": "lognormal", "N": 101, "mu": 5.0, "sigma": 0.5, "seed": 1}},
    {"family": "sample_size_study", "epsilon": 1.0, "draws": 10, "rates": [0.3],
     "population": {"kind": "beta-mixture", "N": 101, "a": 2.0, "b": 10.0, "seed": 1}},
    {"family": "sample_size_study", "epsilon": 1.0, "draws": 10, "rates": [0.3], "statistic": "mean",
     "population": {"kind": "csv", "csv": "pop.csv", "column": "y"}},
    {"family": "importance_sampling", "epsilon": 1.0, "slopes": [0.1, 0.5, 1.0], "name": "x"},
]
ALL_BLOCKS = [(b, True) for b in BLOCKS] + [(b, False) for b in EXTRA_BLOCKS]
TOML_BAD = {"string": "x", "numeric-string": "1.0", "true": True, "empty-array": [], "table": {"a": 1},
            "nan": math.nan, "inf": math.inf, "negative": -1, "zero": 0, "huge": 1e300, "nested": [[1, 2], [3]]}


def _keys(data, prefix=()):
    for k, v in data.items():
        if k == "family":
            continue
        if isinstance(v, dict):
            yield from _keys(v, prefix + (k,))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, item in enumerate(v):
                yield from _keys(item, prefix + (k, i))
        else:
            yield prefix + (k,)


def _set(data, path, value):
    import copy
    out = copy.deepcopy(data)
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return out


def _cli_solve(tmpdir, data):
    """Write ``data`` as a model file, run ``dpopt solve`` in-process: (exit code, stderr lines)."""
    from dpopt import cli
    path = Path(tmpdir) / "model.toml"
    path.write_text(_to_toml(data))
    for name in ("tree.csv", "pop.csv"):         # a README block's data files are copied next to it
        if not (Path(tmpdir) / name).exists():
            (Path(tmpdir) / name).write_text("")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(["solve", str(path)])
    return rc, err.getvalue().strip().splitlines()


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def _to_toml(data):
    lines, tables, arrays = [], [], []
    for k, v in data.items():
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            arrays.append((k, v))
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    for k, v in tables:
        lines.append(f"[{k}]")
        lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
    for k, items in arrays:
        for item in items:
            lines.append(f"[[{k}]]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in item.items()]
    return "\n".join(lines) + "\n"


def _fuzz_model_file(block_index, tmpdir):
    base, readme = ALL_BLOCKS[block_index]
    (Path(tmpdir) / "tree.csv").write_text("id,parent,count\nT,,60\nA,T,25\nB,T,35\na1,A,5\na2,A,20\n"
                                           "b1,B,15\nb2,B,20\n")
    (Path(tmpdir) / "pop.csv").write_text("y\n" + "\n".join(str(v) for v in np.linspace(0, 1, 40)) + "\n")
    folder = ROOT / "models" if readme else Path(tmpdir)
    refused = 0
    counts = {"refused": 0}
    failures = []
    for path in _keys(base):
        key = str(path[-1])
        for label, value in TOML_BAD.items():
            data = _set(base, path, value)
            where = f"{base['family']}:{'.'.join(map(str, path))}={label}"

            def case():
                try:
                    model, options = modelfile.from_dict(data, base=folder, source="fuzz")
                except Exception as exc:  # noqa: BLE001
                    _check_refusal(exc, [key] + ALIASES.get(key, []), where)
                    counts["refused"] += 1
                    # the CLI says the same in one line, exit code 2 (checked for one bad value per key)
                    if label == "string":
                        rc, lines = _cli_solve(tmpdir, data)
                        assert rc == 2 and len(lines) == 1 and lines[0].startswith("dpopt: error:"), \
                            (where, rc, lines)
                    return
                if path[0] == "solve" or type(model).__name__ not in CHECKS:
                    return        # solver options: the registry's and backends' own checks (other tests)
                solve_and_check(model, where)
            tolerated = _known(where, case, failures)     # (case() itself counts the refusals)
            counts["refused"] += tolerated
    _raise_all(failures)
    return counts["refused"]


@pytest.mark.parametrize("block_index", range(len(ALL_BLOCKS)),
                         ids=[f"{b['family']}{'' if r else '-extra'}-{i}" for i, (b, r) in enumerate(ALL_BLOCKS)])
def test_model_file_keys(block_index, tmp_path):
    assert run_bounded(_fuzz_model_file, block_index, str(tmp_path), timeout=GROUP_TIMEOUT) >= 1


def _malformed_files(tmpdir):
    from dpopt import cli
    cases = {
        "empty": b"", "binary": bytes(range(256)), "utf16": "family = \"stratified\"".encode("utf-16"),
        "latin1": "family = \"stratified\"\nname = \"caf\xe9\"\n".encode("latin-1"),
        "truncated": b'family = "stratified"\nN = [1, 2', "no-family": b"epsilon = 1.0\n",
        "family-list": b'family = ["stratified"]\n', "family-unknown": b'family = "nope"\n',
        "family-number": b"family = 3\n", "deep": b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n",
        "duplicate-key": b'family = "stratified"\nfamily = "stratified"\n',
    }
    for label, content in cases.items():
        path = Path(tmpdir) / f"{label}.toml"
        path.write_bytes(content)
        with pytest.raises(ALLOWED) as info:
            modelfile.load(path)
        assert str(path.name) in str(info.value) or "model file" in str(info.value).lower() \
            or "family" in str(info.value), (label, str(info.value))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(["solve", str(path)])
        lines = err.getvalue().strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("dpopt: error:"), (label, rc, lines)
    return True


def test_malformed_model_files(tmp_path):
    assert run_bounded(_malformed_files, str(tmp_path), timeout=GROUP_TIMEOUT)
