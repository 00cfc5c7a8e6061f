"""Hierarchy release through OpenDP: Laplace per level with the chosen budgets, truncation at 0, and
top-down consistency (Ko, Ziani & Fioretto; the budgets from :class:`~dpopt.models.hierarchy.HierarchyBudget`).

Level ℓ's node counts get OpenDP Laplace noise at the scale OpenDP certifies for ε_ℓ (one person changes
one count per level by at most Δ: the L1 sensitivity of a level's vector is Δ); nodes of a level compose in
parallel, levels sequentially. Truncation and the projection of every parent's children onto
{v ≥ 0, Σ v = parent} are post-processing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as V
from . import _opendp
from .ledger import Cell, Measurement, Part, PrivacyLedger, ReleaseRecord


@dataclass
class HierarchyRelease:
    """Released counts per level (root level first), their node ids, and the privacy record."""

    counts: list[np.ndarray]
    ids: list[list[str]]
    epsilon: np.ndarray          # ε_ℓ OpenDP certifies per level
    scales: np.ndarray
    epsilon_spent: float
    consistency: bool
    record: ReleaseRecord
    ledger: PrivacyLedger
    integer: bool = False        # counts rounded to non-negative integers that add up (round_consistent)

    def __repr__(self) -> str:
        return (f"HierarchyRelease(levels={len(self.counts)}, epsilon_spent={self.epsilon_spent:.6g}, "
                f"consistency={self.consistency})")

    def to_frame(self):
        """One row per node: level (1 = root level), node id, released count (a pandas DataFrame)."""
        from ..frames import to_pandas
        rows = {"level": [], "node": [], "count": []}
        for l, (c, ids) in enumerate(zip(self.counts, self.ids)):
            rows["level"] += [l + 1] * len(ids)
            rows["node"] += list(ids)
            rows["count"] += [float(x) for x in c]
        return to_pandas(rows)

    def to_dict(self) -> dict:
        return {"levels": [{"level": l + 1, "epsilon": float(self.epsilon[l]), "scale": float(self.scales[l]),
                            "nodes": dict(zip(ids, (float(x) for x in c)))}
                           for l, (c, ids) in enumerate(zip(self.counts, self.ids))],
                "epsilon_spent": self.epsilon_spent, "consistency": self.consistency, "integer": self.integer}


def release_hierarchy(hierarchy, epsilon_per_level, *, sensitivity: float = 1.0, consistency: bool = True,
                      integer: bool = False, ledger: PrivacyLedger | None = None,
                      name: str = "") -> HierarchyRelease:
    """Release every node count of ``hierarchy`` (the confidential counts) with budgets ``epsilon_per_level``
    (an array or a HierarchyBudget Solution). ``ledger`` (default: total Σ ε_ℓ) is charged first.

    ``integer=True`` (needs ``consistency``) publishes non-negative integers that still add up: the
    consistent counts are rounded top-down by :func:`dpopt.simulate.hierarchy.round_consistent` (each
    parent's integer shared among its children by largest remainder; every node moves by less than 1 plus
    its share of its parent's rounding; docs/release.md). Post-processing: the budget is the same."""
    from ..models.tree import Hierarchy
    from ..simulate.hierarchy import _project_groups, round_consistent

    dp = _opendp.require_opendp()
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    L = hierarchy.n_levels
    eps = V.positive_vector("epsilon_per_level", getattr(epsilon_per_level, "x", epsilon_per_level), length=L)
    d = V.positive("sensitivity", sensitivity)
    consistency = V.flag("consistency", consistency)
    integer = V.flag("integer", integer)
    if integer and not consistency:
        raise ValueError("integer=True needs consistency=True: integers that add up are rounded from consistent "
                         "counts (without consistency each count would only be rounded on its own)")
    scales, spent = [], []
    for l in range(L):
        s, e = _opendp.search_scale(dp, "laplace", d, float(eps[l]))
        scales.append(s)
        spent.append(e)
    parts = [Part(f"level {l + 1}", [Cell(f"level {l + 1} ({hierarchy.sizes[l]} nodes)",
                                          [Measurement(f"counts of level {l + 1}", "laplace", d, s, e, 0.0,
                                                       _opendp.variance_at_scale("laplace", s))])])
             for l, (s, e) in enumerate(zip(scales, spent))]
    record = ReleaseRecord(name or f"hierarchy {hierarchy.name or ''}".strip(), "hierarchy", parts,
                           target_epsilon=float(np.sum(eps)),
                           details={"levels": hierarchy.sizes, "epsilon_per_level": eps.tolist(),
                                    "sensitivity": d, "consistency": bool(consistency), "integer": bool(integer),
                                    "composition_opendp": _opendp.composed_by_opendp(dp, spent)})
    ledger = ledger if ledger is not None else PrivacyLedger(record.epsilon, name=name)
    ledger.charge(record)
    out = []
    for l in range(L):
        noisy = np.maximum(0.0, np.asarray(_opendp.privatise(dp, "laplace", scales[l],
                                                              hierarchy.counts[l].tolist())))
        if consistency and l > 0:
            noisy = _project_groups(noisy, hierarchy.parents[l], out[l - 1])
        out.append(noisy)
    if integer:
        out = round_consistent(out, hierarchy.parents)
    return HierarchyRelease(out, [list(i) for i in hierarchy.ids], np.array(spent), np.array(scales),
                            record.epsilon, bool(consistency), record, ledger, bool(integer))
