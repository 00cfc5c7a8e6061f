"""cvxpy translations (convex relaxations and the secant MILP).

Public for analysts: :func:`build_cvxpy_problem` (every row of the model, or a refusal with the reason) and
:func:`term_expression` (the DCP expression of a unit term of the compiled program, so that a user constraint
never re-derives a formula)."""

from .build import CvxpyUnsupported, build_cvxpy_problem, term_expression

__all__ = ["build_cvxpy_problem", "term_expression", "CvxpyUnsupported"]
