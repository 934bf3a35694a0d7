"""pooling ops (being written)."""
