"""Backend options, declared once (issue 19 item 4): name, type, range, default and description.

Every option a backend handler takes is declared here: the common vocabulary (:data:`COMMON`: ``solver``,
``time_limit``, ``rel_gap``, ``verbose``, ``solver_options``) once for all backends, and each backend's own
options in :data:`OWN`. :func:`validate` checks a call's options against these declarations; the registry
runs it before any handler (:func:`dpopt.registry.dispatch`), so a bad value is refused in one place with
:class:`~dpopt._validate.InvalidOption` naming the option and its range. The README's options table is
generated from the declarations (:func:`defaults_table`, checked by ``tests/test_docs.py``).

Defaults
    :data:`DEFAULT_TIME_LIMIT` (300 s) is the one time limit of a solve when the caller gives ``None``,
    wherever an external solver (SCIP, HiGHS, IPOPT, Clarabel) or a bounded search runs; dpopt's closed-form
    and one-pass routes take no limit and finish in time bounded by their size.
    :data:`DEFAULT_REL_GAP` (1e-9) is the one relative gap at which ``optimal`` is claimed. A family whose
    certificate cannot reach it (its bound comes from a solver accurate to about 1e-7), or that needs a
    tighter one for its point (not only its objective) to be accurate, declares its own in
    :data:`FAMILY_REL_GAP` with the reason, shown in the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import _validate as V
from .result import PROVEN_GAP

#: seconds given to a solve when the caller passes ``time_limit=None`` (the one default of every backend)
DEFAULT_TIME_LIMIT = 300.0
#: seconds the explanation of an infeasible design (dpopt/backends/exact/constrained/diagnose.py) gives each of
#: its continuous relaxations, never more than what is left of the solve's own time limit
DIAGNOSIS_TIME_LIMIT = 5.0
#: the relative gap at which ``optimal`` is claimed when the caller gives none (the one default)
DEFAULT_REL_GAP = 1e-9

#: (backend, model class name) → the default ``rel_gap`` of a family that differs from :data:`DEFAULT_REL_GAP`,
#: with the reason (shown in the options table)
FAMILY_REL_GAP: dict[tuple[str, str], tuple[float, str]] = {
    ("exact", "ImportanceSampling"): (1e-6, "the bisection's bound is certified to about 1e-7"),
    ("exact", "MinMaxDesign"): (1e-4, "each step of the level search is a constrained solve, and levels within about "
                                      "1e-5 of the integer optimum are slow to settle; pass rel_gap down to 1e-9 for "
                                      "a tighter proof"),
    ("exact", "RobustDesign"): (1e-4, "the min-max regret design's level search (as MinMaxDesign); its min-cost "
                                      "variant is certified at 1e-4 too"),
    ("exact", "ControlledPrecisionDesign"): (1e-6, "the min-max level search (as MinMaxDesign); the domain route "
                                                   "decides its levels exactly in milliseconds, so 1e-6 is cheap; "
                                                   "the fpc limits a ratio's resolution (docs/controlled_precision.md)"),
    ("cvxpy", "ImportanceSampling"): (1e-6, "the conic solvers are accurate to about 1e-7"),
    ("scipy", "HierarchyBudget"): (1e-6, "SLSQP's iterate is accurate to about 1e-7"),
    ("pyomo", "HierarchyBudget"): (1e-6, "SCIP's bound on the exponential terms is accurate to about 1e-7"),
    ("cvxpy", "HierarchyBudget"): (1e-12, "tighter: the objective is flat near the optimum, so a gap of 1e-9 "
                                          "leaves the budgets 1e-5 off the exact ones; the cuts reach 1e-12"),
}


def default_rel_gap(backend: str, model_name: str) -> float:
    """The ``rel_gap`` used when the caller gives none, for ``backend`` on a model of class ``model_name``."""
    floor = FAMILY_REL_GAP.get((backend, model_name))
    return DEFAULT_REL_GAP if floor is None else floor[0]


def time_limit_or_default(value) -> float:
    """A checked ``time_limit``, :data:`DEFAULT_TIME_LIMIT` for None."""
    v = V.time_limit(value)
    return DEFAULT_TIME_LIMIT if v is None else v


@dataclass(frozen=True)
class Option:
    """One option: ``check(value) -> value`` raises :class:`~dpopt._validate.InvalidOption` naming it
    (None: the handler checks it, e.g. a choice that depends on the model)."""

    name: str
    type: str
    range: str
    default: Any
    description: str
    check: Callable[[Any], Any] | None = None

    def validate(self, value):
        if self.check is None:
            return value
        return self.check(value)


def _count(name, minimum=1, maximum=None):
    return lambda v: V.count(name, v, minimum=minimum, maximum=maximum)


def _tol(name, maximum=1e-2):
    return lambda v: V.tolerance(name, v, maximum=maximum)


def _flag(name):
    return lambda v: V.option(V.flag, name, v)


#: the common options: one declaration, one validator, for every backend that takes them
COMMON: dict[str, Option] = {o.name: o for o in (
    Option("solver", "str", "the backend's solver names", "backend's first",
           "dpopt's name of the underlying solver (case-insensitive allow-list; never a path)"),
    Option("time_limit", "float or None", f"(0, {V.MAX_TIME_LIMIT:g}] s", DEFAULT_TIME_LIMIT,
           "seconds for the solve; None gives the default", V.time_limit),
    Option("rel_gap", "float", "[0, 1)", DEFAULT_REL_GAP,
           "relative gap within which `optimal` is claimed (the answer's own certificate decides)", V.rel_gap),
    Option("verbose", "bool", "true / false", False,
           "the solver's log and dpopt's step log on stderr", V.verbose),
    Option("solver_options", "dict or None", "the solver's own parameters", None,
           "passed straight to the solver after dpopt's settings (checked by the solver first)",
           lambda v: None if v is None else V.solver_options(v)),
)}

#: each backend's own options (name → declaration); ranges are the handlers' (they check them again when
#: called directly, outside the registry)
OWN: dict[str, dict[str, Option]] = {
    "exact": {o.name: o for o in (
        Option("max_iter", "int", "≥ 1", "family's", "iterations of the bound refinement", _count("max_iter")),
        Option("tol", "float", "(0, 1e-2]", "family's", "numerical tolerance of the certificate", None),
        Option("rtol", "float", "(0, 1e-2]", 1e-10, "relative tolerance of the exchange certificate", None),
        Option("method", "str", "family's choices", "auto", "which exact route", None),
        Option("scan_limit", "int", "≥ 1", 2_000_000, "sizes scanned before the branch-and-bound", None),
        Option("branching", "int", "≥ 2", "family's", "children per node of the interval search", None),
        Option("leaf", "int", "≥ 1", 64, "interval length scanned at a leaf", None),
        Option("max_rounds", "int", "≥ 1", 400, "rounds of the relaxation's interval search", None),
        Option("window", "int", "≥ 1", 1, "window of the block search", None),
        Option("max_milp_columns", "int", "≥ 1", 400_000, "columns of the inner HiGHS MILP", None),
        Option("max_states", "int", "≥ 1", 2_000_000, "partial designs a core enumeration keeps", None),
    )},
    "algorithm1": {o.name: o for o in (
        Option("max_candidates", "int", "≥ 1", 50_000_000, "candidate designs examined", None),
        Option("lambda_rule", "str", "'corrected', 'paper'", "corrected", "Algorithm 1's λ rule", None),
    )},
    "enumerate": {o.name: o for o in (
        Option("max_candidates", "int", "≥ 1", 10_000_000, "integer points enumerated at most", None),
    )},
    "pyomo": {o.name: o for o in (
        Option("formulation", "str or None", "family's choices", None, "the Pyomo formulation", None),
        Option("max_milp_vars", "int", "≥ 1", 2_000_000, "binary columns of the MILP formulation", None),
        Option("max_terms", "int", "≥ 1", 20_000, "exponential terms of the hierarchy model", None),
    )},
    "cvxpy": {o.name: o for o in (
        Option("method", "str", "'auto', 'dcp', 'cuts', 'dnlp'", "auto", "which cvxpy route", None),
        Option("max_iter", "int", "≥ 1", "family's", "cutting-plane rounds", _count("max_iter")),
        Option("initial_cuts", "int", "≥ 2", 9, "tangent cuts per level to start from", None),
    )},
    "scipy": {o.name: o for o in (
        Option("method", "str", "family's choices", "SLSQP", "scipy.optimize method", None),
        Option("max_iter", "int", "≥ 1", "family's", "iterations", _count("max_iter")),
        Option("tol", "float", "(0, 1e-2]", 1e-13, "the optimizer's tolerance", None),
        Option("ftol", "float", "(0, 1e-6]", 1e-15, "SLSQP's tolerance", None),
        Option("segments", "int", "≥ 1", 16, "segments of the bounded scalar search", None),
        Option("xatol", "float", "> 0", 1e-10, "absolute tolerance of the scalar search", None),
    )},
    "monte-carlo": {o.name: o for o in (
        Option("draws", "int or None", "≥ 1", None, "Monte Carlo draws per rate", None),
        Option("seed", "int or None", "any", None, "random seed", None),
        Option("progress", "bool", "true / false", False, "a progress line on stderr", _flag("progress")),
    )},
}


def declaration(backend: str, name: str) -> Option | None:
    """The declaration of option ``name`` for ``backend`` (its own first, then the common one)."""
    return OWN.get(backend, {}).get(name) or COMMON.get(name)


def validate(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options with every declared one checked (raises InvalidOption naming the first bad one).
    Undeclared names are left for the handler's signature to refuse."""
    out = dict(options)
    for key, value in options.items():
        decl = declaration(backend, key)
        if decl is not None:
            out[key] = decl.validate(value)
    return out


def _fmt(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def defaults_table() -> str:
    """The README's table of the common options: type, range, default, meaning; then the families whose
    ``rel_gap`` default differs from :data:`DEFAULT_REL_GAP` and why."""
    lines = ["| option | type | range | default | meaning |", "|---|---|---|---|---|"]
    for o in COMMON.values():
        default = o.default
        if o.name == "time_limit":
            default = f"{DEFAULT_TIME_LIMIT:g} s (None)"
        lines.append(f"| `{o.name}` | {o.type} | {o.range} | {_fmt(default)} | {o.description} |")
    lines.append("")
    lines.append(f"`rel_gap` defaults to {DEFAULT_REL_GAP:g} except on these families (the reason in parentheses):")
    lines.append("")
    for (backend, model), (floor, why) in sorted(FAMILY_REL_GAP.items()):
        lines.append(f"* `{backend}` on {model}: {floor:g} ({why})")
    lines.append(f"* `pyomo` on the integer families: None, which asks the solver for gap 0 and accepts its own "
                 f"proof or a gap within {PROVEN_GAP:g} (`dpopt.result.PROVEN_GAP`) of its bound: in effect the "
                 f"default")
    return "\n".join(lines)
