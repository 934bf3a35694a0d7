"""Folding inference-mode batch normalization into the Convolution, Deconvolution or Affine
next to it.

With its running statistics a batch normalization is a per-channel affine map
``y = c0 * x + c1`` (``c0 = gamma / sqrt(var + eps)``, ``c1 = beta - c0 * mean``), so

- after a layer (``Conv -> BN``) it folds into that layer's weight (scaled per output
  channel) and bias (``c0 * b + c1``);
- before one (``BN -> Conv``, the *opposite* folding) it folds into the weight (scaled per
  input channel) and the bias (``b + sum(W * c1)``), which is exact for unpadded
  convolutions and for Affine.

The folded weights are new parameters ``w-folded`` / ``b-folded`` in the layer's scope (the
running statistics are read when converting). A batch normalization is folded only where the
result is the same: its layer's output feeds nothing else, and its statistics are per channel
of that layer.
"""
import numpy as np

from ... import functions as F
from ...initializer import ConstantInitializer  # noqa: F401  (names nnabla's module has)
from ...parameter import get_parameter_or_create  # noqa: F401
from .graph_converter import FunctionModifier

__all__ = ["AddBiasModifier", "BatchNormBase", "BatchNormalizationFoldingModifier",
           "BatchNormalizationFoldingModifierInner", "BatchNormalizationFoldingOppositeModifierInner"]

_LAYERS = ("Affine", "Convolution", "Deconvolution")


def constant(variables):
    """Whether the values of ``variables`` are known when converting (no function computes
    them), so they can be folded into new parameters."""
    return all(v.parent is None for v in variables)


def bn_affine(bn):
    """``(c0, c1)``, flat per channel, of a BatchNormalization-like function ``bn`` in
    inference; None if it lacks running statistics or constant parameters, or has more than
    one output."""
    if len(bn.outputs) != 1 or not constant(bn.inputs[1:]):
        return None
    given = {name: v.d.astype(np.float64).reshape(-1)
             for name, v in zip(bn.op.input_names, bn.inputs) if name != "x"}
    if "mean" not in given or "variance" not in given:
        return None
    c0 = 1.0 / np.sqrt(given["variance"] + bn.info.args["eps"])
    if "gamma" in given:
        c0 = c0 * given["gamma"]
    c1 = -c0 * given["mean"]
    if "beta" in given:
        c1 = c1 + given["beta"]
    return c0, c1


def channel_axis(f):
    """The channel axis of the output of layer ``f`` (and of its input)."""
    args = f.info.args
    if args.get("channel_last"):
        return len(f.inputs[0].shape) - 1
    return args["base_axis"]


def _is_per_channel(bn, layer):
    """Whether ``bn`` normalizes per channel of ``layer`` (its only kept axis); an Affine's
    channels are its single output axis."""
    if layer.info.type_name == "Affine" and layer.inputs[1].ndim != 2:
        return False
    return list(bn.info.args["axes"]) == [channel_axis(layer)]


