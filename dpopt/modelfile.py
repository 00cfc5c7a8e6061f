"""Model files: TOML descriptions of models, one loader per model family.

A file names its family (``family = "stratified"``) and gives that family's parameters; an optional
``[solve]`` table holds default backend options. Loaders are registered by the model modules with
:func:`register_family`, so the CLI learns every family without knowing any of them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Callable

FamilyLoader = Callable[[dict[str, Any], Path], Any]
_FAMILIES: dict[str, FamilyLoader] = {}


class ModelFileError(ValueError):
    """A model file that cannot be read or describes an invalid model."""


def register_family(name: str):
    def deco(fn: FamilyLoader) -> FamilyLoader:
        _FAMILIES[name] = fn
        return fn
    return deco


def families() -> list[str]:
    _load_families()
    return sorted(_FAMILIES)


def _load_families() -> None:
    # model modules register their loaders on import
    from . import models  # noqa: F401


def load(path) -> tuple[Any, dict[str, Any]]:
    """Read a model file; return ``(model, solve_options)``. Errors are :class:`ModelFileError`."""
    _load_families()
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ModelFileError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from None
    return from_dict(data, base=path.parent, source=str(path))


def from_dict(data: dict[str, Any], base: Path | str = ".", source: str = "<dict>"):
    """Build a model from an already parsed model-file dict."""
    _load_families()
    data = dict(data)
    family = data.pop("family", None)
    if family is None:
        raise ModelFileError(f"{source}: missing key 'family' (one of {', '.join(sorted(_FAMILIES))})")
    if family not in _FAMILIES:
        raise ModelFileError(f"{source}: unknown family {family!r} (one of {', '.join(sorted(_FAMILIES))})")
    solve = data.pop("solve", {})
    if not isinstance(solve, dict):
        raise ModelFileError(f"{source}: [solve] must be a table")
    # [release] names the frame's columns for `dpopt release` (release_table); models do not read it
    if not isinstance(data.pop("release", {}), dict):
        raise ModelFileError(f"{source}: [release] must be a table")
    try:
        model = _FAMILIES[family](data, Path(base))
    except ModelFileError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ModelFileError(f"{source}: {exc}") from None
    return model, solve


def release_table(data: dict[str, Any], source: str = "<dict>") -> dict[str, Any]:
    """The ``[release]`` table of a parsed model file: the frame's ``strata`` and ``y`` columns (and an
    optional unit ``id`` column) that ``dpopt release`` reads; {} when absent."""
    rel = data.get("release", {})
    if not isinstance(rel, dict):
        raise ModelFileError(f"{source}: [release] must be a table")
    take(rel, {"strata", "y", "id"}, set(), f"{source}: [release]")
    for key, val in rel.items():
        ok = isinstance(val, str) or (key == "y" and isinstance(val, list) and bool(val)
                                      and all(isinstance(v, str) for v in val))
        if not ok:
            raise ModelFileError(f"{source}: [release] {key} must be a column name"
                                 + (" or a list of them" if key == "y" else ""))
    return rel


def take(data: dict[str, Any], allowed: set[str], required: set[str], where: str = "model") -> dict[str, Any]:
    """Check a table's keys: all required present, none unknown."""
    unknown = set(data) - allowed
    if unknown:
        raise ModelFileError(f"unknown key(s) in {where}: {', '.join(sorted(unknown))}; "
                             f"allowed: {', '.join(sorted(allowed))}")
    missing = required - set(data)
    if missing:
        raise ModelFileError(f"missing key(s) in {where}: {', '.join(sorted(missing))}")
    return data
