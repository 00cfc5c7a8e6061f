"""The privacy layer: mechanisms and amplification by subsampling (docs/privacy.md)."""

from .amplification import (central_delta, central_epsilon, central_epsilon_delta, log_expm1, nominal_delta, nominal_epsilon,
                            nominal_epsilon_delta)
from .mechanisms import (MECHANISMS, ZCDP, ApproxDP, DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace, Mechanism, MechanismUnsupported,
                         PureDP, TuLap, Unsupported, get_mechanism, laplace_variance, noise_variance)
from .truncated_laplace import truncated_laplace_moments, truncated_laplace_mse_sum

__all__ = [
    "central_epsilon", "nominal_epsilon", "central_delta", "nominal_delta",
    "central_epsilon_delta", "nominal_epsilon_delta", "log_expm1",
    "Mechanism", "Laplace", "DiscreteLaplace", "TuLap", "Gaussian", "DiscreteGaussian", "MECHANISMS", "get_mechanism", "noise_variance",
    "PureDP", "ApproxDP", "ZCDP", "Unsupported", "MechanismUnsupported",
    "laplace_variance", "truncated_laplace_moments", "truncated_laplace_mse_sum",
]
