"""Model-file loaders of the stratified families: ``stratified`` (a fixed total, optional cost budget,
constraints and precision targets), ``stratified_min_cost`` and ``stratified_controlled_precision`` (the
"stratified" keys plus a ``[controlled_precision]`` table; docs/controlled_precision.md). The format is described in the README."""

from __future__ import annotations

import numpy as np

from .. import _validate as V
from ..models.controlled_precision import CP_ESTIMATES, ControlledPrecisionDesign
from ..models.stratified import ESTIMATES, MinCostDesign, StratifiedDesign, TARGET_KINDS, _labels
from .modelfile import ModelFileError, register_family, take


# ---------------------------------------------------------------------------------- stratified

_STRATA_KEYS = {"N", "sigma2", "lower", "upper", "weights", "cost", "label", "domain"}
_DESIGN_KEYS = {"name", "epsilon", "delta", "mechanism", "objective", "sensitivity", "value_range", "fpc", "strata",
                "constraint", "precision", "min_per_stratum", "variables", "shares", "variable_weights"}


def _tables(data: dict, key: str, keys: str) -> list:
    """The array of tables ``[[key]]`` of a model file (``[key]``, a single table, is the usual slip)."""
    items = data.get(key, [])
    if not isinstance(items, list):
        raise ModelFileError(f"{key} entries are an array of tables: write [[{key}]], not [{key}]")
    for i, t in enumerate(items):
        if not isinstance(t, dict):
            raise ModelFileError(f"[[{key}]] #{i + 1} must be a table with {keys}")
    return items


def design_from_file(data: dict, total, strata_required=("N", "sigma2")) -> StratifiedDesign:
    """The StratifiedDesign part of a model file (shared by the stratified and min-cost families):
    strata table, mechanism, objective, variables, and the [[constraint]] and [[precision]] tables."""
    strata = data["strata"]
    if not isinstance(strata, dict):
        raise ModelFileError("[strata] must be a table with arrays N, sigma2 (and optional label, domain, lower, "
                             "upper, weights, cost)")
    take(strata, _STRATA_KEYS, set(strata_required), "[strata]")
    objective = data.get("objective", "mean")
    if objective == "weights":
        if "weights" not in strata:
            raise ModelFileError("objective = 'weights' needs strata.weights")
        objective = strata["weights"]
    elif "weights" in strata:
        raise ModelFileError("strata.weights is given but objective is not 'weights'")
    # key-named checks of what the constructor would report under its Python names
    N = V.positive_int_vector("strata.N", strata["N"])
    for key in ("label", "domain"):
        if key in strata:
            _labels(f"strata.{key}", strata[key], N.size, unique=key == "label")
    if total is None:     # min-cost: any feasible total (Σ upper always is); the model ignores it
        total = int(np.sum(strata["upper"] if strata.get("upper") is not None else strata["N"]))
    design = StratifiedDesign(N=strata["N"], sigma2=strata["sigma2"], total=total,
                              epsilon=data["epsilon"], mechanism=data.get("mechanism", "laplace"),
                              delta=data.get("delta"),
                              objective=objective, sensitivity=data.get("sensitivity"),
                              lower=strata.get("lower"), upper=strata.get("upper"),
                              fpc=data.get("fpc", False), name=data.get("name", ""),
                              labels=strata.get("label"), domains=strata.get("domain"),
                              value_range=data.get("value_range"), variables=data.get("variables"),
                              shares=data.get("shares"), variable_weights=data.get("variable_weights"),
                              min_per_stratum=data.get("min_per_stratum"))
    for i, con in enumerate(_tables(data, "constraint", "coefficients, rhs (and sense, strata, name)")):
        where = f"[[constraint]] #{i + 1}"
        take(con, {"coefficients", "strata", "sense", "rhs", "name"}, {"coefficients", "rhs"}, where)
        sense = V.choice(f"{where} sense", con.get("sense", "<="), ("<=", ">=", "=="))
        rhs = V.real(f"{where} rhs", con["rhs"])
        coef = con["coefficients"]
        if "strata" in con:
            if isinstance(coef, (list, dict)):
                raise ModelFileError(f"{where}: with 'strata', coefficients is one number for those strata")
            value = V.real(f"{where} coefficients", coef)
            idx = design.strata_index(con["strata"], f"{where} strata")
            coef = np.zeros(design.k)
            coef[idx] = value
        elif isinstance(coef, dict):
            coef = {k: V.real(f"{where} coefficients[{k!r}]", v) for k, v in coef.items()}
        else:
            coef = V.vector(f"{where} coefficients", coef, length=design.k)
        name = con.get("name", "")
        if not isinstance(name, str):
            raise ModelFileError(f"{where} name must be a string")
        try:
            design.add_constraint(coef, rhs, sense, name)
        except (ValueError, TypeError) as exc:
            raise ModelFileError(f"{where} coefficients: {exc}") from None
    for i, t in enumerate(_tables(data, "precision", "target (and strata, variable, kind, mean, name)")):
        where = f"[[precision]] #{i + 1}"
        take(t, {"target", "strata", "variable", "kind", "mean", "estimate", "name"}, {"target"}, where)
        target = V.positive(f"{where} target", t["target"])
        kind = V.choice(f"{where} kind", t.get("kind", "variance"), TARGET_KINDS)
        estimate = V.choice(f"{where} estimate", t.get("estimate", "mean"), ESTIMATES)
        mean = None if t.get("mean") is None else V.real(f"{where} mean", t["mean"])
        name = t.get("name", "")
        if not isinstance(name, str):
            raise ModelFileError(f"{where} name must be a string")
        variable = t.get("variable")
        if variable is not None and not isinstance(variable, (str, int)) or isinstance(variable, bool):
            raise ModelFileError(f"{where} variable must be a variable name or index")
        if variable is not None:
            try:
                design.variable_index(variable)
            except (ValueError, TypeError) as exc:
                raise ModelFileError(f"{where} variable: {exc}") from None
        strata_spec = t.get("strata")
        if strata_spec is not None:
            design.strata_index(strata_spec, f"{where} strata")
        try:
            design.add_precision_target(target, strata=strata_spec, variable=variable, kind=kind, mean=mean,
                                        estimate=estimate, name=name)
        except (ValueError, TypeError) as exc:
            raise ModelFileError(f"{where}: {exc}") from None
    return design


