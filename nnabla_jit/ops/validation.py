"""validation ops (being written)."""
