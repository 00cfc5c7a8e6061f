"""Backend-independent model families. Every module here is imported so its model-file loader registers."""

import pkgutil
from importlib import import_module

from .base import Model
from .stratified import LinearConstraint, StratifiedDesign, largest_remainder

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_") and _info.name not in ("base", "stratified"):
        import_module(f"{__name__}.{_info.name}")

__all__ = ["Model", "StratifiedDesign", "LinearConstraint", "largest_remainder"]
