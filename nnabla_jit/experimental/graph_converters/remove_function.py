"""Remove functions of given types from a graph."""
from .graph_converter import FunctionModifier

__all__ = ["RemoveFunctionModifier"]


class RemoveFunctionModifier(FunctionModifier):
    """Leave out every function whose type is in ``rm_funcs`` (e.g. ``['MulScalar']``): what
    read its output reads its first input instead."""

    def __init__(self, rm_funcs=[]):
        super().__init__()
        self._rm_funcs = list(rm_funcs)

    def modify(self, f, inputs):
        if f.info.type_name not in self._rm_funcs:
            return None
        if len(f.outputs) != 1:
            raise ValueError("RemoveFunctionModifier: cannot remove {}, it has {} outputs".format(
                f.info.type_name, len(f.outputs)))
        return inputs[0]
