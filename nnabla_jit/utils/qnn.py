"""Quantization-aware training (nnabla's ``nnabla.utils.qnn``).

``QATScheduler`` takes a network through three states as the training steps count:

- NON_QNN until step ``config.niter_to_recording``: the float network trains as it is;
- RECORDING until step ``config.niter_to_training``: batch normalization is folded if the
  config says so, range recorders are put in front of the inputs of the functions to quantize
  and the network stops learning (its output's ``need_grad`` is False) while the recorders
  collect the ranges of activations and weights;
- TRAINING from then on: the recorders make way for QuantizeLinear -> DequantizeLinear with
  scales from the recorded ranges (int8, power-of-2 scales by default) and the network trains
  again with the learning rate times ``config.learning_rate_scale``.

The graphs change in place (``Variable.rewire_on``): a loss built on the registered output
keeps working. Recorders are ``PythonFunction`` s: ``MinMaxMinMaxRecorder`` (running min and
max), ``MinMaxMvaRecorder`` (moving averages of batch min and max), ``AbsMaxRecorder`` (running
max of |x|), ``MaxMaxRecorder`` (running max), ``MaxMvaRecorder`` (moving average of batch max);
each passes its input through. The ``*Callback`` classes put one on a variable with its range
parameters and turn a recorded range into a scale and zero point (``get_scale_zeropoint``).
"""
from enum import Enum

import numpy as np

from .. import ext_utils
from ..context import get_current_context
from ..experimental import graph_converters as GC
from ..function import PythonFunction
from ..initializer import ConstantInitializer
from ..logger import logger
from ..parameter import get_parameter, get_parameter_or_create, get_parameters
from .save import save

__all__ = ["AbsMaxRecorder", "AbsMaxRecorderCallback", "ConstantInitializer", "FunctionsRankRecorder",
           "MaxMaxRecorder", "MaxMaxRecorderCallback", "MaxMvaRecorder", "MaxMvaRecorderCallback",
           "MinMaxMinMaxRecorder", "MinMaxMinMaxRecorderCallback", "MinMaxMvaRecorder",
           "MinMaxMvaRecorderCallback", "PrecisionMode", "PythonFunction", "QATConfig", "QATScheduler",
           "QATTensorRTConfig", "QNNState", "abs_max_recorder", "max_max_recorder", "max_mva_recorder",
           "minmax_minmax_recorder", "minmax_mva_recorder", "qat_default_config"]

# How a power-of-2 scale's exponent is rounded (QATConfig.pow2); NOTROUND keeps the scale as is.
_ROUND_METHODS = {"CEIL": np.ceil, "ROUND": np.round, "FLOOR": np.floor, "NOTROUND": None}


# ---------------------------------------------------------------------------- recorders
class _RangeRecorder(PythonFunction):
    """y = x; in forward (when ``training``) the range inputs after x (shaped like x with every
    dimension 1) are updated from the batch by :meth:`_update`. The gradient passes straight
    through to x; the ranges get none."""

    stat_names = ()   # the range inputs after x, in order

    def __init__(self, ctx=None, training=True):
        super().__init__(ctx)
        self.training = training

    @property
    def args(self):
        return {"training": self.training}

    def min_outputs(self):
        return 1

    def grad_depends_output_data(self, i, o):
        return False

    def grad_depends_input_data(self, i, j):
        return False

    def setup_impl(self, inputs, outputs):
        n = 1 + len(self.stat_names)
        if len(inputs) != n:
            raise ValueError("{}: takes {} inputs (x, {}); {} given".format(
                self.name, n, ", ".join(self.stat_names), len(inputs)))
        x = inputs[0]
        for stat_name, s in zip(self.stat_names, inputs[1:]):
            if len(s.shape) != len(x.shape) or int(np.prod(s.shape)) != 1:
                raise ValueError("{}: {} must have x's ndim with every dimension 1; x is {}, {} is {}".format(
                    self.name, stat_name, x.shape, stat_name, s.shape))
        outputs[0].reset_shape(x.shape, True)

    def forward_impl(self, inputs, outputs):
        x = inputs[0].d
        outputs[0].d = x
        if self.training:
            for s, value in zip(inputs[1:], self._update(x, [s.d for s in inputs[1:]])):
                s.d = np.asarray(value, dtype=s.d.dtype)

    def _update(self, x, stats):
        raise NotImplementedError

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        if not propagate_down[0]:
            return
        if accum[0]:
            inputs[0].g += outputs[0].g
        else:
            inputs[0].g = outputs[0].g


