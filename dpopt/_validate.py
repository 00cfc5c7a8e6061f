"""Input validation shared by all models: every message names the field and the allowed range."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


class InvalidOption(ValueError):
    """A bad backend option value: raised to the caller even from inside a backend (the registry turns
    every other exception raised there, including checks of solver output, into a status)."""


def option(check, name: str, value: Any, **kw):
    """Run a validator on a backend option, reporting failure as :class:`InvalidOption`."""
    try:
        return check(name, value, **kw)
    except (ValueError, TypeError) as exc:
        raise InvalidOption(str(exc)) from None


def _describe(value: Any) -> str:
    if isinstance(value, (str, bytes)):
        return f"the string {value!r}" if len(value) <= 40 else "a string"
    return type(value).__name__


def _is_real(value: Any) -> bool:
    """A real number, not a boolean (``True`` is an int to Python, never a budget or a size here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _numeric_array(name: str, value: Any) -> np.ndarray:
    """``value`` as an integer, float or object (Python ints too big for int64) array; never converts
    strings, booleans, complex numbers or None (numpy would silently accept "7000" or drop 1j)."""
    if isinstance(value, (str, bytes, bool, np.bool_)) or value is None or isinstance(value, dict):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {_describe(value)}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        raise ValueError(f"{name} must be a flat sequence of numbers (rows of equal length for a "
                         "table)") from None
    kind = raw.dtype.kind
    if kind in "iuf":
        if isinstance(value, (list, tuple)) and _has_bool(value):   # numpy turns [1.0, True] into [1.0, 1.0]
            raise TypeError(f"{name} must hold numbers, not booleans")
        return raw
    if kind == "b":
        raise TypeError(f"{name} must hold numbers, not booleans")
    if kind == "c":
        raise TypeError(f"{name} must hold real numbers, not complex numbers")
    if kind in "US":
        raise TypeError(f"{name} must hold numbers, not strings (got {raw.ravel()[0]!r})")
    if kind == "O":
        for item in raw.ravel():
            if not _is_real(item):
                raise TypeError(f"{name} must hold real numbers, got {_describe(item)}")
        return raw
    raise TypeError(f"{name} must hold real numbers, got an array of dtype {raw.dtype}")


def _has_bool(seq) -> bool:
    stack = [seq]
    while stack:
        for item in stack.pop():
            if isinstance(item, (bool, np.bool_)):
                return True
            if isinstance(item, (list, tuple)):
                stack.append(item)
    return False


def _as_float_array(name: str, value: Any) -> np.ndarray:
    raw = _numeric_array(name, value)
    try:
        with np.errstate(over="ignore"):
            return raw.astype(float)
    except OverflowError:   # a Python int beyond 1e308
        raise ValueError(f"{name} must be finite (no NaN or infinity)") from None


def vector(name: str, value: Any, *, length: int | None = None, scalar_ok: bool = False) -> np.ndarray:
    """A 1-D finite float array (a scalar is broadcast when ``length`` is given, or becomes a length-1 vector
    with ``scalar_ok``)."""
    arr = _as_float_array(name, value)
    if arr.ndim == 0 and length is not None:
        arr = np.full(length, float(arr))
    elif arr.ndim == 0 and scalar_ok:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} has length {arr.size}, expected {length} (one entry per stratum)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def positive_int_vector(name: str, value: Any, *, length: int | None = None, minimum: int = 1,
                        maximum: int = 2**53) -> np.ndarray:
    """A 1-D array of integers in [minimum, maximum]; integers above 2**53 are refused, not rounded."""
    raw = _numeric_array(name, value)
    if raw.dtype.kind in "iuO" and raw.size:
        # exact comparison before the float conversion (2**53 + 1 would round to 2**53)
        top = max(int(v) for v in raw.ravel()) if raw.dtype.kind == "O" else int(raw.max())
        if top > maximum:
            raise ValueError(f"{name} must be <= {_int_text(maximum)}, got {top}")
    arr = vector(name, value, length=length)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integers")
    if np.any(arr < minimum):
        raise ValueError(f"{name} must be >= {minimum}, got min {arr.min():g}")
    if np.any(arr > maximum):
        raise ValueError(f"{name} must be <= {_int_text(maximum)}, got max {arr.max():g}")
    return arr.astype(np.int64)


def _int_text(v: int) -> str:
    return "2**53" if v == 2**53 else f"{v:g}" if v >= 1e7 else str(v)


def nonnegative_vector(name: str, value: Any, *, length: int | None = None, scalar_ok: bool = False) -> np.ndarray:
    arr = vector(name, value, length=length, scalar_ok=scalar_ok)
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got min {arr.min():g}")
    return arr


def positive_vector(name: str, value: Any, *, length: int | None = None, scalar_ok: bool = False) -> np.ndarray:
    arr = vector(name, value, length=length, scalar_ok=scalar_ok)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got min {arr.min():g}")
    return arr


