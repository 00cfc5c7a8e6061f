"""Backend-independent model families: the mathematics only (model files and reports are in :mod:`dpopt.io`)."""

from .base import Model
from .stratified import LinearConstraint, StratifiedDesign, largest_remainder

__all__ = ["Model", "StratifiedDesign", "LinearConstraint", "largest_remainder"]
