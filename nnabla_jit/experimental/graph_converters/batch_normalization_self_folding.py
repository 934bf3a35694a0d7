"""Replace each inference-mode BatchNormalization by its per-channel affine map."""
from ... import functions as F
from .batch_normalization_folding import bn_affine
from .graph_converter import FunctionModifier

__all__ = ["BatchNormalizationSelfFoldingModifier"]


class BatchNormalizationSelfFoldingModifier(FunctionModifier):
    """``BatchNormalization(x)`` with running statistics becomes ``c0 * x + c1``: two new
    parameters ``c0-<name>-<k>`` / ``c1-<name>-<k>`` under the scope ``name``, shaped like
    the statistics (``k`` counts the normalizations of one conversion)."""

    def __init__(self, name="bn-self-folding"):
        super().__init__()
        self._name = name
        self._cnt = 0

    def modify(self, f, inputs):
        if f.info.type_name != "BatchNormalization":
            return None
        folding = bn_affine(f)
        if folding is None:
            return None
        axes = f.info.args["axes"]
        shape = tuple(n if a in axes else 1 for a, n in enumerate(f.inputs[0].shape))
        c0 = self._new_parameter(self._name, "c0-{}-{}".format(self._name, self._cnt),
                                 folding[0].reshape(shape), True, like=inputs[0])
        c1 = self._new_parameter(self._name, "c1-{}-{}".format(self._name, self._cnt),
                                 folding[1].reshape(shape), True, like=inputs[0])
        self._cnt += 1
        return F.add2(F.mul2(c0, inputs[0]), c1)

    def __finish__(self):
        self._cnt = 0
