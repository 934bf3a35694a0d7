"""augmentation ops (being written)."""
