"""Stratified release at census scale against the numpy floor: 10^6-row frame, 1 000 and 100 strata (issue 20).

The dpopt pass is the user's: a design (``StratifiedDesign`` with value_range, Laplace, ε = 1, solved by ``exact``),
``draw_stratified`` (keyed BLAKE2b permanent random numbers per unit), ``plan_stratified`` (OpenDP noise scales,
certified by OpenDP's maps) and ``release_stratified`` (clamp, OpenDP noise on every sampled response, ledger
charge, the stratified estimate with SE). The numpy floor is the same pass in plain numpy over the same arrays:
scales from the closed form Δ/ε_h, a numpy uniform per row and one sort for the sample, clipping, numpy Laplace
noise and ``np.bincount`` group sums. Parts are timed separately (plan the noise scales; draw the sample;
clamp + aggregate + noise, which for dpopt includes the re-check of the given plan and the ledger) and the whole
(dpopt: draw, then ``release_stratified`` planning inside; numpy: its three parts). Every figure interleaves the
two sides (``_timing.interleaved``): median and minimum of the pairwise ratios dpopt / numpy.

Target: the whole release within 10x the numpy floor at 1 000 strata. OpenDP's exact samplers cost about 20-30 µs
per noisy value and the keyed BLAKE2b permanent random numbers about 0.5-1 µs per frame row (both printed as
"alone"): they bound how close dpopt can come to numpy, whose uniforms and Laplace draws are not a PRF or exact.

Run: ``python benchmarks/bench_release.py [--pairs P] [--quick]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import dpopt
from _timing import interleaved, timed
from dpopt.release import plan_stratified, release_stratified
from dpopt.release import _opendp
from dpopt.sampling import draw_stratified

ROWS = 1_000_000
LO, HI = 0.0, 200.0
EPSILON = 1.0


def frame(k, rows=ROWS, seed=0):
    """A synthetic census frame: integer stratum codes (area codes 1000 + 7h: k strata of unequal sizes) and a
    skewed response. Integer codes keep the floor strict (numpy groups them without sorting text)."""
    rng = np.random.default_rng(seed)
    size = rng.gamma(4.0, 1.0, k)
    codes = np.minimum(np.searchsorted(np.cumsum(size / size.sum()), rng.random(rows)), k - 1)
    codes[:k] = np.arange(k)                                     # every stratum present
    y = rng.gamma(2.0, 10.0 + 30.0 * (codes % 7) / 6.0)          # strata differ in scale
    return {"stratum": 1000 + 7 * codes, "y": y}, codes


def design(fr, codes, k, total):
    """The design from the frame's stratum counts and clamped variances (numpy; not timed)."""
    N = np.bincount(codes, minlength=k)
    yc = np.clip(fr["y"], LO, HI)
    s1, s2 = np.bincount(codes, yc, k), np.bincount(codes, yc * yc, k)
    S2 = (s2 - s1 * s1 / N) / (N - 1)
    labels = [str(1000 + 7 * h) for h in range(k)]
    model = dpopt.StratifiedDesign(N, S2, total, EPSILON, mechanism="laplace", value_range=(LO, HI),
                                   min_per_stratum=2, labels=labels)
    sol = model.solve(backend="exact")
    return model, sol


# ---------------------------------------------------------------------------------- the numpy floor
def np_plan(N, n):
    """Closed-form scales: the nominal budget log1p(expm1(ε)·N/n) of each stratum, scale Δ/ε_h."""
    nominal = np.log1p(np.expm1(EPSILON) * N / n)
    return (HI - LO) / nominal


def np_draw(strata_column, n, seed):
    """Stratum codes from the labels, a uniform per row, the n_h smallest per stratum (one sort)."""
    rng = np.random.default_rng(seed)
    _, codes = np.unique(strata_column, return_inverse=True)
    u = rng.random(codes.size)
    order = np.lexsort((u, codes))
    N = np.bincount(codes, minlength=n.size)
    starts = np.concatenate([[0], np.cumsum(N)[:-1]])
    sc = codes[order]
    rows = order[np.arange(order.size) - starts[sc] < n[sc]]
    return rows, codes[rows], N


def np_release(y, rows, stratum, N, n, scales, seed):
    """Clamp, numpy Laplace noise per response, group sums by bincount, the stratified mean and its SE."""
    rng = np.random.default_rng(seed)
    k = N.size
    z = np.clip(y[rows], LO, HI) + rng.laplace(0.0, scales[stratum])
    s1, s2 = np.bincount(stratum, z, k), np.bincount(stratum, z * z, k)
    mean = s1 / n
    var = (s2 - s1 * mean) / (n - 1)
    W, f = N / N.sum(), n / N
    gamma2 = 2.0 * scales ** 2
    return W @ mean, np.sqrt((W ** 2) @ ((1 - f) * var / n + f * gamma2 / n))


