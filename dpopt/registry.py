"""Backend registry: the only link between models and backends.

Models call :func:`dispatch`; backends register the functions that handle a model class. Neither
imports the other, so a new backend (or a new model family) plugs in without touching existing code.
A backend that has no entry for a model class is reported as ``unsupported`` on the Solution.
"""

from __future__ import annotations

import inspect
import time
from importlib import import_module
from typing import Any, Callable

from . import _validate as V
from .result import Solution, Status

# (backend name, model class, task) -> function(model, **options) -> Solution
_HANDLERS: dict[tuple[str, type, str], Callable[..., Solution]] = {}
_BACKENDS: dict[str, str] = {}  # name -> one-line description
TASKS = ("solve", "relax")


def register(backend: str, model_cls: type, task: str, description: str = ""):
    """Decorator registering ``fn(model, **options) -> Solution`` for (backend, model class, task)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}")

    def deco(fn):
        _HANDLERS[(backend, model_cls, task)] = fn
        if description or backend not in _BACKENDS:
            _BACKENDS[backend] = description or _BACKENDS.get(backend, "")
        return fn

    return deco


def available_backends() -> dict[str, str]:
    """Registered backend names with their descriptions."""
    _load()
    return dict(_BACKENDS)


def capable(model, task: str = "solve") -> list[str]:
    """Backends with a handler for this model's class and task."""
    _load()
    names = []
    for (name, cls, t) in _HANDLERS:
        if t == task and isinstance(model, cls) and name not in names:
            names.append(name)
    return names


def _find(backend: str, model, task: str):
    for cls in type(model).__mro__:
        fn = _HANDLERS.get((backend, cls, task))
        if fn is not None:
            return fn
    return None


def option_parameter(model, backend: str, task: str, option: str) -> inspect.Parameter | None:
    """The named keyword parameter ``option`` of the handler for (backend, model class, task), if any.

    A ``**kwargs`` catch-all does not count: what it forwards (e.g. cvxpy's solver options) is the
    backend's business, so callers adding an option of their own (the CLI's ``--time-limit``, compare)
    pass it only where a handler names it."""
    _load()
    fn = _find(backend, model, task)
    if fn is None:
        return None
    p = inspect.signature(fn).parameters.get(option)
    if p is None or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
        return None
    return p


def dispatch(model, backend: str, task: str, options: dict[str, Any]) -> Solution:
    """Run ``backend`` on ``model``; never raises for solver faults (they become a status)."""
    _load()
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, got {type(backend).__name__}")
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(sorted(_BACKENDS))}")
    fn = _find(backend, model, task)
    name = type(model).__name__
    if fn is None:
        return Solution(status=Status.UNSUPPORTED, backend=backend, model=name,
                        message=f"backend {backend!r} cannot {task} a {name}")
    if "time_limit" in options:      # one rule for every backend: finite seconds > 0, or None
        options = {**options, "time_limit": V.time_limit(options["time_limit"])}
    try:
        inspect.signature(fn).bind(model, **options)
    except TypeError as exc:
        raise TypeError(f"backend {backend!r} ({task}): {exc}") from None
    t0 = time.perf_counter()
    try:
        sol = fn(model, **options)
    except (KeyboardInterrupt, MemoryError, V.InvalidOption):
        raise   # bad option values are the caller's to fix, not a solver status
    except Exception as exc:  # a fault inside a solver becomes a status, never a crash
        sol = Solution(status=Status.ERROR, message=f"{type(exc).__name__}: {exc}")
    sol.wall_time = sol.wall_time or (time.perf_counter() - t0)
    sol.backend = sol.backend or backend
    sol.model = sol.model or name
    return sol


def _load() -> None:
    # importing the backends package registers every built-in backend (once)
    import_module(__package__ + ".backends")
