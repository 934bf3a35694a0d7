"""Convert a graph between channel-first (NCHW) and channel-last (NHWC) layouts.

The converted graph starts from inputs in the new layout (made from the originals, or given)
and keeps every variable it can in the new layout: Convolution, Deconvolution, the poolings
and Unpooling switch their ``channel_last`` argument (with weights permuted into new
``W_cl`` / ``W_cf`` parameters), batch normalizations their ``axes`` (statistics permuted into
``beta_cl``, ...), Concatenate its ``axis``, Affine reads its flattened input in the new order
(``w_cl`` / ``w_cf``), and elementwise functions run as they are. Any other function gets its
inputs transposed back to the original layout, so the converted graph computes the same
values; its outputs are in the new layout wherever the last function kept it.
"""
import numpy as np

from ... import functions as F
from ...ops.registry import TABLE
from ...variable import Variable
from .graph_converter import FunctionModifier

__all__ = ["ChannelLastModifier"]

# Functions computing each element from the same element of their inputs (the layout does
# not matter to them): the activation, arithmetic, logical and math tables, less those with
# an axis, a broadcast parameter, or no input to follow.
_NOT_ELEMENTWISE = {"Softmax", "LogSoftmax", "CReLU", "CELU", "PReLU", "SearchSorted", "Constant",
                    "Arange", "Linspace", "BatchMatmul"}
_ELEMENTWISE = {name for name, spec in TABLE.items()
                if spec.category in ("Neural Network Activation Functions", "Arithmetic", "Logical", "Math")
                and name not in _NOT_ELEMENTWISE}
_BATCH_NORMS = ("BatchNormalization", "FusedBatchNormalization", "SyncBatchNormalization")
_POOLINGS = ("MaxPooling", "AveragePooling", "SumPooling", "Unpooling")


def _to_last(ndim):
    """The permutation moving axis 1 (channels) to the end."""
    return (0,) + tuple(range(2, ndim)) + (1,)


def _to_first(ndim):
    """The permutation moving the last axis (channels) to axis 1."""
    return (0, ndim - 1) + tuple(range(1, ndim - 1))


