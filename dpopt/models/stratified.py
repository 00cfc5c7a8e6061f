"""Stratified sampling design under differential privacy (docs/stratified.md; Chen, Pasupathy & Awan).

Choose integer sample sizes ``n_i`` per stratum, ``Σ n_i = total``, ``lower ≤ n ≤ upper``, to minimise

    g(n) = Σ_i α_i² / n_i · (σ_i² + γ²(n_i)),

where ``γ²(n_i)`` is the noise variance of the mechanism run at the nominal budget
``ε_i = log1p(expm1(ε)·N_i/n_i)`` that subsampling amplifies back to the central target ``ε``.

The model only declares the problem and evaluates it (objective, gradient, Hessian diagonal, exact
unit increments, its rows and whether a design meets them); solving is the business of the backends
(``solve(backend=...)``). Its minimum-cost variant :class:`MinCostDesign` (``design.min_cost(...)``) lives here
too, so that neither class imports the other's module.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .. import _validate as V
from .. import frames as F
from ..feasibility import FEASIBILITY_TOL, Row, feasible, row_holds, used_columns
from ..numerics import water_fill
from ..privacy.amplification import log_expm1
from ..privacy.mechanisms import Mechanism, PureDP, get_mechanism
from ..result import Certificate, Solution, Status
from .base import DesignDelegate, Model, honest_status
from .controlled_precision import ControlledPrecisionDesign

OBJECTIVES = ("mean", "a-optimal", "unit-free")
BASELINES = ("neyman", "neyman-mean", "proportional", "equal")

# Taylor coefficients of psi(y) = x³/(2Δ²)·v''(x) for the Laplace noise term v = 2Δ²/(x·L²),
# L = log1p(y), y = cN/x. The closed form cancels like 1/y² for small y (the paper's eq. (11)
# turns negative there), so below _PSI_SERIES_MAX the series is used.
_PSI_COEF = np.array([1 / 6, 0.0, -1 / 20, 1 / 12, -221 / 2016, 19 / 144, -9829 / 64800, 407 / 2400,
                      -330157 / 1774080, 24377 / 120960, -4281164477 / 19813248000,
                      70074463 / 304819200, -1197622087 / 4926873600])
_PSI_SERIES_MAX = 0.05


@dataclass(frozen=True)
class LinearConstraint:
    """``A n (sense) b`` with sense ``"<="``, ``">="`` or ``"=="`` on the design vector."""

    A: np.ndarray
    b: np.ndarray
    sense: str
    name: str = ""

    def residual(self, n) -> np.ndarray:
        """Violation per row (≤ 0 means satisfied for inequalities; |.| for equalities)."""
        lhs = self.A @ np.asarray(n, dtype=float)
        if self.sense == "<=":
            return lhs - self.b
        if self.sense == ">=":
            return self.b - lhs
        return np.abs(lhs - self.b)

    @classmethod
    def make(cls, k: int, A, b, sense: str = "<=", name: str = "") -> "LinearConstraint":
        """A validated constraint on a design of ``k`` strata (clear errors naming A, b or sense)."""
        A = np.atleast_2d(V._as_float_array("A", A))
        if A.shape[1] != k:
            raise ValueError(f"A must have {k} columns (one per stratum), got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            raise ValueError("A must be finite")
        b = V.vector("b", np.atleast_1d(b), length=A.shape[0])
        if sense not in ("<=", ">=", "=="):
            raise ValueError(f"sense must be '<=', '>=' or '==', got {sense!r}")
        return cls(A, b, sense, name)


TARGET_KINDS = ("variance", "se", "cv")
#: what a precision target bounds: the domain mean (weights (N_i/N_D)²), the domain total (weights N_i²) or the
#: design's objective restricted to the domain (weights α_i²); docs/constrained.md
ESTIMATES = ("mean", "total", "objective")
EPSILON_RANGE = (1e-6, 700.0)   # supported central budgets of the stratified family


@dataclass(frozen=True)
class PrecisionTarget:
    """Σ_{i∈D} weights_i · t_ij(n_i) − fpc_const ≤ bound: a domain estimate's variance bound.

    ``weights`` (length k, zero outside the domain) are β_i² with β_i = N_i/N_D for a domain mean, N_i for a domain total or α_i for
    the objective restricted to the domain; ``bound`` is on the variance scale whatever ``kind`` the user
    gave (``target`` keeps the number as given).
    """

    name: str
    strata: np.ndarray
    variable: int
    weights: np.ndarray
    bound: float
    fpc_const: float
    kind: str
    target: float
    mean: float | None
    estimate: str


def _labels(field: str, labels, k: int, unique: bool = True, default=None) -> list[str] | None:
    """k labels as strings (default "1".."k"); duplicates refused where they must be unique."""
    if labels is None:
        return list(default) if default is not None else [str(i + 1) for i in range(k)]
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__"):
        raise TypeError(f"{field} must be a sequence of {k} names")
    out = []
    for v in list(labels):
        if isinstance(v, (bool, np.bool_)) or v is None or isinstance(v, float) and not math.isfinite(v):
            raise TypeError(f"{field} must hold names (strings or integers), got {v!r}")
        out.append(str(v))
    if len(out) != k:
        raise ValueError(f"{field} has length {len(out)}, expected {k}")
    if unique and len(set(out)) != k:
        dup = next(v for v in out if out.count(v) > 1)
        raise ValueError(f"{field} must be unique (repeated {dup!r})")
    return out


def _domains_by_label(mapping, labels: list[str]) -> list:
    """Domains given as {stratum label: domain}: every stratum named once, no other key (a mapping read as a
    sequence would be its keys, putting every stratum in a 'domain' named after itself)."""
    by_label = {}
    for key, dom in mapping.items():
        name = str(key)
        if name in by_label:
            raise ValueError(f"domains names stratum {name!r} twice (as {key!r})")
        by_label[name] = dom
    unknown = [key for key in by_label if key not in labels]
    if unknown:
        raise ValueError(f"domains names {unknown[0]!r}, which is not a stratum label (labels: "
                         f"{', '.join(labels[:10])}{', ...' if len(labels) > 10 else ''})")
    missing = [lab for lab in labels if lab not in by_label]
    if missing:
        raise ValueError(f"domains gives no domain for stratum {missing[0]!r} ({len(missing)} stratum/strata "
                         "without one; every stratum needs its domain)")
    return [by_label[lab] for lab in labels]


def _sigma2_matrix(sigma2, k: int) -> np.ndarray:
    """σ² as a k×J matrix (a vector is one variable); finite, ≥ 0."""
    arr = V._as_float_array("sigma2", sigma2)
    if arr.ndim == 0:
        raise ValueError("sigma2 must have one entry per stratum")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != k or arr.shape[1] == 0:
        raise ValueError(f"sigma2 must be a vector of {k} variances or a {k}×J matrix (one column per "
                         f"study variable), got shape {np.shape(sigma2)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("sigma2 must be finite (no NaN or infinity)")
    if np.any(arr < 0):
        raise ValueError(f"sigma2 must be >= 0, got min {arr.min():g}")
    return arr


def _shares(shares, J: int) -> np.ndarray:
    """Each variable's fraction of a person's nominal budget (sequential composition): > 0, summing to 1."""
    if shares is None:
        return np.full(J, 1.0 / J)
    s = V.vector("shares", shares, length=J)
    if np.any(s <= 0):
        raise ValueError(f"shares must be > 0 (each variable gets part of the budget), got min {s.min():g}")
    if abs(s.sum() - 1.0) > 1e-9:
        raise ValueError(f"shares must sum to 1 (sequential composition of the budget), got {s.sum():.12g}")
    return s / s.sum()


def _value_range(value_range, name: str = "value_range") -> tuple[float, float]:
    try:
        vr = V.vector(name, value_range)
    except TypeError as e:
        raise TypeError(f"{name} must be (lo, hi), got {value_range!r}") from e
    if vr.size != 2 or not vr[0] < vr[1]:
        raise ValueError(f"{name} must be (lo, hi) with lo < hi, got {value_range!r}")
    return float(vr[0]), float(vr[1])


def _is_scalar(value) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 0
    return not isinstance(value, (Mapping, list, tuple))


def _per_variable(name: str, value, variables, one) -> list:
    """``value`` for every variable: a mapping variable → value (every variable once), a list of one value per
    variable, or (``one`` is how a single value is told) one value for all of them."""
    J = len(variables)
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in variables]
        if unknown:
            raise ValueError(f"{name} names unknown variable {unknown[0]!r}; variables: {', '.join(variables)}")
        missing = [v for v in variables if v not in value]
        if missing:
            raise ValueError(f"{name} has no entry for variable {missing[0]!r} (give one per variable)")
        return [value[v] for v in variables]
    if one(value):
        return [value] * J
    if isinstance(value, str) or not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must be one value for all variables or a list of one per variable, got {value!r}")
    if len(value) != J:
        raise ValueError(f"{name} has {len(value)} entries but the design has {J} variable(s) "
                         f"({', '.join(variables)}): give one for all or one per variable")
    return list(value)


def _one_pair(value) -> bool:
    """Is ``value`` a single (lo, hi) pair (rather than one pair per variable)?"""
    if isinstance(value, (str, Mapping)) or not isinstance(value, (list, tuple, np.ndarray)):
        return False
    return all(_is_scalar(v) and not isinstance(v, str) for v in value) if len(value) else False


def _frame_ranges(value_range, variables) -> np.ndarray:
    """J×2 value ranges: one (lo, hi) for every variable, a list of one per variable, or a mapping variable →
    (lo, hi); errors name ``value_range`` and the variable."""
    J = len(variables)
    if not isinstance(value_range, Mapping) and not _one_pair(value_range) and (
            isinstance(value_range, str) or not isinstance(value_range, (list, tuple, np.ndarray))):
        raise TypeError(f"value_range must be (lo, hi), a list of one (lo, hi) per variable or a mapping "
                        f"variable -> (lo, hi), got {value_range!r}")
    pairs = _per_variable("value_range", value_range, variables, _one_pair)
    return np.array([_value_range(p, "value_range" + ("" if J == 1 else f"[{variables[j]!r}]"))
                     for j, p in enumerate(pairs)], dtype=float).reshape(J, 2)


class StratifiedDesign(Model):
    """The stratified DP design problem (separable convex MINLP).

    Parameters
    ----------
    N : stratum population sizes (integers ≥ 1)
    sigma2 : response variances σ_i² (≥ 0)
    total : total sample size η (integer, Σ lower ≤ η ≤ Σ upper)
    epsilon : central privacy target ε > 0 every population member receives
    mechanism : ``"laplace" | "dlap" | "tulap" | "gaussian" | "gaussian-zcdp" | "discrete-gaussian"`` or a
        :class:`~dpopt.privacy.Mechanism`
    delta : the central δ of an (ε, δ) target (``"gaussian"``, required there; docs/gaussian.md): a sampled
        person's nominal δ is δ·N_i/n_i, so every n_i must exceed δ·N_i (the default lower bound does)
    objective : ``"mean"`` (α = N), ``"a-optimal"`` (α = 1), ``"unit-free"`` (α = 1/σ), or weights α
    sensitivity : Δ of one response (TuLap needs 1, DLap an integer)
    lower, upper : bounds on n (defaults 1 and N)
    fpc : subtract the finite-population constant Σ α² σ²/N (argmin unchanged)
    """

    def __init__(self, N, sigma2, total, epsilon, mechanism="laplace", objective="mean",
                 sensitivity=None, lower=None, upper=None, fpc=False, name="", *, labels=None,
                 domains=None, value_range=None, variables=None, shares=None, variable_weights=None,
                 min_per_stratum=None, delta=None):
        self.N = V.positive_int_vector("N", N)
        k = self.N.size
        self.labels = _labels("labels", labels, k)
        self._labels_given = labels is not None   # the default "1".."k" never makes an index ambiguous
        if isinstance(domains, Mapping):
            domains = _domains_by_label(domains, self.labels)
        self.domains = None if domains is None else _labels("domains", domains, k, unique=False)
        S = _sigma2_matrix(sigma2, k)
        self.J = S.shape[1]
        self.variables = _labels("variables", variables, self.J, default=("y",) if self.J == 1 else None)
        self.shares = _shares(shares, self.J)
        self.variable_weights = self._variable_weights(variable_weights)
        self.sigma2_matrix = S
        self.sigma2 = S[:, 0] if self.J == 1 else S
        self.epsilon = V.positive("epsilon", epsilon)
        if not EPSILON_RANGE[0] <= self.epsilon <= EPSILON_RANGE[1]:
            # below 1e-6 the noise term's part linear in n (2Δ²α²n/(cN)², c = expm1(ε)) exceeds the sampling
            # variance by more than double precision resolves, so designs could no longer be told apart
            raise ValueError(f"epsilon must be in [{EPSILON_RANGE[0]:g}, {EPSILON_RANGE[1]:g}] for a stratified "
                             f"design, got {self.epsilon:g} (docs/stratified.md, supported ranges)")
        self.mechanism: Mechanism = get_mechanism(mechanism, delta)
        # the noise each variable's unit terms use, as a function of the nominal budget (docs/gaussian.md)
        self.noise_mechanisms = tuple(self.mechanism.for_design(self.epsilon, float(s)) for s in self.shares)
        self.value_ranges, self.sensitivities = self._ranges(value_range, sensitivity)
        self.alpha, self.objective_kind = self._weights(objective)
        self.lower = (np.ones(k, dtype=np.int64) if lower is None
                      else V.positive_int_vector("lower", lower, length=k, minimum=1))
        self.upper = (self.N.copy() if upper is None
                      else V.positive_int_vector("upper", upper, length=k, minimum=1))
        if np.any(self.upper > self.N):
            i = int(np.argmax(self.upper > self.N))
            raise ValueError(f"upper must be <= N (stratum {self.labels[i]!r}: upper={self.upper[i]}, N={self.N[i]})")
        self.min_per_stratum = None
        if min_per_stratum is not None:
            m = V.integer("min_per_stratum", min_per_stratum, minimum=1)
            if m > 2 ** 53:
                raise ValueError(f"min_per_stratum must be <= 2**53 (a stratum size), got {m:g}")
            self.min_per_stratum = m
            # a stratum smaller than m is taken whole (its variance is then known exactly)
            self.lower = np.maximum(self.lower, np.minimum(m, self.upper))
        self._delta_floor(lower is None)
        if np.any(self.lower > self.upper):
            i = int(np.argmax(self.lower > self.upper))
            raise ValueError(f"lower must be <= upper (stratum {self.labels[i]!r}: lower={self.lower[i]}, "
                             f"upper={self.upper[i]})")
        self.total = V.integer("total", total)
        self._check_total()
        self.fpc = V.flag("fpc", fpc)
        self.name = str(name)
        self.constraints: list[LinearConstraint] = []
        self.precision_targets: list[PrecisionTarget] = []
        self.cost: np.ndarray | None = None
        # cached pieces of the math
        self.alpha2 = self.alpha ** 2
        self.log_c = float(log_expm1(self.epsilon))
        self.log_N = np.log(self.N.astype(float))
        self._fpc_const = (float(np.sum(self.alpha2 * ((S / self.N[:, None]) @ self.variable_weights)))
                           if self.fpc else 0.0)
        self._check_finite()

    @property
    def delta(self):
        """The central δ of an (ε, δ) target, else None."""
        return getattr(self.mechanism.guarantee, "delta", None)

    def _delta_floor(self, default_lower: bool) -> None:
        """Under (ε, δ) a sampled person's nominal δ_i = δ·N_i/n_i must be < 1, i.e. n_i > δ·N_i (docs/gaussian.md):
        the default lower bound is raised to that floor; a lower bound given below it is refused."""
        if self.delta is None or self.mechanism.guarantee.kind != "approx":
            return
        floor = np.floor(self.delta * self.N.astype(float)).astype(np.int64) + 1
        bad = self.lower < floor
        if not np.any(bad):
            return
        if default_lower:
            self.lower = np.maximum(self.lower, np.minimum(floor, self.upper))
            if np.any(self.upper < floor):
                i = int(np.argmax(self.upper < floor))
                raise ValueError(f"upper must exceed delta·N for an (epsilon, delta) design (stratum "
                                 f"{self.labels[i]!r}: upper={self.upper[i]}, delta·N={self.delta * self.N[i]:g})")
            return
        i = int(np.argmax(bad))
        raise ValueError(f"lower must be > delta·N_i for an (epsilon, delta) design: the nominal delta delta·N_i/n_i "
                         f"reaches 1 otherwise (stratum {self.labels[i]!r}: lower={self.lower[i]}, "
                         f"delta·N={self.delta * self.N[i]:g}; use lower >= {floor[i]})")

    def noise_mechanism(self, variable: int = 0) -> Mechanism:
        """The mechanism of variable ``variable``'s noise as a function of the nominal budget: the design's mechanism
        for pure ε-DP, bound to the central target and the variable's share otherwise (docs/gaussian.md). Every
        route (models, formulations, backends) reads the unit terms' noise from here."""
        return self.noise_mechanisms[int(variable)]

    def _check_finite(self) -> None:
        """Every term must be finite over the bounds (each is convex, so at both ends): an objective that
        overflows double precision cannot be optimised, so refuse it and say which input is too large."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ends = [self.terms(self.lower.astype(float)), self.terms(self.upper.astype(float))]
        for t in ends:
            bad = np.flatnonzero(~np.isfinite(t))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"the objective overflows double precision in stratum {self.labels[i]!r} "
                                 f"(sigma2 {np.max(self.sigma2_matrix[i]):g}, weight {self.alpha[i]:g}, "
                                 f"N {self.N[i]}): rescale sigma2 or the weights")

    def _check_total(self) -> None:
        lo_sum, hi_sum = int(self.lower.sum()), int(self.upper.sum())
        if not lo_sum <= self.total <= hi_sum:
            raise ValueError(f"total must be in [sum(lower), sum(upper)] = [{lo_sum}, {hi_sum}], got {self.total}")

    def _ranges(self, value_range, sensitivity):
        """(J×2 value ranges or None, J sensitivities): one for all variables or one per variable each; a range's
        width is its variable's sensitivity."""
        names = self.variables
        tag = (lambda j: "" if self.J == 1 else f" of variable {names[j]!r}")
        ranges = None
        if value_range is not None:
            ranges = _frame_ranges(value_range, names)
        sens = None if sensitivity is None else _per_variable("sensitivity", sensitivity, names, _is_scalar)
        out = np.empty(self.J)
        for j in range(self.J):
            d = None if sens is None else sens[j]
            if d is not None and (not _is_scalar(d) or isinstance(d, str)):
                raise TypeError(f"sensitivity{tag(j)} must be a number (give one per variable as a flat list), "
                                f"got {d!r}")
            if ranges is not None:
                width = float(ranges[j, 1] - ranges[j, 0])
                if d is not None and float(d) != width:
                    raise ValueError(f"sensitivity{tag(j)} ({d!r}) contradicts value_range ({ranges[j, 0]:g}, "
                                     f"{ranges[j, 1]:g}), whose width {width:g} is the sensitivity")
                d = width
            try:
                out[j] = self.mechanism.check_sensitivity(1.0 if d is None else d)
            except (TypeError, ValueError) as e:
                if self.J == 1:
                    raise
                what = "value_range" if ranges is not None else "sensitivity"
                raise type(e)(f"{what} of variable {names[j]!r}: {e}") from e
        return ranges, out

    def sensitivity_of(self, variable) -> float:
        """Δ_j, the sensitivity of variable ``variable``'s response (name or index; its value range's width)."""
        return float(self.sensitivities[self.variable_index(variable)])

    @property
    def sensitivity(self) -> float:
        """The sensitivity Δ when every variable has the same one; a design with one per variable raises (read
        :attr:`sensitivities` or :meth:`sensitivity_of`)."""
        s = self.sensitivities
        if np.all(s == s[0]):
            return float(s[0])
        raise ValueError("this design has one sensitivity per variable ("
                         + ", ".join(f"{v}: {d:g}" for v, d in zip(self.variables, s))
                         + "): read sensitivities or sensitivity_of(variable)")

    @property
    def value_range(self):
        """(lo, hi) when every variable has the same range (None without one); a design with one range per
        variable raises (read :attr:`value_ranges` or :meth:`value_range_of`)."""
        r = self.value_ranges
        if r is None:
            return None
        if np.all(r == r[0]):
            return float(r[0, 0]), float(r[0, 1])
        raise ValueError("this design has one value_range per variable ("
                         + ", ".join(f"{v}: [{a:g}, {b:g}]" for v, (a, b) in zip(self.variables, r))
                         + "): read value_ranges or value_range_of(variable)")

    def value_range_of(self, variable):
        """(lo, hi) of variable ``variable`` (name or index), None when the design has no value range."""
        if self.value_ranges is None:
            return None
        lo, hi = self.value_ranges[self.variable_index(variable)]
        return float(lo), float(hi)

    def _variable_weights(self, weights) -> np.ndarray:
        if weights is None:
            return np.ones(self.J)
        if isinstance(weights, str):
            w = np.zeros(self.J)
            w[self.variable_index(weights)] = 1.0
            return w
        w = V.nonnegative_vector("variable_weights", weights, length=self.J)
        if not np.any(w > 0):
            raise ValueError("variable_weights must have a positive entry")
        return w

    def variable_index(self, variable) -> int:
        """Column of ``sigma2`` for a variable name or index (0-based)."""
        if isinstance(variable, str):
            if variable not in self.variables:
                raise ValueError(f"unknown variable {variable!r}; variables: {', '.join(self.variables)}")
            return self.variables.index(variable)
        j = V.integer("variable", variable, minimum=0)
        if j >= self.J:
            raise ValueError(f"variable must be a name or an index in [0, {self.J - 1}], got {j}")
        return j

    def strata_index(self, strata, field: str = "strata") -> np.ndarray:
        """Indices of the strata named by ``strata``: None (all), a domain name (``domains`` column),
        a label or list of labels, a boolean mask, or 0-based indices. Empty or unknown names raise."""
        k = self.k
        if strata is None:
            return np.arange(k)
        if isinstance(strata, str):
            domain = (np.flatnonzero(np.array(self.domains) == strata)
                      if self.domains is not None and strata in self.domains else None)
            label = np.array([self.labels.index(strata)]) if strata in self.labels else None
            if domain is not None and label is not None and not np.array_equal(domain, label):
                raise ValueError(f"{field}: {strata!r} is ambiguous: it is a domain (strata "
                                 f"{', '.join(repr(self.labels[i]) for i in domain[:5])}"
                                 f"{', ...' if domain.size > 5 else ''}) and the label of stratum {label[0]}; "
                                 "rename the domain or the stratum")
            if domain is not None:
                return domain
            if label is not None:
                return label
            known = sorted(set(self.domains or [])) + self.labels[:10]
            raise ValueError(f"{field}: unknown domain or stratum label {strata!r} (known: {', '.join(known)}"
                             f"{', ...' if k > 10 else ''})")
        if not isinstance(strata, (list, tuple, np.ndarray, range)):
            raise TypeError(f"{field} must be a domain name, a label, a list of labels or indices, or a boolean "
                            f"mask, got {type(strata).__name__}")
        items = list(strata) if not isinstance(strata, np.ndarray) else strata.tolist()
        if not items:
            raise ValueError(f"{field} must name at least one stratum (got an empty domain)")
        if all(isinstance(v, str) for v in items):
            bad = [v for v in items if v not in self.labels]
            if bad:
                raise ValueError(f"{field}: unknown stratum label(s) {', '.join(map(repr, bad[:5]))}")
            idx = np.array([self.labels.index(v) for v in items])
        elif all(isinstance(v, (bool, np.bool_)) for v in items):
            if len(items) != k:
                raise ValueError(f"{field}: a boolean mask needs {k} entries (one per stratum), got {len(items)}")
            idx = np.flatnonzero(np.array(items, dtype=bool))
            if idx.size == 0:
                raise ValueError(f"{field}: the mask selects no stratum (empty domain)")
        else:
            arr = V.vector(field, items)
            if np.any(arr != np.round(arr)) or np.any(arr < 0) or np.any(arr >= k):
                raise ValueError(f"{field}: stratum indices must be integers in [0, {k - 1}]")
            idx = arr.astype(np.int64)
            # with numeric labels (label = [1, 2, 3]) an integer reads as an index and as a label
            for i in (idx if getattr(self, "_labels_given", True) else ()):
                j = self.labels.index(str(i)) if str(i) in self.labels else i
                if j != i:
                    raise ValueError(f"{field}: {int(i)} is ambiguous: as a 0-based index it is the stratum "
                                     f"labelled {self.labels[i]!r}, as a label it is stratum {j}; name strata "
                                     f"by their labels as strings ({str(i)!r})")
        if np.unique(idx).size != idx.size:
            raise ValueError(f"{field}: a stratum is named twice")
        return np.sort(idx)

    # ------------------------------------------------------------------ set-up helpers
    def _weights(self, objective):
        k = self.N.size
        if isinstance(objective, str):
            key = V.choice("objective", objective, OBJECTIVES)
            if key == "mean":
                return self.N.astype(float), key
            if key == "a-optimal":
                return np.ones(k), key
            if self.J > 1:
                raise ValueError("objective 'unit-free' (alpha = 1/sigma) needs one variable; with several, "
                                 "give variable_weights to put them on one scale")
            if np.any(self.sigma2 <= 0):
                raise ValueError("objective 'unit-free' (alpha = 1/sigma) needs sigma2 > 0 in every stratum")
            return 1.0 / np.sqrt(self.sigma2), key
        alpha = V.positive_vector("objective weights (alpha)", objective, length=k)
        return alpha, "weights"

    @property
    def k(self) -> int:
        return int(self.N.size)

    def __repr__(self) -> str:
        return (f"StratifiedDesign(k={self.k}, total={self.total}, epsilon={self.epsilon:g}, "
                f"mechanism={self.mechanism.name!r}, objective={self.objective_kind!r}"
                f"{', constraints=' + str(len(self.constraints)) if self.constraints else ''})")

    # ------------------------------------------------------------------ custom constraints
    def add_constraint(self, A, b, sense: str = "<=", name: str = "") -> "StratifiedDesign":
        """Add linear constraints ``A n (sense) b`` (e.g. a cost budget ``c @ n <= C``). Returns self.

        ``A`` is a k-column matrix or vector, or a mapping ``{stratum label or domain: coefficient}``
        (``{"Los Angeles": 1}, 30, ">="`` asks for at least 30 units in Los Angeles).
        """
        A = self._coefficients(A)
        self.constraints.append(LinearConstraint.make(self.k, A, b, sense, name or f"c{len(self.constraints)}"))
        return self

    def _coefficients(self, A):
        if not isinstance(A, dict):
            return A
        row = np.zeros(self.k)
        for key, coef in A.items():
            row[self.strata_index(key, "constraint coefficients")] = V.real(f"coefficient of {key!r}", coef)
        return row

    def add_cost_budget(self, cost, budget) -> "StratifiedDesign":
        """Σ cost_i n_i ≤ budget."""
        cost = V.positive_vector("cost", cost, length=self.k)
        self.cost = cost
        return self.add_constraint(cost[None, :], [V.positive("budget", budget)], "<=", "cost budget")

    def add_precision_target(self, target, strata=None, variable=None, kind: str = "variance",
                             mean=None, estimate: str = "mean", name: str = "") -> "StratifiedDesign":
        """Require the estimate over a domain (a set of strata) to reach a precision target. Returns self.

        ``estimate="mean"``: the stratified estimator of the domain's mean of ``variable``,
        Σ_{h∈D} (N_h/N_D) ȳ_h with privatised responses; its variance (sampling plus noise, finite-population
        corrected when ``fpc``) must not exceed the target. ``kind`` says what ``target`` is: ``"variance"``,
        ``"se"`` (standard error) or ``"cv"`` (coefficient of variation, needs the domain mean ``mean=``).
        ``estimate="total"``: the estimator Σ_{h∈D} N_h ȳ_h of the domain's total (weights N_h²; a ``cv`` then
        needs the domain total as ``mean=``). ``estimate="objective"``: the design's own weighted objective
        restricted to the domain (weights α_h, variance scale only). ``strata`` names the domain (see :meth:`strata_index`); ``variable`` a column
        of ``sigma2`` (default: the only one). See docs/constrained.md.
        """
        self.precision_targets.append(self._precision_target(target, strata, variable, kind, mean, estimate, name))
        return self

    def _precision_target(self, target, strata, variable, kind, mean, estimate, name) -> "PrecisionTarget":
        kind = V.choice("kind", kind, TARGET_KINDS)
        estimate = V.choice("estimate", estimate, ESTIMATES)
        value = V.positive("precision target", target)
        if variable is None:
            if self.J > 1:
                raise ValueError(f"variable must name one of {', '.join(self.variables)} for a precision target")
            j = 0
        else:
            j = self.variable_index(variable)
        idx = self.strata_index(strata)
        if kind == "cv":
            if mean is None:
                raise ValueError("a cv precision target needs the domain mean (mean=)")
            m = V.real("mean", mean)
            if m == 0:
                raise ValueError("mean must be non-zero for a cv precision target")
            bound = (value * abs(m)) * (value * abs(m))
        else:
            if mean is not None:
                raise ValueError("mean= is only used by kind='cv'")
            bound = value * value if kind == "se" else value
        if not math.isfinite(bound):
            raise ValueError(f"precision target {value:g} ({kind}) is too large: its variance overflows")
        if estimate == "objective" and kind != "variance":
            raise ValueError("estimate='objective' targets are on the objective's scale: use kind='variance'")
        beta = np.zeros(self.k)
        if estimate == "mean":
            Nd = self.N[idx].astype(float)
            beta[idx] = Nd / Nd.sum()
        elif estimate == "total":
            beta[idx] = self.N[idx].astype(float)
        else:
            beta[idx] = self.alpha[idx]
        label = name or (f"{estimate} of {self.variables[j]} over "
                         f"{strata if isinstance(strata, str) else (str(idx.size) + ' strata')}")
        fpc_const = float(np.sum(beta ** 2 * self.sigma2_matrix[:, j] / self.N)) if self.fpc else 0.0
        return PrecisionTarget(name=label, strata=idx, variable=j, weights=beta ** 2, bound=bound,
                               fpc_const=fpc_const, kind=kind, target=value, mean=None if mean is None else float(mean),
                               estimate=estimate)

    def precision_value(self, target: "PrecisionTarget", n) -> float:
        """Variance of the target's domain estimate at design ``n`` (compare with ``target.bound``)."""
        x = self._check_design(n)
        return float(np.sum(target.weights * self.unit_terms(x, target.variable)) - target.fpc_const)

    def min_cost(self, cost, variance_target=None, *, se=None, cv=None, mean=None):
        """The minimum-cost variant: minimise Σ cost_i n_i s.t. the precision requirements (no fixed total).

        ``variance_target`` bounds the objective g(n) itself; ``se``/``cv`` bound the standard error or
        coefficient of variation of the population-mean estimate (``cv`` needs ``mean``). The design's own
        precision targets and linear constraints are kept. Returns a new
        :class:`MinCostDesign`.
        """
        return MinCostDesign(self, cost, variance_target, se=se, cv=cv, mean=mean)

    def controlled_precision(self, domains=None, *, rho=None, totals=None, priorities=None, variable=None,
                             estimate: str = "total", name: str = "") -> ControlledPrecisionDesign:
        """The multi-domain controlled-precision variant (stratallo's ``dopt`` with DP noise): at this design's
        total, minimise max_d V_d(n)/ρ_d², ρ_d = totals_d·√priorities_d (or ``rho`` given directly), V_d the
        variance of the domain's ``estimate`` ("total", "mean" or "objective"). The design's bounds, linear
        constraints and precision targets are kept. Returns a new :class:`ControlledPrecisionDesign`
        (docs/controlled_precision.md)."""
        return ControlledPrecisionDesign(self, domains, rho=rho, totals=totals, priorities=priorities,
                                         variable=variable, estimate=estimate, name=name)

    @property
    def is_plain(self) -> bool:
        """True for the sum-and-bounds problem with one variable (what the marginal-allocation path solves)."""
        return not self.constraints and not self.precision_targets and self.J == 1

    def extended_features(self) -> list[str]:
        """What this design has beyond one variable and linear constraints (routes that cannot model them
        refuse the design rather than ignore them)."""
        out = []
        if self.J > 1:
            out.append(f"{self.J} study variables")
        if self.precision_targets:
            out.append(f"{len(self.precision_targets)} precision target(s)")
        return out

    # ------------------------------------------------------------------ per-stratum math
    def _check_design(self, n, name="n") -> np.ndarray:
        x = V.vector(name, n, length=self.k)
        if np.any(x <= 0) or np.any(x > self.N):
            raise ValueError(f"{name} must satisfy 0 < {name}_i <= N_i")
        return x

    def _log_y(self, x, idx=None):
        """log(c·N/x), the odds of the amplified nominal budget."""
        logN = self.log_N if idx is None else self.log_N[idx]
        return self.log_c + logN - np.log(x)

    def nominal_epsilon_at(self, x, idx=None) -> np.ndarray:
        """Nominal budget ε_i = log1p(expm1(ε)·N_i/x_i) each sampled person gets in stratum i.

        With several study variables, variable j's response is privatised with ``shares[j]·ε_i``.
        ``idx``: the strata of the entries of ``x`` (default: x has one entry per stratum, in order).
        """
        return np.logaddexp(0.0, self._log_y(np.asarray(x, dtype=float), idx))

    def noise_variance_at(self, x, variable: int | None = None, idx=None) -> np.ndarray:
        """γ²(x_i): noise variance per response at the nominal budget (variable j's share of it).

        One variable: a vector; several: a k×J matrix unless ``variable`` picks one column. ``idx`` as in
        :meth:`nominal_epsilon_at`.
        """
        L = self.nominal_epsilon_at(x, idx)
        if variable is None and self.J > 1:
            return np.stack([self.noise_variance_at(x, j, idx) for j in range(self.J)], axis=1)
        j = variable or 0
        return np.asarray(self.noise_mechanism(j).variance(float(self.shares[j]) * L, self.sensitivity_of(j)),
                          dtype=float)

    def unit_terms(self, x, variable: int = 0, idx=None) -> np.ndarray:
        """t_ij(x_i) = (σ_ij² + γ_j²(x_i))/x_i per stratum for one variable (no weights); ``idx``: the strata
        of the entries of ``x`` (default: one entry per stratum)."""
        x = np.asarray(x, dtype=float)
        sl = slice(None) if idx is None else idx
        return (self.sigma2_matrix[sl, variable] + self.noise_variance_at(x, variable, idx)) / x

    def terms(self, x, idx=None) -> np.ndarray:
        """f_i(x_i) = α_i² Σ_j w_j t_ij(x_i) per stratum (real or integer x, no validation); ``idx`` as in
        :meth:`unit_terms` (e.g. ``terms(v, np.full(v.size, i))``: stratum i's term at the values v)."""
        x = np.asarray(x, dtype=float)
        out = 0.0
        for j in np.flatnonzero(self.variable_weights):
            out = out + self.variable_weights[j] * self.unit_terms(x, j, idx)
        return (self.alpha2 if idx is None else self.alpha2[idx]) * out

    def linear_noise_form(self, divisor: float = 1.0):
        """``(a, b, const)`` with f_i(n)/divisor = a_i/n + b_i·n + const_i, or None for other mechanisms.

        A mechanism whose variance is c0 + c1/y + c2/y² in y = expm1(ε) (its ``growth_coefficients``: DLap
        and TuLap at sensitivity 1, γ² = 2q(c+q)/c² (+ 1/12), q = n/N), at the whole budget and with one
        variable, has y = cN/n, so f = α²(σ² + c0)/n + c1·α²/(cN) + c2·α²n/(cN)² exactly
        (docs/stratified.md). The last two are formed
        in log space: exp(−2 log cN) alone is subnormal long before the product is. This form is DCP
        (cvxpy), linear plus inv for Pyomo, and gives increments and derivatives without cancellation
        when σ² = 0.
        """
        if self.J != 1 or self._unit_linear_form(0) is None:
            return None
        c0, c1, c2 = self._growth_form()
        w = self.alpha2 / float(divisor)
        lcn = self.log_c + self.log_N                   # log(cN)
        with np.errstate(divide="ignore"):              # a zero coefficient: exp(−inf) = 0
            return w * (self.sigma2 + c0), np.exp(np.log(c2 * w) - 2.0 * lcn), np.exp(np.log(c1 * w) - lcn)

    def _growth_form(self, variable: int = 0):
        """The mechanism's (c0, c1, c2) at this sensitivity (variance = c0 + c1/y + c2/y², y = expm1(ε)) when it
        has them, all ≥ 0 (then a/x + b·x is convex), else None. Asked of the mechanism, never of its class: a
        user subclass with its own variance has no such form unless it gives one (checked by probe)."""
        mech = self.noise_mechanism(variable)
        d = self.sensitivity_of(variable)
        if not mech.support("growth_coefficients", d):
            return None
        c = tuple(float(t) for t in mech.growth_coefficients(d))
        return c if len(c) == 3 and all(t >= 0 for t in c) else None

    def _unit_linear_form(self, variable: int, idx=None):
        """(a, b, const) with t_ij(x) = a/x + b·x + const for a mechanism with growth coefficients (DLap/TuLap at
        Δ = 1) at the whole budget, else None."""
        form = self._growth_form(variable) if self.shares[variable] == 1.0 else None
        if form is None:
            return None
        c0, c1, c2 = form
        sl = slice(None) if idx is None else idx
        lcn = self.log_c + self.log_N[sl]
        with np.errstate(divide="ignore"):
            return (self.sigma2_matrix[sl, variable] + c0, np.exp(np.log(c2) - 2.0 * lcn),
                    np.exp(np.log(c1) - lcn))

    def kkt_residuals(self, x, mu=None, bound_rtol: float = 0.0, fallback_mu: float = 0.0):
        """Per-stratum violation of the relaxation's KKT conditions at x, and the multiplier μ used.

        Stationarity asks f_i'(x_i) = μ on free strata; a stratum at its lower (upper) bound may only move
        up (down), so only f_i' < μ (f_i' > μ) violates there; fixed strata (lo = hi) never do. The signed
        residuals f_i' − μ of those violations are returned (0 elsewhere). ``mu`` defaults to the median f'
        over the free strata (``fallback_mu`` when none is free); ``bound_rtol`` is how close (relative)
        to a bound counts as at it.
        """
        x = np.asarray(x, dtype=float)
        grad = self.terms_derivative(x, 1)
        lo, hi = self.lower.astype(float), self.upper.astype(float)
        at_lo = x <= lo * (1 + bound_rtol)
        at_hi = x >= hi * (1 - bound_rtol)
        free = ~(at_lo | at_hi)
        if mu is None or not math.isfinite(mu):
            mu = float(np.median(grad[free])) if free.any() else float(fallback_mu)
        res = grad - mu
        res = np.where(at_lo, np.minimum(res, 0.0), np.where(at_hi, np.maximum(res, 0.0), res))
        return np.where(hi > lo, res, 0.0), mu

    def terms_derivative(self, x, order: int = 1, idx=None) -> np.ndarray:
        """f_i'(x_i) (order=1) or f_i''(x_i) (order=2), stable (docs/stratified.md).

        ``idx`` restricts the evaluation to those strata (x then has their length).
        """
        if order not in (1, 2):
            raise ValueError("order must be 1 or 2")
        return self.terms_derivatives(x, idx, second=order == 2)[order - 1]

    def terms_derivatives(self, x, idx=None, second: bool = True):
        """(f_i'(x_i), f_i''(x_i) or None), the objective's weighted sum of :meth:`unit_derivatives`."""
        sl = slice(None) if idx is None else idx
        d1, d2 = 0.0, (0.0 if second else None)
        for j in np.flatnonzero(self.variable_weights):
            u1, u2 = self.unit_derivatives(x, j, idx, second)
            d1 = d1 + self.variable_weights[j] * u1
            if second:
                d2 = d2 + self.variable_weights[j] * u2
        a2 = self.alpha2[sl]
        return a2 * d1, (a2 * d2 if second else None)

    def unit_derivatives(self, x, variable: int = 0, idx=None, second: bool = True):
        """(t_ij'(x_i), t_ij''(x_i) or None) for one variable, stable (docs/stratified.md).

        The mechanism runs at the budget E = s·L(x) (s the variable's share); the Laplace part
        2Δ²/E² = 2(Δ/s)²/L² has a cancellation-free closed form (series near y = cN/x → 0), the smooth
        remainder is differentiated by the chain rule.
        """
        x = np.asarray(x, dtype=float)
        sl = slice(None) if idx is None else idx
        s2 = self.sigma2_matrix[sl, variable]
        form = self._unit_linear_form(variable, idx)
        if form is not None:     # t = a/x + b·x + const: no cancellation when σ² = 0
            a, b = form[:2]
            return b - a / x ** 2, (2.0 * a / x ** 3 if second else None)
        mech = self.noise_mechanism(variable)
        share = float(self.shares[variable])
        ly = self._log_y(x, idx)
        if ly.size and float(np.max(ly)) < _EXP_SAFE:
            # y = cN/x once: L = log1p(y), y/(1+y) and 1/(1+y) from it (measured: a third of the time of the
            # three stable forms below, which serve where y could overflow)
            y = np.exp(ly)
            L = np.log1p(y)
            u = 1.0 / (1.0 + y)  # 1/(1+y)
            s = y * u            # y/(1+y)
        else:
            L = np.logaddexp(0.0, ly)
            s = expit(ly)
            u = expit(-ly)
        E = share * L
        sens = self.sensitivity_of(variable)
        d2 = (sens / share) ** 2
        inv_x = 1.0 / x
        Lp = -s * inv_x          # dL/dx
        d1 = -s2 * inv_x ** 2
        dd = 2 * s2 * inv_x ** 3 if second else None
        if mech.laplace_part:
            lap = E < mech.split_below(sens)
            every = bool(np.all(lap))          # (the usual case: no masking needed)
            part = 2 * d2 * (inv_x / L) ** 2 * (2 * s / L - 1)
            d1 = d1 + (part if every else np.where(lap, part, 0.0))
            if second:
                part = 2 * d2 * _psi(ly, L, s, u) * inv_x ** 3
                dd = dd + (part if every else np.where(lap, part, 0.0))
        else:
            lap, every = np.zeros(L.shape, dtype=bool), False
        if mech.has_remainder or not every:
            # the remainder where the Laplace split holds, the whole variance elsewhere: each evaluated on its
            # own points only (elementwise functions, so the values are those of the whole arrays)
            r, r1 = np.empty_like(E), np.empty_like(E)
            r2 = np.empty_like(E) if second else None
            for where, value, deriv in ((lap, mech.remainder, mech.remainder_derivative),
                                        (~lap, mech.variance, mech.variance_derivative)):
                if not np.any(where):
                    continue
                e = E[where]
                r[where] = value(e, sens)
                r1[where] = deriv(e, sens, 1)
                if second:
                    r2[where] = deriv(e, sens, 2)
            r1 = share * r1
            d1 = d1 + r1 * Lp * inv_x - r * inv_x ** 2
            if second:
                r2 = share ** 2 * r2
                Lpp = s * (2 - s) * inv_x ** 2
                dd = dd + r2 * Lp ** 2 * inv_x + r1 * Lpp * inv_x - 2 * r1 * Lp * inv_x ** 2 + 2 * r * inv_x ** 3
        return d1, dd

    def increments(self, m, idx=None) -> np.ndarray:
        """Exact unit increments d_i(m_i) = f_i(m_i + 1) − f_i(m_i) of the objective's terms (integer m ≥ 1).

        ``idx`` restricts the evaluation to those strata (m then has their length).
        """
        sl = slice(None) if idx is None else idx
        out = 0.0
        for j in np.flatnonzero(self.variable_weights):
            out = out + self.variable_weights[j] * self.unit_increments(m, j, idx)
        return self.alpha2[sl] * out

    def unit_increments(self, m, variable: int = 0, idx=None) -> np.ndarray:
        """t_ij(m+1) − t_ij(m) for one variable, written so that no two large, nearly equal numbers are
        subtracted (docs/stratified.md): ``L0 − L1 = log1p(cN / (m(m+1+cN)))`` is computed directly and the
        mechanism turns it into the variance change without subtracting the two variances."""
        m = np.asarray(m, dtype=float)
        sl = slice(None) if idx is None else idx
        s2, logN = self.sigma2_matrix[sl, variable], self.log_N[sl]
        m1 = m + 1.0
        form = self._unit_linear_form(variable, idx)
        if form is not None:     # t = a/m + b·m + const: the general route below cancels when σ² = 0
            return form[1] - form[0] / (m * m1)
        mech, d = self.noise_mechanism(variable), self.sensitivity_of(variable)
        share = float(self.shares[variable])
        lcn = self.log_c + logN                       # log(cN)
        L0, L1, dL = _budgets_and_gap(lcn, m, m1)
        # t(m+1) − t(m) = [−σ² + m·(V(L1) − V(L0)) − V(L0)] / (m(m+1)), V = noise variance
        dV = mech.variance_difference(share * L0, share * L1, share * dL, d)
        V0 = mech.variance(share * L0, d)
        return (-s2 + m * dV - V0) / (m * m1)

    # ------------------------------------------------------------------ public evaluation API
    def objective_value(self, n) -> float:
        """g(n) = Σ f_i(n_i) (minus the fpc constant when ``fpc``) for an integer or real design."""
        x = self._check_design(n)
        return float(np.sum(self.terms(x)) - self._fpc_const)

    def gradient(self, x) -> np.ndarray:
        """∇g of the continuous relaxation."""
        return self.terms_derivative(self._check_design(x, "x"), 1)

    def hessian_diagonal(self, x) -> np.ndarray:
        """Diagonal of ∇²g (g is separable, so this is the whole Hessian)."""
        return self.terms_derivative(self._check_design(x, "x"), 2)

    def variance_of_mean(self, g: float) -> float:
        """Var(μ̂) = g/(ΣN)² for the population-mean objective, nan otherwise."""
        if self.objective_kind != "mean":
            return float("nan")
        return float(g) / float(np.sum(self.N.astype(float))) ** 2

    def variance_breakdown(self, n) -> dict:
        """Sampling and noise parts of the objective per stratum (and Var(μ̂) for the mean)."""
        x = self._check_design(n)
        w = self.variable_weights
        samp = self.alpha2 * ((self.sigma2_matrix / x[:, None]) @ w)
        if self.fpc:
            samp = samp - self.alpha2 * ((self.sigma2_matrix / self.N[:, None]) @ w)
        noise_var = self.noise_variance_at(x)
        noise = self.alpha2 * ((noise_var.reshape(self.k, -1) / x[:, None]) @ w)
        total = float(np.sum(samp) + np.sum(noise))
        out = {"sampling": samp, "noise": noise, "total": total,
               "sampling_total": float(np.sum(samp)), "noise_total": float(np.sum(noise))}
        if self.objective_kind == "mean":
            out["variance_of_mean"] = self.variance_of_mean(total)
        return out

    def nominal_budgets(self, n) -> dict:
        """Per stratum: sampling rate, nominal ε_i (ρ under zCDP), nominal δ_i = δ·N_i/n_i under (ε, δ), noise scale
        (Δ/ε_i; σ for Gaussian noise) and noise standard deviation (with several variables: ``epsilon_variable``,
        ``scale`` and ``noise_sd`` are k×J, per variable)."""
        x = self._check_design(n)
        eps_i = self.nominal_epsilon_at(x)
        kind = self.mechanism.guarantee.kind
        if kind == "zcdp":       # sampling does not amplify zCDP: every sampled person spends the central ρ
            eps_i = np.full(self.k, self.epsilon)
        out = {"rate": x / self.N, "epsilon": eps_i, "guarantee": kind}
        if kind == "approx":     # δ_i = δ·N_i/n_i (docs/gaussian.md)
            out["delta"] = self.delta * (self.N / x)
        sd = np.sqrt(self.noise_variance_at(x))
        gauss = kind != "pure"     # Gaussian noise: its scale is its standard deviation σ
        if self.J == 1:
            out.update(scale=sd if gauss else self.sensitivity_of(0) / eps_i, noise_sd=sd)
        else:
            e = eps_i[:, None] * self.shares[None, :]
            out.update(epsilon_variable=e, scale=sd if gauss else self.sensitivities[None, :] / e, noise_sd=sd)
        return out

    def precision_report(self, n) -> list[dict]:
        """Each precision target's variance, SE and CV at ``n`` against its bound (and whether it binds)."""
        out = []
        for t in self.precision_targets:
            v = self.precision_value(t, n)
            row = {"name": t.name, "variable": self.variables[t.variable], "strata": len(t.strata),
                   "kind": t.kind, "target": t.target, "variance": v, "bound": t.bound,
                   "se": math.sqrt(max(v, 0.0)), "met": target_met(t, v),
                   "binding": abs(v - t.bound) <= 1e-6 * t.bound}
            if t.mean is not None:
                row["cv"] = row["se"] / abs(t.mean)
            out.append(row)
        return out

    def is_feasible(self, n, tol: float | None = None) -> bool:
        """Does ``n`` meet the bounds, the total, the linear constraints and the precision targets? Decided by
        the one feasibility test of every stratified model (:func:`dpopt.feasibility.feasible` on the rows of
        :meth:`program_rows`, relative tolerance ``FEASIBILITY_TOL`` = 1e-11 of each row's magnitude;
        docs/constrained.md). ``tol`` loosens it only for checks of a solver's *real* relaxation point;
        integer designs are judged at the default."""
        return _is_feasible(self, self, n, tol)

    def program_rows(self) -> tuple[Row, list[Row], float]:
        """``(objective, rows, const)``: the model as rows over its unit terms (docs/constrained.md) — the
        objective g(n) + const, the fixed total, the linear constraints (≥ negated) and the precision targets.
        :func:`dpopt.formulations.program_of` compiles them; :meth:`is_feasible` tests them."""
        objective = Row("g(n)", "objective", self.alpha2[:, None] * self.variable_weights[None, :], None)
        rows = [Row("total", "total", None, np.ones(self.k), float(self.total), "==")]
        return objective, rows + _requirement_rows(self, self.constraints, self.precision_targets), self._fpc_const

    def unit_matrix(self, x, columns=None, idx=None) -> np.ndarray:
        """The unit terms t_ij(x_i) as a len(x)×J matrix: the ``columns`` given (default: every variable),
        zero elsewhere; ``idx`` as in :meth:`unit_terms`."""
        x = np.asarray(x, dtype=float)
        out = np.zeros((x.size, self.J))
        for j in (range(self.J) if columns is None else columns):
            out[:, j] = self.unit_terms(x, j, idx)
        return out

    # ------------------------------------------------------------------ certificate
    def certificate(self, n, rtol: float = 1e-10) -> Certificate:
        """Integer-optimality test for the sum-and-bounds problem (docs/stratified.md, "The exchange certificate").

        n is optimal iff ``max_{n_i>lo_i} d_i(n_i−1) ≤ min_{n_j<hi_j} d_j(n_j)``; compared with a
        relative tolerance ``rtol`` on the increment scale. ``slack = min − max``.
        """
        n = np.asarray(n)
        if n.shape != (self.k,) or not np.all(n == np.round(n)):
            return Certificate("exchange", False, message="not an integer design of the right length")
        n = n.astype(np.int64)
        if not (np.all(n >= self.lower) and np.all(n <= self.upper) and int(n.sum()) == self.total):
            return Certificate("exchange", False, message="design is infeasible (sum or bounds)")
        if not self.is_plain:
            return Certificate("exchange", False,
                               message="exchange certificate covers the sum-and-bounds problem only")
        left, right = self.exchange_values(n)
        max_left = float(np.max(left)) if left.size else -np.inf
        min_right = float(np.min(right)) if right.size else np.inf
        if not np.isfinite(max_left) or not np.isfinite(min_right):
            return Certificate("exchange", True, slack=np.inf, tolerance=rtol,
                               message="no exchange is possible")
        # increments near the subnormal range (σ² = 0 at ε ≈ 700: ~1e-316) carry no relative precision:
        # below tiny/rtol ≈ 2e-298 the scale is floored, so round-off there cannot fail the test
        scale = max(abs(max_left), abs(min_right), np.finfo(float).tiny / rtol)
        slack = min_right - max_left
        return Certificate("exchange", bool(slack >= -rtol * scale), slack=slack, tolerance=rtol,
                           message=f"max removal gain {max_left:.6e}, min addition cost {min_right:.6e}")

    def attach_certificate(self, sol: Solution) -> Solution:
        """Attach the exchange certificate to a solver's integer answer of the sum-and-bounds problem.

        The certificate decides the status, whatever the solver's termination or internal gap: a claimed
        optimum it refutes becomes ``feasible`` (the solver's tolerances hid an improving exchange), and a
        feasible point it proves (with the discrete convexity it rests on verified) becomes ``optimal``.
        """
        if not self.is_plain or sol.n is None:
            return sol
        sol.certificate = self.certificate(sol.n)
        if sol.status == Status.OPTIMAL and not sol.certificate.optimal:
            sol.status = Status.FEASIBLE
            sol.message = f"{sol.message}; solver claimed optimal but the exchange certificate fails"
        elif sol.status in (Status.FEASIBLE, Status.TIME_LIMIT) and sol.certificate.optimal \
                and self.is_feasible(sol.n) and self.convexity_verified()[0] is True:
            sol.status = Status.OPTIMAL
            sol.message = f"{sol.message}; the exchange certificate proves the point optimal"
        return sol

    def convexity_verified(self, max_points: int = 5_000_000, until: float | None = None) -> tuple[bool | None, str]:
        """Are the unit terms discretely convex (non-decreasing increments) on every stratum's range?

        The exchange certificate, the exact backends and Algorithm 1 rest on it. It is proven for the
        built-in pure-DP mechanisms (Laplace, DLap, TuLap) at every budget share (docs/stratified.md).
        Otherwise (a user mechanism, or Gaussian noise under (ε, δ)) it is checked increment by increment,
        per variable, when the ranges hold at most ``max_points`` values in all (True/False), else unknown
        (None). ``until``: a ``time.perf_counter()`` instant (a solve's deadline) after which the check stops,
        unknown (None) and not remembered, so a later call with time finishes it (measured: 3.4 s for 4.4
        million increments of Gaussian terms at k = 100 000, asked with time_limit = 0.3 s).
        """
        mech = self.mechanism
        if all(m.convex_terms_proven(self.shares) for m in self.noise_mechanisms):   # the mechanisms' own claim
            return True, "proven for the built-in mechanisms"
        if getattr(self, "_convexity", None) is not None:
            return self._convexity
        what = (f"user mechanism {mech.name!r}" if type(mech).convex_terms_proven is Mechanism.convex_terms_proven
                else f"{mech.name} under {mech.guarantee}" if not isinstance(mech.guarantee, PureDP)
                else f"{mech.name} (convexity not proven for it)")
        span = int(np.sum(self.upper - self.lower)) * self.J
        if span > max_points:
            out = (None, f"{what}: convexity of the terms not verified ({span} increments exceed {max_points})")
        else:
            out = (True, f"{what}: increments checked non-decreasing on every range")
            for j in range(self.J):
                bad = self._first_concave(j, until=until)
                if bad == "stopped":
                    return None, (f"{what}: convexity of the terms not verified within the time limit (a longer "
                                  "time_limit checks it)")
                if bad is not None:
                    i, n_at = bad
                    out = (False, f"{what}: stratum {self.labels[i]!r} is not discretely convex in variable "
                                  f"{self.variables[j]!r} (increment falls after n = {n_at})")
                    break
        self._convexity = out
        return out

    def _first_concave(self, j: int, chunk: int = 1 << 20, until: float | None = None):
        """(stratum, n) of the first place where variable j's unit increments fall (relative tolerance 1e-12), or
        None: every stratum's increments over [lower, upper − 1], evaluated in vectorised chunks of whole strata
        (bounded: Σ(upper − lower) evaluations in all); "stopped" when ``until`` passed before a chunk."""
        span = (self.upper - self.lower).astype(np.int64)
        i0 = 0
        while i0 < self.k:
            if until is not None and time.perf_counter() >= until:
                return "stopped"
            i1, size = i0, 0
            while i1 < self.k and (size == 0 or size + span[i1] <= chunk):
                size += int(span[i1])
                i1 += 1
            idx = np.repeat(np.arange(i0, i1), span[i0:i1])
            if idx.size:
                starts = np.repeat(np.cumsum(span[i0:i1]) - span[i0:i1], span[i0:i1])
                m = self.lower[idx] + (np.arange(idx.size) - starts)
                d = self._increments_along(m.astype(float), j, idx, span[i0:i1])
                same = idx[1:] == idx[:-1]
                fall = same & (np.diff(d) < -1e-12 * np.maximum(np.abs(d[:-1]), np.abs(d[1:])))
                if np.any(fall):
                    p = int(np.flatnonzero(fall)[0])
                    return int(idx[p]), int(m[p] + 1)
            i0 = i1
        return None

    def _increments_along(self, m, j, idx, spans):
        """:meth:`unit_increments` at the consecutive integers ``m`` of each stratum's run (one run per stratum of
        ``idx``, lengths ``spans``). Where the mechanism's ``variance_difference`` is the subtraction
        V(L(m+1)) − V(L(m)) (``Mechanism.subtracts``), L(m+1) of one increment is L(m) of the next: the variances
        are evaluated once per point, with the same expressions as :meth:`unit_increments`; elsewhere its own
        difference is used, as there."""
        mech = self.noise_mechanism(j)
        if self._unit_linear_form(j) is not None:
            return self.unit_increments(m, j, idx)
        share, d = float(self.shares[j]), self.sensitivity_of(j)
        # the points m and, per run, its last m + 1
        last = np.cumsum(spans[spans > 0]) - 1
        pts = np.insert(m, last + 1, m[last] + 1.0)
        pidx = np.insert(idx, last + 1, idx[last])
        L = _budgets_and_gap(self.log_c + self.log_N[pidx], pts)[0]
        keep = np.ones(pts.size, dtype=bool)
        keep[last + np.arange(1, last.size + 1)] = False        # positions of the inserted m + 1
        here = np.flatnonzero(keep)
        lcn = self.log_c + self.log_N[idx]
        m1 = m + 1.0
        dL = _budgets_and_gap(lcn, m, m1)[2]          # L0 − L1, as unit_increments
        sub = np.asarray(mech.subtracts(share * L[here], share * dL), dtype=bool)
        if not np.any(sub):
            return self.unit_increments(m, j, idx)
        Vp = np.asarray(mech.variance(share * L, d), dtype=float)
        V0 = Vp[here]
        dV = Vp[here + 1] - V0
        if not np.all(sub):
            o = ~sub
            dV[o] = mech.variance_difference(share * L[here][o], share * L[here + 1][o], share * dL[o], d)
        s2 = self.sigma2_matrix[idx, j]
        return (-s2 + m * dV - V0) / (m * m1)

    def exchange_values(self, n):
        """(d_i(n_i−1) for n_i > lo_i, d_j(n_j) for n_j < hi_j): removal savings and addition costs."""
        n = np.asarray(n, dtype=np.int64)
        can_remove = np.flatnonzero(n > self.lower)
        can_add = np.flatnonzero(n < self.upper)
        left = self.increments(n[can_remove] - 1, can_remove)
        right = self.increments(n[can_add], can_add)
        return left, right

    # ------------------------------------------------------------------ baselines
    def baseline(self, name: str = "neyman") -> np.ndarray:
        """Integer baseline design by largest-remainder rounding within the bounds.

        ``"neyman"`` (x ∝ α σ, the no-noise optimum of this objective), ``"neyman-mean"`` (x ∝ N σ, the
        population-mean Neyman design whatever the objective: Chen et al.'s naive design in Fig. 4),
        ``"proportional"`` (x ∝ N) or ``"equal"``.
        """
        key = V.choice("baseline", name, BASELINES)
        if key in ("neyman", "neyman-mean"):
            w = (self.alpha if key == "neyman" else self.N) * np.sqrt(self.sigma2)
            if not np.any(w > 0):
                raise ValueError("Neyman baseline is undefined when every sigma2 is 0")
        elif key == "proportional":
            w = self.N.astype(float)
        else:
            w = np.ones(self.k)
        return largest_remainder(w, self.total, self.lower, self.upper)

    def solution_summary(self, n) -> dict:
        """Objective, Var(μ̂) and the ratio to the Neyman and proportional baselines."""
        g = self.objective_value(n)
        out = {"objective": g, "variance": self.variance_of_mean(g)}
        for b in ("neyman", "proportional"):
            try:
                gb = self.objective_value(self.baseline(b))
                out[f"ratio_{b}"] = gb / g if g > 0 else float("nan")
            except ValueError:
                out[f"ratio_{b}"] = float("nan")
        return out

    # ------------------------------------------------------------------ solution builder for backends
    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: objective and Var(μ̂) from ``n`` (integer) or ``x`` (relaxation),
        plus the per-stratum, constraint and precision details."""
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.labels))
        if pt is not None:
            sol.objective = self.objective_value(pt)
            sol.variance = self.variance_of_mean(sol.objective)
            self.describe_point(sol, pt)
        return honest_status(sol, rel_gap)

    def describe_point(self, sol: Solution, pt) -> None:
        """Fill the report details of a point: per stratum what the report shows (so ``Solution.to_frame()``
        carries it), precision targets, binding constraints, cost, warnings."""
        for key, column in self.stratum_columns(pt).items():
            sol.details.setdefault(key, column)
        if self.precision_targets:
            sol.details.setdefault("precision", self.precision_report(pt))
        if self.constraints:
            sol.details.setdefault("constraints", self.constraint_report(pt))
        if self.cost is not None:
            sol.details.setdefault("cost", float(self.cost @ np.asarray(pt, dtype=float)))

    def stratum_columns(self, pt) -> dict:
        """Per stratum at the point ``pt``: domain, N, S² (per variable with several), sampling rate, nominal ε,
        noise scale, the sampling and noise parts of the objective and the stratum's share of it."""
        x = np.asarray(pt, dtype=float)
        b = self.variance_breakdown(x)
        nb = self.nominal_budgets(x)
        out: dict = {}
        if self.domains is not None:
            out["domain"] = list(self.domains)
        out["N"] = self.N.copy()
        if self.J == 1:
            out["sigma2"] = self.sigma2.copy()
        else:
            for j, v in enumerate(self.variables):
                out[f"sigma2_{v}"] = self.sigma2_matrix[:, j].copy()
        out["rate"] = nb["rate"]
        out["rho" if nb["guarantee"] == "zcdp" else "epsilon_nominal"] = nb["epsilon"]
        if "delta" in nb:
            out["delta_nominal"] = nb["delta"]
        scale = np.asarray(nb["scale"])
        if scale.ndim == 1:
            out["noise_scale"] = scale
        else:
            for j, v in enumerate(self.variables):
                out[f"noise_scale_{v}"] = scale[:, j]
        out["sampling_var"] = b["sampling"]
        out["noise_var"] = b["noise"]
        total = float(b["total"])
        out["share"] = (b["sampling"] + b["noise"]) / total if total > 0 else np.zeros(self.k)
        return out

    def constraint_report(self, n) -> list[dict]:
        """Each linear constraint row's left-hand side, right-hand side and whether it binds."""
        out = []
        x = np.asarray(n, dtype=float)
        for con in self.constraints:
            lhs = con.A @ x
            for r in range(con.A.shape[0]):
                tol = 1e-9 * max(1.0, abs(float(con.b[r])))
                out.append({"name": con.name if con.A.shape[0] == 1 else f"{con.name}[{r}]", "sense": con.sense,
                            "lhs": float(lhs[r]), "rhs": float(con.b[r]),
                            "binding": bool(abs(lhs[r] - con.b[r]) <= max(tol, 0.5 * float(np.min(
                                np.abs(con.A[r][con.A[r] != 0])) if np.any(con.A[r]) else 0.0)))})
        return out

    def rising_strata(self, n) -> np.ndarray:
        """Strata where one more sampled unit would raise the objective term (the noise, growing with the
        sampling rate at small ε, outweighs the sampling error saved)."""
        n = np.asarray(n, dtype=np.int64)
        room = np.flatnonzero(n < self.N)
        inc = self.increments(n[room].astype(float), room)
        return room[inc > 0]

    @classmethod
    def from_frame(cls, frame, strata: str, y, total, epsilon, *, pilot=None, **options) -> "StratifiedDesign":
        """A design from a sampling frame (pandas, polars, a mapping of columns or a CSV path).

        ``N_h`` are the frame's stratum counts, labelled by the values of ``strata`` (sorted). ``S_h²`` is the
        unbiased variance of ``y`` (one column, or a list of columns for several study variables) in each
        stratum, of the values clamped to ``value_range`` when one is given (the release clamps responses to
        it, so that is the variance of what is released), from the frame itself or from ``pilot`` (a frame with
        the same ``strata`` and ``y`` columns: a pilot sample or public data; every stratum needs at least 2
        pilot units). Other keyword options (mechanism, objective, value_range, lower, upper, min_per_stratum,
        shares, ...) go to the design.

        With an integer-data mechanism (``"dlap"``, ``"tulap"``) the y values must be integers (see
        :func:`dpopt.frames.check_integer_values`).
        """
        ys = F._y_columns(y)
        fr = F.Frame(frame, "frame")
        vr = options.get("value_range")
        # the release clamps every response to value_range, so S_h² is the variance of the clamped values: one
        # outlier in an unclamped pilot can multiply a stratum's S_h² and pull the allocation towards it
        # (one range for all y columns, or one per column: a list or a mapping column -> (lo, hi))
        ranges = None if vr is None else _frame_ranges(vr, list(options.get("variables") or ys))
        clamp = None if ranges is None else (ranges[:, 0], ranges[:, 1])
        if pilot is None:
            labels, N, S2, Y, _ = F.stratum_moments(fr, strata, ys, name="frame", min_units=2, clamp=clamp)
            design_values = Y
            src = "frame"
        else:
            labels, N, _, _, _ = F.stratum_moments(fr, strata, [], name="frame", min_units=1)
            pf = F.Frame(pilot, "pilot")
            plabels, pcounts, S2p, Y, _ = F.stratum_moments(pf, strata, ys, name="pilot", min_units=2, clamp=clamp)
            missing = [lab for lab in labels if lab not in plabels]
            if missing:
                raise ValueError(f"pilot strata column {strata!r} has no units in stratum "
                                 f"{missing[0]!r} (every stratum of the frame needs at least 2 pilot units)")
            extra = [lab for lab in plabels if lab not in labels]
            if extra:
                raise ValueError(f"pilot strata column {strata!r} has stratum {extra[0]!r}, which the frame does not have")
            S2 = S2p[[plabels.index(lab) for lab in labels]]
            design_values = Y
            src = "pilot"
        mech = get_mechanism(options.get("mechanism", "laplace"), options.get("delta"))   # raises as the design would
        if mech.integer_data:
            for j, c in enumerate(ys):
                F.check_integer_values(design_values[:, j], c, mech.name, where=src)
        if clamp is not None:
            for j, c in enumerate(ys):
                lo, hi = ranges[j]
                col = design_values[:, j]
                if np.any(col < lo) or np.any(col > hi):
                    warnings.warn(f"{src} column {c!r} has values outside value_range ({lo:g}, {hi:g}); the release "
                                  "clamps responses to that range, which biases the estimate (S_h^2 is that of the "
                                  "clamped values, as released)", stacklevel=2)
        if "labels" in options:
            raise TypeError("labels come from the strata column in from_frame; do not pass labels=")
        if isinstance(options.get("domains"), str):
            options["domains"] = F._stratum_column(fr, strata, labels, options["domains"], "domains")
        options.setdefault("variables", ys)
        sigma2 = S2[:, 0] if len(ys) == 1 else S2
        model = cls(N=N, sigma2=sigma2, total=total, epsilon=epsilon, labels=labels, **options)
        # what the frame columns were: the release reads the same columns (dpopt release / release_stratified)
        model.frame_columns = {"strata": str(strata), "y": ys if len(ys) > 1 else ys[0], "sigma2_from": src,
                               "sigma2_clamped_to": None if ranges is None else (
                                   tuple(float(v) for v in ranges[0]) if np.all(ranges == ranges[0])
                                   else [tuple(float(v) for v in r) for r in ranges])}
        return model


