"""cvxpy translations (convex relaxations and the secant MILP)."""
