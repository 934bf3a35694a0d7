"""Split FusedBatchNormalization into ``BatchNormalization -> Add2 -> ReLU``."""
from ... import functions as F
from .graph_converter import FunctionModifier

__all__ = ["UnfusedBatchNormalizationModifier"]


class UnfusedBatchNormalizationModifier(FunctionModifier):
    """Replace each FusedBatchNormalization by BatchNormalization on the same parameters and
    running statistics, the addition of its residual input (if any), and the ReLU."""

    def modify(self, f, inputs):
        if f.info.type_name != "FusedBatchNormalization":
            return None
        args = f.info.args
        if len(f.outputs) != 1:
            raise ValueError("UnfusedBatchNormalizationModifier: a FusedBatchNormalization with "
                             "output_stat cannot be split")
        h = self._call_function(
            "BatchNormalization", inputs[:5],
            dict(axes=args["axes"], decay_rate=args["decay_rate"], eps=args["eps"],
                 batch_stat=args["batch_stat"], no_scale=False, no_bias=False))
        if len(inputs) == 6:
            h = F.add2(h, inputs[5])
        return F.relu(h)
