"""Deprecated names kept for one release (issue 12's vocabulary: docs/privacy.md#vocabulary).

``renamed(new, "old.qualified.name")`` returns a function that warns (DeprecationWarning naming the new
name) and calls ``new``; ``renamed_keyword`` maps an old keyword argument onto its new name."""

from __future__ import annotations

import functools
import warnings


def warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}", DeprecationWarning,
                  stacklevel=stacklevel)


def renamed(new, old: str, new_name: str | None = None):
    """A deprecated alias ``old`` of the function ``new``."""
    target = new_name or f"{new.__module__.replace('dpopt.', 'dpopt.', 1)}.{new.__name__}"

    @functools.wraps(new)
    def alias(*args, **kwargs):
        warn(old, target)
        return new(*args, **kwargs)

    alias.__doc__ = f"Deprecated alias of :func:`{target}` (removed in the next release)."
    alias.__name__ = old.rsplit(".", 1)[-1]
    alias.__qualname__ = alias.__name__
    return alias


def renamed_keyword(kwargs: dict, old: str, new: str, current, where: str):
    """The value of keyword ``new`` when the caller used the deprecated ``old`` (in ``kwargs``); giving both is
    an error."""
    if old not in kwargs:
        return current
    value = kwargs.pop(old)
    if current is not None:
        raise TypeError(f"{where}: give {new}= only ({old}= is its deprecated name)")
    warn(f"{where}({old}=...)", f"{new}=", stacklevel=4)
    return value
