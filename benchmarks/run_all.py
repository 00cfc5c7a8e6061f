"""Run every benchmark of the project and write one markdown report.

    python benchmarks/run_all.py [--out benchmarks/REPORT.md] [--quick] [--only bench_a,bench_b]

Each ``benchmarks/bench_*.py`` script measures its own comparisons side by side in one process and
prints them; this runner collects their output, with the machine and the time of the run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(HERE / "REPORT.md"))
    ap.add_argument("--quick", action="store_true", help="pass --quick to benchmarks that accept it")
    ap.add_argument("--only", default="", help="comma-separated script names (e.g. bench_constrained): run "
                                                 "only these (a report in parts; the parts' sections concatenate)")
    args = ap.parse_args(argv)
    only = {name.strip().removesuffix(".py") for name in args.only.split(",") if name.strip()}
    lines = ["# dpopt benchmark report", "",
             f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}.", ""]
    for script in sorted(HERE.glob("bench_*.py")):
        if only and script.stem not in only:
            continue
        cmd = [sys.executable, str(script)]
        if args.quick:
            help_text = subprocess.run(cmd + ["--help"], capture_output=True, text=True).stdout
            if "--quick" in help_text:
                cmd.append("--quick")
        print("running", script.name, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        doc = (script.read_text().split('"""')[1].strip().splitlines() or [""])[0]
        lines += [f"## {script.stem}", "", doc, "", "```", proc.stdout.rstrip(), "```", ""]
        if proc.returncode != 0:
            lines += [f"**exit code {proc.returncode}**", "", "```", proc.stderr[-3000:], "```", ""]
    Path(args.out).write_text("\n".join(lines))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
