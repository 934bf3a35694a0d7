"""``nnabla_jit.parametric_functions`` (``PF``): functions that create their parameters.

Each PF function runs under a parameter scope named after it (``affine``, ``conv``, ``bn``, ...)
and, when ``name=`` is given, under that scope first: ``PF.affine(x, 10, name='fc1')`` creates
``fc1/affine/W`` and ``fc1/affine/b``, exactly as nnabla does, so parameter files cross between
the two libraries.
"""
import functools
import inspect

import numpy as np

from . import functions as F
from .composite_functions import lstm_cell_update
from .initializer import (ConstantInitializer, NormalInitializer, UniformInitializer,
                          WeightNormalizationScaleInitializer, calc_uniform_lim_glorot)
from .parameter import get_parameter, get_parameter_or_create, parameter_scope, set_parameter
from .variable import Variable

__all__ = ["parametric_function_api"]


def parametric_function_api(scope_name=None, param_desc=None):
    """Decorator: run the function under ``parameter_scope(scope_name)`` and add a ``name``
    argument that puts that scope under ``name``. ``param_desc`` lists (name, description,
    shape, need_grad) for the docstring."""
    def decorate(func):
        scope = scope_name or func.__name__
        sig = inspect.signature(func)
        if "fix_parameters" not in sig.parameters:
            raise TypeError("parametric function {} must take fix_parameters".format(func.__name__))

        @functools.wraps(func)
        def wrapper(*args, name=None, **kwargs):
            _check_sizes(func.__name__, sig, args, kwargs)
            if name is None:
                with parameter_scope(scope):
                    return func(*args, **kwargs)
            with parameter_scope(name):
                with parameter_scope(scope):
                    return func(*args, **kwargs)

        params = list(sig.parameters.values()) + [
            inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY if any(
                p.kind == inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values())
                else inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
        wrapper.__signature__ = sig.replace(parameters=params)
        if param_desc:
            wrapper.__doc__ = (func.__doc__ or "") + "\n    Parameters (created under scope '{}'):\n{}".format(
                scope, "\n".join("        {} ({}, {}): {}".format(
                    n, s, "trained" if g else "not trained", d) for n, d, s, g in param_desc))
        wrapper.__scope_name__ = scope
        wrapper.__parametric_function_api_base__ = func
        return wrapper
    return decorate


# Arguments that are sizes (a positive integer; those in _SIZE_TUPLES also a tuple of them), checked
# before any parameter is created, so that a bad one is reported by name, not by the initializer
# or numpy (``PF.affine(x, -1)``, ``PF.convolution(x, 2, (0, 0))``). A float size is taken as
# nnabla takes it (programs pass ``maps * 0.5``): it flows into the initializers' bounds as given,
# and parameter shapes truncate it toward zero (:func:`_dims`), as nnabla's Variable does.
_SIZES = ("n_outmaps", "outmaps", "kernel", "group", "n_inputs", "n_features", "state_size",
          "num_heads", "r", "multiplier", "divisor", "num_groups", "embed_dim", "batch_size")
_SIZE_TUPLES = ("n_outmaps", "kernel")


def _is_size(value):
    if isinstance(value, (float, np.floating)):
        return bool(np.isfinite(value)) and int(value) > 0
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0


def _dims(shape):
    """A parameter's shape with float sizes truncated toward zero, as nnabla's Variable
    truncates them (``PF.convolution(x, 4.7, ...)`` makes 4 maps)."""
    return tuple(int(s) if isinstance(s, (float, np.floating)) else s for s in shape)


def _check_sizes(layer, sig, args, kwargs):
    try:
        bound = sig.bind(*args, **kwargs).arguments
    except TypeError as e:
        raise TypeError("PF.{}: {}".format(layer, e)) from None
    for arg in _SIZES:
        if arg not in bound:
            continue
        value = bound[arg]
        if arg == "group" and isinstance(value, str):     # sync_batch_normalization's group name
            continue
        if arg in _SIZE_TUPLES and hasattr(value, "__iter__") and not isinstance(value, str):
            if len(list(value)) and all(_is_size(v) for v in value):
                continue
        elif _is_size(value):
            continue
        raise ValueError("PF.{}: {} must be a positive integer{}, got {!r}".format(
            layer, "r (the rank)" if arg == "r" else arg,
            " or a tuple of them" if arg in _SIZE_TUPLES else "", value))
    base_axis = bound.get("base_axis")
    inp = args[0] if args else None
    if base_axis is not None and hasattr(inp, "shape"):
        ndim = len(inp.shape)
        if not isinstance(base_axis, (int, np.integer)):
            # nnabla indexes the shape with it: a TypeError there
            raise TypeError("PF.{}: base_axis must be an integer, got {!r}".format(layer, base_axis))
        if not -ndim <= base_axis < ndim:
            raise ValueError("PF.{}: base_axis {!r} is out of range for an input of shape {}"
                             .format(layer, base_axis, tuple(inp.shape)))


def _append_api(*names):
    """Families appended below register their public names here."""
    __all__.extend(names)


# ============================================================================ helpers
def _as_list(n_outmaps):
    """nnabla's ``n_outmaps``: an int or a shape, as a list."""
    return list(n_outmaps) if hasattr(n_outmaps, "__iter__") else [n_outmaps]


def _glorot_uniform(inmaps, outmaps, kernel=(1, 1), rng=None):
    """nnabla's default weight initializer: U(-b, b), b = sqrt(6 / (K (inmaps + outmaps)))."""
    return UniformInitializer(calc_uniform_lim_glorot(inmaps, outmaps, kernel), rng=rng)


def _trainable(name, shape, initializer, fix_parameters):
    """A parameter a solver updates (registered with need_grad=True), fixed on request."""
    return get_parameter_or_create(name, _dims(shape), initializer, True, not fix_parameters)


def _buffer(name, shape, initializer):
    """A parameter no gradient reaches (running statistics, quantized copies, ...)."""
    return get_parameter_or_create(name, _dims(shape), initializer, False)


def _written_into(param_name, shape, initializer, transform):
    """The output of ``transform(outputs=...)`` made to live in the buffer parameter
    ``param_name``, so that the parameter holds e.g. the quantized weights after a forward."""
    holder = _buffer(param_name, shape, initializer)
    out = transform(outputs=[Variable._from_ndarray(holder.data)])
    out.persistent = True
    return out


def _new_factor(name, data):
    """Register ``data`` as the trainable parameter ``name`` (factors of the low-rank layers)."""
    param = Variable(data.shape, need_grad=True)
    param.d = data
    set_parameter(name, param)
    return param


def _fixed_if(param, fix_parameters):
    """``param``, or a twin with need_grad off when ``fix_parameters`` (and on otherwise)."""
    if fix_parameters == param.need_grad:
        return param.get_unlinked_variable(need_grad=not fix_parameters)
    return param


def _conv_filter_shape(inp, base_axis, group, kernel, channel_last):
    """(input channels, the filter's shape after its out-channel axis)."""
    if channel_last:
        channels = inp.shape[-1]
        return channels, tuple(kernel) + (channels // group,)
    channels = inp.shape[base_axis]
    return channels, (channels // group,) + tuple(kernel)


def _stat_shape(inp, axes):
    """Shape of per-axes statistics: the input's sizes on ``axes``, 1 elsewhere."""
    shape = [1] * len(inp.shape)
    for a in axes:
        shape[a] = inp.shape[a]
    return shape


def _beta_gamma(shape, fix_parameters, param_init, no_bias, no_scale):
    """The ``beta`` (zeros) and ``gamma`` (ones) of a normalization layer, None when omitted."""
    param_init = param_init or {}
    beta = None if no_bias else _trainable(
        "beta", shape, param_init.get("beta", ConstantInitializer(0)), fix_parameters)
    gamma = None if no_scale else _trainable(
        "gamma", shape, param_init.get("gamma", ConstantInitializer(1)), fix_parameters)
    return beta, gamma


def _default(initializer, value):
    """``initializer``, or a constant ``value`` when it is None."""
    return ConstantInitializer(value) if initializer is None else initializer


def _bias(shape, b_init, with_bias, fix_parameters, apply_b=None):
    """The bias ``b`` of a layer (zero at first unless ``b_init``), through ``apply_b``; None
    without ``with_bias``."""
    if not with_bias:
        return None
    b = _trainable("b", shape, _default(b_init, 0), fix_parameters)
    return b if apply_b is None else apply_b(b)


def _force_list(axis):
    return list(axis) if hasattr(axis, "__iter__") else [axis]


# ============================================================================ affine family
@parametric_function_api("affine", [
    ("W", "the weights", "(inmaps, outmaps)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def affine(inp, n_outmaps, base_axis=1, w_init=None, b_init=None, fix_parameters=False, rng=None,
           with_bias=True, apply_w=None, apply_b=None):
    """Fully connected layer with its own parameters: y = x W + b, x flattened to a matrix at
    base_axis.

    Args:
        inp (Variable): input (N..., D...); the axes from base_axis on are flattened.
        n_outmaps (int or tuple of int): output units; a tuple shapes the output's trailing axes.
        base_axis (int, default 1): the first flattened axis (the axes before it are batch axes).
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained (no gradient).
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        apply_w (callable, default None): applied to W before use (e.g. a weight normalization).
        apply_b (callable, default None): applied to b before use.
        name (str, default None): a parameter scope to put the layer's scope under
            (``name/affine/W``).

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.

    Example:
        >>> x = nn.Variable((8, 3, 4))
        >>> y = PF.affine(x, 10, name='fc1')  # y.shape == (8, 10)
    """
    n_outmaps = _as_list(n_outmaps)
    inmaps = int(np.prod(inp.shape[base_axis:]))
    if w_init is None:
        w_init = _glorot_uniform(inmaps, int(np.prod(n_outmaps)), rng=rng)
    w = _trainable("W", [inmaps] + n_outmaps, w_init, fix_parameters)
    if apply_w is not None:
        w = apply_w(w)
    b = _bias(n_outmaps, b_init, with_bias, fix_parameters, apply_b)
    return F.affine(inp, w, b, base_axis)


@parametric_function_api("svd_affine", [
    ("U", "the first factor", "(inmaps, r)", True),
    ("V", "the second factor", "(r, outmaps)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def svd_affine(inp, n_outmaps, r, base_axis=1, uv_init=None, b_init=None, fix_parameters=False,
               rng=None, with_bias=True):
    """Affine layer with a rank-r weight U V: two affines through an r-wide bottleneck, U and V
    taken from the truncated SVD of a full weight (existing U and V are kept).

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        r (int): the rank (the bottleneck's width).
        base_axis (int, default 1): the first flattened axis.
        uv_init (initializer or numpy array, default None): the full weight (D, n_outmaps) that is
            factored; None: Glorot uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    n_outmaps = _as_list(n_outmaps)
    n_outmap = int(np.prod(n_outmaps))
    inmaps = int(np.prod(inp.shape[base_axis:]))
    if uv_init is None:
        uv_init = _glorot_uniform(inmaps, n_outmap, rng=rng)
    uv = uv_init if isinstance(uv_init, np.ndarray) else uv_init([inmaps] + n_outmaps)
    u, v = get_parameter("U"), get_parameter("V")
    if u is None or v is None:
        if r <= 0:
            raise ValueError("svd_affine: the rank r must be positive, got {}".format(r))
        left, singular, right = np.linalg.svd(uv.reshape(inmaps, n_outmap), full_matrices=False)
        u = _new_factor("U", np.dot(left, np.diag(singular))[:, :r])   # singular values go to U
        v = _new_factor("V", right[:r, :].reshape([r] + n_outmaps))
    u, v = _fixed_if(u, fix_parameters), _fixed_if(v, fix_parameters)
    b = _bias(n_outmaps, b_init, with_bias, fix_parameters)
    return F.affine(F.affine(inp, u, None, base_axis), v, b, base_axis)


def _binary_affine_params(inp, n_outmaps, base_axis, w_init, wb_init, fix_parameters, rng):
    """W (float) and Wb (its binarized copy, written by the op) of the binary affines."""
    n_outmaps = _as_list(n_outmaps)
    inmaps = int(np.prod(inp.shape[base_axis:]))
    n_outmap = int(np.prod(n_outmaps))
    if w_init is None:
        w_init = _glorot_uniform(inmaps, n_outmap, rng=rng)
    if wb_init is None:
        wb_init = _glorot_uniform(inmaps, n_outmap, rng=rng)
    w = _trainable("W", [inmaps] + n_outmaps, w_init, fix_parameters)
    wb = _buffer("Wb", [inmaps] + n_outmaps, wb_init)
    return n_outmaps, w, wb


@parametric_function_api("bicon_affine", [
    ("W", "the weights, trained in float", "(inmaps, outmaps)", True),
    ("Wb", "sign(W), written by the forward", "(inmaps, outmaps)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def binary_connect_affine(inp, n_outmaps, base_axis=1, quantize_zero_to=1.0, w_init=None,
                          wb_init=None, b_init=None, fix_parameters=False, rng=None, with_bias=True):
    """Affine layer with binarized weights (BinaryConnect): y = x sign(W) + b; W is trained, Wb
    holds sign(W) after a forward.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        quantize_zero_to (float, default 1.0): the value a zero weight binarizes to.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        wb_init (initializer or numpy array, default None): Wb's initial values.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    n_outmaps, w, wb = _binary_affine_params(inp, n_outmaps, base_axis, w_init, wb_init,
                                             fix_parameters, rng)
    b = _bias(n_outmaps, b_init, with_bias, fix_parameters)
    return F.binary_connect_affine(inp, w, wb, b, base_axis, quantize_zero_to)


@parametric_function_api("bwn_affine", [
    ("W", "the weights, trained in float", "(inmaps, outmaps)", True),
    ("Wb", "sign(W), written by the forward", "(inmaps, outmaps)", False),
    ("alpha", "the per-output scale, written by the forward", "(outmaps,)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def binary_weight_affine(inp, n_outmaps, base_axis=1, quantize_zero_to=1.0, w_init=None,
                         wb_init=None, b_init=None, fix_parameters=False, rng=None, with_bias=True):
    """Affine layer with binary weights scaled per output (XNOR-Net): y = alpha (x sign(W)) + b,
    alpha the mean of abs(W) per output unit.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        quantize_zero_to (float, default 1.0): the value a zero weight binarizes to.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        wb_init (initializer or numpy array, default None): Wb's initial values.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    n_outmaps, w, wb = _binary_affine_params(inp, n_outmaps, base_axis, w_init, wb_init,
                                             fix_parameters, rng)
    alpha = _buffer("alpha", n_outmaps, ConstantInitializer(0))
    b = _bias(n_outmaps, b_init, with_bias, fix_parameters)
    return F.binary_weight_affine(inp, w, wb, alpha, b, base_axis, quantize_zero_to)


@parametric_function_api("inq_affine", [
    ("W", "the weights, trained in float", "(inmaps, outmaps)", True),
    ("I", "1 where a weight is fixed", "(inmaps, outmaps)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def inq_affine(inp, n_outmaps, base_axis=1, num_bits=4, inq_iterations=(),
               selection_algorithm="random", seed=-1, w_init=None, i_init=None, b_init=None,
               fix_parameters=False, rng=None, with_bias=True):
    """Affine layer with Incremental Network Quantization: at the forwards listed in
    inq_iterations half of the free weights are fixed to powers of two (I marks them).

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        num_bits (int, default 4): bits of the power-of-two grid.
        inq_iterations (tuple of int, default ()): the forward counts at which more weights are
            fixed.
        selection_algorithm (str, default 'random'): 'largest_abs' or 'random': which weights are
            fixed first.
        seed (int, default -1): seed of the random selection; -1: the global generator.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        i_init (initializer or numpy array, default None): I's initial values; None: zeros (no
            weight fixed).
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    n_outmaps = _as_list(n_outmaps)
    inmaps = int(np.prod(inp.shape[base_axis:]))
    if w_init is None:
        w_init = _glorot_uniform(inmaps, int(np.prod(n_outmaps)), rng=rng)
    w = _trainable("W", [inmaps] + n_outmaps, w_init, fix_parameters)
    i = _buffer("I", [inmaps] + n_outmaps, _default(i_init, 0))
    b = _bias(n_outmaps, b_init, with_bias, fix_parameters)
    return F.inq_affine(inp, w, i, b, base_axis, num_bits, inq_iterations, selection_algorithm, seed)


# ============================================================================ convolutions
@parametric_function_api("conv", [
    ("W", "the filters", "(outmaps, inmaps // group, *kernel)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                channel_last=False, w_init=None, b_init=None, base_axis=1, fix_parameters=False,
                rng=None, with_bias=True, apply_w=None, apply_b=None):
    """N-d convolution layer with its own filters W and bias b.

    Args:
        inp (Variable): input (N..., C, *spatial), or (N..., *spatial, C) with channel_last.
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size, e.g. (3, 3).
        pad (tuple of int, default None): zero padding at both ends of each spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups, each with its own outmaps / group filters.
        channel_last (bool, default False): channel-last input, output and W.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        apply_w (callable, default None): applied to W before use (e.g. a weight normalization).
        apply_b (callable, default None): applied to b before use.
        name (str, default None): a parameter scope to put the layer's scope under
            (``name/conv/W``).

    Returns:
        Variable: (N..., outmaps, *out), out as in F.convolution.

    Example:
        >>> x = nn.Variable((8, 3, 32, 32))
        >>> y = PF.convolution(x, 16, (3, 3), pad=(1, 1), name='conv1')  # y.shape == (8, 16, 32, 32)
    """
    channels, filter_shape = _conv_filter_shape(inp, base_axis, group, kernel, channel_last)
    if w_init is None:
        w_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    w = _trainable("W", (outmaps,) + filter_shape, w_init, fix_parameters)
    if apply_w is not None:
        w = apply_w(w)
    b = _bias((outmaps,), b_init, with_bias, fix_parameters, apply_b)
    return F.convolution(inp, w, b, base_axis, pad, stride, dilation, group, channel_last)


@parametric_function_api("svd_conv", [
    ("U", "the depthwise filters", "(inmaps * r, *kernel)", True),
    ("V", "the 1x1 convolution's filters", "(outmaps, inmaps * r, 1, ...)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def svd_convolution(inp, outmaps, kernel, r, pad=None, stride=None, dilation=None, uv_init=None,
                    b_init=None, base_axis=1, fix_parameters=False, rng=None, with_bias=True):
    """Convolution with a rank-r filter: a depthwise convolution with multiplier r (U) followed by a
    1x1 convolution (V), from the truncated SVD of a full filter.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        r (int): the rank.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        uv_init (initializer or numpy array, default None): the full filter that is factored;
            None: Glorot uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    if r <= 0:
        raise ValueError("svd_convolution: the rank r must be positive, got {}".format(r))
    inmaps = inp.shape[base_axis]
    kernel = tuple(kernel)
    if uv_init is None:
        uv_init = _glorot_uniform(inmaps, outmaps, kernel, rng=rng)
    uv = uv_init if isinstance(uv_init, np.ndarray) else uv_init((outmaps, inmaps) + kernel)
    uv = uv.reshape((outmaps, inmaps, int(np.prod(kernel))))
    u, v = get_parameter("U"), get_parameter("V")
    if u is None or v is None:
        u_low_rank = np.zeros((inmaps, int(np.prod(kernel)), r))
        v_low_rank = np.zeros((inmaps, r, outmaps))
        for i in range(inmaps):
            left, singular, right = np.linalg.svd(np.transpose(uv[:, i, :]), full_matrices=False)
            u_low_rank[i] = np.dot(left[:, :r], np.diag(singular[:r]))
            v_low_rank[i] = right[:r, :]
        # U: (I, K, r) -> (I * r, *kernel) for the depthwise convolution;
        # V: (I, r, O) -> (O, I * r, 1, ...) for the 1x1 convolution.
        u = _new_factor("U", np.transpose(u_low_rank, (0, 2, 1)).reshape((inmaps * r,) + kernel))
        v = _new_factor("V", np.transpose(v_low_rank, (2, 0, 1)).reshape(
            (outmaps, inmaps * r) + (1,) * len(kernel)))
    u, v = _fixed_if(u, fix_parameters), _fixed_if(v, fix_parameters)
    b = _bias((outmaps,), b_init, with_bias, fix_parameters)
    y = F.depthwise_convolution(inp, u, None, base_axis, pad, stride, dilation, r)
    return F.convolution(y, v, b, base_axis)


@parametric_function_api("cpd3_conv", [
    ("I", "the input 1x1 convolution's filters", "(r, inmaps, 1, ...)", True),
    ("K", "the depthwise filters", "(r, *kernel)", True),
    ("O", "the output 1x1 convolution's filters", "(outmaps, r, 1, ...)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def cpd3_convolution(inp, outmaps, kernel, r, pad=None, stride=None, dilation=None, oik_init=None,
                     b_init=None, base_axis=1, fix_parameters=False, rng=None, with_bias=True,
                     max_iter=500, stopping_criterion=1e-5, lambda_reg=0.0):
    """Convolution with a rank-r CP-decomposed filter: a 1x1 convolution to r maps (I), a depthwise
    convolution (K) and a 1x1 convolution to outmaps (O), the factors found by alternating least
    squares.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        r (int): the rank.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        oik_init (initializer or numpy array, default None): the full filter that is factored;
            None: Glorot uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the initializers and the
            decomposition draw from.
        with_bias (bool, default True): create and add the bias b.
        max_iter (int, default 500): iterations of the decomposition.
        stopping_criterion (float, default 1e-05): the decomposition stops when its fit improves
            less.
        lambda_reg (float, default 0.0): regularization of the decomposition.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    inmaps = inp.shape[base_axis]
    kernel = tuple(kernel)
    if oik_init is None:
        oik_init = _glorot_uniform(inmaps, outmaps, kernel, rng=rng)
    oik = oik_init if isinstance(oik_init, np.ndarray) else oik_init((outmaps, inmaps) + kernel)
    oik = oik.reshape((outmaps, inmaps, int(np.prod(kernel))))
    o, i, k = get_parameter("O"), get_parameter("I"), get_parameter("K")
    if o is None or i is None or k is None:
        if r <= 0:
            raise ValueError("cpd3_convolution: the rank r must be positive, got {}".format(r))
        from .utils.factorization import cpd
        factors, lmbda = cpd.ALS().solve(X=oik, rank=r, max_iter=max_iter,
                                         stopping_criterion=stopping_criterion,
                                         lambda_reg=lambda_reg, dtype=oik.dtype, rng=rng)
        ones = (1,) * len(kernel)
        i = _new_factor("I", np.transpose(factors[1]).reshape((r, inmaps) + ones))
        o = _new_factor("O", (factors[0] * lmbda).reshape((outmaps, r) + ones))
        k = _new_factor("K", np.transpose(factors[2]).reshape((r,) + kernel))
    o, i, k = (_fixed_if(p, fix_parameters) for p in (o, i, k))
    b = _bias((outmaps,), b_init, with_bias, fix_parameters)
    y = F.convolution(inp, i, None, base_axis)
    y = F.depthwise_convolution(y, k, None, base_axis, pad, stride, dilation, 1)
    return F.convolution(y, o, b, base_axis)


def _binary_conv_params(inp, outmaps, kernel, group, w_init, wb_init, base_axis, fix_parameters,
                        rng):
    """W (float) and Wb (its binarized copy, written by the op) of the binary convolutions."""
    channels, filter_shape = _conv_filter_shape(inp, base_axis, group, kernel, False)
    if w_init is None:
        w_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    if wb_init is None:
        wb_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    w = _trainable("W", (outmaps,) + filter_shape, w_init, fix_parameters)
    wb = _buffer("Wb", (outmaps,) + filter_shape, wb_init)
    return w, wb


@parametric_function_api("bicon_conv", [
    ("W", "the filters, trained in float", "(outmaps, inmaps // group, *kernel)", True),
    ("Wb", "sign(W), written by the forward", "(outmaps, inmaps // group, *kernel)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def binary_connect_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                               quantize_zero_to=1.0, w_init=None, wb_init=None, b_init=None,
                               base_axis=1, fix_parameters=False, rng=None, with_bias=True):
    """Convolution with binarized filters (BinaryConnect): sign(W) convolves; W is trained, Wb holds
    sign(W) after a forward.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        quantize_zero_to (float, default 1.0): the value a zero weight binarizes to.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        wb_init (initializer or numpy array, default None): Wb's initial values.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w, wb = _binary_conv_params(inp, outmaps, kernel, group, w_init, wb_init, base_axis,
                                fix_parameters, rng)
    b = _bias((outmaps,), b_init, with_bias, fix_parameters)
    return F.binary_connect_convolution(inp, w, wb, b, base_axis, pad, stride, dilation, group,
                                        quantize_zero_to)


@parametric_function_api("bwn_conv", [
    ("W", "the filters, trained in float", "(outmaps, inmaps // group, *kernel)", True),
    ("Wb", "sign(W), written by the forward", "(outmaps, inmaps // group, *kernel)", False),
    ("alpha", "the per-output scale, written by the forward", "(outmaps,)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def binary_weight_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                              quantize_zero_to=1.0, w_init=None, wb_init=None, b_init=None,
                              base_axis=1, fix_parameters=False, rng=None, with_bias=True):
    """Convolution with binary filters scaled per output channel (XNOR-Net): alpha sign(W), alpha
    the mean of abs(W) per output channel.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        quantize_zero_to (float, default 1.0): the value a zero weight binarizes to.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        wb_init (initializer or numpy array, default None): Wb's initial values.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w, wb = _binary_conv_params(inp, outmaps, kernel, group, w_init, wb_init, base_axis,
                                fix_parameters, rng)
    alpha = _buffer("alpha", (outmaps,), ConstantInitializer(0))
    b = _bias((outmaps,), b_init, with_bias, fix_parameters)
    return F.binary_weight_convolution(inp, w, wb, alpha, b, base_axis, pad, stride, dilation,
                                       group, quantize_zero_to)


@parametric_function_api("inq_conv", [
    ("W", "the filters, trained in float", "(outmaps, inmaps // group, *kernel)", True),
    ("I", "1 where a weight is fixed", "(outmaps, inmaps // group, *kernel)", False),
    ("b", "the bias", "(outmaps,)", True),
])
def inq_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                    num_bits=4, inq_iterations=(), selection_algorithm="random", seed=-1,
                    w_init=None, i_init=None, b_init=None, base_axis=1, fix_parameters=False,
                    rng=None, with_bias=True):
    """Convolution with Incremental Network Quantization of its filters (see :func:`inq_affine`).

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        num_bits (int, default 4): bits of the power-of-two grid.
        inq_iterations (tuple of int, default ()): the forward counts at which more weights are
            fixed.
        selection_algorithm (str, default 'random'): 'largest_abs' or 'random'.
        seed (int, default -1): seed of the random selection; -1: the global generator.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        i_init (initializer or numpy array, default None): I's initial values; None: zeros.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    channels, filter_shape = _conv_filter_shape(inp, base_axis, group, kernel, False)
    if w_init is None:
        w_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    w = _trainable("W", (outmaps,) + filter_shape, w_init, fix_parameters)
    i = _buffer("I", (outmaps,) + filter_shape, _default(i_init, 0))
    b = _bias((outmaps,), b_init, with_bias, fix_parameters)
    return F.inq_convolution(inp, w, i, b, base_axis, pad, stride, dilation, group, num_bits,
                             inq_iterations, selection_algorithm, seed)


@parametric_function_api("depthwise_conv", [
    ("W", "the filters", "(inmaps * multiplier, *kernel)", True),
    ("b", "the bias", "(inmaps * multiplier,)", True),
])
def depthwise_convolution(inp, kernel, pad=None, stride=None, dilation=None, multiplier=1,
                          w_init=None, b_init=None, base_axis=1, fix_parameters=False, rng=None,
                          with_bias=True):
    """Depthwise convolution layer: multiplier filters per input channel, no mixing across channels.

    Args:
        inp (Variable): input (N..., C, *spatial).
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        multiplier (int, default 1): filters (output channels) per input channel.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., C * multiplier, *out).
    """
    channels = inp.shape[base_axis]
    if w_init is None:
        w_init = _glorot_uniform(channels * multiplier, channels, tuple(kernel), rng=rng)
    w = _trainable("W", (channels * multiplier,) + tuple(kernel), w_init, fix_parameters)
    b = _bias((channels * multiplier,), b_init, with_bias, fix_parameters)
    return F.depthwise_convolution(inp, w, b, base_axis, pad, stride, dilation, multiplier)


@parametric_function_api("deconv", [
    ("W", "the filters", "(inmaps, outmaps // group, *kernel)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def deconvolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                  channel_last=False, output_padding=None, w_init=None, b_init=None, base_axis=1,
                  fix_parameters=False, rng=None, with_bias=True, apply_w=None, apply_b=None):
    """Transposed convolution layer with its own filters W (C, outmaps / group, *kernel) and bias b.

    Args:
        inp (Variable): input (N..., C, *spatial), or channel-last.
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): padding removed from the output; None: 0.
        stride (tuple of int, default None): upsampling step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        channel_last (bool, default False): channel-last input, output and W.
        output_padding (tuple of int, default None): added to the end of each output spatial axis;
            None: 0.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        apply_w (callable, default None): applied to W before use.
        apply_b (callable, default None): applied to b before use.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out), out as in F.deconvolution.

    Example:
        >>> x = nn.Variable((8, 16, 8, 8))
        >>> y = PF.deconvolution(x, 3, (4, 4), pad=(1, 1), stride=(2, 2))  # y.shape == (8, 3, 16, 16)
    """
    if channel_last:
        channels = inp.shape[-1]
        w_shape = (channels,) + tuple(kernel) + (outmaps // group,)
    else:
        channels = inp.shape[base_axis]
        w_shape = (channels, outmaps // group) + tuple(kernel)
    if w_init is None:
        w_init = _glorot_uniform(outmaps, channels, tuple(kernel), rng=rng)
    w = _trainable("W", w_shape, w_init, fix_parameters)
    if apply_w is not None:
        w = apply_w(w)
    b = _bias((outmaps,), b_init, with_bias, fix_parameters, apply_b)
    return F.deconvolution(inp, w, b, base_axis, pad, stride, dilation, group, channel_last,
                           output_padding)


@parametric_function_api("depthwise_deconv", [
    ("W", "the filters", "(inmaps,) + kernel", True),
    ("b", "the bias", "(inmaps / divisor,)", True),
])
def depthwise_deconvolution(inp, kernel, pad=None, stride=None, dilation=None, divisor=1,
                            w_init=None, b_init=None, base_axis=1, fix_parameters=False, rng=None,
                            with_bias=True):
    """Transposed depthwise convolution layer: divisor input channels are summed into each output
    channel.

    Args:
        inp (Variable): input (N..., C, *spatial); C divisible by divisor.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): padding removed from the output; None: 0.
        stride (tuple of int, default None): upsampling step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        divisor (int, default 1): input channels per output channel.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias b.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., C / divisor, *out).
    """
    channels = inp.shape[base_axis]
    if w_init is None:
        w_init = _glorot_uniform(channels, channels, tuple(kernel), rng=rng)
    w = _trainable("W", (channels,) + tuple(kernel), w_init, fix_parameters)
    b = _bias((channels // divisor,), b_init, with_bias, fix_parameters)
    return F.depthwise_deconvolution(inp, w, b, base_axis, pad, stride, dilation, divisor)


# ============================================================================ normalization
_BN_PARAMS = [
    ("beta", "the shift", "the statistics' shape", True),
    ("gamma", "the scale", "the statistics' shape", True),
    ("mean", "the running mean", "the statistics' shape", False),
    ("var", "the running variance", "the statistics' shape", False),
]


def _bn_params(inp, axes, fix_parameters, param_init, no_scale, no_bias):
    """beta, gamma, running mean (zeros) and variance (ones), shaped like per-``axes`` stats."""
    shape = _stat_shape(inp, _force_list(axes))
    param_init = param_init or {}
    beta, gamma = _beta_gamma(shape, fix_parameters, param_init, no_bias, no_scale)
    mean = _buffer("mean", shape, param_init.get("mean", ConstantInitializer(0)))
    var = _buffer("var", shape, param_init.get("var", ConstantInitializer(1)))
    return beta, gamma, mean, var


@parametric_function_api("bn", _BN_PARAMS)
def batch_normalization(inp, axes=[1], decay_rate=0.9, eps=1e-5, batch_stat=True, output_stat=False,
                        fix_parameters=False, param_init=None, no_scale=False, no_bias=False):
    """Batch normalization layer with its own beta, gamma and running mean and variance (scope
    'bn').

    Args:
        inp (Variable): input, e.g. (N, C, H, W).
        axes (list of int, default [1]): the axes that keep their statistics (the channels).
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): normalize with the batch's statistics and update the
            running ones (training); False: use the running ones (inference).
        output_stat (bool, default False): also return the batch mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta', 'gamma', 'mean' and
            'var'; the defaults are 0, 1, 0 and 1.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp; with output_stat also the batch mean and variance.

    Example:
        >>> x = nn.Variable((8, 16, 4, 4))
        >>> y = PF.batch_normalization(x, batch_stat=True)  # y.shape == (8, 16, 4, 4)
    """
    beta, gamma, mean, var = _bn_params(inp, axes, fix_parameters, param_init, no_scale, no_bias)
    return F.batch_normalization(inp, beta, gamma, mean, var, axes, decay_rate, eps, batch_stat,
                                 output_stat)


@parametric_function_api("bn", _BN_PARAMS)
def fused_batch_normalization(inp, z=None, axes=[1], decay_rate=0.9, eps=1e-5, batch_stat=True,
                              nonlinearity="relu", output_stat=False, fix_parameters=False,
                              param_init=None, no_scale=False, no_bias=False):
    """Batch normalization layer, then + z, then relu, in one function (parameters as
    :func:`batch_normalization`'s).

    Args:
        inp (Variable): input, e.g. (N, C, H, W).
        z (Variable, default None): added before the nonlinearity (a residual); None: nothing.
        axes (list of int, default [1]): the axes that keep their statistics.
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): use the batch's statistics and update the running ones.
        nonlinearity (str, default 'relu'): the activation (only 'relu').
        output_stat (bool, default False): also return the batch mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta', 'gamma', 'mean', 'var'.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    beta, gamma, mean, var = _bn_params(inp, axes, fix_parameters, param_init, no_scale, no_bias)
    return F.fused_batch_normalization(inp, beta, gamma, mean, var, z, axes=axes,
                                       decay_rate=decay_rate, eps=eps, batch_stat=batch_stat,
                                       nonlinearity=nonlinearity, output_stat=output_stat)


@parametric_function_api("bn", _BN_PARAMS)
def sync_batch_normalization(inp, comm, group="world", axes=[1], decay_rate=0.9, eps=1e-5,
                             batch_stat=True, output_stat=False, fix_parameters=False,
                             param_init=None, no_scale=False, no_bias=False):
    """Batch normalization layer whose batch statistics are merged over the processes of a
    communicator (data-parallel training).

    Args:
        inp (Variable): input, e.g. (N, C, H, W).
        comm (Communicator): whose processes share the statistics.
        group (str, default 'world'): the communicator's group.
        axes (list of int, default [1]): the axes that keep their statistics.
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): use the merged batch statistics.
        output_stat (bool, default False): also return the batch mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta', 'gamma', 'mean', 'var'.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    beta, gamma, mean, var = _bn_params(inp, axes, fix_parameters, param_init, no_scale, no_bias)
    return F.sync_batch_normalization(inp, beta, gamma, mean, var, comm, group=group, axes=axes,
                                      decay_rate=decay_rate, eps=eps, batch_stat=batch_stat,
                                      output_stat=output_stat)


@parametric_function_api("mean_subtraction", [
    ("mean", "the running mean", "inp.shape[base_axis:]", False),
    ("t", "the number of batches seen", "(1,)", False),
])
def mean_subtraction(inp, base_axis=1, update_running_mean=True, fix_parameters=False):
    """Subtracts the running mean of all inputs seen so far (kept in the parameters mean and t).

    Args:
        inp (Variable): input (N..., *features).
        base_axis (int, default 1): the first feature axis.
        update_running_mean (bool, default True): fold this batch into the running mean.
        fix_parameters (bool, default False): accepted for nnabla's signature (no effect).
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    if len(inp.shape) < base_axis:
        raise ValueError("mean_subtraction: base_axis={} exceeds the {} dimensions of input shape {}"
                         .format(base_axis, len(inp.shape), inp.shape))
    mean = _buffer("mean", inp.shape[base_axis:], ConstantInitializer(0))
    t = _buffer("t", (1,), ConstantInitializer(0))
    return F.mean_subtraction(inp, mean, t, base_axis=base_axis,
                              update_running_mean=update_running_mean)


@parametric_function_api("layer_normalization", [
    ("beta", "the shift", "the statistics' shape", True),
    ("gamma", "the scale", "the statistics' shape", True),
])
def layer_normalization(inp, batch_axis=0, eps=1e-05, output_stat=False, fix_parameters=False,
                        param_init=None, no_scale=False, no_bias=False):
    """Layer normalization layer: each sample normalized over all its axes, with elementwise beta and
    gamma (the input's shape with 1 on the batch axes).

    Args:
        inp (Variable): input (N, ...).
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta' and 'gamma'.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.

    Example:
        >>> x = nn.Variable((8, 10, 32))
        >>> y = PF.layer_normalization(x, batch_axis=(0, 1))  # y.shape == (8, 10, 32)
    """
    batch_axis = _force_list(batch_axis)
    shape = list(inp.shape)
    for a in batch_axis:
        shape[a] = 1
    beta, gamma = _beta_gamma(shape, fix_parameters, param_init, no_bias, no_scale)
    return F.layer_normalization(inp, beta, gamma, batch_axis=batch_axis, eps=eps,
                                 output_stat=output_stat)


@parametric_function_api("instance_normalization", [
    ("beta", "the shift", "the statistics' shape", True),
    ("gamma", "the scale", "the statistics' shape", True),
])
def instance_normalization(inp, channel_axis=1, batch_axis=0, eps=1e-05, output_stat=False,
                           fix_parameters=False, param_init=None, no_scale=False, no_bias=False):
    """Instance normalization layer: each sample's channel normalized over the remaining axes, with
    per-channel beta and gamma.

    Args:
        inp (Variable): input (N, C, ...).
        channel_axis (int, default 1): the channel axis.
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta' and 'gamma'.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    beta, gamma = _beta_gamma(_stat_shape(inp, [channel_axis]), fix_parameters, param_init,
                              no_bias, no_scale)
    return F.instance_normalization(inp, beta, gamma, channel_axis=channel_axis,
                                    batch_axis=batch_axis, eps=eps, output_stat=output_stat)


@parametric_function_api("group_normalization", [
    ("beta", "the shift", "the statistics' shape", True),
    ("gamma", "the scale", "the statistics' shape", True),
])
def group_normalization(inp, num_groups, channel_axis=1, batch_axis=0, eps=1e-05, output_stat=False,
                        fix_parameters=False, param_init=None, no_scale=False, no_bias=False):
    """Group normalization layer: each sample normalized over groups of channels, with per-channel
    beta and gamma.

    Args:
        inp (Variable): input (N, C, ...).
        num_groups (int): number of channel groups; divides C.
        channel_axis (int, default 1): the channel axis.
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance.
        fix_parameters (bool, default False): beta and gamma are not trained.
        param_init (dict, default None): initializers or arrays for 'beta' and 'gamma'.
        no_scale (bool, default False): no gamma.
        no_bias (bool, default False): no beta.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    beta, gamma = _beta_gamma(_stat_shape(inp, [channel_axis]), fix_parameters, param_init,
                              no_bias, no_scale)
    return F.group_normalization(inp, beta, gamma, num_groups=num_groups, channel_axis=channel_axis,
                                 batch_axis=batch_axis, eps=eps,
                                 output_stat=output_stat)


@parametric_function_api("spectral-norm", [
    ("u", "the power iteration's vector", "(w.shape[dim], )", False),
])
def spectral_norm(w, dim=0, itr=1, eps=1e-12, test=False, u_init=None, fix_parameters=True):
    """Spectral normalization of a weight, with the power iteration's vector u kept as a parameter;
    typically ``apply_w=lambda w: PF.spectral_norm(w, dim=0)``.

    Args:
        w (Variable): the weight.
        dim (int, default 0): the output axis (the rows of the matrix).
        itr (int, default 1): power iterations per forward.
        eps (float, default 1e-12): keeps the vectors' normalization away from 0 / 0.
        test (bool, default False): leave u unchanged (inference).
        u_init (initializer or numpy array, default None): u's initial values; None: normal.
        fix_parameters (bool, default True): accepted for nnabla's signature (u is never trained).
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: w / sigma, shape of w.
    """
    if not 0 <= dim < len(w.shape):
        raise ValueError("spectral_norm: dim={} is not an axis of the weight of shape {}"
                         .format(dim, w.shape))
    u = get_parameter_or_create("u", (w.shape[dim],),
                                NormalInitializer() if u_init is None else u_init, False, False)
    return F.spectral_norm(w, u, dim=dim, itr=itr, eps=eps, test=test)


@parametric_function_api("spectral-norm", [
    ("W_sn", "the normalized weight, written by the forward", "w.shape", False),
    ("u", "the power iteration's vector", "(w.shape[dim], )", False),
])
def _spectral_norm_v1(w, dim=0, itr=1, eps=1e-12, test=False, u_init=None, fix_parameters=True):
    """nnabla's earlier spectral norm (its graph of F ops, here the SpectralNorm function): the
    result also kept in the buffer parameter ``W_sn``, which ``test=True`` returns as it is."""
    if not 0 <= dim < len(w.shape):
        raise ValueError("_spectral_norm_v1: dim={} is not an axis of the weight of shape {}"
                         .format(dim, w.shape))
    holder = _buffer("W_sn", w.shape, ConstantInitializer(0))
    u = get_parameter_or_create("u", (w.shape[dim],),
                                NormalInitializer() if u_init is None else u_init, False, False)
    if test:
        return holder
    return _written_into("W_sn", w.shape, ConstantInitializer(0), lambda outputs: F.spectral_norm(
        w, u, dim=dim, itr=itr, eps=eps, test=False, outputs=outputs))


@parametric_function_api("wn", [
    ("g", "the learned norms", "w.shape[dim]", True),
])
def weight_normalization(w, dim=0, eps=1e-12, g_init=None, fix_parameters=False):
    """Weight normalization with the scale g as a parameter: g W / norm(W), the norm per index of
    dim; typically ``apply_w=PF.weight_normalization``.

    Args:
        w (Variable): the weight.
        dim (int, default 0): the axis that keeps its own norm (the output units).
        eps (float, default 1e-12): added to the squared norm.
        g_init (initializer or numpy array, default None): g's initial values; None: W's norms (the
            layer starts unchanged).
        fix_parameters (bool, default False): g is not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of w.
    """
    if g_init is None:
        g_init = WeightNormalizationScaleInitializer(w, dim, eps)
    g = get_parameter_or_create("g", (w.shape[dim],), initializer=g_init, need_grad=True,
                                as_need_grad=not fix_parameters)
    return F.weight_normalization(w, g, dim, eps)


# ============================================================================ embed, prelu
@parametric_function_api("embed", [
    ("W", "the table", "(n_inputs, n_features)", True),
])
def embed(inp, n_inputs, n_features, initializer=None, fix_parameters=False, apply_w=None):
    """Embedding layer: a look-up table W (n_inputs, n_features); y[...] = W[inp[...]].

    Args:
        inp (Variable): integer indices in [0, n_inputs), any shape.
        n_inputs (int): number of rows (distinct indices).
        n_features (int): the length of each row.
        initializer (initializer or numpy array, default None): W's initial values; None: uniform
            in [-sqrt(3), sqrt(3)].
        fix_parameters (bool, default False): W is not trained.
        apply_w (callable, default None): applied to W before use.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape + (n_features,)``.

    Example:
        >>> idx = nn.Variable.from_numpy_array(np.array([[1, 4, 2]]))
        >>> y = PF.embed(idx, 10, 8)  # y.shape == (1, 3, 8)
    """
    if initializer is None:
        initializer = UniformInitializer((-np.sqrt(3.), np.sqrt(3)))
    w = _trainable("W", [n_inputs, n_features], initializer, fix_parameters)
    if apply_w is not None:
        w = apply_w(w)
    return F.embed(inp, w)


@parametric_function_api("prelu", [
    ("slope", "the slope of negative inputs", "tuple() if shared else (inp.shape[base_axis],)", True),
])
def prelu(inp, base_axis=1, shared=True, fix_parameters=False, slope_init=None):
    """Parametric ReLU layer: x for x > 0, slope * x otherwise, with one learned slope or one per
    channel (starting at 0.25).

    Args:
        inp (Variable): input, any shape.
        base_axis (int, default 1): the channel axis of per-channel slopes.
        shared (bool, default True): one slope for all elements (True) or one per channel.
        fix_parameters (bool, default False): the slope is not trained.
        slope_init (initializer or numpy array, default None): the slopes' initial values; None:
            0.25.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of inp.
    """
    shape = tuple() if shared else (inp.shape[base_axis],)
    slope = _trainable("slope", shape, _default(slope_init, 0.25),
                       fix_parameters)
    return F.prelu(inp, slope, base_axis)


# ============================================================================ quantized layers
def _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                               quantize_w, quantize_b, quantize_weight, quantize_bias):
    """The float ``W`` and ``b``, and what the layer uses in their place: the graph writing
    ``quantize_weight(W)`` into ``W_q`` (and likewise ``b_q``), or the float ones when not
    quantized. ``W_q``/``b_q`` start with a draw of ``w_init``/``b_init``, as in nnabla."""
    w = _trainable("W", w_shape, w_init, fix_parameters)
    used_w = w
    if quantize_w:
        used_w = _written_into("W_q", w_shape, w_init, lambda outputs: quantize_weight(w, outputs))
    used_b = None
    if with_bias:
        b = _trainable("b", b_shape, b_init, fix_parameters)
        used_b = b
        if quantize_b:
            used_b = _written_into("b_q", b_shape, b_init, lambda outputs: quantize_bias(b, outputs))
    return used_w, used_b


def _affine_shapes(inp, n_outmaps, base_axis, w_init, b_init, with_bias, rng):
    n_outmaps = _as_list(n_outmaps)
    inmaps = int(np.prod(inp.shape[base_axis:]))
    if w_init is None:
        w_init = _glorot_uniform(inmaps, int(np.prod(n_outmaps)), rng=rng)
    if with_bias and b_init is None:
        b_init = ConstantInitializer()
    return [inmaps] + n_outmaps, n_outmaps, w_init, b_init


def _conv_shapes(inp, outmaps, kernel, group, channel_last, base_axis, w_init, b_init, with_bias, rng):
    channels, filter_shape = _conv_filter_shape(inp, base_axis, group, kernel, channel_last)
    if w_init is None:
        w_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    if with_bias and b_init is None:
        b_init = ConstantInitializer()
    return (outmaps,) + filter_shape, (outmaps,), w_init, b_init


def _fixed_point(sign, n, delta, ste_fine_grained):
    return lambda x, outputs: F.fixed_point_quantize(x, sign, n, delta, ste_fine_grained,
                                                     outputs=outputs)


def _pow2(sign, with_zero, n, m, ste_fine_grained):
    return lambda x, outputs: F.pow2_quantize(x, sign, with_zero, n, m, ste_fine_grained,
                                              outputs=outputs)


def _pruned(rate):
    return lambda x, outputs: F.prune(x, rate, outputs=outputs)


_QUANTIZED_PARAMS = [
    ("W", "the weights, trained in float", "(inmaps, outmaps) or (outmaps, inmaps // group, *kernel)", True),
    ("b", "the bias, trained in float", "(outmaps,)", True),
    ("W_q", "the quantized weights, written by the forward", "like W", False),
    ("b_q", "the quantized bias, written by the forward", "(outmaps,)", False),
]


@parametric_function_api("fp_quantized_affine", _QUANTIZED_PARAMS)
def fixed_point_quantized_affine(inp, n_outmaps, base_axis=1, w_init=None, b_init=None,
                                 fix_parameters=False, rng=None, with_bias=True, quantize_w=True,
                                 sign_w=True, n_w=8, delta_w=2**-4, ste_fine_grained_w=True,
                                 quantize_b=True, sign_b=True, n_b=8, delta_b=2**-4,
                                 ste_fine_grained_b=True):
    """Affine layer whose weights and bias are fixed-point quantized in the forward (W_q, b_q hold
    the quantized values); the float W and b are trained.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the weights.
        sign_w (bool, default True): signed weight range.
        n_w (int, default 8): bits of the weights.
        delta_w (float, default 2 ** -4): step of the weights' levels.
        ste_fine_grained_w (bool, default True): the weights' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        sign_b (bool, default True): signed bias range.
        n_b (int, default 8): bits of the bias.
        delta_b (float, default 2 ** -4): step of the bias's levels.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    w_shape, b_shape, w_init, b_init = _affine_shapes(inp, n_outmaps, base_axis, w_init, b_init,
                                                      with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      quantize_w, quantize_b,
                                      _fixed_point(sign_w, n_w, delta_w, ste_fine_grained_w),
                                      _fixed_point(sign_b, n_b, delta_b, ste_fine_grained_b))
    return F.affine(inp, w, b, base_axis)


@parametric_function_api("fp_quantized_conv", _QUANTIZED_PARAMS)
def fixed_point_quantized_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None,
                                      group=1, channel_last=False, w_init=None, b_init=None,
                                      base_axis=1, fix_parameters=False, rng=None, with_bias=True,
                                      quantize_w=True, sign_w=True, n_w=8, delta_w=2**-4,
                                      ste_fine_grained_w=True, quantize_b=True, sign_b=True, n_b=8,
                                      delta_b=2**-4, ste_fine_grained_b=True):
    """Convolution layer whose filters and bias are fixed-point quantized in the forward; the float
    W and b are trained.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        channel_last (bool, default False): channel-last input and output.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the filters.
        sign_w (bool, default True): signed filter range.
        n_w (int, default 8): bits of the filters.
        delta_w (float, default 2 ** -4): step of the filters' levels.
        ste_fine_grained_w (bool, default True): the filters' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        sign_b (bool, default True): signed bias range.
        n_b (int, default 8): bits of the bias.
        delta_b (float, default 2 ** -4): step of the bias's levels.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w_shape, b_shape, w_init, b_init = _conv_shapes(inp, outmaps, kernel, group, channel_last,
                                                    base_axis, w_init, b_init, with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      quantize_w, quantize_b,
                                      _fixed_point(sign_w, n_w, delta_w, ste_fine_grained_w),
                                      _fixed_point(sign_b, n_b, delta_b, ste_fine_grained_b))
    return F.convolution(inp, w, b, base_axis, pad, stride, dilation, group, channel_last)


@parametric_function_api("pow2_quantized_affine", _QUANTIZED_PARAMS)
def pow2_quantized_affine(inp, n_outmaps, base_axis=1, w_init=None, b_init=None,
                          fix_parameters=False, rng=None, with_bias=True, quantize_w=True,
                          sign_w=True, with_zero_w=False, n_w=8, m_w=2, ste_fine_grained_w=True,
                          quantize_b=True, sign_b=True, with_zero_b=False, n_b=8, m_b=2,
                          ste_fine_grained_b=True):
    """Affine layer whose weights and bias are power-of-two quantized in the forward; the float W
    and b are trained.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the weights.
        sign_w (bool, default True): keep the weights' sign.
        with_zero_w (bool, default False): allow 0 as a weight value.
        n_w (int, default 8): bits of the weights.
        m_w (int, default 2): the largest weight magnitude is 2 ** m_w.
        ste_fine_grained_w (bool, default True): the weights' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        sign_b (bool, default True): keep the bias's sign.
        with_zero_b (bool, default False): allow 0 as a bias value.
        n_b (int, default 8): bits of the bias.
        m_b (int, default 2): the largest bias magnitude is 2 ** m_b.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    w_shape, b_shape, w_init, b_init = _affine_shapes(inp, n_outmaps, base_axis, w_init, b_init,
                                                      with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      quantize_w, quantize_b,
                                      _pow2(sign_w, with_zero_w, n_w, m_w, ste_fine_grained_w),
                                      _pow2(sign_b, with_zero_b, n_b, m_b, ste_fine_grained_b))
    return F.affine(inp, w, b, base_axis)


@parametric_function_api("pow2_quantized_conv", _QUANTIZED_PARAMS)
def pow2_quantized_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                               w_init=None, b_init=None, base_axis=1, fix_parameters=False,
                               rng=None, with_bias=True, quantize_w=True, with_zero_w=False,
                               sign_w=True, n_w=8, m_w=2, ste_fine_grained_w=True, quantize_b=True,
                               with_zero_b=False, sign_b=True, n_b=8, m_b=2,
                               ste_fine_grained_b=True):
    """Convolution layer whose filters and bias are power-of-two quantized in the forward; the float
    W and b are trained.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the filters.
        with_zero_w (bool, default False): allow 0 as a filter value.
        sign_w (bool, default True): keep the filters' sign.
        n_w (int, default 8): bits of the filters.
        m_w (int, default 2): the largest filter magnitude is 2 ** m_w.
        ste_fine_grained_w (bool, default True): the filters' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        with_zero_b (bool, default False): allow 0 as a bias value.
        sign_b (bool, default True): keep the bias's sign.
        n_b (int, default 8): bits of the bias.
        m_b (int, default 2): the largest bias magnitude is 2 ** m_b.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w_shape, b_shape, w_init, b_init = _conv_shapes(inp, outmaps, kernel, group, False, base_axis,
                                                    w_init, b_init, with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      quantize_w, quantize_b,
                                      _pow2(sign_w, with_zero_w, n_w, m_w, ste_fine_grained_w),
                                      _pow2(sign_b, with_zero_b, n_b, m_b, ste_fine_grained_b))
    return F.convolution(inp, w, b, base_axis, pad, stride, dilation, group)


@parametric_function_api("pruned_affine", _QUANTIZED_PARAMS)
def pruned_affine(inp, n_outmaps, base_axis=1, w_init=None, b_init=None, fix_parameters=False,
                  rng=None, with_bias=True, prune_w=True, rate_w=0.9, prune_b=True, rate_b=0.9):
    """Affine layer whose smallest-magnitude weights (a fraction rate) are zeroed in the forward;
    the full W and b are trained.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        prune_w (bool, default True): prune the weights.
        rate_w (float, default 0.9): the fraction of weights zeroed.
        prune_b (bool, default True): prune the bias.
        rate_b (float, default 0.9): the fraction of bias entries zeroed.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    w_shape, b_shape, w_init, b_init = _affine_shapes(inp, n_outmaps, base_axis, w_init, b_init,
                                                      with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      prune_w, prune_b, _pruned(rate_w), _pruned(rate_b))
    return F.affine(inp, w, b, base_axis)


@parametric_function_api("pruned_conv", _QUANTIZED_PARAMS)
def pruned_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None, group=1,
                       channel_last=False, w_init=None, b_init=None, base_axis=1,
                       fix_parameters=False, rng=None, with_bias=True, prune_w=True, rate_w=0.9,
                       prune_b=True, rate_b=0.9):
    """Convolution layer whose smallest-magnitude filter weights (a fraction rate) are zeroed in the
    forward; the full W and b are trained.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        channel_last (bool, default False): channel-last input and output.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        prune_w (bool, default True): prune the filters.
        rate_w (float, default 0.9): the fraction of filter weights zeroed.
        prune_b (bool, default True): prune the bias.
        rate_b (float, default 0.9): the fraction of bias entries zeroed.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w_shape, b_shape, w_init, b_init = _conv_shapes(inp, outmaps, kernel, group, channel_last,
                                                    base_axis, w_init, b_init, with_bias, rng)
    w, b = _quantized_weight_and_bias(w_shape, b_shape, w_init, b_init, fix_parameters, with_bias,
                                      prune_w, prune_b, _pruned(rate_w), _pruned(rate_b))
    return F.convolution(inp, w, b, base_axis, pad, stride, dilation, group, channel_last)


@parametric_function_api("min_max_quantize", [
    ("qr_min", "the range's minimum (a moving minimum of x with ema)", "ql_min.shape", False),
    ("qr_max", "the range's maximum (a moving maximum of x with ema)", "ql_max.shape", False),
])
def min_max_quantize(x, ql_min=0, ql_max=255, decay=0.999, x_min_max=False, ema=False,
                     ste_fine_grained=True, eps=0.01, qr_min_init=None, qr_max_init=None,
                     fix_parameters=False, outputs=None):
    """Min-max quantization of x with its range [qr_min, qr_max] as parameters: trained, or set from
    x's minimum and maximum (x_min_max, optionally as moving averages).

    Args:
        x (Variable): input, any shape.
        ql_min (float or Variable, default 0): the lowest level.
        ql_max (float or Variable, default 255): the highest level.
        decay (float, default 0.999): the moving-average factor of ema.
        x_min_max (bool, default False): take the range from x's minimum and maximum.
        ema (bool, default False): with x_min_max, as exponential moving averages.
        ste_fine_grained (bool, default True): the gradient passes only inside the range.
        eps (float, default 0.01): the smallest width kept between qr_min and qr_max.
        qr_min_init (initializer or numpy array, default None): qr_min's initial value; None: -6.
        qr_max_init (initializer or numpy array, default None): qr_max's initial value; None: 6.
        fix_parameters (bool, default False): the range is not trained.
        outputs (list of Variable, default None): Variables to write the result into.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape of x.
    """
    level_shape = [1] * len(x.shape)
    if isinstance(ql_min, (int, float)):
        ql_min = get_parameter_or_create("ql_min", level_shape,
                                         np.array(ql_min).reshape(level_shape), False, False)
    if isinstance(ql_max, (int, float)):
        ql_max = get_parameter_or_create("ql_max", level_shape,
                                         np.array(ql_max).reshape(level_shape), False, False)
    registered_need_grad = not (x_min_max and ema)
    qr_min = get_parameter_or_create("qr_min", ql_min.shape,
                                     _default(qr_min_init, -6.0),
                                     registered_need_grad, not fix_parameters)
    qr_max = get_parameter_or_create("qr_max", ql_min.shape,
                                     _default(qr_max_init, 6.0),
                                     registered_need_grad, not fix_parameters)
    return F.min_max_quantize(x, qr_min, qr_max, ql_min, ql_max, decay, x_min_max, ema,
                              ste_fine_grained, eps, outputs=outputs)


def _min_max(ql_min, ql_max, w_min_max, qr_min_init, qr_max_init, ste_fine_grained, eps,
             fix_parameters, scope):
    return lambda x, outputs: min_max_quantize(
        x, ql_min, ql_max, 0.999, w_min_max, False, qr_min_init=qr_min_init,
        qr_max_init=qr_max_init, ste_fine_grained=ste_fine_grained, eps=eps,
        fix_parameters=fix_parameters, outputs=outputs, name=scope)


_MIN_MAX_PARAMS = _QUANTIZED_PARAMS + [
    ("qr_min", "the range's minimum", "ql_min.shape", False),
    ("qr_max", "the range's maximum", "ql_max.shape", False),
]


@parametric_function_api("min_max_quantized_affine", _MIN_MAX_PARAMS)
def min_max_quantized_affine(inp, n_outmaps, base_axis=1, w_init=None, b_init=None,
                             fix_parameters=False, rng=None, with_bias=True, quantize_w=True,
                             ql_min_w=0, ql_max_w=255, w_min_max=False, qr_min_w_init=None,
                             qr_max_w_init=None, ste_fine_grained_w=True, quantize_b=True,
                             ql_min_b=0, ql_max_b=255, b_min_max=False, qr_min_b_init=None,
                             qr_max_b_init=None, ste_fine_grained_b=True, eps=0.01):
    """Affine layer whose weights and bias are min-max quantized in the forward (each quantizer with
    its own range parameters); the float W and b are trained.

    Args:
        inp (Variable): input (N..., D...), flattened at base_axis.
        n_outmaps (int or tuple of int): output units.
        base_axis (int, default 1): the first flattened axis.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the weights.
        ql_min_w (float, default 0): the weights' lowest level.
        ql_max_w (float, default 255): the weights' highest level.
        w_min_max (bool, default False): take the weights' range from their minimum and maximum.
        qr_min_w_init (initializer, default None): the weights' range minimum; None: -2.
        qr_max_w_init (initializer, default None): the weights' range maximum; None: 2.
        ste_fine_grained_w (bool, default True): the weights' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        ql_min_b (float, default 0): the bias's lowest level.
        ql_max_b (float, default 255): the bias's highest level.
        b_min_max (bool, default False): take the bias's range from its minimum and maximum.
        qr_min_b_init (initializer, default None): the bias's range minimum; None: -6.
        qr_max_b_init (initializer, default None): the bias's range maximum; None: 6.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        eps (float, default 0.01): the smallest width of a range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: shape ``inp.shape[:base_axis] + n_outmaps``.
    """
    w_shape, b_shape, w_init, b_init = _affine_shapes(inp, n_outmaps, base_axis, w_init, b_init,
                                                      with_bias, rng)
    w, b = _quantized_weight_and_bias(
        w_shape, b_shape, w_init, b_init, fix_parameters, with_bias, quantize_w, quantize_b,
        _min_max(ql_min_w, ql_max_w, w_min_max, _default(qr_min_w_init, -2.0),
                 _default(qr_max_w_init, 2.0), ste_fine_grained_w, eps,
                 fix_parameters, "min_max_quantize_w"),
        _min_max(ql_min_b, ql_max_b, b_min_max, _default(qr_min_b_init, -6.0),
                 _default(qr_max_b_init, 6.0), ste_fine_grained_b, eps,
                 fix_parameters, "min_max_quantize_b"))
    return F.affine(inp, w, b, base_axis)


@parametric_function_api("min_max_quantized_conv", _MIN_MAX_PARAMS)
def min_max_quantized_convolution(inp, outmaps, kernel, pad=None, stride=None, dilation=None,
                                  group=1, channel_last=False, w_init=None, b_init=None,
                                  base_axis=1, fix_parameters=False, rng=None, with_bias=True,
                                  quantize_w=True, ql_min_w=0, ql_max_w=255, w_min_max=False,
                                  qr_min_w_init=None, qr_max_w_init=None, ste_fine_grained_w=True,
                                  quantize_b=True, ql_min_b=0, ql_max_b=255, b_min_max=False,
                                  qr_min_b_init=None, qr_max_b_init=None, ste_fine_grained_b=True,
                                  eps=0.01):
    """Convolution layer whose filters and bias are min-max quantized in the forward (see
    :func:`min_max_quantized_affine`); the float W and b are trained.

    Args:
        inp (Variable): input (N..., C, *spatial).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups.
        channel_last (bool, default False): channel-last input and output.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        quantize_w (bool, default True): quantize the filters.
        ql_min_w (float, default 0): the filters' lowest level.
        ql_max_w (float, default 255): the filters' highest level.
        w_min_max (bool, default False): take the filters' range from their minimum and maximum.
        qr_min_w_init (initializer, default None): the filters' range minimum; None: -2.
        qr_max_w_init (initializer, default None): the filters' range maximum; None: 2.
        ste_fine_grained_w (bool, default True): the filters' gradient passes only inside the
            range.
        quantize_b (bool, default True): quantize the bias.
        ql_min_b (float, default 0): the bias's lowest level.
        ql_max_b (float, default 255): the bias's highest level.
        b_min_max (bool, default False): take the bias's range from its minimum and maximum.
        qr_min_b_init (initializer, default None): the bias's range minimum; None: -6.
        qr_max_b_init (initializer, default None): the bias's range maximum; None: 6.
        ste_fine_grained_b (bool, default True): the bias's gradient passes only inside the range.
        eps (float, default 0.01): the smallest width of a range.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N..., outmaps, *out).
    """
    w_shape, b_shape, w_init, b_init = _conv_shapes(inp, outmaps, kernel, group, channel_last,
                                                    base_axis, w_init, b_init, with_bias, rng)
    w, b = _quantized_weight_and_bias(
        w_shape, b_shape, w_init, b_init, fix_parameters, with_bias, quantize_w, quantize_b,
        _min_max(ql_min_w, ql_max_w, w_min_max, _default(qr_min_w_init, -2.0),
                 _default(qr_max_w_init, 2.0), ste_fine_grained_w, eps,
                 fix_parameters, "min_max_quantize_w"),
        _min_max(ql_min_b, ql_max_b, b_min_max, _default(qr_min_b_init, -6.0),
                 _default(qr_max_b_init, 6.0), ste_fine_grained_b, eps,
                 fix_parameters, "min_max_quantize_b"))
    return F.convolution(inp, w, b, base_axis, pad, stride, dilation, group, channel_last)


_append_api("affine", "svd_affine", "binary_connect_affine", "binary_weight_affine", "inq_affine",
            "convolution", "svd_convolution", "cpd3_convolution", "binary_connect_convolution",
            "binary_weight_convolution", "inq_convolution", "depthwise_convolution",
            "deconvolution", "depthwise_deconvolution", "batch_normalization",
            "fused_batch_normalization", "sync_batch_normalization", "mean_subtraction",
            "layer_normalization", "instance_normalization", "group_normalization",
            "spectral_norm", "weight_normalization", "embed", "prelu",
            "fixed_point_quantized_affine", "fixed_point_quantized_convolution",
            "pow2_quantized_affine", "pow2_quantized_convolution", "pruned_affine",
            "pruned_convolution", "min_max_quantize", "min_max_quantized_affine",
            "min_max_quantized_convolution")


# ============================================================================ layers
# (each family appends its parametric functions below this line)


# ============================================================================ recurrent layers
def _recurrent_params(x, h, n_gates, n_bias_gates, w0_init, w_init, b_init, bidirectional, rng,
                      with_bias, fix_parameters):
    """weight_l0, weight (None for one layer) and bias (None without) of PF.rnn/lstm/gru, in
    nnabla's layouts; defaults: Glorot-uniform input and recurrent parts, zero bias."""
    n_in, n_hidden, n_layers = x.shape[2], h.shape[3], h.shape[0]
    n_dir = 2 if bidirectional else 1
    gate = (n_gates,) if n_gates > 1 else ()

    def glorot_pair(lead, n_layer_in):
        w_ih = _glorot_uniform(n_layer_in, n_hidden, rng=rng)(lead + gate + (n_hidden, n_layer_in))
        w_hh = _glorot_uniform(n_hidden, n_hidden, rng=rng)(lead + gate + (n_hidden, n_hidden))
        return np.concatenate((w_ih, w_hh), axis=-1)

    if w0_init is None:
        w0_init = glorot_pair((n_dir,), n_in)
    w0 = _trainable("weight_l0", (n_dir,) + gate + (n_hidden, n_in + n_hidden), w0_init, fix_parameters)
    w = None
    if n_layers > 1:
        if w_init is None:
            w_init = glorot_pair((n_layers - 1, n_dir), n_dir * n_hidden)
        w = _trainable("weight", (n_layers - 1, n_dir) + gate + (n_hidden, (n_dir + 1) * n_hidden),
                       w_init, fix_parameters)
    b = None
    if with_bias:
        b_shape = (n_layers, n_dir) + ((n_bias_gates,) if gate else ()) + (n_hidden,)
        b = _trainable("bias", b_shape, _default(b_init, 0), fix_parameters)
    return w0, w, b


@parametric_function_api("rnn", [
    ("weight_l0", "the first layer's weights", "(D, H, I + H)", True),
    ("weight", "the other layers' weights", "(L-1, D, H, DH + H)", True),
    ("bias", "the biases", "(L, D, H)", True),
])
def rnn(x, h, w0_init=None, w_init=None, b_init=None, num_layers=1, nonlinearity="tanh", dropout=0.0,
        bidirectional=False, training=True, rng=None, with_bias=True, fix_parameters=False):
    """Elman recurrent network layer with its own weights (see F.rnn); the number of layers is taken
    from h.

    Args:
        x (Variable): input sequence (T, B, I).
        h (Variable): initial hidden states (L, D, B, H); L layers, D = 2 if bidirectional else 1.
        w0_init (initializer or numpy array, default None): first-layer weights' initial values;
            None: Glorot uniform.
        w_init (initializer or numpy array, default None): the other layers' weights; None:
            Glorot uniform.
        b_init (initializer or numpy array, default None): the biases; None: zeros.
        num_layers (int, default 1): accepted for nnabla's signature (h decides).
        nonlinearity (str, default 'tanh'): 'tanh' or 'relu'.
        dropout (float, default 0.0): dropout between layers while training.
        bidirectional (bool, default False): also run backwards in time.
        training (bool, default True): apply dropout.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the biases.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        tuple of Variable: y (T, B, D * H) and h_n (L, D, B, H).
    """
    w0, w, b = _recurrent_params(x, h, 1, 1, w0_init, w_init, b_init, bidirectional, rng,
                                 with_bias, fix_parameters)
    return F.rnn(x, h, w0, w, b, num_layers=h.shape[0], nonlinearity=nonlinearity,
                 dropout=dropout, bidirectional=bidirectional, training=training)


@parametric_function_api("lstm", [
    ("weight_l0", "the first layer's weights", "(D, 4, H, I + H)", True),
    ("weight", "the other layers' weights", "(L-1, D, 4, H, DH + H)", True),
    ("bias", "the biases", "(L, D, 4, H)", True),
])
def lstm(x, h, c, w0_init=None, w_init=None, b_init=None, num_layers=1, dropout=0.0,
         bidirectional=False, training=True, rng=None, with_bias=True, fix_parameters=False):
    """LSTM network layer with its own weights (see F.lstm); the number of layers is taken from h.

    Args:
        x (Variable): input sequence (T, B, I).
        h (Variable): initial hidden states (L, D, B, H); L layers, D = 2 if bidirectional else 1.
        c (Variable): initial cell states, shape of h.
        w0_init (initializer or numpy array, default None): first-layer weights' initial values;
            None: Glorot uniform.
        w_init (initializer or numpy array, default None): the other layers' weights; None:
            Glorot uniform.
        b_init (initializer or numpy array, default None): the biases; None: zeros.
        num_layers (int, default 1): accepted for nnabla's signature (h decides).
        dropout (float, default 0.0): dropout between layers while training.
        bidirectional (bool, default False): also run backwards in time.
        training (bool, default True): apply dropout.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the biases.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        tuple of Variable: y (T, B, D * H), h_n and c_n (L, D, B, H).

    Example:
        >>> x, h, c = nn.Variable((5, 2, 3)), nn.Variable((1, 1, 2, 4)), nn.Variable((1, 1, 2, 4))
        >>> y, h_n, c_n = PF.lstm(x, h, c)  # y.shape == (5, 2, 4)
    """
    w0, w, b = _recurrent_params(x, h, 4, 4, w0_init, w_init, b_init, bidirectional, rng,
                                 with_bias, fix_parameters)
    return F.lstm(x, h, c, w0, w, b, num_layers=h.shape[0], dropout=dropout,
                  bidirectional=bidirectional, training=training)


@parametric_function_api("gru", [
    ("weight_l0", "the first layer's weights", "(D, 3, H, I + H)", True),
    ("weight", "the other layers' weights", "(L-1, D, 3, H, DH + H)", True),
    ("bias", "the biases", "(L, D, 4, H)", True),
])
def gru(x, h, w0_init=None, w_init=None, b_init=None, num_layers=1, dropout=0.0,
        bidirectional=False, training=True, rng=None, with_bias=True, fix_parameters=False):
    """GRU network layer with its own weights (see F.gru); the number of layers is taken from h.

    Args:
        x (Variable): input sequence (T, B, I).
        h (Variable): initial hidden states (L, D, B, H); L layers, D = 2 if bidirectional else 1.
        w0_init (initializer or numpy array, default None): first-layer weights' initial values;
            None: Glorot uniform.
        w_init (initializer or numpy array, default None): the other layers' weights; None:
            Glorot uniform.
        b_init (initializer or numpy array, default None): the biases; None: zeros.
        num_layers (int, default 1): accepted for nnabla's signature (h decides).
        dropout (float, default 0.0): dropout between layers while training.
        bidirectional (bool, default False): also run backwards in time.
        training (bool, default True): apply dropout.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the biases.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        tuple of Variable: y (T, B, D * H) and h_n (L, D, B, H).
    """
    w0, w, b = _recurrent_params(x, h, 3, 4, w0_init, w_init, b_init, bidirectional, rng,
                                 with_bias, fix_parameters)
    return F.gru(x, h, w0, w, b, num_layers=h.shape[0], dropout=dropout,
                 bidirectional=bidirectional, training=training)


@parametric_function_api("lstm", [
    ("affine/W", "the four gates' weights", "(inmaps, 4, state_size)", True),
    ("affine/b", "the four gates' biases", "(4, state_size,)", True),
])
def lstm_cell(x, h, c, state_size, w_init=None, b_init=None, fix_parameters=False):
    """One LSTM step with its own affine over [x, h]: the gates come from ``affine(concat(x, h))``.

    Args:
        x (Variable): input (B, I).
        h (Variable): hidden state (B, state_size).
        c (Variable): cell state (B, state_size).
        state_size (int): the states' width.
        w_init (initializer or numpy array, default None): the affine's weights; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): the affine's bias; None: zeros.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        tuple of Variable: the new h and c, (B, state_size) each.
    """
    gates = affine(F.concatenate(x, h, axis=1), (4, state_size), w_init=w_init, b_init=b_init,
                   fix_parameters=fix_parameters)
    i_t, o_t, f_t, candidate = F.split(gates, axis=1)
    return lstm_cell_update(i_t, f_t, candidate, o_t, c)


class LSTMCell:
    """An LSTM cell holding its states: ``cell(x)`` runs :func:`lstm_cell` and returns h."""

    def __init__(self, batch_size, state_size, h=None, c=None, name=None):
        self.batch_size = batch_size
        self.state_size = state_size
        self.name = name
        self.h = h if h is not None else self._zeros()
        self.c = c if c is not None else self._zeros()

    def _zeros(self):
        v = Variable(_dims((self.batch_size, self.state_size)))
        v.data.zero()
        return v

    def reset_state(self):
        """Set h and c back to zero."""
        self.h.data.zero()
        self.c.data.zero()

    def __call__(self, x, w_init=None, b_init=None, fix_parameters=False):
        self.h, self.c = lstm_cell(x, self.h, self.c, self.state_size, w_init, b_init,
                                   fix_parameters=fix_parameters, name=self.name)
        return self.h


# ============================================================================ attention
@parametric_function_api("multi_head_attention", [
    ("q_weight", "the query projection", "(E, E)", True),
    ("k_weight", "the key projection", "(E_k, E)", True),
    ("v_weight", "the value projection", "(E_v, E)", True),
    ("out_weight", "the output projection", "(E, E)", True),
    ("q_bias", "the query projection's bias", "(E, )", True),
    ("k_bias", "the key projection's bias", "(E, )", True),
    ("v_bias", "the value projection's bias", "(E, )", True),
    ("out_bias", "the output projection's bias", "(E, )", True),
    ("attn_bias_k", "the appended key step", "(1, 1, E)", True),
    ("attn_bias_v", "the appended value step", "(1, 1, E)", True),
])
def multi_head_attention(query, key, value, num_heads=12, dropout=0.0, k_embed_dim=None,
                         v_embed_dim=None, out_dim=None, rng=None, with_bias=True,
                         add_attn_bias=False, additive_mask=None, key_padding_mask=None,
                         fix_parameters=False, param_init=None):
    """Multi-head attention with its projections as parameters (see F.multi_head_attention).

    Args:
        query (Variable): (L_T, B, D_q).
        key (Variable): (L_S, B, D_k).
        value (Variable): (L_S, B, D_v).
        num_heads (int, default 12): number of heads; divides the embedding sizes.
        dropout (float, default 0.0): dropout of the attention weights.
        k_embed_dim (int, default None): the query and key embedding size; None: D_q.
        v_embed_dim (int, default None): the value embedding size; None: D_v.
        out_dim (int, default None): the output size; None: v_embed_dim.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the projections' biases.
        add_attn_bias (bool, default False): add one learned key and value step.
        additive_mask (Variable, default None): (L_T, L_S), added to the attention logits.
        key_padding_mask (Variable, default None): (B, L_S), 1 marks padding keys.
        fix_parameters (bool, default False): the parameters are not trained.
        param_init (dict, default None): initializers or arrays by parameter name ('q_weight', ...).
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        tuple of Variable: the output (L_T, B, out_dim) and the attention weights
        (B * num_heads, L_T, L_S).

    Example:
        >>> q = nn.Variable((5, 2, 16))
        >>> y, w = PF.multi_head_attention(q, q, q, num_heads=4)  # y.shape == (5, 2, 16)
    """
    embed = query.shape[2] if k_embed_dim is None else k_embed_dim
    v_embed = value.shape[2] if v_embed_dim is None else v_embed_dim
    out_dim = v_embed if out_dim is None else out_dim
    init = param_init or {}

    def weight(name, n_in, n_out):
        return _trainable(name, (n_in, n_out), init.get(name, _glorot_uniform(n_in, n_out, rng=rng)),
                          fix_parameters)

    def bias(name, shape, default):
        return _trainable(name, shape, init.get(name, default), fix_parameters)

    qw = weight("q_weight", query.shape[2], embed)
    kw = weight("k_weight", key.shape[2], embed)
    vw = weight("v_weight", value.shape[2], v_embed)
    ow = weight("out_weight", v_embed, out_dim)
    qb = kb = vb = ob = abk = abv = None
    if with_bias:
        qb = bias("q_bias", (embed,), ConstantInitializer())
        kb = bias("k_bias", (embed,), ConstantInitializer())
        vb = bias("v_bias", (v_embed,), ConstantInitializer())
        ob = bias("out_bias", (out_dim,), ConstantInitializer())
    if add_attn_bias:
        abk = bias("attn_bias_k", (1, 1, embed), _glorot_uniform(embed, 1, rng=rng))
        abv = bias("attn_bias_v", (1, 1, v_embed), _glorot_uniform(v_embed, 1, rng=rng))
    return F.multi_head_attention(query, key, value, num_heads, qw, kw, vw, ow, qb, kb, vb, ob,
                                  abk, abv, dropout, additive_mask=additive_mask,
                                  key_padding_mask=key_padding_mask)


def _residual_norm(x, sublayer_out, dropout, fix_parameters, name):
    """LayerNorm(x + Dropout(sublayer_out)) over the feature axis of (L, B, E)."""
    if dropout > 0:
        sublayer_out = F.dropout(sublayer_out, dropout)
    return layer_normalization(x + sublayer_out, batch_axis=(0, 1), fix_parameters=fix_parameters,
                               name=name)


def _attention_sublayer(x, kv, num_heads, rng, add_attn_bias, additive_mask, key_padding_mask,
                        dropout, fix_parameters, attn_name, norm_name):
    """Attention of x to kv (self-attention when kv is x), then ``_residual_norm``."""
    attn = multi_head_attention(x, kv, kv, num_heads=num_heads, rng=rng,
                                add_attn_bias=add_attn_bias, additive_mask=additive_mask,
                                key_padding_mask=key_padding_mask,
                                fix_parameters=fix_parameters, name=attn_name)[0]
    return _residual_norm(x, attn, dropout, fix_parameters, norm_name)


def _feed_forward(x, embed_dim, dim_feedforward, dropout, activation, rng, fix_parameters, prefix):
    hidden = activation(affine(x, dim_feedforward, base_axis=2, rng=rng,
                               fix_parameters=fix_parameters, name=prefix + "_affine1"))
    if dropout > 0:
        hidden = F.dropout(hidden, dropout)
    return affine(hidden, embed_dim, base_axis=2, rng=rng, fix_parameters=fix_parameters,
                  name=prefix + "_affine2")


@parametric_function_api("transformer_encode", [
    ("src_self_attn", "the source's self-attention",
     "see PF.multi_head_attention", True),
    ("enc_affine1", "the feed-forward network's first affine", "see PF.affine", True),
    ("enc_affine2", "the feed-forward network's second affine", "see PF.affine", True),
    ("enc_layer_norm1", "the normalization after the attention",
     "see PF.layer_normalization", True),
    ("enc_layer_norm2", "the normalization after the feed-forward network",
     "see PF.layer_normalization", True),
])
def transformer_encode(src, embed_dim, num_heads, dim_feedforward=2048, dropout=0.1, activation=None,
                       src_additive_mask=None, src_key_padding_mask=None, rng=None,
                       add_attn_bias=False, fix_parameters=False):
    """One Transformer encoder layer (post-norm): self-attention, then a feed-forward network, each
    with dropout, a residual connection and layer normalization.

    Args:
        src (Variable): the source sequence (L_S, B, E).
        embed_dim (int): E, the feature size.
        num_heads (int): attention heads; divides E.
        dim_feedforward (int, default 2048): the feed-forward network's hidden size.
        dropout (float, default 0.1): dropout probability.
        activation (callable, default None): the feed-forward activation; None: F.relu.
        src_additive_mask (Variable, default None): (L_S, L_S), added to the attention logits.
        src_key_padding_mask (Variable, default None): (B, L_S), 1 marks padding.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        add_attn_bias (bool, default False): add one learned key and value step to the attention.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (L_S, B, E).
    """
    activation = F.relu if activation is None else activation
    src = _attention_sublayer(src, src, num_heads, rng, add_attn_bias, src_additive_mask,
                              src_key_padding_mask, dropout, fix_parameters, "src_self_attn",
                              "enc_layer_norm1")
    ff = _feed_forward(src, embed_dim, dim_feedforward, dropout, activation, rng, fix_parameters, "enc")
    return _residual_norm(src, ff, dropout, fix_parameters, "enc_layer_norm2")


@parametric_function_api("transformer_decode", [
    ("tgt_self_attn", "the target's self-attention",
     "see PF.multi_head_attention", True),
    ("tgt_memory_attn", "the attention of the target to the encoder's output",
     "see PF.multi_head_attention", True),
    ("dec_affine1", "the feed-forward network's first affine", "see PF.affine", True),
    ("dec_affine2", "the feed-forward network's second affine", "see PF.affine", True),
    ("dec_layer_norm1", "the normalization after the self-attention",
     "see PF.layer_normalization", True),
    ("dec_layer_norm2", "the normalization after the memory attention",
     "see PF.layer_normalization", True),
    ("dec_layer_norm3", "the normalization after the feed-forward network",
     "see PF.layer_normalization", True),
])
def transformer_decode(tgt, memory, embed_dim, num_heads, dim_feedforward=2048, dropout=0.1,
                       activation=None, tgt_additive_mask=None, memory_additive_mask=None,
                       tgt_key_padding_mask=None, memory_key_padding_mask=None, rng=None,
                       add_attn_bias=False, fix_parameters=False):
    """One Transformer decoder layer (post-norm): self-attention, attention to the encoder's memory,
    then a feed-forward network, each with dropout, a residual connection and layer normalization.

    Args:
        tgt (Variable): the target sequence (L_T, B, E).
        memory (Variable): the encoder's output (L_S, B, E).
        embed_dim (int): E, the feature size.
        num_heads (int): attention heads; divides E.
        dim_feedforward (int, default 2048): the feed-forward network's hidden size.
        dropout (float, default 0.1): dropout probability.
        activation (callable, default None): the feed-forward activation; None: F.relu.
        tgt_additive_mask (Variable, default None): (L_T, L_T), added to the self-attention logits
            (e.g. a causal mask).
        memory_additive_mask (Variable, default None): (L_T, L_S), added to the memory attention
            logits.
        tgt_key_padding_mask (Variable, default None): (B, L_T), 1 marks padding.
        memory_key_padding_mask (Variable, default None): (B, L_S), 1 marks padding.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        add_attn_bias (bool, default False): add one learned key and value step to the attentions.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (L_T, B, E).
    """
    activation = F.relu if activation is None else activation
    tgt = _attention_sublayer(tgt, tgt, num_heads, rng, add_attn_bias, tgt_additive_mask,
                              tgt_key_padding_mask, dropout, fix_parameters, "tgt_self_attn",
                              "dec_layer_norm1")
    tgt = _attention_sublayer(tgt, memory, num_heads, rng, add_attn_bias, memory_additive_mask,
                              memory_key_padding_mask, dropout, fix_parameters, "tgt_memory_attn",
                              "dec_layer_norm2")
    ff = _feed_forward(tgt, embed_dim, dim_feedforward, dropout, activation, rng, fix_parameters, "dec")
    return _residual_norm(tgt, ff, dropout, fix_parameters, "dec_layer_norm3")


@parametric_function_api("transformer", [
    ("encoder{layer#}", "encoder layer n (00, 01, ...)",
     "see PF.transformer_encode", True),
    ("decoder{layer#}", "decoder layer n (00, 01, ...)",
     "see PF.transformer_decode", True),
])
def transformer(src, tgt, embed_dim=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                dim_feedforward=2048, dropout=0.1, activation=None, src_additive_mask=None,
                tgt_additive_mask=None, memory_additive_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, rng=None,
                add_attn_bias=False, fix_parameters=False):
    """Encoder-decoder Transformer: src through num_encoder_layers encoder layers, tgt through
    num_decoder_layers decoder layers attending to the encoder's output.

    Args:
        src (Variable): the source sequence (L_S, B, embed_dim).
        tgt (Variable): the target sequence (L_T, B, embed_dim).
        embed_dim (int, default 512): the feature size.
        num_heads (int, default 8): attention heads.
        num_encoder_layers (int, default 6): encoder layers (scopes encoder00, ...).
        num_decoder_layers (int, default 6): decoder layers (scopes decoder00, ...).
        dim_feedforward (int, default 2048): the feed-forward networks' hidden size.
        dropout (float, default 0.1): dropout probability.
        activation (callable, default None): the feed-forward activation; None: F.relu.
        src_additive_mask (Variable, default None): (L_S, L_S), added to the encoder's attention
            logits.
        tgt_additive_mask (Variable, default None): (L_T, L_T), added to the decoder's
            self-attention logits.
        memory_additive_mask (Variable, default None): (L_T, L_S), added to the memory attention
            logits.
        src_key_padding_mask (Variable, default None): (B, L_S), 1 marks padding.
        tgt_key_padding_mask (Variable, default None): (B, L_T), 1 marks padding.
        memory_key_padding_mask (Variable, default None): (B, L_S), 1 marks padding.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        add_attn_bias (bool, default False): add one learned key and value step to the attentions.
        fix_parameters (bool, default False): the parameters are not trained.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (L_T, B, embed_dim).
    """
    if src.shape[1] != tgt.shape[1] or src.shape[2] != embed_dim or tgt.shape[2] != embed_dim:
        raise ValueError("transformer: src {} and tgt {} must share the batch size and have "
                         "embed_dim={} features".format(src.shape, tgt.shape, embed_dim))
    common = dict(embed_dim=embed_dim, num_heads=num_heads, dim_feedforward=dim_feedforward,
                  dropout=dropout, activation=activation, rng=rng, add_attn_bias=add_attn_bias,
                  fix_parameters=fix_parameters)
    memory = src
    for i in range(num_encoder_layers):
        memory = transformer_encode(memory, src_additive_mask=src_additive_mask,
                                    src_key_padding_mask=src_key_padding_mask,
                                    name="encoder{:02d}".format(i), **common)
    out = tgt
    for i in range(num_decoder_layers):
        out = transformer_decode(out, memory, tgt_additive_mask=tgt_additive_mask,
                                 memory_additive_mask=memory_additive_mask,
                                 tgt_key_padding_mask=tgt_key_padding_mask,
                                 memory_key_padding_mask=memory_key_padding_mask,
                                 name="decoder{:02d}".format(i), **common)
    return out


_append_api("rnn", "lstm", "gru", "lstm_cell", "LSTMCell", "multi_head_attention",
            "transformer_encode", "transformer_decode", "transformer")


# ============================================================================ deformable convolution
@parametric_function_api("deformable_conv", [
    ("W", "the filters", "(outmaps, inmaps // group, *kernel)", True),
    ("b", "the bias", "(outmaps,)", True),
])
def deformable_convolution(inp, outmaps, kernel, offset, mask=None, pad=None, stride=None, dilation=None, group=1,
                           deformable_group=1, channel_last=False, w_init=None, b_init=None, base_axis=1,
                           fix_parameters=False, rng=None, with_bias=True, apply_w=None, apply_b=None):
    """2-d deformable convolution layer with its own filters and bias (DCNv2 when mask is given);
    offset and mask come from outside, e.g. a convolution of inp.

    Args:
        inp (Variable): input (N, C, H, W).
        outmaps (int): number of output channels.
        kernel (tuple of int): the filter's spatial size.
        offset (Variable): (N, 2 * K * deformable_group, Ho, Wo), K = kernel elements.
        mask (Variable, default None): (N, K * deformable_group, Ho, Wo); None: no modulation.
        pad (tuple of int, default None): zero padding per spatial axis; None: 0.
        stride (tuple of int, default None): window step per spatial axis; None: 1.
        dilation (tuple of int, default None): spacing of the filter taps; None: 1.
        group (int, default 1): channel groups of the filters.
        deformable_group (int, default 1): channel groups sharing one set of offsets.
        channel_last (bool, default False): must be False.
        w_init (initializer or numpy array, default None): W's initial values; None: Glorot
            uniform.
        b_init (initializer or numpy array, default None): b's initial values; None: zeros.
        base_axis (int, default 1): the channel axis.
        fix_parameters (bool, default False): the parameters are not trained.
        rng (numpy.random.RandomState, default None): what the default initializers draw from.
        with_bias (bool, default True): create and add the bias.
        apply_w (callable, default None): applied to W before use.
        apply_b (callable, default None): applied to b before use.
        name (str, default None): a parameter scope to put the layer's scope under.

    Returns:
        Variable: (N, outmaps, Ho, Wo).
    """
    channels, filter_shape = _conv_filter_shape(inp, base_axis, group, kernel, channel_last)
    if w_init is None:
        w_init = _glorot_uniform(channels, outmaps, tuple(kernel), rng=rng)
    w = _trainable("W", (outmaps,) + filter_shape, w_init, fix_parameters)
    if apply_w is not None:
        w = apply_w(w)
    b = _bias((outmaps,), b_init, with_bias, fix_parameters, apply_b)
    return F.deformable_convolution(inp, w, offset, mask, b, base_axis, pad, stride, dilation, group,
                                    deformable_group, channel_last)


_append_api("deformable_convolution")
