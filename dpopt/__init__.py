"""dpopt — mathematical programming for privacy-aware sampling designs and DP budget allocation.

Models are declared once and solved by any capable backend:
``model.solve(backend="exact")`` (the default, no external solver), ``"pyomo"``, ``"cvxpy"``,
``"scipy"``, ``"algorithm1"``, ``"enumerate"``, ``"monte-carlo"`` (SampleSizeStudy). Every call returns a :class:`Solution`.
"""

from . import privacy
from . import datasets
from . import io
from .compare import CompareResult, compare
from .datasets import load_gapminder, toy_hierarchy
from .models import ControlledPrecisionDesign, Model, StratifiedDesign
from .models.hierarchy import HierarchyBudget
from .models.tree import Hierarchy
from .privacy.truncated_laplace import truncated_laplace_moments
from .models.importance import (ImportanceSampling, amplified_loss, bisect_optimal_weights, calibrate_epsilon,
                                calibrate_noise_scale, coreset_probabilities, linear_optimal_weights,
                                uniform_probabilities)
from .models.stratified import MinCostDesign
from .models.sample_size import (SampleSizeProgram, epsilon_for_noise_ratio, no_gain_bound, noise_ratio, q_bound, rate_for_q_bound)
from .models.sample_size_study import SampleSizeStudy
from .registry import available_backends
from .result import Certificate, CertificateKind, Solution, Status
from .simulate.hierarchy import simulate_hierarchy
from . import release  # noqa: E402
from .simulate.sample_size import simulate_sample_size, smooth_sensitivity_median


def build_pyomo_model(model, **kw):
    """Pyomo ConcreteModel of a stratified model (see dpopt.backends.pyomo.build)."""
    from .backends.pyomo.build import build_pyomo_model as _build
    return _build(model, **kw)


def build_cvxpy_problem(model, **kw):
    """cvxpy Problem and variables of a stratified model (see dpopt.backends.cvxpy.build)."""
    from .backends.cvxpy.build import build_cvxpy_problem as _build
    return _build(model, **kw)


__version__ = "0.1.0"

__all__ = [
    "privacy", "datasets", "io", "Model", "StratifiedDesign", "MinCostDesign", "ControlledPrecisionDesign", "Hierarchy", "HierarchyBudget", "SampleSizeProgram",
    "SampleSizeStudy", "ImportanceSampling", "Solution", "Certificate", "CertificateKind", "Status", "available_backends", "compare", "CompareResult",
    "build_pyomo_model", "build_cvxpy_problem", "load_gapminder", "toy_hierarchy", "truncated_laplace_moments",
    "release", "simulate_hierarchy", "noise_ratio", "epsilon_for_noise_ratio", "q_bound", "rate_for_q_bound",
    "no_gain_bound", "amplified_loss", "calibrate_epsilon", "calibrate_noise_scale",
    "uniform_probabilities", "coreset_probabilities", "linear_optimal_weights", "bisect_optimal_weights",
    "simulate_sample_size", "smooth_sensitivity_median", "__version__",
]