class _MovingAverage(_RangeRecorder):
    def __init__(self, ctx=None, decay=0.99, training=True):
        super().__init__(ctx, training)
        self.decay = decay

    @property
    def args(self):
        return {"decay": self.decay, "training": self.training}

    def _average(self, running, batch):
        return self.decay * running + (1 - self.decay) * batch


class MinMaxMinMaxRecorder(_RangeRecorder):
    """Records the min and max over all batches (inputs x, m, M)."""
    stat_names = ("m", "M")

    def _update(self, x, stats):
        m, M = stats
        return np.minimum(m, x.min()), np.maximum(M, x.max())


class MinMaxMvaRecorder(_MovingAverage):
    """Records moving averages of the batch min and max (inputs x, m, M)."""
    stat_names = ("m", "M")

    def _update(self, x, stats):
        m, M = stats
        return self._average(m, x.min()), self._average(M, x.max())


class AbsMaxRecorder(_RangeRecorder):
    """Records the max of |x| over all batches (inputs x, M)."""
    stat_names = ("M",)

    def _update(self, x, stats):
        return (np.maximum(stats[0], np.abs(x).max()),)


class MaxMaxRecorder(_RangeRecorder):
    """Records the max over all batches (inputs x, M)."""
    stat_names = ("M",)

    def _update(self, x, stats):
        return (np.maximum(stats[0], x.max()),)


class MaxMvaRecorder(_MovingAverage):
    """Records a moving average of the batch max (inputs x, M)."""
    stat_names = ("M",)

    def _update(self, x, stats):
        return (self._average(stats[0], x.max()),)


def minmax_minmax_recorder(x, m, M, training=True):
    return MinMaxMinMaxRecorder(get_current_context(), training)(x, m, M)


def minmax_mva_recorder(x, m, M, decay=0.99, training=True):
    return MinMaxMvaRecorder(get_current_context(), decay, training)(x, m, M)


def abs_max_recorder(x, M, training=True):
    return AbsMaxRecorder(get_current_context(), training)(x, M)


def max_max_recorder(x, M, training=True):
    return MaxMaxRecorder(get_current_context(), training)(x, M)


def max_mva_recorder(x, M, decay=0.99, training=True):
    return MaxMvaRecorder(get_current_context(), decay, training)(x, M)


