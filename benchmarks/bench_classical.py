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

Min-size (unit costs 1, the same variance bound): dpopt against stratallo's integer routes, Friedrich et al.'s
CapacityScaling (``stratallo:::CapacityScaling2``, exact integer, in the R package's namespace), one call
each, same instance, interleaved.

Bethel-type (min cost, a CV target per domain × variable, 2 variables × 10 domains, lower bound 2 per
stratum, fpc): dpopt against R's Bethel–Chromy allocation (SamplingStrata's ``bethel``, which ceils its
continuous answer). SamplingStrata is not in Debian's archive and its dependencies are not all there either,
so the benchmark sources its public ``R/Bethel.r`` (``--bethel-source PATH`` or DPOPT_BETHEL_R), or uses the
installed package when there is one; else an independent Python reimplementation of Chromy's algorithm
(labelled "py-bethel").

Run: ``python benchmarks/bench_classical.py [--quick] [--time-limit 60] [--bethel-source Bethel.r]``
Target (issue 20, 2): dpopt within 2x the time of optcost + rounding and of Bethel, certified, and faster
than stratallo's integer routes.
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


def r_capacity_scaling(r, V, reps):
    """stratallo:::CapacityScaling2 (min Σ n s.t. the variance bound, integer, exact), seconds per call."""
    out = r.run(f'tryCatch({{t0 <- proc.time()[["elapsed"]]; for (i in 1:{reps}) n <- stratallo:::CapacityScaling2('
                f'{V!r}, NN, SS, rep(1, length(NN)), NN); cat(format((proc.time()[["elapsed"]] - t0) / {reps}, '
                f'digits=17), n)}}, error=function(e) cat("ERROR", conditionMessage(e)))')
    vals = out.split()
    if not vals or vals[0] == "ERROR":
        return None
    return float(vals[0]), np.array([float(v) for v in vals[1:]])


def send_vectors(r, **cols):
    """Assign R vectors through a file (R reads at most 4 096 bytes per input line)."""
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        np.savetxt(f, np.column_stack(list(cols.values())), delimiter=",", fmt="%.17g")
    names = "; ".join(f"{k} <- d[[{i + 1}]]" for i, k in enumerate(cols))
    r.run(f'd <- read.csv("{f.name}", header=FALSE); {names}')
    os.unlink(f.name)


# ---------------------------------------------------------------------------------- Bethel-type
def bethel_population(k, seed=1, domains=10):
    rng = np.random.default_rng(seed)
    N = np.clip(np.round(rng.lognormal(math.log(3000.0), 1.0, k)), 300, 30000).astype(np.int64)
    M = np.column_stack([10.0 ** rng.uniform(1, 3, k), 10.0 ** rng.uniform(1, 3, k)])
    S = M * rng.uniform(0.2, 2.0, (k, 2))
    cost = np.round(rng.uniform(1.0, 10.0, k), 1)
    dom = np.array([int(v) for v in np.concatenate([np.full(p.size, d + 1) for d, p in
                                                    enumerate(np.array_split(np.arange(k), domains))])])
    return N, M, S, cost, rng.permutation(dom)


