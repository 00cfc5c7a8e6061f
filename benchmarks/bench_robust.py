"""Robust designs at scale (docs/robust.md): 50 variance scenarios × 1 000 strata, the min-max regret design
proven (or not) within 10 s, printed with its time, status, proven gap and the number of level steps.

Instance (generated, seeded): k strata with log-normal N (median 3 000, clipped to 300..30 000), nominal
S = 10^U(0, 2), scenarios S²_s = S² · exp(Z_s,h) with Z ~ N(0, 0.5²) per stratum and scenario (a pilot's
sampling error), Laplace, ε = 1, η = 20·k. The scenarios' own optima g*_s (marginal allocation, certified) and the
nominal design are solved first and timed apart; the figure asked for (issue 23) is the min-max step.
Also printed, side by side in one run (:func:`_timing.interleaved`): the robust solve against the plain
nominal solve at the same size (the price of asking for robustness, in time).

Run: ``python benchmarks/bench_robust.py [--quick] [--k 1000] [--scenarios 50] [--time-limit 10]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpopt  # noqa: E402
from dpopt.models.robust import RobustDesign  # noqa: E402
from _timing import timed  # noqa: E402


def instance(k: int, S: int, seed: int = 23):
    rng = np.random.default_rng(seed)
    N = np.clip(np.round(np.exp(rng.normal(np.log(3000), 1.0, k))), 300, 30_000).astype(int)
    s2 = (10 ** rng.uniform(0, 2, k)) ** 2
    d = dpopt.StratifiedDesign(N, s2, 20 * k, 1.0)
    scen = [s2 * np.exp(rng.normal(0, 0.5, k)) for _ in range(S)]
    return RobustDesign(d, scen)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="k = 100, 10 scenarios")
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--scenarios", type=int, default=50)
    ap.add_argument("--time-limit", type=float, default=10.0)
    a = ap.parse_args(argv)
    k, S = (100, 10) if a.quick else (a.k, a.scenarios)
    r = instance(k, S)
    t_opt, _ = timed(lambda: r.scenario_optima())
    mm = r.minmax()
    t_mm, sol = timed(lambda: mm.solve(time_limit=a.time_limit))
    print(f"robust design, {S} scenarios x {k} strata (eta = {20 * k}, Laplace, eps = 1)")
    print(f"  scenario optima g*_s (marginal allocation): {t_opt:.2f} s")
    print(f"  min-max regret: {t_mm:.2f} s, status {sol.status.value}, proven: {sol.status.value == 'optimal'}, "
          f"gap {sol.certificate.gap if sol.certificate else float('nan'):.2e}, worst regret {sol.objective:.8g}, "
          f"lower bound {sol.details.get('lower_bound', float('nan')):.8g}, steps {sol.details.get('level_steps')}")
    nominal = r.design.solve()
    worst_nominal = float(np.max(r.regrets(nominal.n)))
    print(f"  nominal design's worst regret {worst_nominal:.6g} (robust {sol.objective:.6g})")
    t0 = time.perf_counter()
    r.design.solve()
    t_plain = time.perf_counter() - t0
    print(f"  time ratio robust min-max / plain nominal solve (same run): {t_mm / max(t_plain, 1e-9):.1f}x "
          f"({t_mm:.2f} s vs {t_plain:.3f} s)")
    print(f"  target: proven within 10 s -> {'met' if sol.status.value == 'optimal' and t_mm <= 10 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
