"""Which solver options a model file may set: one allow-list per solver (README, "Model files").

A solver parameter can name a file the solver then writes or reads (HiGHS ``log_file``, ``solution_file``
with ``write_solution_to_file``, ``write_model_file``, ``read_solution_file``; SCIP ``visual/vbcfilename``,
``concurrent/paramsetprefix``, ``nlpi/ipopt/hsllib``; IPOPT ``output_file``; SCS ``write_data_filename``).
A model file is data that may come from someone else, so its ``[solve] solver_options`` may only set the
harmless parameters listed here (tolerances, limits, threads, seeds, presolve, algorithm choices), each with
the kind of value it takes; every other name is refused by name. Options passed from Python
(``model.solve(..., solver_options=...)``) are the caller's own and are not filtered (docs/api.md).

No list holds a solver's own time limit: the one time limit of a solve is ``[solve] time_limit`` (dpopt's
capped, always finite limit; docs/api.md).

The lists hold no string-valued parameter except a few with a fixed set of choices, so no value from a
model file can ever be a file name.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

REAL, INT, BOOL = "number", "integer", "true/false"
_ON = ("off", "choose", "on")

#: solver (dpopt's lower-case name) -> option name -> REAL, INT, BOOL or a tuple of the allowed strings
MODEL_FILE_SOLVER_OPTIONS: dict[str, dict[str, Any]] = {
    "highs": {
        "mip_rel_gap": REAL, "mip_abs_gap": REAL,
        "primal_feasibility_tolerance": REAL, "dual_feasibility_tolerance": REAL, "optimality_tolerance": REAL,
        "mip_feasibility_tolerance": REAL, "ipm_optimality_tolerance": REAL, "kkt_tolerance": REAL,
        "objective_bound": REAL, "objective_target": REAL, "mip_heuristic_effort": REAL,
        "simplex_iteration_limit": INT, "ipm_iteration_limit": INT, "mip_max_nodes": INT,
        "mip_max_stall_nodes": INT, "mip_max_leaves": INT, "mip_max_improving_sols": INT,
        "threads": INT, "random_seed": INT, "simplex_strategy": INT, "mip_detect_symmetry": BOOL,
        "presolve": _ON, "parallel": _ON, "run_crossover": _ON,
        "solver": ("choose", "simplex", "ipm", "pdlp"),
    },
    "scip": {
        "limits/gap": REAL, "limits/absgap": REAL, "limits/memory": REAL,
        "limits/nodes": INT, "limits/totalnodes": INT, "limits/stallnodes": INT, "limits/solutions": INT,
        "limits/bestsol": INT, "limits/restarts": INT,
        "numerics/feastol": REAL, "numerics/epsilon": REAL, "numerics/sumepsilon": REAL,
        "numerics/dualfeastol": REAL, "numerics/lpfeastolfactor": REAL,
        "parallel/maxnthreads": INT, "parallel/minnthreads": INT, "lp/threads": INT,
        "randomization/randomseedshift": INT, "randomization/permutationseed": INT, "randomization/lpseed": INT,
        "presolving/maxrounds": INT, "presolving/maxrestarts": INT, "separating/maxrounds": INT,
        "separating/maxroundsroot": INT, "timing/clocktype": INT,
    },
    "ipopt": {
        "tol": REAL, "acceptable_tol": REAL, "constr_viol_tol": REAL, "dual_inf_tol": REAL,
        "compl_inf_tol": REAL, "bound_push": REAL,
        "mu_init": REAL, "max_iter": INT, "mu_strategy": ("monotone", "adaptive"),
    },
    # the cvxpy exponential-cone solvers of the importance family
    "clarabel": {"max_iter": INT, "tol_gap_abs": REAL, "tol_gap_rel": REAL, "tol_feas": REAL,
                 "tol_ktratio": REAL, "equilibrate_enable": BOOL},
    "scs": {"max_iters": INT, "eps_abs": REAL, "eps_rel": REAL, "eps_infeas": REAL,
            "acceleration_lookback": INT},
    "ecos": {"maxit": INT, "abstol": REAL, "reltol": REAL, "feastol": REAL},
}


def _fits(kind, value) -> bool:
    if kind == BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == INT:
        return isinstance(value, numbers.Integral)
    if kind == REAL:
        return isinstance(value, numbers.Real) and math.isfinite(float(value))
    return isinstance(value, str) and value in kind


def _kind_text(kind) -> str:
    return kind if isinstance(kind, str) else " | ".join(map(repr, kind))


def solver_of(solve: dict) -> str | None:
    """The solver a ``[solve]`` table names (``solver``, or ``backend = "pyomo:highs"``) when it has an
    allow-list here, else None."""
    name = solve.get("solver")
    backend = solve.get("backend")
    if name is None and isinstance(backend, str) and ":" in backend:
        name = backend.split(":", 1)[1]
    key = name.strip().lower() if isinstance(name, str) else None
    return key if key in MODEL_FILE_SOLVER_OPTIONS else None


def check_model_file_solver_options(value, solver: str | None = None,
                                    where: str = "[solve] solver_options") -> dict:
    """``value`` checked against the allow-list of ``solver`` (or, when the file names no solver, of any
    solver): a dict of allowed names with values of the listed kind. ValueError/TypeError naming the
    option otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{where} must be a table of solver option names to values, got {type(value).__name__}")
    lists = ({solver: MODEL_FILE_SOLVER_OPTIONS[solver]} if solver in MODEL_FILE_SOLVER_OPTIONS
             else MODEL_FILE_SOLVER_OPTIONS)
    which = f"solver {solver!r}" if solver in MODEL_FILE_SOLVER_OPTIONS else "any solver"
    for name, val in value.items():
        kinds = [opts[name] for opts in lists.values() if isinstance(name, str) and name in opts]
        shown = name if len(str(name)) <= 80 else f"{str(name)[:77]}..."
        if not kinds:
            allowed = (", ".join(sorted(MODEL_FILE_SOLVER_OPTIONS[solver])) if solver in MODEL_FILE_SOLVER_OPTIONS
                       else "see the README, section 'Model files'")
            raise ValueError(f"{where}: option {shown!r} cannot be set from a model file for {which} (a model "
                             f"file sets only harmless solver options: others can write or read files); "
                             f"allowed: {allowed}")
        if not any(_fits(k, val) for k in kinds):
            got = f", got {val!r}" if len(repr(val)) <= 80 else ""
            raise ValueError(f"{where}: option {shown!r} must be "
                             f"{' or '.join(_kind_text(k) for k in kinds)}{got}")
    return dict(value)


def markdown_table() -> str:
    """The README's table of the options a model file may set (kept equal by tests/test_fuzz_model_options)."""
    rows = ["| solver | options a model file may set |", "|---|---|"]
    for solver, opts in MODEL_FILE_SOLVER_OPTIONS.items():
        cells = ", ".join(f"`{n}`" + ("" if isinstance(k, str) else f" ({'/'.join(k)})")
                          for n, k in opts.items())
        rows.append(f"| {solver} | {cells} |")
    return "\n".join(rows)
