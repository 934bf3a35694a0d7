"""convolution ops (being written)."""
