"""dpopt's own certified algorithms (no external solver)."""
