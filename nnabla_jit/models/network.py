"""What every model of the zoo shares: finding its weights, and building its network either from
Sony's ``.nnp`` file (through ``NnpNetworkPass``, as nnabla does) or, without the file, from
parametric functions (``Layers``) with freshly initialised weights."""
import os
from collections import OrderedDict

from .. import functions as F
from .. import parametric_functions as PF
from ..logger import logger
from ..parameter import load_parameters, parameter_scope
from ..utils.download import download
from ..utils.nnp_graph import NnpLoader, NnpNetworkPass
from ..variable import Variable
from .utils import get_model_home, get_model_url_base

__all__ = ["ModelBase", "Layers", "BuiltNetwork"]


class _Reached(Exception):
    """Raised by ``Layers.mark`` at the ``use_up_to`` variable: the build stops there."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable


class BuiltNetwork:
    """What ``model(..., returns_net=True)`` returns for a network built from layers: the same
    ``inputs`` / ``outputs`` / ``variables`` dicts as an ``NnpNetwork``."""

    def __init__(self, inputs, outputs, variables):
        self.inputs = inputs
        self.outputs = outputs
        self.variables = variables


class Layers:
    """The building blocks a model's architecture is written with. ``training`` decides batch
    statistics, dropout and whether the parameters take gradients; ``mark(key, h)`` names a cut
    point and ends the build there when it is the ``use_up_to`` one."""

    def __init__(self, training, use_up_to, force_global_pooling, check_global_pooling):
        self.training = training
        self.use_up_to = use_up_to
        self.force_global_pooling = force_global_pooling
        self.check_global_pooling = check_global_pooling
        self.marked = OrderedDict()
        self.extra_outputs = OrderedDict()    # outputs besides the cut (auxiliary classifiers)

    def mark(self, key, h):
        self.marked[key] = h
        if key == self.use_up_to:
            raise _Reached(h)
        return h

    def conv(self, h, maps, kernel, stride=1, pad=None, group=1, dilation=1, bias=False, name=None):
        """A convolution ("same" padding by default); parameters ``<name>/conv/W`` (and ``b``)."""
        k = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
        pad = tuple(dilation * (s // 2) for s in k) if pad is None else (
            (pad, pad) if isinstance(pad, int) else tuple(pad))
        with parameter_scope(name or ""):
            return PF.convolution(h, maps, k, pad=pad, stride=(stride, stride), group=group,
                                  dilation=(dilation, dilation), with_bias=bias,
                                  fix_parameters=not self.training)

    def bn(self, h, relu=False, name=None):
        """Batch normalization (``<name>/bn/...``), then a ReLU with ``relu``."""
        with parameter_scope(name or ""):
            h = PF.batch_normalization(h, batch_stat=self.training, fix_parameters=not self.training)
        return F.relu(h) if relu else h

    def conv_bn(self, h, maps, kernel, stride=1, group=1, relu=True, pad=None, dilation=1, name="conv"):
        """Convolution (no bias), batch normalization and, with ``relu``, a ReLU, under ``name``."""
        with parameter_scope(name):
            h = self.conv(h, maps, kernel, stride, pad, group, dilation)
            return self.bn(h, relu)

    def affine(self, h, n, name=None):
        """An affine layer (``<name>/affine/W`` and ``b``)."""
        with parameter_scope(name or ""):
            return PF.affine(h, n, fix_parameters=not self.training)

    def dropout(self, h, p=0.5):
        return F.dropout(h, p) if self.training else h

    def max_pool(self, h, kernel, stride, pad=0):
        return F.max_pooling(h, (kernel, kernel), (stride, stride), pad=(pad, pad))

    def final_pool(self, h, trained):
        """The last average pooling: over the whole map at the model's own input size (its
        ``trained`` window). At another size nnabla refuses (``check_global_pooling``) unless
        told to pool globally (``force_global_pooling``); without the check it keeps the window."""
        size = tuple(h.shape[2:])
        trained = tuple(trained)
        if size != trained and not self.force_global_pooling:
            if self.check_global_pooling:
                raise ValueError("the final average pooling (window {}) is not global on a feature "
                                 "map of {}: pass force_global_pooling=True for inputs of another "
                                 "size, or check_global_pooling=False".format(trained, size))
            return F.average_pooling(h, trained, trained)
        return F.average_pooling(h, size, size)


class ModelBase:
    """A model of the zoo. Subclasses set ``_KEY_VARIABLE`` (``use_up_to`` key -> nnabla's
    variable name in the ``.nnp``), the settings of the ``.nnp`` pass (``_NNP_*``), their input
    shape and ``_build(layers, x)``, the same architecture written with ``Layers``."""
    _KEY_VARIABLE = {}
    _FOLDER = "imagenet"
    _NNP_NETWORK = "Training"
    _NNP_INPUT = "InputX"
    _NNP_AUGMENTATION = "ImageAugmentationX"    # removed and rewired
    _NNP_POOLING = ("AveragePooling", False)    # the final pooling's name (or type: True), or None
    _NNP_DROPOUTS = ()                          # removed when not training
    _NNP_DROP_FUNCTIONS = ()                    # left out
    _KEY_FORMAT = {}

    nnp = None
    _h5 = None

    @property
    def input_shape(self):
        """The image size the model was trained on: (channels, height, width)."""
        return self._input_shape()

    def _input_shape(self):
        return (3, 224, 224)

    def _load_nnp(self, rel_name, rel_url):
        """Take the weights ``rel_name`` from the model home, downloading them from
        ``rel_url`` (under ``get_model_url_base()``) first if needed; without them, say so."""
        path = os.path.join(get_model_home(), self._FOLDER, rel_name)
        h5 = os.path.splitext(path)[0] + ".h5"
        if not os.path.exists(path) and os.path.exists(h5):
            logger.info("{}: loading the weights of {}".format(type(self).__name__, h5))
            self._h5 = h5
            return
        url = get_model_url_base().rstrip("/") + "/{}/{}".format(self._FOLDER, rel_url)
        if not os.path.exists(path):
            logger.info("Downloading {} from {}".format(rel_name, url))
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            download(url, path, open_file=False, allow_overwrite=False, timeout=30)
        except (OSError, ValueError) as e:   # urllib's errors are OSErrors
            logger.warning("{}: no pretrained weights ({} could not be downloaded: {}); the network "
                           "is built with initialised weights (put {} there to use them)".format(
                               type(self).__name__, url, getattr(e, "reason", e), path))
            return
        self.nnp = NnpLoader(path)

    def get_input_var(self, input_var):
        if input_var is None:
            input_var = Variable((1,) + tuple(self.input_shape))
        if input_var.ndim != 4 or input_var.shape[1] != self.input_shape[0]:
            raise ValueError("{}: input_var must be 4-d (batch, {}, height, width), got shape {}"
                             .format(type(self).__name__, self.input_shape[0], input_var.shape))
        return input_var

    def __call__(self, input_var=None, use_from=None, use_up_to="classifier", training=False,
                 force_global_pooling=False, check_global_pooling=True, returns_net=False, verbose=0):
        """Build the network on ``input_var`` (default: one image of ``input_shape``) up to the
        variable ``use_up_to`` names; ``training`` turns batch statistics, dropout and the
        parameters' gradients on. Returns the last variable, or with ``returns_net`` the network
        (``inputs``, ``outputs``, ``variables``)."""
        if use_from is not None:
            raise ValueError("{}: use_from is reserved (nnabla's forward compatibility); leave it "
                             "None".format(type(self).__name__))
        if use_up_to not in self._KEY_VARIABLE:
            raise ValueError('The key "{}" is not present in {}. Available keys are {}.'.format(
                use_up_to, type(self).__name__, list(self._KEY_VARIABLE.keys())))
        x = self.get_input_var(input_var)
        if self.nnp is not None:
            net = self._network_from_nnp(x, use_up_to, training, force_global_pooling,
                                         check_global_pooling, verbose)
        else:
            net = self._network_from_layers(x, use_up_to, training, force_global_pooling,
                                            check_global_pooling)
        return net if returns_net else list(net.outputs.values())[0]

    def _nnp_pass(self, x, training, force_global_pooling, check_global_pooling, verbose):
        """The edits every model makes to its file's network: the input, the final pooling, the
        batch statistics (the cut and the fixing of parameters come after)."""
        callback = NnpNetworkPass(verbose)
        if self._NNP_DROP_FUNCTIONS:
            callback.drop_function(*self._NNP_DROP_FUNCTIONS)
        if self._NNP_AUGMENTATION:
            callback.remove_and_rewire(self._NNP_AUGMENTATION)
        callback.set_variable(self._NNP_INPUT, x)
        name, by_type = self._NNP_POOLING
        if name is None:           # no final average pooling (VGG, AlexNet)
            pass
        elif force_global_pooling:
            callback.force_average_pooling_global(name, by_type=by_type)
        elif check_global_pooling:
            callback.check_average_pooling_global(name, by_type=by_type)
        callback.set_batch_normalization_batch_stat_all(training)
        return callback

    def _network_from_nnp(self, x, use_up_to, training, force_global_pooling, check_global_pooling,
                          verbose, cuts=(), drops=()):
        """Build the file's network up to ``use_up_to`` (and the other keys ``cuts``), without
        the functions ``drops``."""
        callback = self._nnp_pass(x, training, force_global_pooling, check_global_pooling, verbose)
        for key in cuts:
            callback.use_up_to(self._KEY_VARIABLE[key].format(**self._KEY_FORMAT))
        if drops:
            callback.drop_function(*drops)
        if not training:
            for dropout in self._NNP_DROPOUTS:
                callback.remove_and_rewire(dropout)
            callback.fix_parameters()
        callback.use_up_to(self._KEY_VARIABLE[use_up_to].format(**self._KEY_FORMAT))
        return self.nnp.get_network(self._NNP_NETWORK, batch_size=x.shape[0], callback=callback)

    def _network_from_layers(self, x, use_up_to, training, force_global_pooling, check_global_pooling):
        if self._h5 is not None:
            load_parameters(self._h5)
            self._h5 = None        # once: later calls share the parameters loaded
        layers = Layers(training, use_up_to, force_global_pooling, check_global_pooling)
        try:
            self._build(layers, x)
        except _Reached as reached:
            out = reached.variable
        else:
            raise RuntimeError("{}: the build never reached '{}'".format(type(self).__name__, use_up_to))
        outputs = OrderedDict([(use_up_to, out)])
        outputs.update(layers.extra_outputs)
        return BuiltNetwork(OrderedDict(x=x), outputs, layers.marked)

    def _build(self, layers, x):
        raise NotImplementedError
