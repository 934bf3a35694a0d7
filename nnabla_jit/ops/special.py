"""special ops (being written)."""
