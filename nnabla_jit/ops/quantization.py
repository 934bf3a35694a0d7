"""quantization ops (being written)."""
