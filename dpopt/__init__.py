"""dpopt — mathematical programming for privacy-aware sampling designs and DP budget allocation.

Models are declared once (``StratifiedDesign``, ...) and solved by any capable backend:
``model.solve(backend="exact")`` (the default, no external solver), ``"pyomo"``, ``"cvxpy"``, ...
"""

from . import privacy
from .models import Model, StratifiedDesign
from .registry import available_backends
from .result import Certificate, Solution, Status

__version__ = "0.1.0"

__all__ = ["privacy", "Model", "StratifiedDesign", "Solution", "Certificate", "Status", "available_backends",
           "__version__"]
