"""scipy.optimize routes for continuous problems."""