def np_whole(fr, n, seed):
    rows, stratum, N = np_draw(fr["stratum"], n, seed)
    scales = np_plan(N, n)
    return np_release(fr["y"], rows, stratum, N, n, scales, seed)


# ---------------------------------------------------------------------------------- one case
def case(k, total, pairs):
    fr, codes = frame(k)
    model, sol = design(fr, codes, k, total)
    n = np.asarray(sol.n, dtype=np.int64)
    N = model.N.astype(np.int64)
    seed = [0]

    def next_seed():
        seed[0] += 1
        return seed[0]

    sample = draw_stratified(fr, model, n, strata="stratum", seed=1)
    plan = plan_stratified(model, sample.n)
    rows_np, stratum_np, _ = np_draw(fr["stratum"], n, 1)
    scales_np = np_plan(N, n)
    out = {"k": k, "n": int(n.sum()), "status": sol.status.value,
           "distinct": len({(int(a), int(b)) for a, b in zip(N, n)})}

    def dp_release():
        return release_stratified(model, sample, sample.values(fr, "y"), plan=plan)

    out["plan"] = interleaved(lambda: plan_stratified(model, sample.n), lambda: np_plan(N, n), pairs)
    out["draw"] = interleaved(lambda: draw_stratified(fr, model, n, strata="stratum", seed=next_seed()),
                              lambda: np_draw(fr["stratum"], n, next_seed()), pairs)
    out["release"] = interleaved(dp_release, lambda: np_release(fr["y"], rows_np, stratum_np, N, n, scales_np,
                                                               next_seed()), pairs)

    def dp_whole():
        s = draw_stratified(fr, model, n, strata="stratum", seed=next_seed())
        return release_stratified(model, s, s.values(fr, "y"))

    out["whole"] = interleaved(dp_whole, lambda: np_whole(fr, n, next_seed()), pairs)
    # what OpenDP's exact sampler costs alone: one measurement on all sampled values (informative)
    dp = _opendp.require_opendp()
    meas = _opendp.noise_measurement(dp, "laplace", float(np.median(scales_np)))
    vals = np.clip(fr["y"][sample.rows], LO, HI).tolist()
    out["noise_alone"], _ = timed(lambda: meas(vals))
    from dpopt.sampling import _numbers, sample_key
    out["prf_alone"], _ = timed(lambda: _numbers(sample_key(0), np.arange(ROWS)))
    rel = out["whole"]["a"]
    est_np, se_np = out["whole"]["b"]
    out["check"] = (float(rel.estimate), float(rel.se), float(est_np), float(se_np), float(rel.epsilon_spent))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs per figure")
    ap.add_argument("--quick", action="store_true", help="1 000 strata only, 2 pairs")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", UserWarning)
    cases = [(1000, 20_000), (100, 20_000), (1000, 50_000)]
    pairs = args.pairs
    if args.quick:
        cases, pairs = cases[:1], 2
    print(f"frame: {ROWS} rows, Laplace, epsilon = {EPSILON}, value_range = ({LO:g}, {HI:g}); times in s are medians; "
          "ratio = dpopt / numpy, interleaved pairs")
    print(f"{'k':>5} {'n':>6} {'(N,n)':>6} {'part':>8} {'dpopt s':>9} {'numpy s':>9} {'ratio med':>10} "
          f"{'ratio min':>10}")
    results = []
    for k, total in cases:
        t0 = time.perf_counter()
        r = case(k, total, pairs)
        results.append(r)
        for part in ("plan", "draw", "release", "whole"):
            x = r[part]
            print(f"{r['k']:>5} {r['n']:>6} {r['distinct']:>6} {part:>8} {x['a_median']:>9.3f} "
              f"{x['b_median']:>9.4f} "
                  f"{x['ratio_median']:>10.1f} {x['ratio_min']:>10.1f}")
        est, se, est_np, se_np, eps = r["check"]
        print(f"{'':>5} alone: OpenDP noise on the {r['n']} sampled values {r['noise_alone']:.3f} s, keyed BLAKE2b "
              f"numbers of the {ROWS} ids {r['prf_alone']:.3f} s; "
              f"estimate {est:.4f} (SE {se:.3f}, epsilon spent {eps:.6g}) vs numpy's {est_np:.4f} (SE {se_np:.3f}); "
              f"case {time.perf_counter() - t0:.0f} s")
    print("target: whole release within 10x the numpy floor at 1 000 strata (ratio med of 'whole')")
    for r in results:
        ok = "met" if r["whole"]["ratio_median"] <= 10 else "NOT met"
        print(f"  k = {r['k']}, n = {r['n']}: whole ratio {r['whole']['ratio_median']:.1f} "
              f"(min {r['whole']['ratio_min']:.1f}): {ok}")


if __name__ == "__main__":
    main()
