"""Inference mode: running statistics in batch normalizations, training-only functions out."""
from .batch_norm_batchstat import BatchNormBatchStatModifier
from .remove_function import RemoveFunctionModifier

__all__ = ["TestModeModifier"]


class TestModeModifier:
    """``[BatchNormBatchStatModifier(), RemoveFunctionModifier(rm_funcs)]``: batch
    normalizations use their running statistics and the ``rm_funcs`` types (e.g. 'Dropout')
    are removed. Pass the list to ``GraphConverter``."""

    __test__ = False   # not a pytest test class, despite the name

    def __new__(cls, rm_funcs=[]):
        return [BatchNormBatchStatModifier(), RemoveFunctionModifier(rm_funcs=rm_funcs)]
