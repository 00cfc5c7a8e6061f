"""The compiled program: the one contract between models and backends (docs/architecture.md).

:mod:`~dpopt.formulations.separable` compiles every stratified model (plain, constrained, precision targets,
several variables, min-cost) into one separable convex program over integer sample sizes: an objective row
and constraint rows, each a weighted sum of the per-variable unit terms t_ij(n_i) plus a linear part, with
one feasibility test (:meth:`SeparableProgram.feasible`, :data:`FEASIBILITY_TOL`) and one safe lower-bound
arithmetic (:func:`safe_lower`). :func:`secant_milp` writes its integer restriction as an exact MILP whose
:meth:`SecantMILP.to_coo` / :meth:`SecantMILP.to_scipy` every writer reads, and :func:`solution_from` turns a
solver's (point, bound, status) into a :class:`~dpopt.result.Solution` with its certificate.

Public API for backend authors (no private name needed)::

    from dpopt.formulations import program_of, ranges, secant_milp, solution_from
    prog = program_of(model); lo, hi = ranges(prog)
    milp = secant_milp(prog, lo, hi)                  # milp.to_scipy() -> scipy.optimize.milp(**...)
    sol = solution_from(model, n, bound, "optimal", program=prog, solver="mine")
"""

from .separable import (EVAL_RTOL, FEASIBILITY_TOL, Row, SecantMILP, SeparableProgram, program_of, ranges,
                        safe_lower, secant_milp)
from .solution import SOLVER_WORDS, solution_from

__all__ = ["Row", "SeparableProgram", "SecantMILP", "program_of", "ranges", "secant_milp", "solution_from",
           "safe_lower", "FEASIBILITY_TOL", "EVAL_RTOL", "SOLVER_WORDS"]
