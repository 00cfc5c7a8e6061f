"""Pyomo translations, solved by SCIP (PySCIPOpt) or HiGHS (highspy); shared plumbing in :mod:`._solver`.

Public for analysts: :func:`build_pyomo_model` (every row of the model, ``m.extra`` for their own),
:func:`solve_pyomo_model` (a :class:`~dpopt.result.Solution`), and :func:`term_expression` /
:func:`row_expression` (the Pyomo expression of any unit term or row of the compiled program, so that a user
constraint never re-derives a formula)."""

from .build import PyomoUnsupported, build_pyomo_model, row_expression, term_expression


def __getattr__(name):
    # lazily: importing .stratified registers the backend, which must happen in the package's own order
    if name == "solve_pyomo_model":
        from .stratified import solve_pyomo_model
        return solve_pyomo_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["build_pyomo_model", "solve_pyomo_model", "term_expression", "row_expression", "PyomoUnsupported"]
