"""Model files (TOML) and plain-text reports: what dpopt reads and writes, kept apart from the mathematics.

``modelfile`` reads a file into a model (``load``, ``from_dict``, ``register_family`` for third-party
families); ``stratified``, ``hierarchy``, ``sample_size`` and ``importance`` hold each family's loader and
``report`` each family's report, all registered when this package is imported (below); ``writer`` writes a
model back to a file (``save``, ``to_toml``). Models never import this package, not even inside a function.
"""

from .modelfile import ModelFileError, families, from_dict, load, read, register_family, resolve_path
from .writer import save, to_toml
# the built-in family loaders and reports register themselves on import (modelfile never imports them)
from . import hierarchy, importance, report, sample_size, stratified  # noqa: E402,F401

__all__ = ["ModelFileError", "families", "from_dict", "load", "read", "register_family", "resolve_path", "save",
           "to_toml"]
