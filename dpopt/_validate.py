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


def _as_float_array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, (str, bytes, bool, np.bool_)) or value is None:
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {type(value).__name__}")
    try:
        raw = np.asarray(value)
        numeric = raw.dtype != bool
        arr = raw.astype(float) if numeric else raw
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric; could not convert: {exc}") from None
    if not numeric:
        raise TypeError(f"{name} must hold numbers, not booleans")
    return arr


def vector(name: str, value: Any, *, length: int | None = None) -> np.ndarray:
    """A 1-D finite float array (a scalar is broadcast when ``length`` is given)."""
    arr = _as_float_array(name, value)
    if arr.ndim == 0 and length is not None:
        arr = np.full(length, float(arr))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if length is not None and arr.size != length:
        raise ValueError(f"{name} has length {arr.size}, expected {length} (one entry per stratum)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def positive_int_vector(name: str, value: Any, *, length: int | None = None, minimum: int = 1) -> np.ndarray:
    arr = vector(name, value, length=length)
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integers")
    if np.any(arr < minimum):
        raise ValueError(f"{name} must be >= {minimum}, got min {arr.min():g}")
    if np.any(arr > 2**53):
        raise ValueError(f"{name} must be <= 2**53")
    return arr.astype(np.int64)


def nonnegative_vector(name: str, value: Any, *, length: int | None = None) -> np.ndarray:
    arr = vector(name, value, length=length)
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got min {arr.min():g}")
    return arr


def positive_vector(name: str, value: Any, *, length: int | None = None) -> np.ndarray:
    arr = vector(name, value, length=length)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0, got min {arr.min():g}")
    return arr


def real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        else:
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
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


def integer(name: str, value: Any, *, minimum: int | None = None) -> int:
    v = real(name, value)
    if v != round(v):
        raise ValueError(f"{name} must be an integer, got {v:g}")
    iv = int(round(v))
    if minimum is not None and iv < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {iv}")
    return iv


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


def time_limit(value: Any) -> float | None:
    """None (no limit) or a finite number of seconds > 0 (a backend option: raises InvalidOption)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise InvalidOption(f"time_limit must be a finite number of seconds > 0 (or None for no limit), "
                            f"got {value!r}")
    return float(value)


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {type(value).__name__}")
    key = value.strip().lower()
    if key not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(map(repr, allowed))}")
    return key
