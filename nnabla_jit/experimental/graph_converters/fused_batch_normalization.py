"""Fuse ``BatchNormalization -> Add2 -> ReLU`` blocks into FusedBatchNormalization."""
from .graph_converter import FunctionModifier

__all__ = ["FusedBatchNormalizationModifier"]


class FusedBatchNormalizationModifier(FunctionModifier):
    """Replace ``relu(batch_normalization(x) + z)`` (each intermediate read by the next step
    only) by one FusedBatchNormalization on the same parameters and running statistics."""

    def __init__(self):
        super().__init__()
        self._blocks = {}   # the block's ReLU -> [its BatchNormalization, new x, new z]

    def _only_consumer(self, v, type_name):
        after = self.consumers(v)
        if len(after) == 1 and after[0].info.type_name == type_name:
            return after[0]
        return None

    def modify(self, f, inputs):
        kind = f.info.type_name
        if kind == "BatchNormalization" and len(f.outputs) == 1 and len(inputs) == 5:
            add = self._only_consumer(f.outputs[0], "Add2")
            relu = add and self._only_consumer(add.outputs[0], "ReLU")
            # Of two normalizations meeting at one Add2, the first fuses; the other is z.
            if relu is not None and add not in self._blocks and add.inputs[0].shape == add.inputs[1].shape:
                self._blocks[add] = self._blocks[relu] = [f, inputs, None]
                return inputs[0]   # a stand-in, read by the Add2 only
            return None
        block = self._blocks.get(f)
        if block is None:
            return None
        bn, bn_inputs, _ = block
        if kind == "Add2":
            # The operand that is not the normalization's output is the residual z.
            block[2] = inputs[1] if f.inputs[0] is bn.outputs[0] else inputs[0]
            return bn_inputs[0]
        args = bn.info.args
        return self._call_function(
            "FusedBatchNormalization", list(bn_inputs) + [block[2]],
            dict(axes=args["axes"], decay_rate=args["decay_rate"], eps=args["eps"],
                 batch_stat=args["batch_stat"], nonlinearity="relu"))

    def __finish__(self):
        self._blocks = {}
