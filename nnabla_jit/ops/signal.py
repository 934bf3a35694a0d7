"""signal ops (being written)."""
