"""Built-in backends, grouped by the tool that solves: ``exact/`` (dpopt's own certified algorithms),
``pyomo/``, ``cvxpy/``, ``scipy/``, ``montecarlo/``. Importing this package registers every backend with
:mod:`dpopt.registry`. The modelling-layer routes import their libraries lazily, so a missing solver becomes
an ``unsupported`` status, never an import error. Shared across tools: :mod:`._routes` (which route takes a
model) and :mod:`._secant` (the one secant MILP handed to SCIP/HiGHS through Pyomo and cvxpy).
"""

import pkgutil
from importlib import import_module

for _info in sorted(pkgutil.walk_packages(__path__, prefix=__name__ + "."), key=lambda m: m.name):
    if not any(part.startswith("_") for part in _info.name.split(".")[2:]):
        import_module(_info.name)