@register_family("stratified")
def _load_stratified(data: dict, base) -> StratifiedDesign:
    """Model-file loader; see the README for the format."""
    take(data, _DESIGN_KEYS | {"total", "cost_budget"}, {"epsilon", "total", "strata"})
    model = design_from_file(data, data["total"])
    if "cost_budget" in data:
        if "cost" not in data["strata"]:
            raise ModelFileError("cost_budget needs strata.cost")
        model.add_cost_budget(V.positive_vector("strata.cost", data["strata"]["cost"], length=model.k),
                              V.positive("cost_budget", data["cost_budget"]))
    elif "cost" in data["strata"]:
        raise ModelFileError("strata.cost is given but no cost_budget uses it (add cost_budget, or use the "
                             "stratified_min_cost family)")
    return model


# ---------------------------------------------------------------------------------- min_cost


@register_family("stratified_min_cost")
def _load_min_cost(data: dict, base) -> MinCostDesign:
    """Like the "stratified" family, with the precision requirements (variance_target, se or cv with mean,
    [[precision]] tables) instead of ``total``, and ``strata.cost`` required."""
    take(data, _DESIGN_KEYS | {"variance_target", "se", "cv", "mean"}, {"epsilon", "strata"})
    design = design_from_file(data, None, ("N", "sigma2", "cost"))
    return MinCostDesign(design, data["strata"]["cost"], data.get("variance_target"), se=data.get("se"),
                         cv=data.get("cv"), mean=data.get("mean"))


# ---------------------------------------------------------------------------------- controlled precision

_CP_KEYS = {"domains", "rho", "totals", "priorities", "estimate", "variable"}


def _per_domain(cp: dict, key: str):
    """An array (in the order the domains first appear) or a table {domain: value} of the [controlled_precision]
    table, as the model takes it."""
    value = cp.get(key)
    if value is None or isinstance(value, (list, dict)):
        return value
    raise ModelFileError(f"[controlled_precision] {key} must be an array (one value per domain, in the order the "
                         f"domains first appear) or a table {{domain = value}}")


@register_family("stratified_controlled_precision")
def _load_controlled_precision(data: dict, base) -> ControlledPrecisionDesign:
    """The "stratified" keys (total, strata with a domain column, constraints, precision targets, cost_budget)
    and a [controlled_precision] table: ``totals`` (with optional ``priorities``) or ``rho`` per domain,
    ``estimate`` ("total", "mean" or "objective"), ``variable``, and optionally ``domains`` (a table
    {domain = strata}) instead of the strata's domain column."""
    cp = data.pop("controlled_precision", None)
    if not isinstance(cp, dict):
        raise ModelFileError("family 'stratified_controlled_precision' needs a [controlled_precision] table with "
                             "totals (and priorities) or rho")
    take(cp, _CP_KEYS, set(), "[controlled_precision]")
    design = _load_stratified(data, base)
    domains = cp.get("domains")
    if domains is not None and not isinstance(domains, dict):
        raise ModelFileError("[controlled_precision] domains must be a table {domain = strata}; without it the "
                             "strata's domain column is used")
    estimate = V.choice("[controlled_precision] estimate", cp.get("estimate", "total"), CP_ESTIMATES)
    try:
        return design.controlled_precision(domains, rho=_per_domain(cp, "rho"), totals=_per_domain(cp, "totals"),
                                           priorities=_per_domain(cp, "priorities"), variable=cp.get("variable"),
                                           estimate=estimate)
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"[controlled_precision]: {exc}") from None


