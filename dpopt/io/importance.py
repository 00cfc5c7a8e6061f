"""Model-file loader of the ``importance`` family (per-record sampling probabilities)."""

from __future__ import annotations

from ..models.importance import ImportanceSampling
from .modelfile import ModelFileError, register_family, take


# ---------------------------------------------------------------------------------- importance


@register_family("importance_sampling")
def _load_importance(data: dict, base) -> ImportanceSampling:
    """``family = "importance_sampling"``: epsilon and either ``slopes`` (linear profiles) or
    ``points`` + ``noise_scale`` [+ ``norm``] (Laplace weighted sum, slopes ‖x‖_p/b)."""
    take(data, {"name", "epsilon", "slopes", "points", "noise_scale", "norm"}, {"epsilon"})
    if "slopes" in data:
        if "points" in data or "noise_scale" in data:
            raise ModelFileError("give either slopes, or points and noise_scale")
        return ImportanceSampling(data["epsilon"], slopes=data["slopes"], name=data.get("name", ""))
    if "points" not in data or "noise_scale" not in data:
        raise ModelFileError("importance_sampling needs slopes, or points and noise_scale")
    return ImportanceSampling.laplace_sum(data["points"], data["noise_scale"], data["epsilon"],
                                          norm=data.get("norm", 1), name=data.get("name", ""))