# =================================================================================== minimum cost
# Minimum-cost stratified design under DP (stratallo's ``optcost`` and Bethel–Chromy with DP noise).
#
# Choose integer sample sizes ``lower ≤ n ≤ upper`` to
#
#     minimise  Σ_i cost_i · n_i     subject to   every precision requirement   (and the linear constraints),
#
# where the requirements are the objective bound ``g(n) ≤ V0`` of a
# :class:`~dpopt.models.stratified.StratifiedDesign` (same strata, mechanism, weights, ε and finite-population
# choice) and any number of domain/variable precision targets (SE, CV or variance of a domain mean). There is
# no fixed total. Build it with ``StratifiedDesign.min_cost(cost, ...)`` or the model-file family
# ``"stratified_min_cost"``; the mathematics is in docs/constrained.md.
#
# ``exact`` (the default) solves it with a certificate; ``enumerate`` (tiny instances), ``pyomo``, ``cvxpy``
# and ``scipy`` solve the forms they can model.


class MinCostDesign(DesignDelegate, Model):
    """Minimise Σ cost_i n_i s.t. precision requirements on the DP variance.

    Parameters
    ----------
    design : the StratifiedDesign whose strata, mechanism, weights, bounds, linear constraints and precision
        targets are used (its ``total`` is ignored). They are copied when this model is made: add later
        ones here with :meth:`add_constraint` / :meth:`add_precision_target`
    cost : positive cost per sampled unit in each stratum
    variance_target : optional bound V0 > 0 on the objective g(n) (the scale of ``design.objective_value``)
    se, cv : optional bound on the standard error / coefficient of variation of the population-mean estimate
        (``cv`` needs ``mean``; with several variables, ``variable`` names the one meant)
    At least one requirement must be given (here or as a precision target of the design).
    """

    default_backend = "exact"

    def __init__(self, design: StratifiedDesign, cost, variance_target=None, *, se=None, cv=None, mean=None,
                 variable=None, name: str = ""):
        if not isinstance(design, StratifiedDesign):
            raise TypeError(f"design must be a StratifiedDesign, got {type(design).__name__}")
        self.design = design
        self.cost = V.positive_vector("cost", cost, length=design.k)
        self.variance_target = None if variance_target is None else V.positive("variance_target", variance_target)
        self.constraints: list[LinearConstraint] = list(design.constraints)
        self.precision_targets: list[PrecisionTarget] = list(design.precision_targets)
        if se is not None and cv is not None:
            raise ValueError("give se or cv for the population mean, not both")
        if se is not None or cv is not None:
            kind, value = ("se", se) if se is not None else ("cv", cv)
            value = V.positive(kind, value)
            self.precision_targets.append(design._precision_target(value, None, variable, kind, mean, "mean",
                                                                   f"population mean ({kind})"))
        if self.variance_target is None and not self.precision_targets:
            raise ValueError("a min-cost design needs a precision requirement: variance_target, se, cv or "
                             "a precision target")
        self.name = str(name or design.name)

    def add_precision_target(self, target, strata=None, variable=None, kind: str = "variance", mean=None,
                             estimate: str = "mean", name: str = "") -> "MinCostDesign":
        """Add a domain precision target (see :meth:`StratifiedDesign.add_precision_target`). Returns self."""
        self.precision_targets.append(self.design._precision_target(target, strata, variable, kind, mean,
                                                                    estimate, name))
        return self

    # ------------------------------------------------------------------ delegated data (and DesignDelegate)
    @property
    def mechanism(self):
        return self.design.mechanism

    @property
    def is_plain(self) -> bool:
        return False

    def extended_features(self) -> list[str]:
        """What this model has beyond one variable, one objective-variance bound and linear constraints."""
        out = [f for f in self.design.extended_features() if "precision" not in f]
        if self.precision_targets:
            out.append(f"{len(self.precision_targets)} precision target(s)")
        if self.variance_target is None:
            out.append("no objective-variance bound (precision targets only)")
        return out

    @property
    def objective_kind(self) -> str:
        return self.design.objective_kind

    def __repr__(self) -> str:
        vt = "None" if self.variance_target is None else f"{self.variance_target:.6g}"
        return (f"MinCostDesign(k={self.k}, variance_target={vt}, targets={len(self.precision_targets)}, "
                f"epsilon={self.design.epsilon:g}, mechanism={self.design.mechanism.name!r}, "
                f"objective={self.design.objective_kind!r}"
                f"{', constraints=' + str(len(self.constraints)) if self.constraints else ''})")

    def add_constraint(self, A, b, sense: str = "<=", name: str = "") -> "MinCostDesign":
        """Add linear constraints ``A n (sense) b`` (validated as in StratifiedDesign). Returns self."""
        self.constraints.append(LinearConstraint.make(self.k, A, b, sense, name or f"c{len(self.constraints)}"))
        return self

    # ------------------------------------------------------------------ evaluation
    def objective_value(self, n) -> float:
        """Σ cost_i n_i."""
        x = V.vector("n", n, length=self.k)
        return float(self.cost @ x)

    def variance_value(self, n) -> float:
        """g(n), the DP variance objective of the design (compared with ``variance_target``)."""
        return self.design.objective_value(n)

    @property
    def variance_budget(self) -> float:
        """Bound on Σ f_i(n_i) (``variance_target`` plus the fpc constant when ``fpc``), or None."""
        return None if self.variance_target is None else self.variance_target + self.design._fpc_const

    def is_feasible(self, n, tol: float | None = None) -> bool:
        """Does ``n`` meet the bounds, g(n) ≤ V0, the precision targets and the linear constraints? The one
        feasibility test of every stratified model (see :meth:`StratifiedDesign.is_feasible`)."""
        return _is_feasible(self, self.design, n, tol)

    def program_rows(self) -> tuple[Row, list[Row], float]:
        """``(objective, rows, const)``: the cost Σ cost_i n_i, the bound g(n) ≤ V0 (when given), the linear
        constraints and the precision targets as rows over the design's unit terms (see
        :meth:`StratifiedDesign.program_rows`)."""
        d = self.design
        rows = []
        if self.variance_target is not None:
            rows.append(Row("variance g(n)", "variance", d.alpha2[:, None] * d.variable_weights[None, :], None,
                            self.variance_budget, "<="))
        return (Row("cost", "objective", None, self.cost.astype(float)), rows
                + _requirement_rows(d, self.constraints, self.precision_targets), 0.0)

    def make_solution(self, n=None, x=None, *, status=Status.OPTIMAL, certificate=None, rel_gap=None, backend="",
                      solver="", message="", details=None) -> Solution:
        """See :meth:`Model.make_solution`: the cost, g(n), Var(μ̂) and each precision target at the point."""
        pt = n if n is not None else x
        sol = Solution(n=None if n is None else np.asarray(n, dtype=np.int64),
                       x=None if x is None else np.asarray(x, dtype=float), model=type(self).__name__,
                       status=status, certificate=certificate, backend=backend, solver=solver, message=message,
                       details=dict(details or {}))
        sol.details.setdefault("labels", list(self.design.labels))
        if pt is not None:
            sol.objective = self.objective_value(pt)
            g = self.variance_value(pt)
            sol.variance = self.design.variance_of_mean(g)
            sol.details.setdefault("variance_objective", g)
            sol.details.setdefault("variance_target", self.variance_target)
            if self.precision_targets:
                sol.details.setdefault("precision", [
                    {"name": t.name, "variable": self.design.variables[t.variable], "kind": t.kind,
                     "target": t.target, "variance": self.design.precision_value(t, pt), "bound": t.bound}
                    for t in self.precision_targets])
        return honest_status(sol, rel_gap)


