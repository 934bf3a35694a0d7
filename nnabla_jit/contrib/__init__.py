"""nnabla's ``nnabla.contrib`` (deprecated helpers kept for old programs)."""
