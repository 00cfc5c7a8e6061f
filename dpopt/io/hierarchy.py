"""Model-file loader of the ``hierarchy`` family (a tree and a privacy budget over its levels)."""

from __future__ import annotations

from .. import _validate as V
from ..models.hierarchy import DEFAULT_EPS_MIN, DEFAULT_RHO_MIN, HierarchyBudget
from ..models.tree import Hierarchy
from .modelfile import ModelFileError, register_family, resolve_path, take


# ---------------------------------------------------------------------------------- hierarchy


@register_family("hierarchy")
def _load_hierarchy(data: dict, base) -> HierarchyBudget:
    """Model-file loader. Keys: name, epsilon_total | mse_target, weights, sensitivity, epsilon_min,
    loss, noise ("laplace" | "discrete_gaussian"; the latter with rho_total, or epsilon_total and delta, and
    rho_min), and exactly one source of the tree: ``[tree] counts = [[…], …], parents = [[…], …]``
    (parents of levels 2..L), ``tree_csv = "file.csv"`` (columns id,parent,count), or
    ``dataset = "gapminder"`` with ``year`` (and optional ``unit``), or ``dataset = "toy"``."""
    take(data, {"name", "epsilon_total", "mse_target", "weights", "sensitivity", "epsilon_min", "loss",
                "tree", "tree_csv", "dataset", "year", "unit", "allow_inconsistent", "noise", "rho_total",
                "delta", "rho_min"}, set())
    sources = [k for k in ("tree", "tree_csv", "dataset") if k in data]
    if len(sources) != 1:
        raise ModelFileError("give exactly one of [tree], tree_csv or dataset")
    allow = V.flag("allow_inconsistent", data.get("allow_inconsistent", False))
    if "tree" in data:
        tree = data["tree"]
        if not isinstance(tree, dict):
            raise ModelFileError("[tree] must be a table with counts (and parents, ids)")
        take(tree, {"counts", "parents", "ids"}, {"counts"}, "[tree]")
        raw = tree.get("parents", [])
        if not isinstance(raw, list):
            raise ModelFileError("tree.parents must be an array with one array of parent indices per level 2..L")
        parents = [None] + raw
        h = Hierarchy.from_levels(tree["counts"], parents, tree.get("ids"), allow_inconsistent=allow)
    elif "tree_csv" in data:
        path = resolve_path(base, data["tree_csv"], "tree_csv")     # under the model file's folder
        try:
            h = Hierarchy.from_table(path, allow_inconsistent=allow)
        except (ValueError, TypeError) as exc:
            raise ModelFileError(f"tree_csv = {data['tree_csv']!r}: {exc}") from None
    else:
        from ..datasets import load_gapminder, toy_hierarchy
        ds = data["dataset"]
        if ds == "gapminder":
            h = load_gapminder(data.get("year", 2007), data.get("unit", 1.0))
        elif ds == "toy":
            h = toy_hierarchy()
        else:
            raise ModelFileError(f"unknown dataset {ds!r}; allowed: 'gapminder', 'toy'")
    if ("year" in data or "unit" in data) and data.get("dataset") != "gapminder":
        raise ModelFileError("year/unit are only for dataset = 'gapminder'")
    if data.get("noise", "laplace") == "discrete_gaussian":
        if "epsilon_min" in data or "loss" in data:
            raise ModelFileError("epsilon_min and loss are for Laplace noise; discrete Gaussian takes rho_min")
        return HierarchyBudget(h, data.get("epsilon_total"), mse_target=data.get("mse_target"),
                               weights=data.get("weights"), sensitivity=data.get("sensitivity", 1.0),
                               noise="discrete_gaussian", rho_total=data.get("rho_total"), delta=data.get("delta"),
                               rho_min=data.get("rho_min", DEFAULT_RHO_MIN), name=data.get("name", ""))
    if "rho_total" in data or "delta" in data or "rho_min" in data:
        raise ModelFileError("rho_total, delta and rho_min need noise = 'discrete_gaussian'")
    return HierarchyBudget(h, data.get("epsilon_total"), mse_target=data.get("mse_target"),
                           weights=data.get("weights"), sensitivity=data.get("sensitivity", 1.0),
                           epsilon_min=data.get("epsilon_min", DEFAULT_EPS_MIN),
                           loss=data.get("loss", "truncated-laplace-mse"), name=data.get("name", ""),
                           noise=data.get("noise", "laplace"))
