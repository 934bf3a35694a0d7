"""detection ops (being written)."""
