"""sequence ops (being written)."""