class _RecorderCallback:
    """``callback()(x, name=...)`` records x's range in parameters ``m-<name>`` / ``M-<name>``
    of the current scope (created as zeros); ``Callback.get_scale_zeropoint(x, name=...)``
    (called on the class) turns them into int8 ``scale-<name>`` and ``zeropoint-<name>``."""

    _function = None       # the recorder function
    stat_names = ()        # its range parameters
    _symmetric = False     # scale from 2 * M (max recorders) rather than M - m

    def __init__(self):
        self._function = type(self)._function

    def name(self):
        """The recorder's function type name (the class name without ``Callback``)."""
        n = type(self).__name__
        return n[:n.rfind("Callback")]

    def __call__(self, x, axes=[1], training=True, name=""):
        shape = [1] * len(x.shape)
        stats = [get_parameter_or_create("{}-{}".format(s, name), shape, ConstantInitializer())
                 for s in self.stat_names]
        return self._function(x, *stats, training=training)

    @classmethod
    def get_scale_zeropoint(cls, x, axes=[1], narrow_range=False, round_method="NOTROUND", name=""):
        """(scale, zero point) parameters for int8 from the recorded range; (None, None) if no
        range was recorded under ``name`` in the current scope. Existing ``scale-<name>`` /
        ``zeropoint-<name>`` parameters are returned as they are."""
        if not any(get_parameter("{}-{}".format(s, name)) is not None for s in cls.stat_names):
            return None, None
        shape = [1] * len(x.shape)
        stats = [get_parameter_or_create("{}-{}".format(s, name), shape, ConstantInitializer()).d
                 for s in cls.stat_names]
        levels = 255 if not narrow_range else 254   # int8: 127 - (-128), or 127 - (-127)
        if cls._symmetric:
            scale = 2 * stats[-1] / levels
        else:
            scale = np.maximum(stats[1] - stats[0], 1e-24) / levels   # never a zero scale
        scale = pow2_scale(scale, round_method).astype(np.float32)
        zero_point = get_parameter_or_create("zeropoint-{}".format(name), scale.shape,
                                             np.zeros(scale.shape, np.float32), False)
        scale = get_parameter_or_create("scale-{}".format(name), scale.shape, scale, False)
        return scale, zero_point


def pow2_scale(scale, round_method):
    """``scale`` as 2 ** round(log2(scale)) with ``round_method`` ('CEIL', 'ROUND', 'FLOOR'),
    or unchanged for 'NOTROUND'."""
    if round_method not in _ROUND_METHODS:
        raise ValueError("round_method must be one of {}, not {!r}".format(sorted(_ROUND_METHODS), round_method))
    rounding = _ROUND_METHODS[round_method]
    return scale if rounding is None else 2 ** rounding(np.log(scale) / np.log(2))


class MinMaxMinMaxRecorderCallback(_RecorderCallback):
    _function = staticmethod(minmax_minmax_recorder)
    stat_names = ("m", "M")


class MinMaxMvaRecorderCallback(_RecorderCallback):
    _function = staticmethod(minmax_mva_recorder)
    stat_names = ("m", "M")


class AbsMaxRecorderCallback(_RecorderCallback):
    _function = staticmethod(abs_max_recorder)
    stat_names = ("M",)
    _symmetric = True


class MaxMaxRecorderCallback(_RecorderCallback):
    _function = staticmethod(max_max_recorder)
    stat_names = ("M",)
    _symmetric = True


class MaxMvaRecorderCallback(_RecorderCallback):
    _function = staticmethod(max_mva_recorder)
    stat_names = ("M",)
    _symmetric = True


# ---------------------------------------------------------------------------- configuration
class PrecisionMode(Enum):
    QNN = 0        # quantized functions only
    SIM_QNN = 1    # QuantizeLinear / DequantizeLinear around float functions (the one implemented)
    MIXED_QNN = 2  # quantized functions where possible, else simulated


class QNNState(Enum):
    NON_QNN = 0     # the float network
    RECORDING = 1   # recording ranges of weights and activations
    TRAINING = 2    # training with simulated quantization
    DEPLOYMENT = 3  # not reached by the scheduler (nnabla's neither)


