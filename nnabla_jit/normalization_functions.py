"""nnabla's ``normalization_functions``: the Python-level normalization wrappers of ``F``
(``batch_normalization(..., output_stat)`` and friends), mapped onto the registered ops.

Where nnabla reshapes and transposes around its single-axis kernels (several BN ``axes``), the
ops here take the axes directly.
"""
import numpy as np

from . import function_bases as _fb
from .function_bases import *  # noqa: F401,F403  (nnabla's module re-exports every F function)
from .function_bases import get_auto_forward, get_current_context  # noqa: F401


def _force_list(axis):
    """``axis`` as a list unless it already is iterable (nnabla's helper)."""
    return axis if hasattr(axis, "__iter__") else [axis]


def _get_axes_excluding(ndim, axes):
    """The axes of an ``ndim``-D array not in ``axes`` (negative axes count from the end)."""
    axes = [a + ndim * (a < 0) for a in _force_list(axes)]
    return [i for i in range(ndim) if i not in axes]


def _as_list(axis):
    if isinstance(axis, (int, np.integer)):
        return [int(axis)]
    return [int(a) for a in axis]


def _positive_axes(x, axes):
    return [a + len(x.shape) if a < 0 else a for a in _as_list(axes)]


def _stat_shape(x, axes):
    return tuple(s if a in axes else 1 for a, s in enumerate(x.shape))


def _check_running_stats(name, mean, variance, batch_stat, output_stat):
    if output_stat and not batch_stat:
        raise ValueError("{}: output_stat=True needs batch_stat=True (the batch statistics are "
                         "what it outputs)".format(name))
    if not batch_stat and (mean is None or variance is None):
        raise ValueError("{}: with batch_stat=False the running mean and variance must be given"
                         .format(name))
    if batch_stat and any(v is not None and getattr(v, "parent", None) is not None for v in (mean, variance)):
        raise ValueError("{}: with batch_stat=True the running mean and variance are updated in "
                         "place, so they must not be outputs of another function".format(name))


def batch_normalization(x, beta, gamma, mean, variance, axes=[1], decay_rate=0.9, eps=1e-05,
                        batch_stat=True, output_stat=False, n_outputs=None):
    """Batch normalization: ``(x - mean) / sqrt(var + eps) * gamma + beta``, the statistics taken
    over every axis but ``axes``.

    With ``batch_stat`` (training) the batch's statistics are used and the running mean and
    variance, if given, are updated in place: ``running = decay_rate * running + (1 - decay_rate)
    * batch`` (the unbiased variance). Otherwise (inference) the running statistics are used.

    Args:
        x (Variable): input, any shape, e.g. (N, C, H, W).
        beta (Variable or None): shift, the statistics' shape (x's shape with 1 outside axes, e.g.
            (1, C, 1, 1)); None: no shift.
        gamma (Variable or None): scale, shape of beta; None: no scale.
        mean (Variable or None): running mean, shape of beta; None with batch_stat only.
        variance (Variable or None): running variance, shape of beta; None with batch_stat only.
        axes (list of int, default [1]): the axes that keep their statistics (the channels).
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): normalize with the batch's statistics and update the
            running ones.
        output_stat (bool, default False): also return the batch mean and (biased) variance.
        n_outputs (int, default None): accepted for nnabla's signature (output_stat decides).

    Returns:
        Variable: shape of x; ``(y, batch_mean, batch_var)`` with ``output_stat``.

    Example:
        >>> x, p = nn.Variable((8, 16, 4, 4)), [nn.Variable((1, 16, 1, 1)) for _ in range(4)]
        >>> y = F.batch_normalization(x, *p, batch_stat=True)  # y.shape == (8, 16, 4, 4)
    """
    _check_running_stats("batch_normalization", mean, variance, batch_stat, output_stat)
    return _fb.batch_normalization(x, beta, gamma, mean, variance, _positive_axes(x, axes), decay_rate,
                                   eps, batch_stat, gamma is None, beta is None,
                                   n_outputs=3 if output_stat else 1)


