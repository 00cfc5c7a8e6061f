"""Model files: TOML descriptions of models, one loader per model family.

A file names its family (``family = "stratified"``) and gives that family's parameters; an optional
``[solve]`` table holds default backend options. Each family's loader (``dpopt/io/<family>.py``) registers
itself with :func:`register_family` when :mod:`dpopt.io` imports it, so neither this module nor the CLI knows
any family (a third party's loader calls ``register_family`` itself).

Files a model file names (``tree_csv``, ``[population] csv``, ...) are resolved by :func:`resolve_path`:
relative to the model file's folder and only inside it, unless the caller of :func:`load` passes
``allow_outside=True`` (CLI: ``--allow-outside-paths``). Every error names the model file and the key, and
never quotes the referenced file's contents.
"""

from __future__ import annotations

import contextvars
import tomllib
from pathlib import Path
from typing import Any, Callable

FamilyLoader = Callable[[dict[str, Any], Path], Any]
_FAMILIES: dict[str, FamilyLoader] = {}


class ModelFileError(ValueError):
    """A model file that cannot be read or describes an invalid model."""


# whether the model file being loaded may name files outside its own folder (set by load/from_dict)
_ALLOW_OUTSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("dpopt_allow_outside", default=False)


def resolve_path(base, value, key: str) -> Path:
    """The file a model file names under ``key``: relative to the model file's folder ``base``.

    Refused (ModelFileError naming ``key``) unless it is a string naming an existing regular file inside
    ``base`` (after resolving ``..`` and symbolic links); absolute paths and paths leading outside are
    accepted only when the caller of :func:`load` allowed them (``allow_outside=True``)."""
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ModelFileError(f"{key} must be a file name (a non-empty string), got {type(value).__name__}")
    root = Path(base).resolve()
    path = (root / value).resolve()
    if not _ALLOW_OUTSIDE.get() and not path.is_relative_to(root):
        raise ModelFileError(f"{key} = {value!r} lies outside the model file's folder; only files under "
                             "that folder are read (pass allow_outside=True, or --allow-outside-paths on the "
                             "command line, to read it)")
    if not path.exists():
        raise ModelFileError(f"{key} = {value!r}: no such file")
    if not path.is_file():
        raise ModelFileError(f"{key} = {value!r} is not a regular file")
    return path


def register_family(name: str):
    def deco(fn: FamilyLoader) -> FamilyLoader:
        _FAMILIES[name] = fn
        return fn
    return deco


def families() -> list[str]:
    return sorted(_FAMILIES)


def load(path, allow_outside: bool = False) -> tuple[Any, dict[str, Any]]:
    """Read a model file; return ``(model, solve_options)``. Errors are :class:`ModelFileError`.

    ``allow_outside``: let the file name data files outside its own folder (absolute paths, ``..``)."""
    path = Path(path)
    return from_dict(read(path), base=path.parent, source=str(path), allow_outside=allow_outside)


def read(path) -> dict[str, Any]:
    """The parsed TOML table of a model file (every read error a one-line :class:`ModelFileError`)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a model file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ModelFileError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not a TOML model file (TOML is UTF-8 text; this file is binary or in "
                             "another encoding)") from None
    except RecursionError:
        raise ModelFileError(f"{path}: not a usable TOML model file (arrays or tables nested too deeply)") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return data


def from_dict(data: dict[str, Any], base: Path | str = ".", source: str = "<dict>", allow_outside: bool = False):
    """Build a model from an already parsed model-file dict (``base``: the folder its file names are relative
    to; ``allow_outside``: see :func:`load`)."""
    if not isinstance(data, dict):
        raise ModelFileError(f"{source}: a model file is a TOML table, got {type(data).__name__}")
    data = dict(data)
    family = data.pop("family", None)
    if family is None:
        raise ModelFileError(f"{source}: missing key 'family' (one of {', '.join(sorted(_FAMILIES))})")
    if not isinstance(family, str):
        raise ModelFileError(f"{source}: family must be a string, one of {', '.join(sorted(_FAMILIES))} "
                             f"(got {type(family).__name__})")
    if family not in _FAMILIES:
        raise ModelFileError(f"{source}: unknown family {family!r} (one of {', '.join(sorted(_FAMILIES))})")
    solve = data.pop("solve", {})
    if not isinstance(solve, dict):
        raise ModelFileError(f"{source}: [solve] must be a table")
    if "solver_options" in solve:       # only allow-listed, file-free solver options (io/solver_options.py)
        from .solver_options import check_model_file_solver_options, solver_of
        try:
            solve = {**solve, "solver_options": check_model_file_solver_options(
                solve["solver_options"], solver_of(solve), where=f"{source}: [solve] solver_options")}
        except (ValueError, TypeError) as exc:
            raise ModelFileError(str(exc)) from None
    # [release] names the frame's columns for `dpopt release` (release_table); models do not read it
    if not isinstance(data.pop("release", {}), dict):
        raise ModelFileError(f"{source}: [release] must be a table")
    token = _ALLOW_OUTSIDE.set(bool(allow_outside))
    try:
        model = _FAMILIES[family](data, Path(base))
    except ModelFileError as exc:
        text = str(exc)
        if text.startswith(f"{source}:"):
            raise
        raise ModelFileError(f"{source}: {text}") from None       # every error names the file
    except (ValueError, TypeError, KeyError, ArithmeticError, IndexError) as exc:
        raise ModelFileError(f"{source}: {exc}") from None
    except RecursionError:
        raise ModelFileError(f"{source}: arrays nested too deeply") from None
    except MemoryError:
        raise ModelFileError(f"{source}: the model is too large for the available memory") from None
    finally:
        _ALLOW_OUTSIDE.reset(token)
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
