"""Backend registry: the only link between models and backends.

Models call :func:`dispatch`; backends register the functions that handle a model class. Neither
imports the other, so a new backend (or a new model family) plugs in without touching existing code.
A backend that has no entry for a model class is reported as ``unsupported`` on the Solution.
"""

from __future__ import annotations

import inspect
import math
import time
from importlib import import_module
from typing import Any, Callable

from . import _log
from . import _validate as V
from . import options as declared_options
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


def _check_options(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """Every declared option checked before any handler runs (:mod:`dpopt.options`: one declaration each)."""
    return declared_options.validate(backend, options)


def _known_options(backend: str) -> set[str]:
    """Every keyword any handler of ``backend`` names (for any model class or task)."""
    names: set[str] = set()
    for (b, _cls, _task), fn in _HANDLERS.items():
        if b == backend:
            params = list(inspect.signature(fn).parameters.values())[1:]
            names.update(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return names


def dispatch(model, backend: str, task: str, options: dict[str, Any]) -> Solution:
    """Run ``backend`` on ``model``; never raises for solver faults (they become a status).

    Raises for the caller's mistakes: a backend that is not a registered name (``""`` included), an option
    no handler of that backend knows, a bad value of a common option (even when the backend cannot run this
    model: the call is then ``unsupported`` only after its options passed), or a bad value a handler rejects
    (:class:`~dpopt._validate.InvalidOption`). A returned point whose objective is not finite is never
    ``optimal`` or ``feasible``: it becomes ``error`` with the reason."""
    _load()
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string (one of {', '.join(sorted(_BACKENDS))}), "
                        f"got {type(backend).__name__}")
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(sorted(_BACKENDS))}")
    options = _check_options(backend, options)
    fn = _find(backend, model, task)
    name = type(model).__name__
    if fn is None:
        unknown = sorted(set(options) - _known_options(backend))
        if unknown:
            raise TypeError(f"backend {backend!r} has no option {', '.join(map(repr, unknown))}")
        return Solution(status=Status.UNSUPPORTED, backend=backend, model=name,
                        message=f"backend {backend!r} cannot {task} a {name}")
    try:
        inspect.signature(fn).bind(model, **options)
    except TypeError as exc:
        raise TypeError(f"backend {backend!r} ({task}): {exc}") from None
    t0 = time.perf_counter()
    from .backends import _status
    token = _status.begin()
    try:
        with _log.to_stderr(options.get("verbose") is True):     # verbose: the dpopt log on stderr too
            sol = fn(model, **options)
    except (KeyboardInterrupt, MemoryError, V.InvalidOption):
        raise   # bad option values are the caller's to fix, not a solver status
    except Exception as exc:  # a fault inside a solver becomes a status, never a crash
        sol = Solution(status=Status.ERROR, message=f"{type(exc).__name__}: {exc}")
    finally:
        termination = _status.end(token)
    sol.termination = sol.termination or termination      # the solver's own reason, beside dpopt's status
    sol.wall_time = sol.wall_time or (time.perf_counter() - t0)
    sol.backend = sol.backend or backend
    sol.model = sol.model or name
    sol = _refuse_non_finite(sol)
    _log.logger.info("%s %s of a %s: %s%s in %.3g s: %s", backend, task, name, sol.status.value,
                     f" (solver: {sol.termination})" if sol.termination else "", sol.wall_time, sol.message)
    return sol


def _refuse_non_finite(sol: Solution) -> Solution:
    """A point reported with a NaN or infinite objective is not an answer: status error, point moved to
    ``details['rejected_point']``."""
    has_point = sol.n is not None or sol.x is not None
    claims = sol.status in (Status.OPTIMAL, Status.FEASIBLE) or (sol.status == Status.TIME_LIMIT and has_point)
    try:
        finite = math.isfinite(float(sol.objective))
    except (TypeError, ValueError):
        finite = False
    if not claims or finite:
        return sol
    sol.details["rejected_point"] = sol.point
    sol.details["rejected_status"] = sol.status.value
    reason = (f"the objective at the returned point is {sol.objective!r} (not finite: overflow or a NaN in the "
              f"model's data or mechanism), so the point is not an answer")
    sol.message = f"{reason}; {sol.message}" if sol.message else reason
    sol.status = Status.ERROR
    sol.n = sol.x = None
    if "epsilon" in getattr(sol, "__dataclass_fields__", {}):
        sol.epsilon = None
    if sol.certificate is not None:
        sol.certificate.optimal = False
    return sol


def _load() -> None:
    # importing the backends package registers every built-in backend (once)
    import_module(__package__ + ".backends")
