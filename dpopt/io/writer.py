"""Writing models back to model files: ``dpopt.io.save(model, path)`` and ``to_toml(model)``, the inverse of
:func:`dpopt.io.load` for the stratified families (``stratified``, ``stratified_min_cost``): the file loads
back to the same model (strata, bounds, objective, mechanism, variables, domains, cost budget, linear
constraints and precision targets). What a file cannot express (a user-defined mechanism) is refused with
the reason."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def _toml_value(v) -> str:
    """A TOML value (numbers, strings, booleans and nested arrays of them)."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            raise ValueError(f"cannot write a non-finite number ({v}) to a model file")
        return repr(float(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)     # a JSON string is a TOML basic string
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to a model file")


def dumps(data: dict[str, Any], comments: list[str] | None = None) -> str:
    """TOML text of a model-file dict: top-level keys, then tables (``dict``) and arrays of tables
    (``list`` of ``dict``), in insertion order."""
    lines = [f"# {c}" for c in (comments or [])]
    tables = []
    for key, value in data.items():
        if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(t, dict) for t in value)):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables:
        for table in ([value] if isinstance(value, dict) else value):
            lines += ["", f"[{key}]" if isinstance(value, dict) else f"[[{key}]]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _mechanism_name(mech) -> str:
    from ..privacy.mechanisms import get_mechanism

    try:
        builtin = type(get_mechanism(mech.name, getattr(mech.guarantee, "delta", None)))
    except (ValueError, TypeError):
        builtin = None
    if builtin is not type(mech):
        raise TypeError(f"mechanism {mech.name!r} is user-defined: a model file can only name the built-in "
                        "mechanisms, so this model cannot be saved as one")
    return mech.name


def design_to_dict(design, *, skip_cost_budget: bool = False) -> dict[str, Any]:
    """The model-file keys of a StratifiedDesign (``family`` and ``total`` included)."""
    d: dict[str, Any] = {"family": "stratified"}
    if design.name:
        d["name"] = design.name
    d["total"] = int(design.total)
    d["epsilon"] = float(design.epsilon)
    d["mechanism"] = _mechanism_name(design.mechanism)
    if getattr(design.mechanism.guarantee, "delta", None) is not None:
        d["delta"] = float(design.mechanism.guarantee.delta)
    d["objective"] = design.objective_kind
    ranges, sens = design.value_ranges, [float(x) for x in design.sensitivities]
    if ranges is not None:        # one [lo, hi] for all variables, or one per variable (their widths are Δ_j)
        pairs = [[float(a), float(b)] for a, b in ranges]
        d["value_range"] = pairs[0] if all(p == pairs[0] for p in pairs) else pairs
    elif any(x != sens[0] for x in sens):
        d["sensitivity"] = sens
    elif sens[0] != 1.0:          # 1 is the default
        d["sensitivity"] = sens[0]
    if design.fpc:
        d["fpc"] = True
    if design.J > 1 or design.variables != ["y"]:
        d["variables"] = list(design.variables)
    if design.J > 1:
        d["shares"] = [float(x) for x in design.shares]
        d["variable_weights"] = [float(x) for x in design.variable_weights]
    if design.min_per_stratum is not None:
        d["min_per_stratum"] = int(design.min_per_stratum)
    strata: dict[str, Any] = {}
    if getattr(design, "_labels_given", True):
        strata["label"] = list(design.labels)
    if design.domains is not None:
        strata["domain"] = [str(x) for x in design.domains]
    strata["N"] = design.N.tolist()
    strata["sigma2"] = (design.sigma2_matrix[:, 0] if design.J == 1 else design.sigma2_matrix).tolist()
    strata["lower"] = design.lower.tolist()
    strata["upper"] = design.upper.tolist()
    if design.objective_kind == "weights":
        strata["weights"] = design.alpha.tolist()
    budget = None
    constraints = []
    for con in design.constraints:
        if (budget is None and con.name == "cost budget" and design.cost is not None and con.A.shape[0] == 1
                and con.sense == "<=" and np.array_equal(con.A[0], design.cost)):
            budget = float(con.b[0])
            continue
        for r in range(con.A.shape[0]):
            constraints.append({"coefficients": con.A[r].tolist(), "rhs": float(con.b[r]), "sense": con.sense,
                                "name": con.name if con.A.shape[0] == 1 else f"{con.name}[{r}]"})
    if budget is not None and not skip_cost_budget:
        strata["cost"] = design.cost.tolist()
        d["cost_budget"] = budget
    d["strata"] = strata
    if constraints:
        d["constraint"] = constraints
    targets = [_target_to_dict(design, t) for t in design.precision_targets]
    if targets:
        d["precision"] = targets
    return d


def _target_to_dict(design, t) -> dict[str, Any]:
    out: dict[str, Any] = {"target": float(t.target), "kind": t.kind}
    idx = np.asarray(t.strata)
    if idx.size != design.k:
        out["strata"] = [design.labels[i] for i in idx]
    if design.J > 1:
        out["variable"] = design.variables[int(t.variable)]
    if t.mean is not None:
        out["mean"] = float(t.mean)
    if t.estimate != "mean":
        out["estimate"] = t.estimate
    if t.name:
        out["name"] = t.name
    return out


def model_to_dict(model) -> dict[str, Any]:
    """The model-file keys of a stratified or min-cost design."""
    from ..models.stratified import MinCostDesign, StratifiedDesign

    if isinstance(model, StratifiedDesign):
        return design_to_dict(model)
    if isinstance(model, MinCostDesign):
        d = design_to_dict(model.design, skip_cost_budget=True)
        d["family"] = "stratified_min_cost"
        d.pop("total", None)
        d.pop("cost_budget", None)
        if model.name and model.name != model.design.name:
            d["name"] = model.name
        if model.variance_target is not None:
            d["variance_target"] = float(model.variance_target)
        d["strata"]["cost"] = model.cost.tolist()
        targets = [_target_to_dict(model.design, t) for t in model.precision_targets]
        if targets:
            d["precision"] = targets
        else:
            d.pop("precision", None)
        return d
    raise TypeError(f"saving a {type(model).__name__} as a model file is not supported (the stratified and "
                    "min-cost designs are)")


def to_toml(model, comments: list[str] | None = None) -> str:
    """The model-file text of ``model`` (see :func:`model_to_dict`)."""
    return dumps(model_to_dict(model), comments)


def save(model, path, *, overwrite: bool = False) -> Path:
    """Write ``model`` as a model file at ``path``; an existing file is kept unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    path.write_text(to_toml(model), encoding="utf-8")
    return path