def _filled_params(x, axes, beta, gamma, mean, variance):
    """The four parameter inputs the fused and synchronized ops require: constants for absent
    beta/gamma, fresh buffers for absent running statistics."""
    from .variable import Variable
    shape = _stat_shape(x, axes)
    beta = _fb.constant(0.0, shape) if beta is None else beta
    gamma = _fb.constant(1.0, shape) if gamma is None else gamma
    mean = Variable(shape) if mean is None else mean
    variance = Variable(shape) if variance is None else variance
    return beta, gamma, mean, variance


def fused_batch_normalization(x, beta, gamma, mean, variance, z=None, axes=[1], decay_rate=0.9, eps=1e-05,
                              batch_stat=True, nonlinearity='relu', output_stat=False, n_outputs=None):
    """Batch normalization, then + z, then relu, in one function:
    ``relu(batch_normalization(x) + z)``.

    Args:
        x (Variable): input, any shape.
        beta (Variable or None): shift, the statistics' shape; None: zeros.
        gamma (Variable or None): scale, shape of beta; None: ones.
        mean (Variable or None): running mean, shape of beta, updated in place with batch_stat.
        variance (Variable or None): running variance, shape of beta, likewise.
        z (Variable, default None): added before the relu (a residual), shape of x.
        axes (list of int, default [1]): the axes that keep their statistics.
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): use the batch's statistics and update the running ones.
        nonlinearity (str, default 'relu'): the activation (only 'relu').
        output_stat (bool, default False): also return the batch mean and variance.
        n_outputs (int, default None): accepted for nnabla's signature.

    Returns:
        Variable: shape of x; with output_stat also the batch mean and variance.
    """
    _check_running_stats("fused_batch_normalization", mean, variance, batch_stat, output_stat)
    axes = _positive_axes(x, axes)
    beta, gamma, mean, variance = _filled_params(x, axes, beta, gamma, mean, variance)
    return _fb.fused_batch_normalization(x, beta, gamma, mean, variance, z, axes, decay_rate, eps,
                                         batch_stat, nonlinearity, n_outputs=3 if output_stat else 1)


def sync_batch_normalization(x, beta, gamma, mean, variance, comm, group="world", axes=[1], decay_rate=0.9,
                             eps=1e-05, batch_stat=True, output_stat=False, n_outputs=None):
    """Batch normalization whose batch statistics are merged over the processes of a communicator
    (data-parallel training); otherwise as :func:`batch_normalization`.

    Args:
        x (Variable): input, any shape.
        beta (Variable or None): shift, the statistics' shape; None: zeros.
        gamma (Variable or None): scale, shape of beta; None: ones.
        mean (Variable or None): running mean, updated in place with batch_stat.
        variance (Variable or None): running variance, updated in place with batch_stat.
        comm (Communicator or None): whose processes share the statistics; None: this process's
            batch only.
        group (str, default 'world'): the communicator's group.
        axes (list of int, default [1]): the axes that keep their statistics.
        decay_rate (float, default 0.9): the running statistics' momentum.
        eps (float, default 1e-05): added to the variance before its square root.
        batch_stat (bool, default True): use the merged batch statistics.
        output_stat (bool, default False): also return the batch mean and variance.
        n_outputs (int, default None): accepted for nnabla's signature.

    Returns:
        Variable: shape of x; with output_stat also the mean and variance.
    """
    _check_running_stats("sync_batch_normalization", mean, variance, batch_stat, output_stat)
    axes = _positive_axes(x, axes)
    beta, gamma, mean, variance = _filled_params(x, axes, beta, gamma, mean, variance)
    return _fb.sync_batch_normalization(x, beta, gamma, mean, variance, comm, group, axes, decay_rate,
                                        eps, batch_stat, n_outputs=3 if output_stat else 1)


