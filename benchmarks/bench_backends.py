"""Backend timings on Chen, Pasupathy & Awan §5.4 settings, printed as ratios to `exact`.

Settings (paper §5.4, population mean, Laplace, ε = 1): k strata with N_i = 10000 + 1000·(k + 1 − i)
(so k = 10 gives N = 20000, 19000, ..., 11000) and σ_i² = 0.08^(1 + i/10).
  sweep A: k = 2, 4, ..., 26 with η = 10³, 10⁴, 10⁵
  sweep B: k = 10 with η from 30 to 10⁷; the paper's N sum to 155 000, so for η above that every N_i is
           multiplied by the smallest power of ten that makes η feasible (×10 for 10⁶, ×100 for 10⁷)
Routes: exact, algorithm1 (corrected), pyomo-SCIP (MINLP), pyomo-HiGHS (incremental MILP), cvxpy (the
Laplace objective is not DCP: cvxpy's integer route refuses, so its *relaxations* are timed against
exact's relaxation: DNLP + IPOPT when the ipopt extra is installed, and the tangent-cut fallback). Each route is capped at --time-limit seconds (algorithm1 by its deadline
and candidate limit; the MILP is skipped when it would need more than --max-milp-vars δ variables).

  sweep C: the generic solvers on their strongest formulation (the lazily cut secant MILP, the one
           `dpopt compare` runs by default, docs/constrained.md#the-secant-milp), k = 10 … 1 000 with η = 50·k,
           plain and with a cost budget at 98 % of the plain optimum's cost; each route capped at 10 s and
           stopped after its first failure: the largest k each proves within 10 s (issue 20, target 6).

Usage:  python benchmarks/bench_backends.py [--quick] [--time-limit 60] [--sweep A|B|C|all]
Targets (issue 3): exact ≥ 1000× faster than algorithm1 at k = 12, η = 10⁵; the largest k each MINLP/MILP
route solves to proven optimality within 60 s is printed at the end of sweep A.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


from dpopt.models.stratified import StratifiedDesign
from dpopt.datasets import chen_section54

warnings.filterwarnings("ignore")


def paper_model(k: int, eta: int, scale_to_fit: bool = False) -> StratifiedDesign:
    return chen_section54(k, eta, scale_to_fit=scale_to_fit)


def run(model, route: str, tl: float, max_milp_vars: int):
    t0 = time.perf_counter()
    if route == "exact":
        s = model.solve(backend="exact")
    elif route == "exact-relax":
        s = model.relax(backend="exact")
    elif route == "algorithm1":
        s = model.solve(backend="algorithm1", time_limit=tl, max_candidates=200_000_000)
    elif route == "pyomo-scip":
        s = model.solve(backend="pyomo", solver="scip", time_limit=tl)
    elif route == "pyomo-highs":
        s = model.solve(backend="pyomo", solver="highs", time_limit=tl, max_milp_vars=max_milp_vars)
    elif route == "scip-secant":
        s = model.solve(backend="pyomo", solver="scip", formulation="secant", time_limit=tl)
    elif route == "highs-secant":
        s = model.solve(backend="pyomo", solver="highs", formulation="secant", time_limit=tl)
    elif route == "cvxpy-dnlp":
        s = model.relax(backend="cvxpy", method="dnlp", time_limit=tl)
    elif route == "cvxpy-cuts":
        s = model.relax(backend="cvxpy", method="cuts", time_limit=tl)
    else:
        raise ValueError(route)
    return s, time.perf_counter() - t0


ROUTES = ["exact", "algorithm1", "pyomo-scip", "pyomo-highs", "cvxpy-dnlp", "cvxpy-cuts"]


def bench(cases, tl, max_milp_vars, skip_after_fail=True, scale_to_fit=False):
    failed = set()
    largest = {r: {} for r in ROUTES}
    print(f"{'k':>3} {'eta':>8} | " + " | ".join(f"{r:>22}" for r in ROUTES))
    for k, eta in cases:
        try:
            m = paper_model(k, eta, scale_to_fit)
        except ValueError as exc:
            print(f"{k:>3} {eta:>8} | infeasible instance: {exc}")
            continue
        ref, t_ref = run(m, "exact", tl, max_milp_vars)
        rref, t_rref = run(m, "exact-relax", tl, max_milp_vars)
        cells = []
        for r in ROUTES:
            if r == "exact":
                cells.append(f"{t_ref * 1e3:9.2f} ms (ref)")
                largest[r][eta] = k
                continue
            if (r, eta) in failed:
                cells.append("skipped (failed smaller k)")
                continue
            s, t = run(m, r, tl, max_milp_vars)
            base_obj, base_t = (rref.objective, t_rref) if r.startswith("cvxpy") else (ref.objective, t_ref)
            ok = s.status.value == "optimal" and abs(s.objective - base_obj) <= 1e-7 * abs(base_obj)
            if ok:
                largest[r][eta] = k
                cells.append(f"{t / base_t:10.3g}x {t:7.2f}s")
            else:
                cells.append(f"{s.status.value[:11]:>11} {t:7.2f}s")
                if skip_after_fail:
                    failed.add((r, eta))
        print(f"{k:>3} {eta:>8} | " + " | ".join(f"{c:>22}" for c in cells), flush=True)
    return largest


SECANT_ROUTES = ["exact", "scip-secant", "highs-secant"]


def sweep_c(ks, tl=10.0):
    """Largest k proven within ``tl`` seconds by each route on the secant MILP (exact as the reference)."""
    for budget in (False, True):
        title = "cost budget at 98 % of the plain optimum's cost" if budget else "plain"
        print(f"\nSweep C ({title}): eta = 50 k, each route capped at {tl:g} s; time and status "
              "(optimal = proven to gap 1e-9 and equal to exact's objective)")
        print(f"{'k':>5} | " + " | ".join(f"{r:>24}" for r in SECANT_ROUTES))
        largest, failed = {r: "-" for r in SECANT_ROUTES}, set()
        for k in ks:
            m = paper_model(k, 50 * k, scale_to_fit=True)
            if budget:
                base = m.solve(backend="exact")
                cost = 1.0 + (np.arange(k) % 7)
                m.add_cost_budget(cost, 0.98 * float(cost @ base.n))
            cells, ref = [], None
            for r in SECANT_ROUTES:
                if r in failed:
                    cells.append("skipped (failed smaller k)")
                    continue
                s, t = run(m, r, tl, 10 ** 9)
                if r == "exact":
                    ref = s
                ok = (s.status.value == "optimal" and ref is not None and ref.status.value == "optimal"
                      and abs(s.objective - ref.objective) <= 1e-7 * abs(ref.objective) and t <= tl + 1.0)
                gap = s.certificate.gap if s.certificate is not None else float("nan")
                cells.append(f"{t:7.2f}s {s.status.value[:10]}" + ("" if ok else f" gap {gap:.1e}"))
                if ok:
                    largest[r] = k
                else:
                    failed.add(r)
            print(f"{k:>5} | " + " | ".join(f"{c:>24}" for c in cells), flush=True)
        print(f"Largest k proven within {tl:g} s ({title}): "
              + ", ".join(f"{r} k={largest[r]}" for r in SECANT_ROUTES))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small subset (k ≤ 8, η ≤ 10⁴, 10 s cap)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--max-milp-vars", type=int, default=300_000)
    ap.add_argument("--sweep", default="all", choices=["A", "B", "C", "all"])
    a = ap.parse_args()
    tl = 10.0 if a.quick else a.time_limit
    for r in ("exact", "exact-relax", "algorithm1", "cvxpy-dnlp"):      # warm-up (imports, first-call overheads)
        run(paper_model(3, 100), r, tl, a.max_milp_vars)
    if a.sweep in ("A", "all"):
        etas = [10 ** 3, 10 ** 4] if a.quick else [10 ** 3, 10 ** 4, 10 ** 5]
        ks = range(2, 9, 2) if a.quick else range(2, 27, 2)
        print(f"\nSweep A: k = {list(ks)}, eta in {etas}; times as ratio to exact (integer) / exact relax (cvxpy)")
        largest = bench([(k, eta) for eta in etas for k in ks], tl, a.max_milp_vars)
        print(f"\nLargest k solved to proven optimality within {tl:g} s (per eta):")
        for r in ROUTES:
            print(f"  {r:12s} " + ", ".join(f"eta={e}: k={largest[r].get(e, '-')}" for e in etas))
        if not a.quick:
            m = paper_model(12, 10 ** 5)
            s_ref, t_ref = run(m, "exact", tl, a.max_milp_vars)
            s1, t1 = run(m, "algorithm1", tl, a.max_milp_vars)
            # the paper gives no run times in its text (its Figs. 7 and 8 are plots): only our own are compared
            print(f"\nTarget check k=12, eta=1e5: exact {t_ref * 1e3:.2f} ms, algorithm1 {t1:.2f} s "
                  f"({s1.status.value}, candidates {s1.details.get('candidates')}), ratio {t1 / t_ref:.3g}x")
    if a.sweep in ("B", "all"):
        etas = [30, 100, 1000, 10 ** 4] if a.quick else [30, 100, 1000, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7]
        print(f"\nSweep B: k = 10, eta in {etas} (N x10 for eta = 1e6, x100 for eta = 1e7)")
        bench([(10, eta) for eta in etas], tl, a.max_milp_vars, skip_after_fail=False, scale_to_fit=True)

    if a.sweep in ("C", "all"):
        sweep_c([10, 20, 50] if a.quick else [10, 20, 50, 100, 200, 500, 1000])


if __name__ == "__main__":
    main()
