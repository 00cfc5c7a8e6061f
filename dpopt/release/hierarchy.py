"""Hierarchy release through OpenDP: Laplace per level with the chosen budgets (or, under ρ-zCDP, the discrete
Gaussian with a ρ per level, as the US Census Bureau's 2020 products), truncation at 0, and top-down consistency
(Ko, Ziani & Fioretto; the budgets from :class:`~dpopt.models.hierarchy.HierarchyBudget`).

Level ℓ's node counts get OpenDP Laplace noise at the scale OpenDP certifies for ε_ℓ (one person changes
one count per level by at most Δ: the L1 sensitivity of a level's vector is Δ); nodes of a level compose in
parallel, levels sequentially. Truncation and the projection of every parent's children onto
{v ≥ 0, Σ v = parent} are post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as V
from . import _opendp
from .ledger import Cell, Measurement, Part, PrivacyLedger, ReleaseRecord, sum_up


@dataclass
class HierarchyRelease:
    """Released counts per level (root level first), their node ids, and the privacy record."""

    counts: list[np.ndarray]
    ids: list[list[str]]
    epsilon: np.ndarray          # ε_ℓ OpenDP certifies per level (ρ_ℓ under zCDP: see ``rho``)
    scales: np.ndarray
    epsilon_spent: float
    consistency: bool
    record: ReleaseRecord
    ledger: PrivacyLedger
    integer: bool = False        # counts rounded to non-negative integers that add up (round_consistent)
    rho: np.ndarray | None = None   # ρ_ℓ OpenDP certifies per level (discrete Gaussian counts), else None
    rho_spent: float | None = None

    def __repr__(self) -> str:
        spent = (f"rho_spent={self.rho_spent:.6g}" if self.rho is not None else
                 f"epsilon_spent={self.epsilon_spent:.6g}")
        return f"HierarchyRelease(levels={len(self.counts)}, {spent}, consistency={self.consistency})"

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
        zcdp = self.rho is not None
        return {"levels": [{"level": l + 1, **({"rho": float(self.rho[l])} if zcdp else
                                               {"epsilon": float(self.epsilon[l])}),
                            "scale": float(self.scales[l]), "nodes": dict(zip(ids, (float(x) for x in c)))}
                           for l, (c, ids) in enumerate(zip(self.counts, self.ids))],
                "mechanism": "discrete-gaussian" if zcdp else "laplace",
                **({"rho_spent": self.rho_spent} if zcdp else {"epsilon_spent": self.epsilon_spent}),
                "consistency": self.consistency, "integer": self.integer}


def release_hierarchy(hierarchy, epsilon_per_level=None, *, rho_per_level=None, sensitivity: float = 1.0,
                      consistency: bool = True, integer: bool = False, ledger: PrivacyLedger | None = None,
                      name: str = "") -> HierarchyRelease:
    """Release every node count of ``hierarchy`` (the confidential counts) with budgets ``epsilon_per_level``
    (an array or a HierarchyBudget Solution; Laplace noise, pure ε) or ``rho_per_level`` (ρ-zCDP, discrete
    Gaussian noise on the integer counts, σ_ℓ = Δ/√(2ρ_ℓ) raised by an ulp or two until OpenDP's map certifies
    ρ_ℓ). ``ledger`` (default: total Σ ε_ℓ, or a zCDP ledger of total Σ ρ_ℓ) is charged first.

    ``integer=True`` (needs ``consistency``) publishes non-negative integers that still add up: the
    consistent counts are rounded top-down by :func:`dpopt.simulate.hierarchy.round_consistent` (each
    parent's integer shared among its children by largest remainder; every node moves by less than 1 plus
    its share of its parent's rounding; docs/release.md). Post-processing: the budget is the same."""
    from ..models.tree import Hierarchy
    from ..simulate.hierarchy import _project_groups, round_consistent

    dp = _opendp.require_opendp()
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"hierarchy must be a dpopt.Hierarchy, got {type(hierarchy).__name__}")
    if (epsilon_per_level is None) == (rho_per_level is None):
        raise ValueError("give epsilon_per_level (Laplace, pure epsilon) or rho_per_level (discrete Gaussian, rho-zCDP), "
                         "exactly one")
    if rho_per_level is not None:
        return _release_zcdp(dp, hierarchy, rho_per_level, sensitivity, consistency, integer, ledger, name)
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


