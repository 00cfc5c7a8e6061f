"""Command line: ``dpopt solve FILE.toml [--backend NAME] [--relax] [--json]``; ``dpopt design`` and
``dpopt release`` (frame to released estimate, :mod:`dpopt.cli_frames`); ``dpopt plot``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from .io import modelfile
from .registry import available_backends, option_parameter


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpopt", description="Privacy-aware sampling design and DP budget allocation.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("solve", help="solve a model file")
    s.add_argument("file", help="model file (TOML)")
    s.add_argument("--backend", default=None, help="backend name, or backend:solver as in compare (e.g. "
                                                  "pyomo:highs); default: the file's [solve] backend, else exact")
    s.add_argument("--solver", default=None, help="solver of the backend (pyomo: scip, highs, ipopt)")
    s.add_argument("--allow-outside-paths", action="store_true",
                   help="let the model file name data files outside its own folder")
    s.add_argument("--relax", action="store_true", help="solve the continuous relaxation instead")
    s.add_argument("--time-limit", type=float, default=None, help="seconds (backends that support it)")
    s.add_argument("--json", action="store_true", help="print the Solution as JSON (the only thing on stdout)")
    s.add_argument("--verbose", action="store_true", help="the dpopt log and the solver's log on stderr")
    sub.add_parser("backends", help="list the registered backends")
    c = sub.add_parser("compare", help="run every capable backend on a model file and compare")
    c.add_argument("file", help="model file (TOML)")
    c.add_argument("--backends", nargs="+", default=None,
                   help="backend names (e.g. exact algorithm1 pyomo:scip pyomo:highs cvxpy); default: all capable")
    c.add_argument("--relax", action="store_true", help="compare continuous relaxations instead")
    c.add_argument("--time-limit", type=float, default=None, help="seconds per backend (those that support it)")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON (the only thing on stdout)")
    c.add_argument("--verbose", action="store_true", help="the dpopt log on stderr")
    c.add_argument("--allow-outside-paths", action="store_true",
                   help="let the model file name data files outside its own folder")
    pl = sub.add_parser("plot", help="draw a figure (needs the plot extra); 'dpopt plot list' lists them, "
                                     "'dpopt plot MODEL.toml' draws your own model")
    pl.add_argument("figure", help="figure name, 'all', 'list', or a model file (.toml)")
    pl.add_argument("--out", default="figures", help="output directory")
    pl.add_argument("--quick", action="store_true", help="coarse grids")
    from .cli_frames import add_commands
    add_commands(sub)   # design, release
    return p


#: main()'s status for a command stopped by Ctrl-C (the shell's 128 + SIGINT)
INTERRUPTED = 130


def run() -> None:
    """The ``dpopt`` command (and ``python -m dpopt.cli``): :func:`main`, then exit with its status. A command
    stopped by Ctrl-C prints its one line, cleans up as any exit does, and then ends *by SIGINT* (the shell shows
    status 130). A shell waiting on a program checks how it ended: a program that exits normally is taken to
    have handled the Ctrl-C, so a script's loop over model files would go on to the next one. Ending by SIGINT
    is also the one outcome CPython guarantees under ``-m``: an interrupt that lands inside code run from a
    string (a dataclass or namedtuple being built during an import) marks it unhandled for good, and the
    process then kills itself with SIGINT after a clean ``sys.exit(130)``."""
    code = main()
    if code == INTERRUPTED and os.name == "posix" and hasattr(signal, "SIGINT"):
        # an uncaught KeyboardInterrupt makes Python finish normally (atexit, flushed streams), then re-raise
        # SIGINT on itself with the default action; its traceback is not shown: the one line was printed
        sys.excepthook = _no_traceback_for_interrupt
        raise KeyboardInterrupt
    sys.exit(code)


def _no_traceback_for_interrupt(kind, value, tb) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)


def main(argv: list[str] | None = None) -> int:
    """Run one command (``argv``: the arguments after ``dpopt``; None: ``sys.argv[1:]``) and return its exit
    status: 0 done, 1 no answer, 2 bad input, :data:`INTERRUPTED` stopped by Ctrl-C."""
    import logging

    # the CLI reports every outcome itself (one line on errors); Pyomo's own log would be a second channel,
    # e.g. a construction traceback when Ctrl-C lands while a Pyomo model is still being built
    log = logging.getLogger("pyomo")
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        return _main(argv)
    finally:
        log.setLevel(level)


def _main(argv: list[str] | None) -> int:
    from . import _log

    from .progress import lines_to_stderr

    args = _parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    # a long solve shows its incumbent and bound as it goes: with the log when --verbose, else on a terminal
    with _log.to_stderr(verbose), lines_to_stderr(not verbose and _is_terminal(sys.stderr)):
        return _run(args)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _run(args) -> int:
    try:
        if args.command == "backends":
            for name, desc in sorted(available_backends().items()):
                print(f"{name:12s} {desc}")
            return 0
        if args.command == "solve":
            return _solve(args)
        if args.command == "compare":
            from .compare import compare
            model, _ = modelfile.load(args.file, allow_outside=args.allow_outside_paths)
            res = compare(model, backends=args.backends and " ".join(args.backends), time_limit=args.time_limit,
                          progress=not args.json, relax=args.relax)
            print(json.dumps(res.to_dict(), indent=2) if args.json else res.table())
            return 0 if res.best is not None else 1
        if args.command == "plot":
            return _plot(args)
        if args.command in ("design", "release"):
            from . import cli_frames
            return cli_frames.run_design(args) if args.command == "design" else cli_frames.run_release(args)
    except KeyboardInterrupt:      # raised by a backend or a solver that caught SIGINT: stop, one line
        print("dpopt: interrupted", file=sys.stderr)
        return INTERRUPTED
    except (modelfile.ModelFileError, ValueError, TypeError, ImportError) as exc:
        print(f"dpopt: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"dpopt: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except RecursionError:
        print(f"dpopt: error: {getattr(args, 'file', 'input')}: structures nested too deeply", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"dpopt: error: {getattr(args, 'file', 'input')}: the problem is too large for the available "
              "memory", file=sys.stderr)
        return 2
    return 1


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _solve(args) -> int:
    from .compare import handler_solvers

    model, options = modelfile.load(args.file, allow_outside=args.allow_outside_paths)
    options = dict(options)
    backend = args.backend or options.pop("backend", None) or model.default_backend
    options.pop("backend", None)
    if isinstance(backend, str) and ":" in backend:          # compare's spelling: pyomo:highs
        backend, options["solver"] = backend.split(":", 1)
    if args.solver is not None:
        options["solver"] = args.solver
    task_name = "relax" if args.relax else "solve"
    if "solver" in options and isinstance(backend, str) and backend in available_backends():
        if option_parameter(model, backend, task_name, "solver") is None:
            raise ValueError(f"backend {backend!r} takes no solver for a {type(model).__name__} ({task_name})")
        allowed = handler_solvers(model, backend, task_name)
        name = options["solver"]
        if allowed and not (isinstance(name, str) and name.strip().lower() in allowed):
            shown = name if isinstance(name, str) and len(name) <= 80 else f"{str(name)[:77]}..."
            raise ValueError(f"solver {shown!r} is not a solver of backend {backend!r} for a "
                             f"{type(model).__name__}; allowed: {', '.join(allowed)}")
    takes_limit = isinstance(backend, str) and option_parameter(model, backend, task_name, "time_limit") is not None
    if args.time_limit is not None:
        if takes_limit:
            options["time_limit"] = args.time_limit
        else:   # the flag applies to the backends that take it; say so rather than fail
            print(f"dpopt: note: backend {backend!r} takes no time limit; --time-limit ignored", file=sys.stderr)
    allowed = handler_solvers(model, backend, task_name) if isinstance(backend, str) \
        and backend in available_backends() else None
    if allowed and takes_limit:      # an external solver runs: say which, and for how long at most
        from .options import DEFAULT_TIME_LIMIT
        limit = options.get("time_limit")
        limit_text = (f"time limit {DEFAULT_TIME_LIMIT:g} s, the default (--time-limit to change)" if limit is None
                      else f"time limit {limit:g} s")
        solver = str(options.get("solver", allowed[0])).strip().lower()
        print(f"dpopt: solving with {backend} ({solver}); {limit_text} ...",
              file=sys.stderr, flush=True)
    if args.verbose and isinstance(backend, str) and backend in available_backends() \
            and option_parameter(model, backend, task_name, "verbose") is not None:
        options["verbose"] = True       # the solver's own log too (on stderr, never stdout)
    task = model.relax if args.relax else model.solve
    sol = task(backend=backend, **options)
    if args.json:
        print(json.dumps(sol.to_dict(), indent=2))
    else:
        print(model.report(sol))
    return 0 if sol.ok else 1


def _plot(args) -> int:
    from pathlib import Path

    from .plots import figures

    if args.figure.lower().endswith(".toml"):
        from .plots.model import plot_model_file
        for path in plot_model_file(args.figure, Path(args.out), quick=args.quick):
            print(f"wrote {path}")
        return 0
    table = figures()
    if args.figure == "list":
        print("\n".join(sorted(table)))
        return 0
    names = sorted(table) if args.figure == "all" else [args.figure]
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown figure {unknown[0]!r}; available: {', '.join(sorted(table))}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {args.out!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {args.out!r}: cannot create the directory ({exc.strerror or exc})") from None
    for name in names:
        print(f"{name}: wrote {table[name](out, quick=args.quick)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    run()
