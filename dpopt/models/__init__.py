"""Backend-independent model families: the mathematics only (model files and reports are in :mod:`dpopt.io`)."""

from .base import Model
from .controlled_precision import ControlledPrecisionDesign
from .stratified import LinearConstraint, StratifiedDesign, largest_remainder

__all__ = ["Model", "ControlledPrecisionDesign", "StratifiedDesign", "LinearConstraint", "largest_remainder"]