def target_met(t: "PrecisionTarget", v: float) -> bool:
    """The feasibility test (FEASIBILITY_TOL, docs/constrained.md) on one precision target whose domain
    variance is ``v``: the row Σ w·t = v + fpc_const against bound + fpc_const, relative to their magnitude."""
    return row_holds(v + t.fpc_const, t.bound + t.fpc_const, tol=FEASIBILITY_TOL)


def _requirement_rows(design: "StratifiedDesign", constraints, precision_targets) -> list[Row]:
    """The linear constraints (``>=`` negated to ``<=``) and precision targets of a stratified or min-cost model
    as rows over ``design``'s unit terms."""
    rows: list[Row] = []
    for con in constraints:
        sign = -1.0 if con.sense == ">=" else 1.0
        sense = "==" if con.sense == "==" else "<="
        for r in range(con.A.shape[0]):
            rows.append(Row(con.name if con.A.shape[0] == 1 else f"{con.name}[{r}]", "linear", None,
                            sign * con.A[r].astype(float), sign * float(con.b[r]), sense, con))
    for t in precision_targets:
        W = np.zeros((design.k, design.J))
        W[:, t.variable] = t.weights
        rows.append(Row(t.name, "precision", W, None, t.bound + t.fpc_const, "<=", t))
    return rows


