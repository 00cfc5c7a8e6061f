"""Solver-independent reformulations that several backends translate (docs/constrained.md).

:mod:`~dpopt.formulations.separable` writes every stratified model (plain, constrained, precision targets,
several variables, min-cost) as one separable convex program over integer sample sizes: an objective row
and constraint rows, each a weighted sum of the per-variable unit terms t_ij(n_i) plus a linear part.
The exact backend, the HiGHS secant MILP and the Pyomo/cvxpy routes all read that one object.
"""

from .separable import Row, SeparableProgram, program_of

__all__ = ["Row", "SeparableProgram", "program_of"]