# ---------------------------------------------------------------------------------- robust (docs/robust.md)

_ROBUST_KEYS = {"robust", "scenario", "pilot", "variance_target", "se", "cv", "mean", "total", "cost_budget"}


def pilot_scenarios(pilot, strata: str, y, labels, *, draws: int = 50, seed=None, clamp=None,
                    name: str = "pilot") -> list:
    """σ² scenarios from a pilot frame (a CSV path's columns, or any frame :mod:`dpopt.frames` reads): the pilot's
    values of ``y`` in each stratum (clamped to ``clamp`` = (lo, hi) when the release clamps), bootstrapped within
    strata (:func:`dpopt.models.robust.scenarios_from_pilot`, seeded); every stratum of ``labels`` needs ≥ 2
    pilot units."""
    from ..frames import stratum_moments
    from ..models.robust import scenarios_from_pilot

    plabels, _, _, Y, codes = stratum_moments(pilot, strata, y, name=name, min_units=2, clamp=clamp)
    missing = [lab for lab in labels if lab not in plabels]
    if missing:
        raise ValueError(f"{name} has no units in stratum {missing[0]!r} (every stratum needs at least 2 pilot "
                         "units)")
    values = Y if clamp is None else np.clip(Y, *clamp)
    keep = np.isin(np.asarray(plabels, dtype=object)[codes], list(labels))
    return scenarios_from_pilot(values[keep], [plabels[c] for c in codes[keep]], labels, draws=draws, seed=seed)


@register_family("stratified_robust")
def _load_robust(data: dict, base):
    """A stratified design robust to its σ² scenarios: the "stratified" keys (``total``: the min-max regret
    design) or the "stratified_min_cost" keys (no ``total``: the cheapest design meeting the requirements in
    every scenario), with ``robust = "regret" | "absolute"`` and the scenarios as ``[[scenario]]`` tables
    (``sigma2``, optional ``name``) or a ``[pilot]`` table (``file`` a CSV, ``strata``, ``y``, ``draws``,
    ``seed``) whose bootstrap gives them."""
    from ..models.robust import ROBUST_OBJECTIVES, RobustDesign
    from .modelfile import resolve_path

    take(data, _DESIGN_KEYS | _ROBUST_KEYS, {"epsilon", "strata"})
    min_cost = "total" not in data
    design = design_from_file(data, None if min_cost else data["total"],
                              ("N", "sigma2", "cost") if min_cost else ("N", "sigma2"))
    if min_cost:
        model = MinCostDesign(design, data["strata"]["cost"], data.get("variance_target"), se=data.get("se"),
                              cv=data.get("cv"), mean=data.get("mean"))
    else:
        for key in ("variance_target", "se", "cv", "mean"):
            if key in data:
                raise ModelFileError(f"{key} is a min-cost requirement: drop total for a min-cost robust design")
        model = design
        if "cost_budget" in data:
            model.add_cost_budget(V.positive_vector("strata.cost", data["strata"].get("cost"), length=design.k),
                                  V.positive("cost_budget", data["cost_budget"]))
    objective = V.choice("robust", data.get("robust", "regret"), ROBUST_OBJECTIVES)
    has_tables, has_pilot = "scenario" in data, "pilot" in data
    if has_tables == has_pilot:
        raise ModelFileError("a robust model file needs its scenarios: [[scenario]] tables (sigma2 = [...]) or a "
                             "[pilot] table (file, strata, y), one of the two")
    if has_tables:
        scen, names = [], []
        for i, t in enumerate(_tables(data, "scenario", "sigma2 (and name)")):
            where = f"[[scenario]] #{i + 1}"
            take(t, {"sigma2", "name"}, {"sigma2"}, where)
            scen.append(t["sigma2"])
            names.append(str(t.get("name", f"s{i + 1}")))
    else:
        p = data["pilot"]
        if not isinstance(p, dict):
            raise ModelFileError("[pilot] must be a table with file, strata, y (and draws, seed)")
        take(p, {"file", "strata", "y", "draws", "seed"}, {"file", "strata", "y"}, "[pilot]")
        from ..frames import read_csv
        path = resolve_path(base, p["file"], "pilot.file")
        draws = V.integer("pilot.draws", p.get("draws", 50), minimum=1)
        seed = None if p.get("seed") is None else V.integer("pilot.seed", p["seed"], minimum=0)
        clamp = design.value_range if design.value_ranges is not None and design.J == 1 else None
        scen = pilot_scenarios(read_csv(path, name="pilot"), p["strata"], p["y"], design.labels, draws=draws,
                               seed=seed, clamp=clamp)
        names = ["pilot"] + [f"boot{b + 1}" for b in range(len(scen) - 1)]
    try:
        return RobustDesign(model, scen, objective=objective, names=names)
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"scenarios: {exc}") from None