class QATConfig:
    """Settings of quantization-aware training (class attributes; set them on an instance)."""

    ext_name = "cudnn"        # 'cpu', 'cuda' or 'cudnn': whose memory cache to clear at a switch
    zero_point = False        # asymmetric quantization (not used by the conversions, as in nnabla)
    dtype = np.int8
    precision_mode = PrecisionMode.SIM_QNN
    channel_last = False
    channel_wise = False      # not used by the conversions, as in nnabla
    niter_to_recording = 0    # the step at which recording starts
    niter_to_training = -1    # the step at which quantized training starts (must be set)

    class RoundingMethod(Enum):
        """How a scale is made a power of 2."""
        CEIL = "CEIL"
        ROUND = "ROUND"
        FLOOR = "FLOOR"
        NOTROUND = "NOTROUND"

    pow2 = RoundingMethod.ROUND
    narrow_range = False      # int8 range -127..127 instead of -128..127
    round_mode = "HALF_TO_EVEN"
    bn_folding = False        # fold batch normalization into the neighbouring layers first
    bn_self_folding = False   # turn the remaining ones into a scale and a bias
    recorder_weight = MinMaxMinMaxRecorderCallback
    recorder_activation = MaxMvaRecorderCallback
    record_layers = []        # function types to record; empty: all

    class RecorderPosition(Enum):
        BEFORE = 0   # recorders on a function's inputs
        BOTH = 1     # and on its output

    recorder_position = RecorderPosition.BEFORE
    skip_inputs_layers = ["Convolution", "Deconvolution"]   # left unquantized when first
    skip_outputs_layers = ["Affine"]                         # left unquantized when last
    learning_rate_scale = 0.1
    skip_bias = False


class QATTensorRTConfig(QATConfig):
    """The settings for a network to deploy with TensorRT."""
    pow2 = QATConfig.RoundingMethod.ROUND
    bn_folding = True
    bn_self_folding = True
    record_layers = ["Convolution", "Deconvolution", "Affine", "BatchMatmul", "ReLU"]
    record_position = QATConfig.RecorderPosition.BEFORE   # so spelt in nnabla (unused)


qat_default_config = QATTensorRTConfig()


class FunctionsRankRecorder:
    """A ``Variable.visit`` callback numbering the functions in visit order (``functions_ranks``:
    function -> rank), the training-only ones (``functions_only_for_training``) left out."""

    def __init__(self, functions_only_for_training=["ImageAugmentation", "Dropout"]):
        self.functions_only_for_training = functions_only_for_training
        self.rank = 0
        self.functions_ranks = {}

    def __call__(self, f):
        if f.info.type_name not in self.functions_only_for_training:
            self.functions_ranks[f] = self.rank
            self.rank += 1


def _functions_ranks(v):
    recorder = FunctionsRankRecorder()
    v.visit(recorder)
    return recorder.functions_ranks


