"""R's stratallo (Wójciak, GPL-2; https://github.com/wwojciech/stratallo, CRAN 3.0.1) called through ``Rscript``.

stratallo's multi-domain population ``pop9d278s`` (9 domains, 278 strata) and its ``dopt`` (multi-domain
controlled precision by the RDCA algorithm) are read from an installed stratallo, never copied into dpopt:
the data ship under stratallo's GPL-2 licence and dpopt is MIT, so dpopt neither redistributes them nor
reimplements ``dopt``. Without ``Rscript`` or without stratallo ≥ 3 installed the callers say so and skip.

To install (Debian/Ubuntu, no CRAN access needed): ``apt-get install r-base-core r-cran-checkmate
r-cran-lifecycle r-cran-rdpack`` and ``R CMD INSTALL <stratallo 3.x source>`` (the CRAN mirror
``github.com/cran/stratallo`` holds it).
"""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np

_TIMEOUT = 120.0        # seconds for one Rscript run


def rscript() -> str | None:
    return shutil.which("Rscript")


def _run(code: str) -> str:
    exe = rscript()
    if exe is None:
        raise RuntimeError("Rscript is not on PATH")
    out = subprocess.run([exe, "--vanilla", "-e", code], capture_output=True, text=True, timeout=_TIMEOUT)
    if out.returncode != 0:
        raise RuntimeError(f"Rscript failed: {out.stderr.strip()[-500:]}")
    return out.stdout


def available() -> tuple[bool, str]:
    """(True, version) when Rscript runs and stratallo ≥ 3 (with ``dopt``) is installed, else (False, why)."""
    if rscript() is None:
        return False, "Rscript not found (R is not installed)"
    try:
        v = _run('cat(as.character(packageVersion("stratallo")), exists("dopt", asNamespace("stratallo")))').split()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return False, f"stratallo is not installed in R ({exc})"
    if len(v) != 2 or v[1] != "TRUE":
        return False, f"stratallo {v[0] if v else '?'} has no dopt (needs stratallo >= 3)"
    return True, v[0]


def pop9d278s() -> dict:
    """stratallo's ``pop9d278s`` as arrays: domain of each stratum (0-based), N, S, and per domain total, kappa."""
    txt = _run("library(stratallo); p <- pop9d278s; "
               "write.csv(data.frame(domain = rep(seq_along(p$H_counts), p$H_counts), N = p$N, S = p$S), "
               "stdout(), row.names = FALSE); cat('--\\n'); "
               "write.csv(data.frame(total = p$total, kappa = p$kappa), stdout(), row.names = FALSE)")
    strata, domains = txt.split("--\n")
    s = np.genfromtxt(io.StringIO(strata), delimiter=",", names=True)
    d = np.genfromtxt(io.StringIO(domains), delimiter=",", names=True)
    return {"domain": s["domain"].astype(int) - 1, "N": s["N"].astype(np.int64), "S": s["S"].astype(float),
            "total": np.atleast_1d(d["total"]).astype(float), "kappa": np.atleast_1d(d["kappa"]).astype(float)}


def dopt(n: int, reps: int = 20) -> dict:
    """``dopt(n, ...)`` on pop9d278s in one Rscript run: the continuous optimum ``x`` and ``T``, stratallo's own
    deterministic rounding ``round_oric(x)`` (a sum-preserving integer design) and the mean time of one
    ``dopt`` call over ``reps`` calls timed in one loop inside R (R's start-up excluded)."""
    txt = _run(f"library(stratallo); p <- pop9d278s; n <- {int(n)}; "
               "f <- function() dopt(n, p$H_counts, p$N, p$S, p$total, p$kappa, return_T = TRUE); "
               f"el <- system.time(for (i in seq_len({int(reps)})) f())[['elapsed']] / {int(reps)}; "
               "r <- f(); options(digits = 17); "
               "cat(el, r$Topt, '\\n'); cat(r$xopt, '\\n'); cat(round_oric(r$xopt), '\\n')")
    lines = txt.strip().splitlines()
    head = lines[0].split()
    return {"seconds": float(head[0]), "T": float(head[1]), "x": np.array(lines[1].split(), dtype=float),
            "rounded": np.array(lines[2].split(), dtype=float).astype(np.int64)}
