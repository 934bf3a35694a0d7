"""Channel pruning: zero the output channels whose weights are small."""
import numpy as np

from ...parameter import get_parameter_or_create  # noqa: F401  (a name nnabla's module has)
from .graph_converter import FunctionModifier

__all__ = ["PruningModifier"]

_OUTPUT_CHANNEL_AXIS = {"Affine": 1, "Convolution": 0, "DepthwiseConvolution": 0,
                        "DepthwiseDeconvolution": 0}


class PruningModifier(FunctionModifier):
    """Zero every output channel of the ``functions_to_prune`` layers whose weights' sum of
    squares is at most ``pruning_threshold`` (as nnabla measures it: no square root); the
    pruned weight and bias are new parameters ``w-pruned`` / ``b-pruned`` in the layer's scope.
    ``channel_last`` says the weight layout of Deconvolution layers (output channels last)."""

    def __init__(self, pruning_threshold,
                 functions_to_prune=("Convolution", "Deconvolution", "DepthwiseConvolution",
                                     "DepthwiseDeconvolution", "Affine"),
                 channel_last=False):
        super().__init__()
        unknown = set(functions_to_prune) - set(_OUTPUT_CHANNEL_AXIS) - {"Deconvolution"}
        if unknown:
            raise ValueError("PruningModifier: cannot prune {}; supported: Affine, Convolution, Deconvolution, "
                             "DepthwiseConvolution, DepthwiseDeconvolution".format(sorted(unknown)))
        self._pruning_threshold = pruning_threshold
        self._functions = tuple(functions_to_prune)
        self._channel_last = channel_last

    def calculate_axis(self, f):
        """The axis of the output channels in ``f``'s weight."""
        kind = f.info.type_name
        if kind == "Deconvolution":
            return -1 if self._channel_last else 1
        return _OUTPUT_CHANNEL_AXIS[kind]

    def modify(self, f, inputs):
        kind = f.info.type_name
        if kind not in self._functions or any(v.parent is not None for v in inputs[1:]):
            return None   # not a pruned layer, or weights computed by the graph
        w = inputs[1]
        axis = self.calculate_axis(f) % w.ndim
        others = tuple(a for a in range(w.ndim) if a != axis)
        keep = (w.d.astype(np.float64) ** 2).sum(axis=others, keepdims=True) > self._pruning_threshold
        scope = self.get_parameter_scope(w)
        new = [inputs[0], self._new_parameter(scope, "w-pruned", w.d * keep, True, like=w)]
        if len(inputs) == 3:
            b = inputs[2]
            new.append(self._new_parameter(scope, "b-pruned", b.d * keep.reshape(b.shape), True, like=b))
        return self._call_function(kind, new, f.info.args)
