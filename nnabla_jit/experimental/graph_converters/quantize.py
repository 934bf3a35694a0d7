"""The two graph conversions of quantization-aware training (``nnabla.utils.qnn.QATScheduler``).

``QuantizeNonQNNToRecordingModifier`` puts range recorders (``nnabla.utils.qnn``'s
``*Recorder`` functions) in front of the inputs of the functions to quantize: the activation
recorder on each activation input, the weight recorder on each parameter input. A recorder
passes its input through and keeps a running range in parameters ``<Type>-<rank>/M-x0``
(``m-x0`` too for the min-max recorders; ``w0``, ``w1`` for weight and bias), where ``<Type>``
and ``<rank>`` name the function by its position in the graph (``FunctionsRankRecorder``).

``QuantizeRecordingToTrainingModifier`` (run on a graph whose recorders were removed) turns
those ranges into scales and puts QuantizeLinear -> DequantizeLinear (simulated quantization)
in front of the same inputs: an activation is quantized after the function that makes it, with
the scale its consumer recorded; a bias is requantized with scale(x) * scale(w).

``config`` is a ``nnabla.utils.qnn.QATConfig``; both modifiers read it the way nnabla does.
"""
from collections import defaultdict

import numpy as np

from ... import functions as F
from ...parameter import get_parameter_or_create, parameter_scope
# nnabla's module has these names (its scheduler uses them through the package).
from .batch_normalization_folding import BatchNormalizationFoldingModifier  # noqa: F401
from .batch_normalization_self_folding import BatchNormalizationSelfFoldingModifier  # noqa: F401
from .graph_converter import FunctionModifier
from .remove_function import RemoveFunctionModifier  # noqa: F401

__all__ = ["QuantizeNonQNNToRecordingModifier", "QuantizeRecordingToTrainingModifier"]

# Functions with two activation inputs (a parameter, if any, follows them).
_BINARY_FUNCTIONS = ("Add2", "Sub2", "Mul2", "Div2", "Pow2")
# Functions whose inputs share one recorder / one scale (the operands must be on one grid).
_SHARED_RANGE_FUNCTIONS = ("Add2", "Concatenate")
_FUNCTIONS_WITH_BIAS = ("Affine", "Convolution", "Deconvolution", "DepthwiseConvolution",
                        "DepthwiseDeconvolution")


def _n_activations(f, n_inputs):
    """How many leading inputs of ``f`` are activations; the rest are parameters."""
    fn = f.info.type_name
    if fn in ("Concatenate", "Stack"):
        return n_inputs
    if fn in _BINARY_FUNCTIONS:
        return 2
    return 1


def _binary_function_set():
    """nnabla's ``_fct_bin_set`` attribute of the modifiers: binary type name -> F function."""
    return {"Add2": F.add2, "Sub2": F.sub2, "Mul2": F.mul2, "Div2": F.div2, "Pow2": F.pow2}


def _channel_axes(config):
    return [3] if config.channel_last else [1]


def _references(v):
    """The functions reading ``v``, newest first: the order of nnabla's
    ``Variable.function_references``, on which the choice of scope below depends (a graph
    output's first reader is the converter's Sink)."""
    return v.function_references


def _made_by(v, type_name):
    return v.parent is not None and v.parent.info.type_name == type_name


class _RankedModifier(FunctionModifier):
    """A modifier that names parameter scopes after a function's type and rank."""

    def __init__(self, functions_ranks, config):
        super().__init__()
        if config is None:
            raise ValueError("{}: config (a nnabla.utils.qnn.QATConfig) is required".format(
                type(self).__name__))
        self._config = config
        self._fct_bin_set = _binary_function_set()
        self.functions_ranks = functions_ranks

    def get_function_rank(self, f):
        """``f``'s rank from ``FunctionsRankRecorder``; -1 for a function of no ranked graph."""
        return self.functions_ranks.get(f, -1)

    def _scope_of(self, f):
        return "{}-{}".format(f.info.type_name, self.get_function_rank(f))

    def _new_graph_consumers(self, v):
        """The functions reading ``v`` that this conversion built (a graph input is shared with
        the graph being converted, whose functions do not count)."""
        graph = self._graph_functions or set()
        return [g for g in _references(v) if id(g) not in graph]


