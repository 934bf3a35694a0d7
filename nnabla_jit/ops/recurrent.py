"""recurrent ops (being written)."""