def _is_feasible(model, design: "StratifiedDesign", n, tol: float | None) -> bool:
    """The one feasibility test (:func:`dpopt.feasibility.feasible`) on ``model``'s rows at ``n``, the unit
    terms computed for every variable some row (the objective included) weighs, as the compiled program does."""
    n = np.asarray(n)
    if n.shape != (design.k,):
        return False
    objective, rows, _ = model.program_rows()
    cols = used_columns([objective, *rows], design.J)
    return feasible(n, design.lower, design.upper, rows, lambda x: design.unit_matrix(x, cols),
                    FEASIBILITY_TOL if tol is None else max(float(tol), FEASIBILITY_TOL))


_EXP_SAFE = 600.0     # log y below which exp(log y) and 1 + y stay finite (unit_derivatives)


def _budgets_and_gap(lcn, m, m1=None):
    """(L(m), L(m1), L(m) − L(m1)) with L(m) = log1p(cN/m) the nominal budget at sample m and ``lcn`` = log(cN)
    (the last two None without ``m1``): the gap as log1p(cN/(m(m1 + cN))), free of cancellation. One home for
    unit_increments and the convexity check. With cN formed once where it cannot overflow (measured: a third
    of the time of the log-space forms, which serve elsewhere)."""
    if lcn.size and float(np.max(lcn)) < _EXP_SAFE:
        cN = np.exp(lcn)
        L0 = np.log1p(cN / m)
        if m1 is None:
            return L0, None, None
        return L0, np.log1p(cN / m1), np.log1p(cN / (m * (m1 + cN)))
    L0 = np.logaddexp(0.0, lcn - np.log(m))
    if m1 is None:
        return L0, None, None
    return (L0, np.logaddexp(0.0, lcn - np.log(m1)),
            np.logaddexp(0.0, lcn - np.log(m) - np.logaddexp(np.log(m1), lcn)))