class QuantizeNonQNNToRecordingModifier(_RankedModifier):
    """Insert range recorders in front of the inputs of the functions to quantize.

    Args:
        functions_ranks (dict): function -> rank, from ``nnabla.utils.qnn.FunctionsRankRecorder``.
        config (QATConfig): which recorders, which functions (``record_layers``,
            ``skip_inputs_layers``, ``skip_outputs_layers``), ``recorder_position``, ``channel_last``.
        training (bool): whether the recorders update their ranges in forward.
    """

    def __init__(self, functions_ranks, config=None, training=True):
        super().__init__(functions_ranks, config)
        self._training = training

    # ------------------------------------------------------------------ which functions
    def check(self, f):
        """Whether ``f`` gets recorders."""
        fn = f.info.type_name
        if fn in ("Sink", "BatchNormalization"):
            return False
        if self._config.record_layers and fn not in self._config.record_layers:
            return False
        return not self._is_skipped_end_layer(f)

    def _is_skipped_end_layer(self, f):
        """``f`` is of a ``skip_inputs_layers`` type with none of those types upstream (the first
        convolution), or of a ``skip_outputs_layers`` type with none downstream (the last affine)."""
        skip_in = self._config.skip_inputs_layers
        skip_out = self._config.skip_outputs_layers
        fn = f.info.type_name
        if skip_in and fn in skip_in and not (_types_upstream(f) & set(skip_in)):
            return True
        if skip_out and fn in skip_out and not (_types_downstream(f) & set(skip_out)):
            return True
        return False

    # ------------------------------------------------------------------ recorders
    def _record(self, callback, v, name):
        return callback()(v, axes=_channel_axes(self._config), training=self._training, name=name)

    def add_recorder(self, f, inputs, cfg):
        """``inputs`` with a recorder in front of each (scope ``<Type>-<rank>``): the activation
        recorder on activations (one already on a variable is reused), the weight recorder on
        parameters."""
        # The scope is entered only where a recorder may be made: entering creates it, and
        # the order scopes are created in is the order of nn.get_parameters().
        recorder_name = cfg.recorder_activation().name()
        scope = self._scope_of(f)
        n_act = _n_activations(f, len(inputs))
        new_inputs = []
        for i, v in enumerate(inputs[:n_act]):
            consumers = self._new_graph_consumers(v)
            if consumers and consumers[0].info.type_name == recorder_name:
                v = consumers[0].outputs[0]
            else:
                with parameter_scope(scope):
                    if not _made_by(v, recorder_name):
                        v = self._record(cfg.recorder_activation, v, "x{}".format(i))
            new_inputs.append(v)
        for i, v in enumerate(inputs[n_act:]):
            with parameter_scope(scope):
                new_inputs.append(self._record(cfg.recorder_weight, v, "w{}".format(i)))
        return new_inputs

    def share_recorder(self, f, inputs, new_inputs, cfg):
        """For Add2 and Concatenate, record every operand into one range: that of the operand
        of lowest rank (the others' recorders are replaced by recorders on its parameters)."""
        if f.info.type_name not in _SHARED_RANGE_FUNCTIONS:
            return new_inputs
        idx, min_rank = 0, inputs[0].rank
        for i, v in enumerate(new_inputs[1:], 1):
            if v.rank < min_rank:
                idx, min_rank = i, v.rank
        scope = self.get_parameter_scope(new_inputs[idx].parent.inputs[1])
        for i, v in enumerate(new_inputs):
            if i == idx:
                continue
            with parameter_scope(scope):
                new_inputs[i] = self._record(cfg.recorder_activation, v.parent.inputs[0], "x0")
        return new_inputs

    def modify(self, f, inputs):
        if not self.check(f):
            return None
        cfg = self._config
        new_inputs = self.add_recorder(f, inputs, cfg)
        new_inputs = self.share_recorder(f, inputs, new_inputs, cfg)
        h = self._modify_as_same(f, new_inputs)
        # The scope of the reader is entered (so created) even with no recorder to put there.
        following = _references(f.outputs[0])[0]
        with parameter_scope(self._scope_of(following)):
            if cfg.recorder_position == cfg.RecorderPosition.BOTH:
                h = self._record(cfg.recorder_activation, h, "x0")
        return h


def _types_reachable(f, neighbours):
    """The types of the functions reached from ``f`` by following ``neighbours(g)`` (the
    functions next to ``g``) again and again; ``f`` itself counts only if reached again."""
    seen, types, stack = set(), set(), [f]
    while stack:
        for g in neighbours(stack.pop()):
            if id(g) not in seen:
                seen.add(id(g))
                types.add(g.info.type_name)
                stack.append(g)
    return types


