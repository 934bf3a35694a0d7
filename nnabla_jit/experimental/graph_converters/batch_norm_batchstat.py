"""Switch batch normalizations to their running statistics (``batch_stat=False``)."""
from .graph_converter import FunctionModifier

__all__ = ["BatchNormBatchStatModifier"]

_BATCH_NORMS = ("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization")


class BatchNormBatchStatModifier(FunctionModifier):
    """Rebuild every BatchNormalization, FusedBatchNormalization and SyncBatchNormalization
    with ``batch_stat=False``: normalize with the running mean and variance, as in inference."""

    def modify(self, f, inputs):
        if f.info.type_name not in _BATCH_NORMS:
            return None
        return self._modify_as_same(f, inputs, batch_stat=False)
