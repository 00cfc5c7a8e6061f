"""The classical regime (ε = 700, Δ = 1e-6: no noise) against the continuous peers, measured side by side.

Min-cost (stratallo's ``optcost`` setting): minimise Σ c_h n_h subject to Σ N_h² S_h²/n_h − Σ N_h S_h² ≤ V,
1 ≤ n_h ≤ N_h, on stratallo's own populations (pop507, pop969, read from the installed R package) and on
generated ones (k = 100, 1 000, 10 000; log-normal N, S = 10^U(−1, 3), costs U(10, 100)); V is the variance of
a proportional 10 % (and 30 %) sample. stratallo's optcost asserts Σ A_h²/M_h − A0 > 0 for upper bounds M,
which M = N (a census has no variance) fails, so it runs without M and its rounded design is capped at N
(flagged when the cap makes it miss V; the unbounded optimum stays below N on these instances). dpopt's exact integer, certified answer against ``optcost`` plus
ceiling (its integer design), in one persistent R session; both run alternately (interleaved pairs,
benchmarks/_timing.py) and the figures are the median and minimum of the pairwise time ratios dpopt/peer.
"saved" is the cost dpopt's design saves against the peer's rounded one (both meet V).

Where R or stratallo cannot be loaded the benchmark says so and times, as the peer, an independent Python
reimplementation of the published continuous algorithm (labelled "py-optcost": the closed form with strata
above their bound fixed there, recursively, then ceiling).

Run: ``python benchmarks/bench_classical.py [--quick] [--time-limit 60]``
Target (issue 20, 2): dpopt within 2x the time of optcost + rounding, certified.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

from dpopt import StratifiedDesign  # noqa: E402

warnings.filterwarnings("ignore")
EPS, DELTA = 700.0, 1e-6


# ---------------------------------------------------------------------------------- R session
class RSession:
    """One R process fed code on stdin; each call returns what the code printed before a marker."""

    def __init__(self):
        self.p = subprocess.Popen(["R", "--vanilla", "--slave"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def run(self, code: str) -> str:
        self.p.stdin.write(code + '\ncat("\\n<<END>>\\n")\n')
        self.p.stdin.flush()
        out = []
        for _ in range(10 ** 6):
            line = self.p.stdout.readline()
            if not line or line.strip() == "<<END>>":
                break
            out.append(line)
        return "".join(out).strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def open_r():
    """(session, why not): R with stratallo loaded, or None and the reason."""
    try:
        r = RSession()
        ok = r.run('cat(suppressWarnings(suppressMessages(require(stratallo))))')
    except (OSError, BrokenPipeError) as e:
        return None, f"R cannot be started ({e})"
    if ok != "TRUE":
        return None, "R is installed but the stratallo package is not"
    return r, ""


# ---------------------------------------------------------------------------------- instances
def generated(k, seed=0):
    rng = np.random.default_rng(seed)
    N = np.clip(np.round(rng.lognormal(math.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    return N, 10.0 ** rng.uniform(-1.0, 3.0, k), np.round(rng.uniform(10.0, 100.0, k), 1)


def stratallo_population(r, name):
    with tempfile.NamedTemporaryFile(suffix=".csv", delete=False) as f:
        path = f.name
    r.run(f'data({name}, package="stratallo"); write.csv({name}, "{path}", row.names=FALSE)')
    a = np.genfromtxt(path, delimiter=",", names=True)
    os.unlink(path)
    return a["N"].astype(np.int64), a["S"].astype(float), a["unit_cost"].astype(float)


def variance_bound(N, S, frac):
    n = np.maximum(frac * N, 1.0)
    return float(np.sum((N * S) ** 2 / n) - np.sum(N * S ** 2))


def model(N, S, c, V):
    d = StratifiedDesign(N, S ** 2, int(max(N.sum() // 10, 1)), EPS, sensitivity=DELTA, fpc=True)
    return d.min_cost(c, variance_target=V)


def classical_variance(N, S, n):
    return float(np.sum((N * S) ** 2 / n) - np.sum(N * S ** 2))


# ---------------------------------------------------------------------------------- peers
def py_optcost(V, A, A0, M, c):
    """Independent Python reimplementation of the published min-cost allocation (stratallo's optcost): the
    closed form x_h = A_h/√c_h · Σ A√c / (V + A0), strata above M_h fixed there and the rest solved again."""
    fixed = np.zeros(A.size, dtype=bool)
    x = np.empty(A.size)
    for _ in range(A.size + 1):
        free = ~fixed
        rest = V + A0 - float(np.sum(A[fixed] ** 2 / M[fixed]))
        x[free] = A[free] / np.sqrt(c[free]) * float(np.sum(A[free] * np.sqrt(c[free]))) / rest
        x[fixed] = M[fixed]
        over = free & (x > M)
        if not over.any():
            break
        fixed |= over
    return x


def r_optcost(r, N, S, c, V, reps):
    """optcost + ceiling in R, ``reps`` times; seconds per call and the rounded design."""
    out = r.run(f'tryCatch({{t0 <- proc.time()[["elapsed"]]; for (i in 1:{reps}) {{ x <- optcost({V!r}, A, A0, NULL, '
                f'cc); n <- pmin(ceiling(x), M) }}; cat(format((proc.time()[["elapsed"]] - t0) / {reps}, digits=17), n)}}, '
                f'error=function(e) cat("ERROR", conditionMessage(e)))')
    vals = out.split()
    if not vals or vals[0] == "ERROR":
        raise RuntimeError(f"stratallo::optcost failed in R: {out}")
    return float(vals[0]), np.array([float(v) for v in vals[1:]])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--pairs", type=int, default=5)
    a = ap.parse_args(argv)
    r, why = open_r()
    print("peer: " + ("stratallo::optcost + ceiling in R" if r else
                      f"{why}; the peer is py-optcost, an independent Python reimplementation of the "
                      "published continuous algorithm (+ ceiling), not stratallo itself"))
    insts = []
    if r:
        for name in ("pop507s_ucost", "pop969s_ucost"):
            insts.append((name.split("s_")[0], *stratallo_population(r, name)))
    else:
        print("stratallo's populations pop507/pop969 need R and stratallo: generated populations only")
    for k in ([100, 1000] if a.quick else [100, 1000, 10000]):
        insts.append((f"gen k={k}", *generated(k)))
    fracs = [0.1] if a.quick else [0.1, 0.3]
    model(*generated(20), 1e6).solve(backend="exact", time_limit=10)      # warm-up (imports, first calls)
    print(f"\n{'instance':>14} {'frac':>4} | {'dpopt s':>8} {'status':>10} {'gap':>8} | {'peer s':>9} | "
          f"{'ratio med':>9} {'ratio min':>9} | {'saved':>9} {'saved %':>8}")
    within = total = 0
    for name, N, S, c in insts:
        A, A0, M = N * S, float(np.sum(N * S ** 2)), N.astype(float)
        for frac in fracs:
            V = variance_bound(N, S, frac)
            mc = model(N, S, c, V)
            if r:
                # (R reads at most 4 096 bytes per input line: the vectors go through a file)
                with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
                    np.savetxt(f, np.column_stack([A, M, c]), delimiter=",", fmt="%.17g")
                r.run(f'd <- read.csv("{f.name}", header=FALSE); A <- d[[1]]; M <- d[[2]]; cc <- d[[3]]; '
                      f'A0 <- {A0!r}')
                os.unlink(f.name)
                reps = 20 if N.size <= 1000 else 3

                def peer():
                    return r_optcost(r, N, S, c, V, reps)
            else:
                def peer():
                    t0 = time.perf_counter()
                    n = np.ceil(py_optcost(V, A, A0, M, c))
                    return time.perf_counter() - t0, n
            peer_times = []

            def peer_timed():
                t, n = peer()
                peer_times.append(t)
                return n

            # the peer's own clock (inside R, without the pipe) is its time; the interleaving keeps the load fair
            res = interleaved(lambda: mc.solve(backend="exact", time_limit=a.time_limit), peer_timed, a.pairs)
            sol, n_peer = res["a"], res["b"]
            t_d = res["a_median"]
            # pairwise ratios: each dpopt solve against the peer's call next to it (the peer's own clock)
            ratios = [td / max(tp, 1e-9) for td, tp in zip(res["a_times"], peer_times)]
            t_p = float(np.median(peer_times))
            gap = sol.certificate.gap if sol.certificate is not None and sol.certificate.gap is not None else math.inf
            cost_peer = float(c @ n_peer)
            ok_peer = classical_variance(N, S, n_peer) <= V * (1 + 1e-9)
            saved = cost_peer - sol.objective
            total += 1
            within += sol.status.value == "optimal" and t_d <= 2 * t_p
            print(f"{name:>14} {frac:>4g} | {t_d:8.3f} {sol.status.value:>10} {gap:8.1e} | {t_p:9.4f} | "
                  f"{float(np.median(ratios)):9.3g} {min(ratios):9.3g} | {saved:9.4g} {100 * saved / cost_peer:7.3f}%"
                  + ("" if ok_peer else "  (peer's rounded design misses V)"), flush=True)
    print(f"\ndpopt proven and within 2x of the peer: {within}/{total}")
    if r:
        r.close()


if __name__ == "__main__":
    main()
