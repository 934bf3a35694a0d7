"""stochastic ops (being written)."""
