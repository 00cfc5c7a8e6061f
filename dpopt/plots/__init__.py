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


def figures() -> dict:
    """Every figure a ``dpopt.plots`` module offers in its ``FIGURES`` table (used by ``dpopt plot``)."""
    import pkgutil
    from importlib import import_module

    out = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = import_module(f"{__name__}.{info.name}")
        out.update(getattr(mod, "FIGURES", {}))
    return out