def tensor_normalization(x, axes, beta=None, gamma=None, eps=1e-05, output_stat=False):
    """Normalizes x by its own mean and variance taken over every axis but ``axes`` (no running
    statistics): ``(x - mean) / sqrt(var + eps) * gamma + beta``.

    Args:
        x (Variable): input, any shape.
        axes (int or list of int): the axes that keep their statistics.
        beta (Variable, default None): shift, the statistics' shape; None: none.
        gamma (Variable, default None): scale, shape of beta; None: none.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance.

    Returns:
        Variable: shape of x; with output_stat also the mean and variance.
    """
    return _fb.tensor_normalization(x, beta, gamma, _positive_axes(x, axes), eps, gamma is None,
                                    beta is None, n_outputs=3 if output_stat else 1)


def weight_standardization(w, channel_axis=0, eps=1e-05, output_stat=False):
    """Weight standardization: each output channel of w made zero-mean and unit-variance over the
    other axes.

    Args:
        w (Variable): weight, any shape, e.g. (M, C, kh, kw).
        channel_axis (int, default 0): the output-channel axis.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance per channel.

    Returns:
        Variable: shape of w; with output_stat also the mean and variance.
    """
    return _fb.weight_standardization(w, channel_axis, eps, n_outputs=3 if output_stat else 1)


def layer_normalization(x, beta, gamma, batch_axis=0, eps=1e-05, output_stat=False):
    """Layer normalization: each sample normalized over all its axes, then scaled and shifted
    elementwise.

    Args:
        x (Variable): input (N, ...).
        beta (Variable or None): shift, one sample's shape with 1 on the batch axes, e.g.
            (1, C, H, W); None: none.
        gamma (Variable or None): scale, shape of beta; None: none.
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance per sample.

    Returns:
        Variable: shape of x; with output_stat also the mean and variance.

    Example:
        >>> x, b, g = nn.Variable((8, 10)), nn.Variable((1, 10)), nn.Variable((1, 10))
        >>> y = F.layer_normalization(x, b, g)  # y.shape == (8, 10)
    """
    return _fb.layer_normalization(x, beta, gamma, _as_list(batch_axis), eps, gamma is None,
                                   beta is None, n_outputs=3 if output_stat else 1)


def instance_normalization(x, beta, gamma, channel_axis=1, batch_axis=0, eps=1e-05, output_stat=False):
    """Instance normalization: each sample's channel normalized over the remaining axes, then scaled
    and shifted per channel.

    Args:
        x (Variable): input (N, C, ...).
        beta (Variable or None): shift, (1, C, 1, ...) or (N, C, 1, ...); None: none.
        gamma (Variable or None): scale, shaped as beta; None: none.
        channel_axis (int, default 1): the channel axis.
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance.

    Returns:
        Variable: shape of x; with output_stat also the mean and variance.
    """
    return _fb.instance_normalization(x, beta, gamma, channel_axis, _as_list(batch_axis), eps,
                                      gamma is None, beta is None, n_outputs=3 if output_stat else 1)


def group_normalization(x, beta, gamma, num_groups, channel_axis=1, batch_axis=0, eps=1e-05,
                        output_stat=False):
    """Group normalization: the channels split into num_groups groups, each sample's group normalized
    over its channels and the other axes, then scaled and shifted per channel.

    Args:
        x (Variable): input (N, C, ...).
        beta (Variable or None): shift per channel, (1, C, 1, ...); None: none.
        gamma (Variable or None): scale, shape of beta; None: none.
        num_groups (int): number of channel groups; divides C.
        channel_axis (int, default 1): the channel axis.
        batch_axis (int or list of int, default 0): the axes whose every index is normalized on
            its own.
        eps (float, default 1e-05): added to the variance before its square root.
        output_stat (bool, default False): also return the mean and variance per group.

    Returns:
        Variable: shape of x; with output_stat also the mean and variance.
    """
    return _fb.group_normalization(x, beta, gamma, num_groups, channel_axis, _as_list(batch_axis),
                                   eps, gamma is None, beta is None, n_outputs=3 if output_stat else 1)