class _ChannelLayoutModifier(FunctionModifier):
    """Converts towards channel-last (``to_last``) or channel-first; ``suffix`` names the
    permuted parameters."""

    to_last = True
    suffix = "cl"

    def __init__(self, inputs, converted_inputs=None):
        super().__init__()
        self._inputs = list(inputs)
        for v in self._inputs:
            if v.ndim < 3:
                raise ValueError("{}: input of shape {} has no spatial axes".format(type(self).__name__, v.shape))
        if converted_inputs is None:
            converted_inputs = [Variable.from_numpy_array(v.d.transpose(self._permutation(v.ndim)))
                                for v in self._inputs]
        self._converted_inputs = list(converted_inputs)
        for v, c in zip(self._inputs, self._converted_inputs):
            if c.shape != tuple(v.shape[a] for a in self._permutation(v.ndim)):
                raise ValueError("{}: converted input of shape {} for an input of shape {}".format(
                    type(self).__name__, c.shape, v.shape))
        self._prepare_inputs()

    def _prepare_inputs(self):
        self._converted = set()   # ids of the new variables in the new layout
        for v, c in zip(self._inputs, self._converted_inputs):
            self.map_variable(v, c)
            self._converted.add(id(c))

    def _permutation(self, ndim):
        """Original layout -> new layout."""
        return _to_last(ndim) if self.to_last else _to_first(ndim)

    def _inverse(self, ndim):
        return _to_first(ndim) if self.to_last else _to_last(ndim)

    def _channel_axis(self, ndim, new):
        """The channel axis in the original layout, or (``new``) in the converted one."""
        return ndim - 1 if self.to_last == new else 1

    def _is_converted(self, v):
        return id(v) in self._converted

    def _converted_outputs(self, o):
        for v in (o if isinstance(o, (list, tuple)) else [o]):
            self._converted.add(id(v))
        return o

    def _param(self, v, name):
        """``v`` in the new layout: a parameter holding its values (in ``v``'s scope), or a
        transposition when the graph computes ``v``."""
        if v.parent is not None:
            return F.transpose(v, self._permutation(v.ndim))
        data = v.d.transpose(self._permutation(v.ndim))
        return self._new_parameter(self.get_parameter_scope(v), "{}_{}".format(name, self.suffix),
                                   data, v.need_grad, like=v)

    def _in_layout(self, v, converted):
        """``v`` transposed into the new layout (``converted``) or back into the original."""
        if self._is_converted(v) == converted or v.ndim < 3:
            return v
        return F.transpose(v, self._permutation(v.ndim) if converted else self._inverse(v.ndim))

    # ----------------------------------------------------------------------- per function
    def modify(self, f, inputs):
        if not any(self._is_converted(v) for v in inputs):
            return None
        kind, args = f.info.type_name, f.info.args
        ndim = f.inputs[0].ndim
        first_converted = self._is_converted(inputs[0])
        was_last = not self.to_last   # the layout this modifier converts from
        if first_converted and kind in ("Convolution", "Deconvolution") and args["base_axis"] == 1 \
                and args["channel_last"] == was_last:
            new = [inputs[0], self._param(inputs[1], "W")] + inputs[2:]
            return self._converted_outputs(
                self._call_function(kind, new, dict(args, channel_last=self.to_last)))
        if first_converted and kind in _POOLINGS and args["channel_last"] == was_last:
            return self._converted_outputs(self._modify_as_same(f, inputs, channel_last=self.to_last))
        if first_converted and kind in _BATCH_NORMS and list(args["axes"]) == [self._channel_axis(ndim, False)]:
            new = [inputs[0]]
            for name, v in zip(f.op.input_names[1:], inputs[1:]):
                if name == "z":
                    new.append(self._in_layout(v, True))
                else:
                    new.append(self._param(v, "var" if name == "variance" else name))
            return self._converted_outputs(
                self._modify_as_same(f, new, axes=(self._channel_axis(ndim, True),)))
        if kind == "Concatenate" and args["axis"] == self._channel_axis(ndim, False) \
                and all(v.ndim == ndim for v in inputs):
            new = [self._in_layout(v, True) for v in inputs]
            return self._converted_outputs(self._modify_as_same(f, new, axis=self._channel_axis(ndim, True)))
        if first_converted and kind == "Affine" and args["base_axis"] == 1 and inputs[1].ndim == 2 \
                and inputs[1].parent is None:
            return self._affine(f, inputs)
        if kind in _ELEMENTWISE and all(v.ndim == ndim for v in inputs):
            new = [self._in_layout(v, True) for v in inputs]
            return self._converted_outputs(self._modify_as_same(f, new))
        return self._modify_as_same(f, [self._in_layout(v, False) for v in inputs])

    def _affine(self, f, inputs):
        """Affine flattens its input: reorder the weight's rows to the new layout's order."""
        x, w = inputs[0], inputs[1]
        original = f.inputs[0].shape[1:]
        rows = w.d.reshape(original + (w.shape[1],))
        order = tuple(a - 1 for a in self._permutation(len(original) + 1)[1:]) + (len(original),)
        data = np.ascontiguousarray(rows.transpose(order)).reshape(w.shape)
        w_new = self._new_parameter(self.get_parameter_scope(w), "w_{}".format(self.suffix), data,
                                    w.need_grad, like=w)
        return self._call_function("Affine", [x, w_new] + inputs[2:], f.info.args)

    def __finish__(self):
        self._prepare_inputs()   # ready for the next conversion


class ChannelLastModifier(_ChannelLayoutModifier):
    """Convert a channel-first (NCHW) graph to channel-last (NHWC).

    Args:
        inputs (list of Variable): the graph's inputs (channel first).
        inputs_cl (list of Variable): their channel-last stand-ins; by default new variables
            holding the inputs' current values transposed (``modifier.inputs_cl``).
    """

    to_last = True
    suffix = "cl"

    def __init__(self, inputs, inputs_cl=None):
        super().__init__(inputs, inputs_cl)

    @property
    def inputs_cl(self):
        return self._converted_inputs
