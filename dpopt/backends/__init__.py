"""Built-in backends. Importing this package registers them with :mod:`dpopt.registry`.

Each module translates models into one solving technology: ``exact_*`` (dpopt's own certified
algorithms) and the modelling-layer backends (Pyomo, cvxpy, scipy), which import their libraries
lazily so that a missing solver becomes an ``unsupported`` status, never an import error.
Every module in this package is imported (and so registered) automatically.
"""

import pkgutil
from importlib import import_module

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        import_module(f"{__name__}.{_info.name}")
