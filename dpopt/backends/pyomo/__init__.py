"""Pyomo translations, solved by SCIP (PySCIPOpt) or HiGHS (highspy); shared plumbing in :mod:`._solver`."""