def real(name: str, value: Any) -> float:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not _is_real(value):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    try:
        v = float(value)
    except OverflowError:   # a Python int beyond 1e308
        raise ValueError(f"{name} must be finite, got an integer beyond 1e308") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def positive(name: str, value: Any, *, upper: float | None = None) -> float:
    v = real(name, value)
    if v <= 0:
        raise ValueError(f"{name} must be > 0, got {v:g}")
    if upper is not None and v > upper:
        raise ValueError(f"{name} must be in (0, {upper:g}], got {v:g}")
    return v


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (a Python/numpy int, or a float with an integral value); Python ints are kept exact."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        iv = int(value)
    else:
        v = real(name, value)
        if v != round(v):
            raise ValueError(f"{name} must be an integer, got {v:g}")
        iv = int(round(v))
    if minimum is not None and iv < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {iv}")
    if maximum is not None and iv > maximum:
        raise ValueError(f"{name} must be <= {_int_text(maximum)}, got {iv}")
    return iv


#: the supported range of a privacy budget ε (docs/privacy.md#supported-ranges); a family may document a wider one
EPS_MIN = 1e-6
EPS_MAX = 700.0


def epsilon(name: str, value: Any, *, minimum: float = EPS_MIN, maximum: float = EPS_MAX) -> float:
    """A privacy budget in the supported range [1e-6, 700] (beyond 700, e**eps overflows double precision)."""
    v = real(name, value)
    if not minimum <= v <= maximum:
        raise ValueError(f"{name} must be in [{minimum:g}, {maximum:g}] (the supported range of a privacy "
                         f"budget), got {v:g}")
    return v


def probability(name: str, value: Any, *, closed_upper: bool = False) -> float:
    v = real(name, value)
    ok = 0 <= v <= 1 if closed_upper else 0 <= v < 1
    if not ok:
        rng = "[0, 1]" if closed_upper else "[0, 1)"
        raise ValueError(f"{name} must be in {rng}, got {v:g}")
    return v


def flag(name: str, value: Any) -> bool:
    """A true boolean (``bool("no")`` is True, so strings and numbers are refused)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be true or false, got {value!r}")
    return bool(value)


#: the largest ``time_limit`` accepted, in seconds (about 116 days): the one cap for every backend, far beyond
#: any real solve and safely inside every solver's own range (SCIP refuses limits near 1e308, and a Python int
#: beyond 1e308 cannot become a float). ``None`` gives the backend's default instead.
MAX_TIME_LIMIT = 1e7


def time_limit(value: Any) -> float | None:
    """None (the backend's default) or a number of seconds in (0, :data:`MAX_TIME_LIMIT`] (a backend option:
    raises InvalidOption naming ``time_limit`` and the range)."""
    if value is None:
        return None
    rng = f"a number of seconds in (0, {MAX_TIME_LIMIT:g}] (or None for the backend's default)"
    try:
        v = real("time_limit", value)
    except (TypeError, ValueError) as exc:   # not a real number, not finite, or an integer beyond 1e308
        raise InvalidOption(f"time_limit must be {rng}, got {str(exc).split(', got ', 1)[-1]}") from None
    if not 0.0 < v <= MAX_TIME_LIMIT:
        raise InvalidOption(f"time_limit must be {rng}, got {v:g}")
    return v


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {type(value).__name__}")
    key = value.strip().lower()
    if key not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(map(repr, allowed))}")
    return key


# ---------------------------------------------------------------------------------- backend options
def rel_gap(value: Any, name: str = "rel_gap") -> float:
    """A relative optimality gap in [0, 1) (a backend option: raises InvalidOption)."""
    v = option(real, name, value)
    if not 0.0 <= v < 1.0:
        raise InvalidOption(f"{name} must be in [0, 1), got {v:g}")
    return v


def tolerance(name: str, value: Any, *, maximum: float = 1e-2) -> float:
    """A numerical tolerance in (0, maximum] (a backend option: a looser one would make 'optimal' mean
    less than it says)."""
    v = option(real, name, value)
    if not 0.0 < v <= maximum:
        raise InvalidOption(f"{name} must be in (0, {maximum:g}], got {v:g}")
    return v


def count(name: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer option such as max_iter or draws, in [minimum, maximum] (raises InvalidOption)."""
    return option(integer, name, value, minimum=minimum, maximum=maximum)


def solver_options(value: Any) -> dict:
    """Options passed straight to the underlying solver: None or a dict with string keys."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidOption(f"solver_options must be a dict of option names to values, got {_describe(value)}")
    return dict(value)


def verbose(value: Any) -> bool:
    """The common ``verbose`` option (a true boolean; raises InvalidOption)."""
    return option(flag, "verbose", value)
