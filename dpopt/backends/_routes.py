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


def secant_for_extended(fn, route):
    """Wrap a backend handler so that models with ``extended_features()`` go to ``route`` (the shared secant
    MILP, :mod:`._secant`) instead of being refused; a relaxation of such a model stays ``unsupported``
    (the secant LP is not the model's continuous relaxation)."""

    @functools.wraps(fn)
    def handler(model, *args, **options):
        features = model.extended_features() if hasattr(model, "extended_features") else []
        constrained = not getattr(model, "is_plain", True)
        formulation = options.get("formulation")
        # constrained models take the shared secant MILP unless the caller names another formulation; any
        # model takes it when asked (formulation="secant")
        secant = formulation == "secant" or (constrained and formulation is None)
        if not features and not (route is not None and secant):
            return fn(model, *args, **options)
        if route is None:
            return Solution(status=Status.UNSUPPORTED,
                            message=f"this route cannot relax a model with {', '.join(features)}; backend 'exact' does")
        return route(model, **options)

    return handler