def _psi(ly, L, s, u):
    """psi(y) = x³/(2Δ²)·v''(x) for the Laplace term; series for small y, else the closed form."""
    out = (2 * L ** 2 - 6 * s * L - 2 * s * u * L + 6 * s ** 2) / L ** 4
    small = ly < np.log(_PSI_SERIES_MAX)
    if np.any(small):
        out = np.where(small, 0.0, out)
        out[small] = np.polynomial.polynomial.polyval(np.exp(ly[small]), _PSI_COEF)
    return out


def largest_remainder(weights, total: int, lower, upper) -> np.ndarray:
    """Integer allocation ∝ ``weights`` summing to ``total`` within [lower, upper].

    The real allocation is :func:`~dpopt.numerics.water_fill`'s ``clip(t·w, lower, upper)`` with Σ = total
    (zero weights filled last); its floors are topped up one unit each in order of largest remainder among
    strata with room.
    """
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    total = int(total)
    if not np.any(np.asarray(weights, dtype=float) > 0):
        raise ValueError("weights must have a positive entry")
    x = water_fill(weights, lo, hi, total)
    n = np.floor(x + 1e-9).astype(np.int64)
    n = np.clip(n, lo.astype(np.int64), hi.astype(np.int64))
    short = total - int(n.sum())
    if short > 0:
        rem = np.where(n < hi, x - n, -np.inf)
        order = np.argsort(-rem, kind="stable")[:short]
        n[order] += 1
    elif short < 0:
        rem = np.where(n > lo, x - n, np.inf)
        order = np.argsort(rem, kind="stable")[:-short]
        n[order] -= 1
    return n
