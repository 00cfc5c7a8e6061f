"""The frame-to-release commands of the CLI: ``dpopt design`` and ``dpopt release``.

``dpopt design FRAME.csv --strata COL --y COL --total N --epsilon E [--mechanism M] [--value-range LO HI]
[--pilot PILOT.csv] [--id COL] --out MODEL.toml`` writes a stratified model file with labelled strata and a
``[release]`` table naming the frame's columns; ``dpopt release MODEL.toml --frame FRAME.csv --seed S
--out DIR`` solves the design, draws the sample, privatises it through OpenDP and writes
``estimate.json``, ``sample.csv`` and ``audit.json`` to DIR (docs/release.md).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from . import _validate as V


def add_commands(sub) -> None:
    d = sub.add_parser("design", help="a stratified design from a sampling frame (CSV): writes a model file")
    d.add_argument("frame", help="sampling frame (CSV with a header row)")
    d.add_argument("--strata", required=True, help="stratum column")
    d.add_argument("--y", required=True, nargs="+", help="study variable column(s)")
    d.add_argument("--total", required=True, type=int, help="total sample size")
    d.add_argument("--epsilon", required=True, type=float, help="central privacy budget every person receives")
    d.add_argument("--mechanism", default="laplace", help="laplace (default), dlap or tulap")
    d.add_argument("--value-range", nargs=2, type=float, metavar=("LO", "HI"), default=None, action="append",
                   help="bounds of the responses: sensitivity HI - LO, responses clamped at release; once for "
                        "every --y column, or repeated once per --y column, in their order")
    d.add_argument("--pilot", default=None, help="pilot sample (CSV) for S_h^2 instead of the frame's own y")
    d.add_argument("--id", default=None, help="unique unit id column (default: the row number)")
    d.add_argument("--min-per-stratum", type=int, default=None, metavar="M",
                   help="at least M sampled units per stratum (2 lets every stratum's variance be estimated)")
    d.add_argument("--domains", default=None, metavar="COL",
                   help="domain column (constant within each stratum, e.g. a region), written to the model file")
    d.add_argument("--cost", default=None, metavar="COL",
                   help="cost per interview, a column constant within each stratum (with --cost-budget)")
    d.add_argument("--cost-budget", type=float, default=None, metavar="C", help="the design's cost may not exceed C")
    for kind in ("se", "cv"):
        d.add_argument(f"--{kind}-target", action="append", default=[], metavar="[DOMAIN[:VAR]=]VALUE",
                       help=f"a precision target: the {kind.upper()} of the mean over DOMAIN (a --domains value or a "
                            "stratum; default the whole population) of variable VAR (needed with several --y) "
                            f"at most VALUE; repeatable")
    d.add_argument("--robust", default=None, choices=("regret", "absolute"),
                   help="design robust to the pilot's uncertainty (docs/robust.md): minimise the worst relative "
                        "regret (or worst variance) over bootstrap scenarios of --pilot's S_h^2")
    d.add_argument("--draws", type=int, default=50, metavar="B", help="bootstrap scenarios for --robust (50)")
    d.add_argument("--seed", type=int, default=None, metavar="S", help="seed of the --robust bootstrap")
    d.add_argument("--out", required=True, help="model file to write (TOML)")
    r = sub.add_parser("release", help="draw the sample, privatise it through OpenDP, estimate, audit")
    r.add_argument("model", help="stratified model file (from dpopt design)")
    r.add_argument("--frame", required=True, help="sampling frame (CSV) the design was made from")
    r.add_argument("--seed", default=None,
                   help="secret seed of the sample draw (keep it confidential; default: a fresh random key)")
    r.add_argument("--out", required=True, help="output directory (estimate.json, sample.csv, audit.json)")
    r.add_argument("--ledger", default=None,
                   help="audit.json of earlier releases on this population: the new release is charged to it")
    r.add_argument("--confidence", type=float, default=0.95, help="confidence level of the interval (0.95)")
    r.add_argument("--epsilon-total", type=float, default=None, metavar="E",
                   help="the per-person total of a planned series of releases (default: the model's epsilon, or "
                        "the --ledger audit's total, which this may only raise)")
    r.add_argument("--force", action="store_true",
                   help="release into an --out that holds an earlier release: its files are kept, renamed "
                        "audit.N.json, estimate.N.json, sample.N.csv")


# ---------------------------------------------------------------------------------- output files
def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def refuse_overwriting_inputs(outputs, inputs: dict) -> None:
    """ValueError when an output path is one of the command's input files (``inputs``: option -> path)."""
    for out in outputs:
        for option, path in inputs.items():
            if path is not None and _same_file(Path(out), Path(path)):
                raise ValueError(f"the output {str(out)!r} is the {option} input file; choose another output path "
                                 "(an output never overwrites an input)")