# ---------------------------------------------------------------------------- the scheduler
class QATScheduler:
    """Scheduler of quantization-aware training.

    Example::

        config = QATConfig()
        config.niter_to_recording = 1
        config.niter_to_training = 500
        qat_scheduler = QATScheduler(config=config, solver=solver)
        qat_scheduler(pred)                    # the training network's output
        qat_scheduler(vpred, training=False)   # the evaluation network's output
        for i in range(training_steps):
            qat_scheduler.step()
            ...                                # forward, backward, update
        qat_scheduler.save('qnn.nnp', vimage)
    """

    def __init__(self, config=qat_default_config, solver=None):
        if config.niter_to_training <= 0 or config.niter_to_recording < 0:
            raise ValueError("QATScheduler: niter_to_recording must be >= 0 and niter_to_training > 0; "
                             "got niter_to_recording={}, niter_to_training={}".format(
                                 config.niter_to_recording, config.niter_to_training))
        if config.niter_to_training - config.niter_to_recording <= 0:
            raise ValueError("QATScheduler: niter_to_training ({}) must come after niter_to_recording ({}), "
                             "by more than the steps of one epoch".format(
                                 config.niter_to_training, config.niter_to_recording))
        self.config = config
        self.solver = solver
        self.counter = 0
        self.state = QNNState.NON_QNN
        self.registry = []   # [(output Variable, training)]

    def __call__(self, pred, training=True):
        """Register the network computing ``pred`` for conversion (``training=False`` for an
        evaluation network: its recorders keep their ranges)."""
        self.registry.append((pred, training))

    def _register_params(self, solver):
        """Give ``solver`` the parameters folding made (with its states reset)."""
        if solver and (self.config.bn_folding or self.config.bn_self_folding):
            solver.set_parameters(get_parameters(grad_only=True))

    def _set_qat_learning_rate(self):
        if self.solver is None:   # nnabla fails here; with no solver there is no rate to scale
            return
        self.solver.set_learning_rate(self.solver.learning_rate() * self.config.learning_rate_scale)

    def _fold_bn(self, pred):
        cfg = self.config
        modifiers = []
        if cfg.bn_folding:
            modifiers += [GC.BatchNormalizationFoldingModifier(opposite=False, channel_last=cfg.channel_last),
                          GC.BatchNormalizationFoldingModifier(opposite=True, channel_last=cfg.channel_last)]
        if cfg.bn_self_folding:
            modifiers.append(GC.BatchNormalizationSelfFoldingModifier())
        if modifiers:
            modifiers.insert(0, GC.UnfusedBatchNormalizationModifier())
            pred.rewire_on(GC.GraphConverter(modifiers).convert(pred))
        return pred

    def _clear_memory_cache(self):
        if self.config.ext_name in ("cuda", "cudnn"):
            try:
                ext = ext_utils.import_extension_module(self.config.ext_name)
            except ImportError:   # no GPU here: no device memory to release
                return
            ext.clear_memory_cache()

    def _schedule_to_recording(self):
        for i, (pred, training) in enumerate(self.registry):
            pred = self._fold_bn(pred)
            modifier = GC.QuantizeNonQNNToRecordingModifier(_functions_ranks(pred), config=self.config,
                                                            training=training)
            pred.rewire_on(GC.GraphConverter([modifier]).convert(pred))
            pred.need_grad = False   # the network does not learn while recording
            self._register_params(self.solver)
            self.registry[i] = (pred, training)
            self.state = QNNState.RECORDING
            logger.info("QNNState.NON_QNN -> QNNState.RECORDING: graph={}".format(pred))

    def _schedule_to_training(self):
        cfg = self.config
        for i, (pred, training) in enumerate(self.registry):
            recorders = [cfg.recorder_activation().name(), cfg.recorder_weight().name()]
            pred.rewire_on(GC.GraphConverter([GC.RemoveFunctionModifier(rm_funcs=recorders)]).convert(pred))
            modifier = GC.QuantizeRecordingToTrainingModifier(_functions_ranks(pred), config=cfg)
            pred.rewire_on(GC.GraphConverter([modifier]).convert(pred))
            self._register_params(self.solver)
            self._set_qat_learning_rate()
            self.registry[i] = (pred, training)
            self.state = QNNState.TRAINING
            logger.info("QNNState.RECORDING -> QNNState.TRAINING: graph={}".format(pred))

    def step(self):
        """Count a training step; switch state at ``niter_to_recording`` and ``niter_to_training``."""
        if self.counter == self.config.niter_to_recording:
            self._clear_memory_cache()
            self._schedule_to_recording()
        elif self.counter == self.config.niter_to_training:
            self._clear_memory_cache()
            self._schedule_to_training()
        self.counter += 1

    def save(self, fname, inputs, batch_size=1, net_name="net", deploy=False):
        """Save each registered evaluation network (``training=False``) to the NNP file
        ``fname`` with ``inputs`` as its data (``x0``, ``x1``, ...) and its output as ``y0``, and
        an executor ``runtime``. ``deploy=True`` (a deployment conversion) is not supported, as
        in nnabla 1.39."""
        if deploy:
            raise NotImplementedError("QATScheduler.save: deploy=True is not supported (nor is it in nnabla 1.39)")
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        for pred, training in self.registry:
            if training:
                continue
            outputs = list(pred) if isinstance(pred, (list, tuple)) else [pred]
            names = {"x{}".format(k): v for k, v in enumerate(inputs)}
            outs = {"y{}".format(k): v for k, v in enumerate(outputs)}
            save(fname, {"networks": [{"name": net_name, "batch_size": batch_size, "outputs": outs,
                                       "names": names}],
                         "executors": [{"name": "runtime", "network": net_name, "data": list(names),
                                        "outputs": list(outs)}]})