def bethel_model(N, M, S, cost, dom, cv):
    d = StratifiedDesign(N, S ** 2, int(N.sum() // 10), EPS, sensitivity=[DELTA, DELTA], fpc=True,
                         variables=["y1", "y2"], lower=np.minimum(2, N), domains=[f"D{v}" for v in dom])
    for D in np.unique(dom):
        i = np.flatnonzero(dom == D)
        for j in range(2):
            mean = float(np.sum(N[i] * M[i, j]) / N[i].sum())
            d.add_precision_target(cv[j], strata=f"D{D}", variable=j, kind="cv", mean=mean, name=f"D{D}:y{j + 1}")
    return d.min_cost(cost)


def py_bethel(N, M, S, cost, dom, cv, maxiter=200, epsilon=1e-11):
    """Independent Python reimplementation of the Bethel–Chromy iteration as SamplingStrata's bethel runs it
    (one domain type, minnumstrat = 2, take-all strata where n > N, ceiling)."""
    cens = np.zeros(N.size, dtype=bool)
    doms = np.unique(dom)
    for _ in range(26):
        ind = (dom[:, None] == doms[None, :]).astype(float)                       # k × D
        m = np.concatenate([ind * M[:, [j]] for j in range(2)], axis=1)          # k × 2D
        s = np.concatenate([ind * S[:, [j]] for j in range(2)], axis=1)
        cvs = np.repeat(cv, doms.size)
        no = (~cens).astype(float)[:, None]
        numA = (N[:, None] ** 2) * s ** 2 * no
        denA = (np.sum(N[:, None] * m, axis=0) * cvs) ** 2 + np.sum(N[:, None] * s ** 2 * no, axis=0) + epsilon
        a = numA / denA
        alfa = np.full(a.shape[1], 1.0 / a.shape[1])
        for _ in range(maxiter):
            den1 = np.sqrt(a @ alfa)
            den2 = np.sum(np.sqrt((a * cost[:, None]) @ alfa))
            x = np.sqrt(cost) / (den1 * den2 + epsilon)
            tot = float(np.sum(alfa * (a.T @ x) ** 2)) or epsilon
            nxt = alfa * (a.T @ x) ** 2 / tot
            diff = np.max(np.abs(nxt - alfa))
            alfa = nxt
            if diff <= epsilon:
                break
        n = np.ceil(1.0 / x)
        over = n > N
        cens |= over
        n = np.where(n < 2, np.minimum(2, N), n)
        if not over.any():
            break
    return np.where(cens, N, n)


def r_bethel(r, reps):
    out = r.run(f'tryCatch({{t0 <- proc.time()[["elapsed"]]; for (i in 1:{reps}) n <- bethel(strata, errors); '
                f'cat(format((proc.time()[["elapsed"]] - t0) / {reps}, digits=17), n)}}, '
                f'error=function(e) cat("ERROR", conditionMessage(e)))')
    vals = out.split()
    if not vals or vals[0] == "ERROR":
        raise RuntimeError(f"bethel failed in R: {out}")
    return float(vals[0]), np.array([float(v) for v in vals[1:]])


def open_bethel(r, source):
    """'package', 'source' or '' (not available) with the reason."""
    if r is None:
        return "", "R is not available"
    if r.run('cat(suppressWarnings(suppressMessages(require(SamplingStrata))))') == "TRUE":
        return "package", ""
    src = source or os.environ.get("DPOPT_BETHEL_R", "")
    if src and os.path.exists(src):
        ok = r.run(f'tryCatch({{source("{src}"); cat(exists("bethel"))}}, error=function(e) cat("FALSE"))')
        if ok == "TRUE":
            return "source", ""
        return "", f"{src} does not define bethel"
    return "", ("SamplingStrata is not installed and no Bethel.r was given (--bethel-source or DPOPT_BETHEL_R; "
                "it is SamplingStrata's public R/Bethel.r)")


def bethel_section(r, a):
    how, why = open_bethel(r, a.bethel_source)
    print("\nBethel-type: min cost, CV targets per domain x variable (2 variables x 10 domains), n >= 2, fpc; peer: "
          + ("R's bethel (SamplingStrata " + ("package)" if how == "package" else "Bethel.r sourced)") if how else
             f"{why}; the peer is py-bethel, an independent Python reimplementation of the Bethel-Chromy "
             "iteration (+ ceiling), not SamplingStrata itself"))
    print(f"{'k':>6} {'cv':>10} | {'dpopt s':>8} {'status':>10} {'gap':>8} | {'peer s':>9} | {'ratio med':>9} "
          f"{'ratio min':>9} | {'saved':>9} {'saved %':>8}")
    within = total = 0
    for k in ([100, 1000] if a.quick else [100, 1000, 10000]):
        N, M, S, cost, dom = bethel_population(k)
        for cv in ([(0.05, 0.08)] if a.quick else [(0.05, 0.08), (0.02, 0.03)]):
            mc = bethel_model(N, M, S, cost, dom, np.array(cv))
            if how:
                send_vectors(r, N=N, M1=M[:, 0], M2=M[:, 1], S1=S[:, 0], S2=S[:, 1], COST=cost, DOM1=dom)
                r.run('strata <- data.frame(STRATO=seq_along(N), N=N, M1=M1, M2=M2, S1=S1, S2=S2, COST=COST, '
                      f'CENS=0, DOM1=DOM1); errors <- data.frame(DOM="DOM1", CV1={cv[0]!r}, CV2={cv[1]!r}, '
                      'domainvalue=1)')
                reps = 5 if k <= 1000 else 1

                def peer():
                    return r_bethel(r, reps)
            else:
                def peer():
                    t0 = time.perf_counter()
                    n = py_bethel(N, M, S, cost, dom, np.array(cv))
                    return time.perf_counter() - t0, n
            total += 1
            within += report(mc, peer, a, f"{k:>6} {str(cv):>10}", cost)
    print(f"dpopt proven and within 2x of the peer: {within}/{total}")


def report(mc, peer, a, label, cost, feasible_peer=None) -> bool:
    """Interleave dpopt and the peer, print one line; True when dpopt proved within 2x the peer's time."""
    peer_times = []

    def peer_timed():
        t, n = peer()
        peer_times.append(t)
        return n

    # the peer's own clock (inside R, without the pipe) is its time; the interleaving keeps the load fair
    res = interleaved(lambda: mc.solve(backend="exact", time_limit=a.time_limit), peer_timed, a.pairs)
    sol, n_peer = res["a"], res["b"]
    ratios = [td / max(tp, 1e-9) for td, tp in zip(res["a_times"], peer_times)]
    t_d, t_p = res["a_median"], float(np.median(peer_times))
    gap = sol.certificate.gap if sol.certificate is not None and sol.certificate.gap is not None else math.inf
    cost_peer = float(cost @ n_peer)
    ok_peer = mc.is_feasible(np.clip(n_peer, 1, mc.N).astype(np.int64)) if feasible_peer is None else feasible_peer(n_peer)
    saved = cost_peer - sol.objective if sol.objective is not None else math.nan
    print(f"{label} | {t_d:8.3f} {sol.status.value:>10} {gap:8.1e} | {t_p:9.4f} | "
          f"{float(np.median(ratios)):9.3g} {min(ratios):9.3g} | {saved:9.4g} {100 * saved / cost_peer:7.3f}%"
          + ("" if ok_peer else "  (peer's rounded design misses a target)"), flush=True)
    return sol.status.value == "optimal" and t_d <= 2 * t_p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--bethel-source", default="", help="SamplingStrata's R/Bethel.r (when the package is absent)")
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
    integer_rows = []
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
            total += 1
            within += report(mc, peer, a, f"{name:>14} {frac:>4g}", c,
                             lambda n: classical_variance(N, S, n) <= V * (1 + 1e-9))
            if r and frac == fracs[0]:
                integer_rows.append((name, N, S, V))
    print(f"\ndpopt proven and within 2x of the peer: {within}/{total}")
    if r:
        print("\nMin-size (unit costs 1, same V): dpopt vs stratallo:::CapacityScaling2 (integer, exact); "
              "ratio < 1: dpopt faster")
        print(f"{'instance':>14} {'frac':>4} | {'dpopt s':>8} {'status':>10} {'gap':>8} | {'peer s':>9} | "
              f"{'ratio med':>9} {'ratio min':>9} | {'saved':>9} {'saved %':>8}")
        for name, N, S, V in integer_rows:
            send_vectors(r, NN=N.astype(float), SS=S)
            ones = np.ones(N.size)
            mc = model(N, S, ones, V)
            reps = 3 if N.size <= 1000 else 1
            if r_capacity_scaling(r, V, 1) is None:
                print(f"{name:>14}: CapacityScaling2 failed in R")
                continue
            report(mc, lambda: r_capacity_scaling(r, V, reps), a, f"{name:>14} {fracs[0]:>4g}", ones,
                   lambda n: classical_variance(N, S, n) <= V * (1 + 1e-9))
    else:
        print("\nstratallo's integer routes need R and stratallo: not run")
    bethel_section(r, a)
    if r:
        r.close()


if __name__ == "__main__":
    main()
