"""Monte Carlo simulations of released statistics (one module per model family)."""
