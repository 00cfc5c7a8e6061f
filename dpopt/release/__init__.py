"""Releases through OpenDP (the optional extra ``pip install "dpopt[release]"``), with a privacy ledger.

* :func:`release_stratified` — a stratified design's sample, privatised response by response, and the
  stratified mean with its SE and CI (:mod:`dpopt.release.stratified`);
* :func:`release_hierarchy` — a hierarchy's counts per level with the optimal budgets
  (:mod:`dpopt.release.hierarchy`);
* :func:`release_mean` — the sample-size family's mean of an SRS (:mod:`dpopt.release.mean`);
* :class:`PrivacyLedger` — composition, refusal of overspending, the JSON audit record.

OpenDP is imported only when a release runs: without it, a release raises ImportError with the install
hint, and nothing else in dpopt needs it. The numpy samplers in :mod:`dpopt.privacy.mechanisms` and
:mod:`dpopt.simulate` are for Monte Carlo only and are never used here (docs/release.md).
"""

from ._opendp import INSTALL_HINT, require_opendp
from .hierarchy import HierarchyRelease, release_hierarchy
from .ledger import (BudgetExceeded, Cell, Measurement, Part, PrivacyLedger, ReleaseRecord, amplify, amplify_up,
                     nominal_within, sum_up)
from .mean import MeanRelease, release_mean
from .stratified import StratifiedRelease, StratumPlan, estimate_stratified, plan_stratified, release_stratified

__all__ = ["INSTALL_HINT", "require_opendp", "release_stratified", "plan_stratified", "estimate_stratified",
           "StratifiedRelease", "StratumPlan", "release_hierarchy", "HierarchyRelease", "release_mean", "MeanRelease",
           "PrivacyLedger", "ReleaseRecord", "Part", "Cell", "Measurement", "BudgetExceeded", "amplify",
           "amplify_up", "nominal_within", "sum_up"]
