"""Additive noise mechanisms (docs/privacy.md#the-mechanism-interface): one module per mechanism, each one
definition of its noise (``variance``) with its derived parts, optional capabilities and declared guarantee.

The samplers (``Mechanism.sample``) are numpy floating-point draws for Monte Carlo only; a real release
must use :mod:`dpopt.release`, whose noise comes from the mechanism's OpenDP measurement (docs/release.md).
"""

from .base import (CAPABILITIES, SUPPORTED, ApproxDP, Mechanism, MechanismUnsupported, PureDP, Unsupported, ZCDP)
from .dlap import DiscreteLaplace
from .gaussian import DiscreteGaussian, Gaussian
from .laplace import Laplace, laplace_variance
from .registry import MECHANISMS, get_mechanism, noise_variance
from .tulap import TuLap

__all__ = ["Mechanism", "Laplace", "DiscreteLaplace", "TuLap", "Gaussian", "DiscreteGaussian", "MECHANISMS", "get_mechanism", "noise_variance",
           "laplace_variance", "PureDP", "ApproxDP", "ZCDP", "CAPABILITIES", "SUPPORTED", "Unsupported",
           "MechanismUnsupported"]