def _release_zcdp(dp, hierarchy, rho_per_level, sensitivity, consistency, integer, ledger, name) -> HierarchyRelease:
    """Discrete Gaussian counts per level under ρ_ℓ-zCDP (docs/release.md §7): one person changes one count of a
    level by at most Δ (an integer), so each level's vector has L2 sensitivity Δ; levels compose by adding ρ,
    nodes of a level in parallel. OpenDP's composition of the level measurements cross-checks the total ρ."""
    from ..privacy.gaussian import sigma_from_rho
    from ..simulate.hierarchy import _project_groups, round_consistent

    L = hierarchy.n_levels
    rho = V.positive_vector("rho_per_level", getattr(rho_per_level, "x", rho_per_level), length=L)
    d = V.positive("sensitivity", sensitivity)
    if d != round(d):
        raise ValueError(f"sensitivity must be an integer for discrete Gaussian counts, got {d:g}")
    consistency = V.flag("consistency", consistency)
    integer = V.flag("integer", integer)
    if integer and not consistency:
        raise ValueError("integer=True needs consistency=True: integers that add up are rounded from consistent "
                         "counts (without consistency each count would only be rounded on its own)")
    for l in range(L):
        c = np.asarray(hierarchy.counts[l], dtype=float)
        if np.any(c != np.round(c)):
            raise ValueError(f"hierarchy counts of level {l + 1} must be integers for discrete Gaussian noise, got "
                             f"{float(c[np.flatnonzero(c != np.round(c))[0]])!r}")
    scales, spent = [], []
    for l in range(L):
        s, r = _opendp.search_gaussian_scale(dp, True, d, float(sigma_from_rho(float(rho[l]), d)),
                                             lambda got, want=float(rho[l]): got <= want)
        scales.append(s)
        spent.append(r)
    parts = [Part(f"level {l + 1}", [Cell(f"level {l + 1} ({hierarchy.sizes[l]} nodes)",
                                          [Measurement(f"counts of level {l + 1}", "discrete-gaussian", d, s, 0.0, 0.0,
                                                       _opendp.gaussian_variance(True, s), "zcdp", r)])])
             for l, (s, r) in enumerate(zip(scales, spent))]
    meas = [_opendp.gaussian_measurement(dp, True, s) for s in scales]
    composed = float(dp.c.make_composition(meas).map(int(round(d)))) if L > 1 else spent[0]
    record = ReleaseRecord(name or f"hierarchy {hierarchy.name or ''}".strip(), "hierarchy", parts,
                           details={"levels": hierarchy.sizes, "rho_per_level": rho.tolist(), "sensitivity": d,
                                    "consistency": bool(consistency), "integer": bool(integer),
                                    "composition_opendp_rho": composed})
    ledger = ledger if ledger is not None else PrivacyLedger(rho_total=sum_up(rho), name=name)
    ledger.charge(record)
    if abs(record.rho - composed) > 1e-9 * composed:      # pragma: no cover - both sum the same maps
        raise RuntimeError(f"hierarchy: dpopt's rho {record.rho!r} and OpenDP's composition {composed!r} disagree")
    out = []
    for l in range(L):
        counts = [int(round(float(x))) for x in hierarchy.counts[l]]
        noisy = np.maximum(0.0, np.asarray(meas[l](counts), dtype=float))
        if consistency and l > 0:
            noisy = _project_groups(noisy, hierarchy.parents[l], out[l - 1])
        out.append(noisy)
    if integer:
        out = round_consistent(out, hierarchy.parents)
    return HierarchyRelease(out, [list(i) for i in hierarchy.ids], np.array(spent), np.array(scales), math.nan,
                            bool(consistency), record, ledger, bool(integer), np.array(spent), record.rho)