def _types_upstream(f):
    """The types of the functions that ``f`` depends on."""
    return _types_reachable(f, lambda g: [v.parent for v in g.inputs if v.parent is not None])


def _types_downstream(f):
    """The types of the functions that read what ``f`` makes, directly or not (through the
    first output of each, as nnabla's converter looks)."""
    return _types_reachable(f, lambda g: _references(g.outputs[0]))


class QuantizeRecordingToTrainingModifier(FunctionModifier):
    """Put QuantizeLinear -> DequantizeLinear in front of the inputs that were recorded, with
    scales and zero points from the recorded ranges (parameters ``scale-*``, ``zeropoint-*``
    next to the ranges).

    Args:
        functions_ranks (dict): function -> rank, from ``nnabla.utils.qnn.FunctionsRankRecorder``
            over the graph with its recorders removed.
        config (QATConfig): its ``precision_mode`` must be ``PrecisionMode.SIM_QNN``, the only
            one nnabla implements.
    """

    class SimulatedQNN(_RankedModifier):
        """The SIM_QNN conversion, in nnabla a helper of the modifier (``modifier`` is it)."""

        def __init__(self, functions_ranks, modifier=None, config=None):
            super().__init__(functions_ranks, config)
            self._modifier = modifier
            self._map_input_scale_zeropoint = defaultdict(list)

        def _scale_zeropoint(self, recorder, v, name):
            cfg = self._config
            return recorder.get_scale_zeropoint(v, axes=_channel_axes(cfg), narrow_range=cfg.narrow_range,
                                                round_method=cfg.pow2.value, name=name)

        def try_to_quantize(self, x, scale, zero_point, round_mode, narrow_range, dtype):
            if scale is None:
                return x
            return F.quantize_linear(x, scale, zero_point, round_mode, narrow_range, dtype)

        def try_to_dequantize(self, x, scale, zero_point):
            return x if scale is None else F.dequantize_linear(x, scale, zero_point)

        def _quantize(self, x, scale, zero_point):
            cfg = self._config
            return self.try_to_quantize(x, scale, zero_point, cfg.round_mode, cfg.narrow_range, cfg.dtype)

        def get_quantization_params(self, variable):
            """The (scale, zero point) arrays of the QuantizeLinear making ``variable``, else
            (None, None)."""
            if _made_by(variable, "QuantizeLinear"):
                return variable.parent.inputs[1].d, variable.parent.inputs[2].d
            return None, None

        def _quantize_outputs(self, f, output, axes, cfg):
            """Quantize ``f``'s output with the scale the first consumer that recorded it has
            (none when a Sink, the graph's end, comes first)."""
            scale = zero_point = None
            for consumer in _references(f.outputs[0]):
                fn = consumer.info.type_name
                if fn == "Sink":
                    return output
                name = "x0"
                if fn in _BINARY_FUNCTIONS:
                    for i, v in enumerate(consumer.inputs):
                        if f.outputs[0] == v:
                            name = "x{}".format(i)
                with parameter_scope(self._scope_of(consumer)):
                    scale, zero_point = self._scale_zeropoint(cfg.recorder_activation, output, name)
                if scale is not None:
                    break
            h = self._quantize(output, scale, zero_point)
            self._map_input_scale_zeropoint[h] = (scale, zero_point)
            return h

        def requantize_bias(self, f, inputs, scope, rm, nr, dt, skip_bias=False):
            """A quantized bias of Affine / Convolution / ... is requantized with scale(x) *
            scale(w) and x's zero point (left unquantized under ``skip_bias``)."""
            if f.info.type_name not in _FUNCTIONS_WITH_BIAS or len(inputs) != 3:
                return inputs
            x, w, b = inputs
            sx, zpx = self.get_quantization_params(x)
            sw, _ = self.get_quantization_params(w)
            if sx is None or sw is None:
                return inputs
            with parameter_scope(scope):
                sb = get_parameter_or_create("scale-b", (1,), np.reshape(sx, (1,)) * np.reshape(sw, (1,)), False)
                zpb = get_parameter_or_create("zeropoint-b", (1,), np.reshape(zpx, (1,)).copy(), False)
            if _made_by(b, "QuantizeLinear"):
                b = b.parent.inputs[0]
                inputs[2] = b if skip_bias else F.quantize_linear(b, sb, zpb, rm, nr, dt)
            return inputs

        def quantize_inputs(self, f, inputs, scope, cfg, axes, rm, nr, dt, pow2):
            """Quantize the graph's own inputs (rank 0) among ``f``'s activations and every
            parameter input whose range was recorded."""
            n_act = _n_activations(f, len(inputs))
            quantized = []
            for i, v in enumerate(inputs[:n_act]):
                if v.rank == 0:
                    with parameter_scope(scope):
                        s, zp = self._scale_zeropoint(cfg.recorder_activation, v, "x{}".format(i))
                        v = self._quantize(v, s, zp)
                    self._map_input_scale_zeropoint[v] = (s, zp)
                quantized.append(v)
            for i, v in enumerate(inputs[n_act:]):
                with parameter_scope(scope):
                    s, zp = self._scale_zeropoint(cfg.recorder_weight, v, "w{}".format(i))
                    quantized.append(self._quantize(v, s, zp))
            return self.requantize_bias(f, quantized, scope, rm, nr, dt, cfg.skip_bias)

        def dequantize_inputs(self, inps):
            """Dequantize each quantized input (reusing a DequantizeLinear another consumer put
            on it)."""
            for i, v in enumerate(inps):
                for g in self._new_graph_consumers(v):
                    if g.info.type_name == "DequantizeLinear":
                        v = g.outputs[0]
                        break
                scale = zero_point = None
                if _made_by(v, "QuantizeLinear"):
                    scale, zero_point = v.parent.inputs[1:3]
                inps[i] = self.try_to_dequantize(v, scale, zero_point)
            return inps

        def shared_quantization(self, f, inps, cfg):
            """For Add2 and Concatenate, quantize every operand with the scale of the dequantized
            operand of lowest rank."""
            if f.info.type_name not in _SHARED_RANGE_FUNCTIONS:
                return inps
            idx, min_rank = 0, inps[0].rank
            for i, v in enumerate(inps[1:], 1):
                if _made_by(v, "DequantizeLinear") and v.rank < min_rank:
                    idx, min_rank = i, v.rank
            scale = zero_point = None
            if _made_by(inps[idx], "DequantizeLinear"):
                scale, zero_point = inps[idx].parent.inputs[1:3]
            for i in range(len(inps)):
                if i == idx:
                    continue
                v = inps[i]
                if _made_by(v, "DequantizeLinear"):
                    v = v.parent.inputs[0].parent.inputs[0]   # what was quantized
                inps[i] = self.try_to_dequantize(self._quantize(v, scale, zero_point), scale, zero_point)
            return inps

        def modify(self, f, inputs):
            cfg = self._config
            axes = _channel_axes(cfg)
            inps = self.quantize_inputs(f, list(inputs), self._scope_of(f), cfg, axes, cfg.round_mode,
                                        cfg.narrow_range, cfg.dtype, cfg.pow2.value)
            inps = self.dequantize_inputs(inps)
            inps = self.shared_quantization(f, inps, cfg)
            h = self._modifier._modify_as_same(f, inps)
            if f.info.type_name == "Sink":
                return h
            return self._quantize_outputs(f, h, axes, cfg)

        def __finish__(self):
            self._map_input_scale_zeropoint = defaultdict(list)

    def __init__(self, functions_ranks, config=None):
        super().__init__()
        if config is None:
            raise ValueError("QuantizeRecordingToTrainingModifier: config (a nnabla.utils.qnn.QATConfig) "
                             "is required")
        self._fct_bin_set = _binary_function_set()
        mode = getattr(config.precision_mode, "name", config.precision_mode)
        if mode != "SIM_QNN":
            raise NotImplementedError(
                "QuantizeRecordingToTrainingModifier: precision_mode {} is not implemented (nnabla 1.39 "
                "implements PrecisionMode.SIM_QNN only)".format(config.precision_mode))
        self._mode = self.SimulatedQNN(functions_ranks, self, config)

    def modify(self, f, inputs):
        # The helper judges which functions the conversion built by this modifier's graph.
        self._mode._graph_functions = self._graph_functions
        return self._mode.modify(f, inputs)

    def __finish__(self):
        self._mode._graph_functions = None
        self._mode.__finish__()
