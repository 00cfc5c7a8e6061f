"""The built-in mechanisms by name, and the one way to turn a name or an object into a mechanism."""

from __future__ import annotations

import numpy as np

from ... import _validate as V
from .base import Mechanism, _budget
from .dlap import DiscreteLaplace
from .gaussian import DiscreteGaussian, Gaussian
from .laplace import Laplace
from .tulap import TuLap

MECHANISMS: dict[str, type[Mechanism]] = {"laplace": Laplace, "dlap": DiscreteLaplace, "tulap": TuLap,
                                          "gaussian": Gaussian, "gaussian-zcdp": Gaussian,
                                          "discrete-gaussian": DiscreteGaussian}
#: names whose mechanism needs a δ (and the others refuse one)
NEEDS_DELTA = ("gaussian",)


def get_mechanism(mechanism, delta=None) -> Mechanism:
    """A mechanism instance from a name (``"laplace" | "dlap" | "tulap" | "gaussian" | "gaussian-zcdp" |
    "discrete-gaussian"``) or a :class:`Mechanism` (class or instance; a user mechanism is probed:
    :meth:`Mechanism.probe`). ``delta``: the δ of ``"gaussian"`` ((ε, δ)-DP, required there); an instance's own δ
    must agree with it; the other names refuse one."""
    if isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        mechanism = mechanism(delta) if issubclass(mechanism, Gaussian) and delta is not None else mechanism()
    if isinstance(mechanism, Mechanism):
        if type(mechanism) not in MECHANISMS.values():
            mechanism.probe()
        if delta is not None and getattr(mechanism.guarantee, "delta", None) != V.probability("delta", delta):
            raise ValueError(f"delta ({delta!r}) contradicts mechanism {mechanism.name!r}, whose guarantee is "
                             f"{mechanism.guarantee}")
        return mechanism
    key = V.choice("mechanism", mechanism, tuple(MECHANISMS))
    if key in NEEDS_DELTA:
        if delta is None:
            raise ValueError(f"mechanism {key!r} needs delta in (0, 1) for (epsilon, delta)-DP (or use "
                             "mechanism 'gaussian-zcdp' for rho-zCDP, the budget then read as rho)")
        return MECHANISMS[key](delta)
    if delta is not None:
        raise ValueError(f"delta must be None for mechanism {key!r} (only 'gaussian' takes an (epsilon, delta) "
                         f"target), got {delta!r}")
    return MECHANISMS[key]()


def noise_variance(mechanism, epsilon, sensitivity=1.0, delta=None):
    """Noise variance of ``mechanism`` at nominal budget ``epsilon`` (validated; ``delta`` as in
    :func:`get_mechanism`)."""
    mech = get_mechanism(mechanism, delta)
    d = mech.check_sensitivity(sensitivity)
    out = mech.variance(_budget(epsilon), d)
    return out[()] if np.ndim(out) == 0 else out