RELEASE_FILES = ("audit.json", "estimate.json", "sample.csv")


def _keep_earlier_release(out: Path, force: bool) -> None:
    """An --out that holds an earlier release's audit.json (the only record of the budget it spent) is
    refused; with --force its files are renamed to the first free ``audit.N.json`` etc. and kept."""
    present = [name for name in RELEASE_FILES if (out / name).exists()]
    if not present:
        return
    if not force:
        raise ValueError(f"--out {str(out)!r} already holds an earlier release ({', '.join(present)}); its "
                         "audit.json is the record of the budget it spent, so it is not overwritten: choose "
                         "another --out, or pass --force to keep the earlier files as audit.N.json, ...")
    n = 1
    while any((out / _numbered(name, n)).exists() for name in RELEASE_FILES):
        n += 1
    for name in present:
        (out / name).rename(out / _numbered(name, n))


def _numbered(name: str, n: int) -> str:
    stem, dot, ext = name.partition(".")
    return f"{stem}.{n}.{ext}"


def write_new_file_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and link it into place: a reader sees the whole
    file or none, and an existing ``path`` is never replaced (FileExistsError)."""
    import os
    import tempfile
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)             # fails if path exists, unlike rename
        except FileExistsError:
            raise
        except OSError:                    # a file system without hard links: check, then rename
            if path.exists():
                raise FileExistsError(17, "exists", str(path)) from None
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ---------------------------------------------------------------------------------- design
def design_toml(model, *, source: str, columns: dict, sigma2_from: str) -> str:
    """The model file text of a stratified design made from a frame (:func:`dpopt.io.writer.to_toml`'s keys,
    with comments on where the variances came from and the ``[release]`` table of frame columns)."""
    from .io.writer import dumps, model_to_dict

    clamped = (getattr(model, "frame_columns", None) or {}).get("sigma2_clamped_to")
    comments = [f"written by dpopt design from {source}",
                f"sigma2: variances of {columns['y']} from the {sigma2_from}"
                + (" (values clamped to value_range, as the release clamps them)" if clamped else "")
                + (" (the design then reads the confidential values; a public pilot avoids that, docs/release.md)"
                   if sigma2_from == "frame" else "")]
    data = model_to_dict(model)
    data["release"] = dict(columns)
    return dumps(data, comments)


def _add_cost_and_targets(model, frame, args) -> None:
    """--cost COL with --cost-budget, and the --se-target / --cv-target rows, added to the design."""
    from .frames import Frame, _stratum_column

    if (args.cost is None) != (args.cost_budget is None):
        raise ValueError("--cost COL and --cost-budget C go together (the budget bounds the cost the column gives)")
    if args.cost is not None:
        by_label = _stratum_column(Frame(frame, "frame"), args.strata, model.labels, args.cost, "--cost")
        cost = [V.positive(f"--cost column {args.cost!r} in stratum {lab!r}", _number(by_label[lab], args.cost))
                for lab in model.labels]
        model.add_cost_budget(cost, V.positive("--cost-budget", args.cost_budget))
    for kind in ("se", "cv"):
        for spec in getattr(args, f"{kind}_target"):
            where, _, value = spec.rpartition("=")
            domain, _, variable = where.partition(":")
            target = V.positive(f"--{kind}-target {spec!r}", _number(value, f"--{kind}-target"))
            model.add_precision_target(target, strata=domain or None, variable=variable or None, kind=kind)


def _number(text, what):
    from .frames import parse_number

    x = parse_number(text)
    if x is None:
        raise ValueError(f"{what}: {text!r} is not a number")
    return x


def run_design(args) -> int:
    from .frames import read_csv
    from .models.stratified import StratifiedDesign

    frame = read_csv(args.frame, name="frame")
    pilot = read_csv(args.pilot, name="pilot") if args.pilot else None
    y = args.y[0] if len(args.y) == 1 else list(args.y)
    if args.id is not None and args.id not in frame:
        raise ValueError(f"frame has no id column {args.id!r}")
    options = {"mechanism": args.mechanism}
    if args.value_range is not None:
        ranges = [tuple(r) for r in args.value_range]
        if len(ranges) not in (1, len(args.y)):
            raise ValueError(f"--value-range is given {len(ranges)} times but there are {len(args.y)} --y columns "
                             f"({', '.join(args.y)}): give it once for all of them or once per column, in order")
        options["value_range"] = ranges[0] if len(ranges) == 1 else ranges
    if args.min_per_stratum is not None:
        options["min_per_stratum"] = args.min_per_stratum
    if args.domains is not None:
        options["domains"] = args.domains
    model = StratifiedDesign.from_frame(frame, args.strata, y, args.total, args.epsilon, pilot=pilot, **options)
    _add_cost_and_targets(model, frame, args)
    columns = {"strata": args.strata, "y": y}
    if args.id is not None:
        columns["id"] = args.id
    out = Path(args.out)
    refuse_overwriting_inputs([out], {"frame": args.frame, "--pilot": args.pilot})
    text = design_toml(model, source=Path(args.frame).name, columns=columns,
                       sigma2_from="pilot" if pilot is not None else "frame")
    if args.robust is not None:
        return _run_robust(model, pilot, args, y, out)
    out.write_text(text, encoding="utf-8")
    sol = model.solve()
    print(f"wrote {out} ({model.k} strata, N = {int(model.N.sum())}, total = {model.total})")
    print(model.report(sol))
    return 0 if sol.ok else 1


def _run_robust(model, pilot, args, y, out: Path) -> int:
    """``dpopt design --robust``: bootstrap scenarios of the pilot's S_h^2 (seeded), the robust design against
    them (docs/robust.md), the model file with its ``[[scenario]]`` tables, and the report."""
    from .io.stratified import pilot_scenarios
    from .io.writer import dumps, model_to_dict
    from .models.robust import RobustDesign

    if pilot is None:
        raise ValueError("--robust needs --pilot: the scenarios are bootstrap draws of the pilot's variances")
    draws = V.integer("--draws", args.draws, minimum=1)
    clamp = model.value_range if model.value_ranges is not None and model.J == 1 else None
    scen = pilot_scenarios(pilot, args.strata, y, model.labels, draws=draws, seed=args.seed, clamp=clamp)
    names = ["pilot"] + [f"boot{b + 1}" for b in range(len(scen) - 1)]
    robust = RobustDesign(model, scen, objective=args.robust, names=names)
    data = model_to_dict(model)
    data["family"] = "stratified_robust"
    data["robust"] = args.robust
    data["scenario"] = [{"name": nm, "sigma2": (S[:, 0] if model.J == 1 else S).tolist()}
                        for nm, S in zip(names, robust.scenarios)]
    out.write_text(dumps(data, [f"written by dpopt design --robust {args.robust} from {Path(args.frame).name}",
                                f"scenarios: the pilot's S_h^2 and {draws} bootstrap draws within strata "
                                f"(seed {args.seed})"]), encoding="utf-8")
    sol = robust.solve()
    print(f"wrote {out} ({model.k} strata, {robust.S} scenarios, total = {model.total})")
    print(robust.report(sol))
    return 0 if sol.ok else 1


# ---------------------------------------------------------------------------------- release
def run_release(args) -> int:

    from .io import modelfile
    from .frames import Frame, read_csv
    from .models.stratified import StratifiedDesign
    from .release import PrivacyLedger, release_stratified
    from .release._opendp import require_opendp
    from .sampling import draw_stratified

    require_opendp()                     # fail first, with the install hint, when the extra is missing
    path = Path(args.model)
    data = modelfile.read(path)
    columns = modelfile.release_table(data, str(path))
    model, _ = modelfile.from_dict(data, base=path.parent, source=str(path))
    if not isinstance(model, StratifiedDesign) or type(model) is not StratifiedDesign:
        raise ValueError(f"{path}: dpopt release needs a stratified model file (family = 'stratified')")
    for key in ("strata", "y"):
        if key not in columns:
            raise ValueError(f"{path}: [release] must name the frame's {key!r} column (dpopt design writes it)")
    confidence = args.confidence
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"--confidence must be in (0, 1), got {confidence!r}")
    frame = Frame(read_csv(args.frame, name="frame"), "frame")
    ys = columns["y"] if isinstance(columns["y"], list) else [columns["y"]]
    if len(ys) != model.J:
        raise ValueError(f"{path}: [release] y names {len(ys)} column(s) but the model has {model.J} variable(s)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {args.out!r} exists and is not a directory")
    refuse_overwriting_inputs([out / name for name in RELEASE_FILES],
                              {"model": path, "--frame": args.frame, "--ledger": args.ledger})
    if not args.force:                   # refuse before any budget is spent
        _keep_earlier_release(out, force=False)
    ledger = None
    if args.ledger:
        ledger = PrivacyLedger.from_audit(Path(args.ledger))
    if args.epsilon_total is not None:
        total = V.positive("--epsilon-total", args.epsilon_total)
        if ledger is None:
            ledger = PrivacyLedger(total, name=path.stem)
        elif total < ledger.epsilon_total:
            raise ValueError(f"--epsilon-total {total:g} is below the ledger's declared total "
                             f"{ledger.epsilon_total:g}; a ledger's total can only be raised")
        else:
            ledger.epsilon_total = total     # a declared policy for a planned series; the audit records it
    sol = model.solve()
    if sol.n is None:
        raise ValueError(f"{path}: the design has no integer solution ({sol.status}: {sol.message})")
    seed = args.seed
    if seed is not None and seed.strip().lstrip("-").isdigit():
        seed = int(seed)
    sample = draw_stratified(frame, model, sol.n, strata=columns["strata"], id=columns.get("id"), seed=seed)
    import numpy as np
    values = np.column_stack([sample.values(frame, c) for c in ys])
    progress = sys.stderr.isatty()
    rel = release_stratified(model, sample, values, ledger=ledger, confidence=confidence, progress=progress,
                             name=f"stratified mean of {', '.join(ys)} ({path.name})")
    out.mkdir(parents=True, exist_ok=True)
    _keep_earlier_release(out, force=args.force)
    est = rel.to_dict()
    # the audit first, whole or not at all: a released estimate never exists without its budget's record
    audit = rel.ledger.audit({
        "model_file": str(path), "frame": Path(args.frame).name, "design_status": str(sol.status),
        "design_backend": sol.backend, "seeded": args.seed is not None,
        "sample_is_confidential": "sample.csv and the seed must stay confidential: amplification by "
                                  "subsampling assumes nobody outside knows who was sampled"})
    write_new_file_atomically(out / "audit.json", json.dumps(audit, indent=2) + "\n")
    write_new_file_atomically(out / "estimate.json", json.dumps(est, indent=2) + "\n")
    sample.to_csv(out / "sample.csv")
    def num(x, spec):
        return "n/a" if x is None else format(x, spec)

    for v in est["variables"]:
        lo, hi = v["ci"]
        print(f"{v['variable']}: estimate {num(v['estimate'], '.6g')}  se {num(v['se'], '.4g')}  "
              f"{int(round(100 * confidence))}% ci [{num(lo, '.6g')}, {num(hi, '.6g')}]")
    print(f"epsilon spent {rel.epsilon_spent:.6g} (ledger {rel.ledger.epsilon_spent:.6g} of "
          f"{rel.ledger.epsilon_total:g})  n {est['n']}")
    if rel.message:
        print(f"note: {rel.message}")
    print(f"wrote {out / 'estimate.json'}, {out / 'sample.csv'} (confidential), {out / 'audit.json'}")
    return 0
