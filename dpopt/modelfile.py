"""Deprecated alias of :mod:`dpopt.io.modelfile` (model files moved into ``dpopt.io``); removed in the next
release. ``import dpopt.modelfile`` warns once and gives the very same module."""

import sys
import warnings

from .io import modelfile as _modelfile

warnings.warn("dpopt.modelfile moved to dpopt.io.modelfile (or use dpopt.io.load); the old name goes in the "
              "next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _modelfile
