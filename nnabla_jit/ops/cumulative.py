"""cumulative ops (being written)."""
