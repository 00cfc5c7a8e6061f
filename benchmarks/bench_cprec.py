"""Multi-domain controlled precision at 278 strata, side by side with R stratallo's ``dopt`` (pop9d278s).

Population: stratallo's own ``pop9d278s`` (9 domains, 278 strata), read from an installed R stratallo ≥ 3
through ``Rscript`` (benchmarks/_stratallo.py; the data are GPL-2 and are not shipped with dpopt). Without R
or stratallo the script says so and stops.

Classical regime (no noise: ε = 700, Δ = 1e-6, finite-population correction on, as ``dopt``): at each total n,
  * the continuous optimum: dpopt's ``relax()`` T against ``dopt``'s ``Topt`` (relative difference), at totals
    where every stratum of ``dopt``'s allocation has at least one unit (dpopt's lower bound is n_h ≥ 1;
    below that the two problems differ, and ``round_oric`` of ``dopt`` leaves strata unsampled);
  * the integer design: dpopt's certified ``solve()`` (status, proven gap) against ``dopt``'s allocation
    rounded by stratallo's own ``round_oric``: the largest weighted domain variance T = max_d V_d/ρ_d² and the
    largest domain variance max_d V_d of each integer design, and how much lower dpopt's T is;
  * time: dpopt's ``solve()`` and one ``dopt`` call alternate (benchmarks/_timing.py's pairing); ``dopt`` is
    timed inside R over a loop of calls (R's start-up excluded), so the ratio is dpopt's integer, certified
    solve against R's continuous ``dopt`` alone.
With DP noise (Laplace, ε = 1, Δ = the median S = 20, so that the noise is of the order of the sampling
error): dpopt's integer design against ``dopt``'s rounded design evaluated with the noise (``dopt`` does not
know it).

Run: ``python benchmarks/bench_cprec.py [--quick] [--pairs 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _stratallo  # noqa: E402

from dpopt import StratifiedDesign  # noqa: E402


def model(pop, n, eps=700.0, delta=1e-6):
    d = StratifiedDesign(pop["N"], pop["S"] ** 2, n, eps, sensitivity=delta, fpc=True,
                         domains=[f"D{v + 1}" for v in pop["domain"]])
    return d.controlled_precision(totals=pop["total"], priorities=pop["kappa"])


def largest(cp, n):
    """(T, max_d V_d) of an integer design; inf when a stratum is left unsampled."""
    n = np.asarray(n)
    if np.any(n < 1):
        return float("inf"), float("inf")
    return cp.objective_value(n), float(np.max(cp.domain_variances(n)))


def main(argv=None):
    warnings.filterwarnings("ignore", category=RuntimeWarning)   # overflow in the noise terms of huge budgets
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args(argv)
    ok, why = _stratallo.available()
    if not ok:
        print(f"stratallo's dopt is not available ({why}); nothing to compare. See benchmarks/_stratallo.py.")
        return 0
    print(f"R stratallo {why}; population pop9d278s read from it")
    pop = _stratallo.pop9d278s()
    print(f"{pop['N'].size} strata, {pop['total'].size} domains, sum N = {int(pop['N'].sum())}")
    totals = [12000] if args.quick else [5000, 12000, 14000, 16000, 20000]
    print("\nclassical regime (eps = 700, Delta = 1e-6, fpc)")
    print(f"{'n':>6} {'T dopt':>13} {'T relax':>13} {'rel diff':>9} {'lb ok':>5} {'relax':>8} | {'T int':>13} {'status':>8} {'gap':>8} "
          f"{'T dopt rnd':>13} {'better':>8} | {'maxV int':>11} {'maxV rnd':>11} | {'t dpopt':>8} {'t dopt':>8} "
          f"{'ratio':>7} {'t relax':>8}")
    for n in totals:
        cp = model(pop, n)
        ta, tb, ratios = [], [], []
        sol = r = None
        for _ in range(max(args.pairs, 1)):
            t0 = time.perf_counter()
            sol = cp.solve()
            ta.append(time.perf_counter() - t0)
            r = _stratallo.dopt(n, reps=5)
            tb.append(r["seconds"])
            ratios.append(ta[-1] / tb[-1])
        t0 = time.perf_counter()
        rel = cp.relax(rel_gap=1e-9)
        t_relax = time.perf_counter() - t0
        T_relax = float(rel.objective)
        inside = rel.certificate.lower_bound <= r["T"] * (1 + 1e-12)     # dopt's T is a point's value: ≥ any bound
        T_int, V_int = largest(cp, sol.n) if sol.n is not None else (float("nan"), float("nan"))
        T_rnd, V_rnd = largest(cp, r["rounded"])
        gap = sol.certificate.gap if sol.certificate is not None and sol.certificate.gap is not None else float("nan")
        same = bool(np.all(r["x"] >= 1))
        note = "" if same else "  (dopt has strata below 1 unit: not the same problem)"
        print(f"{n:>6} {r['T']:>13.6f} {T_relax:>13.6f} {abs(T_relax - r['T']) / r['T']:>9.1e} {('yes' if inside else 'NO') if same else '-':>5} {str(rel.status):>8} | {T_int:>13.6f} "
              f"{str(sol.status):>8} {gap:>8.1e} {T_rnd:>13.6f} {100 * (T_rnd - T_int) / T_rnd:>7.3f}% | "
              f"{V_int:>11.5g} {V_rnd:>11.5g} | {statistics.median(ta):>8.3f} {statistics.median(tb):>8.4f} "
              f"{statistics.median(ratios):>7.1f} {t_relax:>8.3f}{note}")
    delta = float(np.median(pop["S"]))
    print(f"\nwith DP noise (Laplace, eps = 1, Delta = {delta:g}): dopt's rounded design does not know the noise")
    print(f"{'n':>6} {'T int':>13} {'status':>8} {'T dopt rnd':>13} {'better':>8} {'t dpopt':>8}")
    for n in [v for v in totals if v >= 12000]:
        cp = model(pop, n, eps=1.0, delta=delta)
        t0 = time.perf_counter()
        sol = cp.solve()
        t = time.perf_counter() - t0
        r = _stratallo.dopt(n, reps=1)
        T_int = largest(cp, sol.n)[0] if sol.n is not None else float("nan")
        T_rnd = largest(cp, r["rounded"])[0]
        print(f"{n:>6} {T_int:>13.6f} {str(sol.status):>8} {T_rnd:>13.6f} {100 * (T_rnd - T_int) / T_rnd:>7.3f}% "
              f"{t:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
