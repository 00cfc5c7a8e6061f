"""Figures (matplotlib is an optional extra: ``pip install "dpopt[plot]"``); one module per model family."""


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend, or a clear error naming the extra."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError('plotting needs matplotlib: pip install "dpopt[plot]"') from exc
    return plt


def save(fig, out_dir, name: str):
    """Write ``fig`` as ``out_dir/name`` (PNG, tight layout), close it and return the path."""
    from pathlib import Path

    path = Path(out_dir) / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def example_args(description: str, argv=None, quick_help: str = "coarse grids (for tests)"):
    """(out_dir, quick) from an example script's ``--out DIR [--quick]`` command line; creates out_dir."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="figures", help="folder for the PNG figures (default: figures)")
    ap.add_argument("--quick", action="store_true", help=quick_help)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return out, args.quick


def report_written(paths) -> list:
    """Print one ``wrote PATH`` line per figure and return the paths."""
    paths = list(paths)
    for path in paths:
        print("wrote", path)
    return paths


def figures() -> dict:
    """Every figure a ``dpopt.plots`` module offers in its ``FIGURES`` table (used by ``dpopt plot``)."""
    import pkgutil
    from importlib import import_module

    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = import_module(f"{__name__}.{info.name}")
        out.update(getattr(mod, "FIGURES", {}))
    return out
