"""Guard for routes that model only the classical stratified forms (one variable, linear constraints,
one objective-variance bound): a design with more is refused with the reason, never solved with parts of it
silently dropped."""

from __future__ import annotations

import functools

from ..result import Solution, Status


def classical_only(fn):
    """Wrap a backend handler so that models whose ``extended_features()`` is non-empty are ``unsupported``."""

    @functools.wraps(fn)
    def handler(model, *args, **options):
        features = model.extended_features() if hasattr(model, "extended_features") else []
        if features:
            return Solution(status=Status.UNSUPPORTED,
                            message=f"this route cannot model {', '.join(features)}; backend 'exact' solves them")
        return fn(model, *args, **options)

    return handler