def _grouped(layer, w):
    """The weight of ``layer`` as ``(groups, out per group, in per group, ...)`` with the
    channel axes first, and a function putting such an array back into the weight's layout.
    Convolution weights are ``(O, I/g, *k)`` (``(O, *k, I/g)`` channel last), Deconvolution
    ``(I, O/g, *k)`` (``(I, *k, O/g)``), Affine ``(I, O)``."""
    kind, args = layer.info.type_name, layer.info.args
    if kind == "Affine":
        return w.T[None], lambda a: a[0].T
    g = args["group"]
    cl = args["channel_last"]
    if cl:   # bring the last (channel) axis next to the first: (A, B, *k)
        w = np.moveaxis(w, -1, 1)
    a, b = w.shape[:2]
    if kind == "Convolution":   # (O, I/g, *k) -> (g, O/g, I/g, *k)
        grouped = w.reshape((g, a // g, b) + w.shape[2:])

        def back(x):
            x = x.reshape((a, b) + x.shape[3:])
            return np.moveaxis(x, 1, -1) if cl else x
    else:   # Deconvolution (I, O/g, *k) -> (g, O/g, I/g, *k)
        grouped = np.swapaxes(w.reshape((g, a // g, b) + w.shape[2:]), 1, 2)

        def back(x):
            x = np.swapaxes(x, 1, 2).reshape((a, b) + x.shape[3:])
            return np.moveaxis(x, 1, -1) if cl else x
    return grouped, back


def _per(c, grouped, axis):
    """Per-channel values ``c`` shaped to scale ``grouped`` along its out (1) or in (2) axis."""
    shape = [1] * grouped.ndim
    shape[0] = grouped.shape[0]
    shape[axis] = grouped.shape[axis]
    return c.reshape(grouped.shape[0], grouped.shape[axis]).reshape(shape)


class BatchNormBase:
    """nnabla's mixin of its folding modifiers: ``connect(f, x, w, b)`` applies the layer
    ``f`` (Affine, Convolution or Deconvolution, in ``_fct_set``) with its own arguments to
    new inputs."""

    def __init__(self):
        super().__init__()
        self._fct_set = {"Affine": F.affine, "Convolution": F.convolution, "Deconvolution": F.deconvolution}

    def connect(self, f, x, w, b):
        kind = f.info.type_name
        if kind not in self._fct_set:
            raise ValueError("BatchNormBase.connect: {} is not one of {}".format(kind, sorted(self._fct_set)))
        return self._fct_set[kind](x, w, b, **f.info.args)


class AddBiasModifier(FunctionModifier):
    """Give a Convolution, Deconvolution or Affine next to a BatchNormalization a zero bias
    ``b`` (in the weight's scope) if it has none."""

    def modify(self, f, inputs):
        kind = f.info.type_name
        if kind not in _LAYERS or len(inputs) == 3:
            return None
        before = f.inputs[0].parent
        after = [g.info.type_name for g in self.consumers(f.outputs[0])]
        if not ((before is not None and before.info.type_name == "BatchNormalization")
                or "BatchNormalization" in after):
            return None
        w = inputs[1]
        shape = w.shape[1:] if kind == "Affine" else (f.outputs[0].shape[channel_axis(f)],)
        b = self._new_parameter(self.get_parameter_scope(w), "b", np.zeros(shape), True, like=w)
        return self._call_function(kind, [inputs[0], w, b], f.info.args)


class BatchNormalizationFoldingModifierInner(FunctionModifier):
    """Fold each ``Convolution / Deconvolution / Affine -> BatchNormalization`` into the layer.

    ``channel_last`` is kept for nnabla's signature; each layer's own ``channel_last``
    argument says its weight layout.
    """

    def __init__(self, channel_last=False):
        super().__init__()
        self._folded = set()   # the BatchNormalization functions folded away

    def modify(self, f, inputs):
        if f in self._folded:
            return inputs[0]   # the folded layer's output already is this function's
        if f.info.type_name not in _LAYERS or not constant(inputs[1:]):
            return None
        after = self.consumers(f.outputs[0])
        if len(after) != 1 or after[0].info.type_name != "BatchNormalization":
            return None
        bn = after[0]
        if bn.inputs[0] is not f.outputs[0] or not _is_per_channel(bn, f):
            return None
        folding = bn_affine(bn)
        if folding is None:
            return None
        c0, c1 = folding
        w = inputs[1]
        grouped, back = _grouped(f, w.d.astype(np.float64))
        w_data = back(grouped * _per(c0, grouped, 1))
        b_data = c1 + (c0 * inputs[2].d.reshape(-1) if len(inputs) == 3 else 0.0)
        scope = self.get_parameter_scope(w)
        w_folded = self._new_parameter(scope, "w-folded", w_data, w.need_grad, like=w)
        b_folded = self._new_parameter(scope, "b-folded", b_data.reshape(f.outputs[0].shape[channel_axis(f)]),
                                       inputs[2].need_grad if len(inputs) == 3 else w.need_grad, like=w)
        self._folded.add(bn)
        return self._call_function(f.info.type_name, [inputs[0], w_folded, b_folded], f.info.args)

    def __finish__(self):
        self._folded = set()


class BatchNormalizationFoldingOppositeModifierInner(FunctionModifier):
    """Fold each ``BatchNormalization -> Convolution / Affine`` into the layer (an unpadded
    Convolution, or an Affine whose input channels are the batch normalization's).

    ``channel_last`` is kept for nnabla's signature; each layer's own ``channel_last``
    argument says its weight layout.
    """

    def __init__(self, channel_last=False):
        super().__init__()
        self._pending = {}   # layer -> the BatchNormalization folded into it

    def _foldable_layer(self, bn):
        after = self.consumers(bn.outputs[0])
        if len(after) != 1 or after[0].inputs[0] is not bn.outputs[0]:
            return None
        layer = after[0]
        if not constant(layer.inputs[1:]):
            return None
        kind, args = layer.info.type_name, layer.info.args
        if kind == "Convolution" and not any(args["pad"]) and _is_per_channel(bn, layer):
            return layer
        if kind == "Affine" and layer.inputs[1].ndim == 2 and list(bn.info.args["axes"]) == [args["base_axis"]]:
            return layer
        return None

    def modify(self, f, inputs):
        if f.info.type_name == "BatchNormalization" and len(f.outputs) == 1:
            layer = self._foldable_layer(f)
            if layer is not None and bn_affine(f) is not None:
                self._pending[layer] = f
                return inputs[0]   # the layer takes the normalization's input instead
            return None
        bn = self._pending.pop(f, None)
        if bn is None:
            return None
        c0, c1 = bn_affine(bn)
        w = inputs[1]
        if f.info.type_name == "Affine":
            # Affine flattens its input: each channel's values repeat over the other axes.
            inner = f.inputs[0].shape[f.info.args["base_axis"]:]
            c0 = np.broadcast_to(c0.reshape((-1,) + (1,) * (len(inner) - 1)), inner).reshape(-1)
            c1 = np.broadcast_to(c1.reshape((-1,) + (1,) * (len(inner) - 1)), inner).reshape(-1)
        grouped, back = _grouped(f, w.d.astype(np.float64))
        w_data = back(grouped * _per(c0, grouped, 2))
        shift = (grouped * _per(c1, grouped, 2)).sum(axis=tuple(range(2, grouped.ndim))).reshape(-1)
        b_data = shift + (inputs[2].d.reshape(-1) if len(inputs) == 3 else 0.0)
        scope = self.get_parameter_scope(w)
        w_folded = self._new_parameter(scope, "w-folded", w_data, w.need_grad, like=w)
        b_folded = self._new_parameter(scope, "b-folded", b_data.reshape(f.outputs[0].shape[channel_axis(f)]),
                                       inputs[2].need_grad if len(inputs) == 3 else w.need_grad, like=w)
        return self._call_function(f.info.type_name, [inputs[0], w_folded, b_folded], f.info.args)

    def __finish__(self):
        self._pending = {}


class BatchNormalizationFoldingModifier:
    """The modifiers that fold batch normalization into the neighbouring layers:
    ``[AddBiasModifier(), BatchNormalizationFoldingModifierInner()]``, or with ``opposite``
    the ``BatchNormalization -> layer`` folding. Pass the list to ``GraphConverter``."""

    def __new__(cls, opposite=False, channel_last=False):
        inner = BatchNormalizationFoldingOppositeModifierInner if opposite else BatchNormalizationFoldingModifierInner
        return [AddBiasModifier(), inner(channel_last=channel_last)]
