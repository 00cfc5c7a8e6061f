"""The built-in mechanisms by name, and the one way to turn a name or an object into a mechanism."""

from __future__ import annotations

import numpy as np

from ... import _validate as V
from .base import Mechanism, _budget
from .dlap import DiscreteLaplace
from .laplace import Laplace
from .tulap import TuLap

MECHANISMS: dict[str, type[Mechanism]] = {"laplace": Laplace, "dlap": DiscreteLaplace, "tulap": TuLap}


def get_mechanism(mechanism) -> Mechanism:
    """A mechanism instance from a name (``"laplace" | "dlap" | "tulap"``) or a :class:`Mechanism` (class or
    instance; a user mechanism is probed: :meth:`Mechanism.probe`)."""
    if isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        mechanism = mechanism()
    if isinstance(mechanism, Mechanism):
        if type(mechanism) not in MECHANISMS.values():
            mechanism.probe()
        return mechanism
    key = V.choice("mechanism", mechanism, tuple(MECHANISMS))
    return MECHANISMS[key]()


def noise_variance(mechanism, epsilon, sensitivity=1.0):
    """Noise variance of ``mechanism`` at nominal budget ``epsilon`` (validated)."""
    mech = get_mechanism(mechanism)
    d = mech.check_sensitivity(sensitivity)
    out = mech.variance(_budget(epsilon), d)
    return out[()] if np.ndim(out) == 0 else out
