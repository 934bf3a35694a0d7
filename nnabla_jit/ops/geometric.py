"""geometric ops (being written)."""
