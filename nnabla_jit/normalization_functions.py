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
    """Batch normalization over all axes but ``axes``. With ``batch_stat`` the batch statistics
    are used and the running ``mean``/``variance`` (if given) are updated in place:
    ``mean = decay_rate * mean + (1 - decay_rate) * batch_mean`` and likewise the variance with
    the unbiased batch variance. Otherwise the running statistics are used. ``output_stat`` also
    returns the batch mean and (biased) variance. ``beta``/``gamma`` None omit the bias/scale."""
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
    """relu(batch_normalization(x) + z), in one op."""
    _check_running_stats("fused_batch_normalization", mean, variance, batch_stat, output_stat)
    axes = _positive_axes(x, axes)
    beta, gamma, mean, variance = _filled_params(x, axes, beta, gamma, mean, variance)
    return _fb.fused_batch_normalization(x, beta, gamma, mean, variance, z, axes, decay_rate, eps,
                                         batch_stat, nonlinearity, n_outputs=3 if output_stat else 1)


def sync_batch_normalization(x, beta, gamma, mean, variance, comm, group="world", axes=[1], decay_rate=0.9,
                             eps=1e-05, batch_stat=True, output_stat=False, n_outputs=None):
    """Batch normalization with statistics shared over ``comm`` (a single process here)."""
    _check_running_stats("sync_batch_normalization", mean, variance, batch_stat, output_stat)
    axes = _positive_axes(x, axes)
    beta, gamma, mean, variance = _filled_params(x, axes, beta, gamma, mean, variance)
    return _fb.sync_batch_normalization(x, beta, gamma, mean, variance, comm, group, axes, decay_rate,
                                        eps, batch_stat, n_outputs=3 if output_stat else 1)


def tensor_normalization(x, axes, beta=None, gamma=None, eps=1e-05, output_stat=False):
    """Normalize ``x`` by its own mean and variance taken over all axes but ``axes``;
    ``output_stat`` also returns them."""
    return _fb.tensor_normalization(x, beta, gamma, _positive_axes(x, axes), eps, gamma is None,
                                    beta is None, n_outputs=3 if output_stat else 1)


def weight_standardization(w, channel_axis=0, eps=1e-05, output_stat=False):
    """Standardize ``w`` per ``channel_axis`` (its output channels); ``output_stat`` also
    returns the mean and variance."""
    return _fb.weight_standardization(w, channel_axis, eps, n_outputs=3 if output_stat else 1)


def layer_normalization(x, beta, gamma, batch_axis=0, eps=1e-05, output_stat=False):
    """Normalize each sample over all but the batch axes."""
    return _fb.layer_normalization(x, beta, gamma, _as_list(batch_axis), eps, gamma is None,
                                   beta is None, n_outputs=3 if output_stat else 1)


def instance_normalization(x, beta, gamma, channel_axis=1, batch_axis=0, eps=1e-05, output_stat=False):
    """Normalize each sample and channel over the remaining axes."""
    return _fb.instance_normalization(x, beta, gamma, channel_axis, _as_list(batch_axis), eps,
                                      gamma is None, beta is None, n_outputs=3 if output_stat else 1)


def group_normalization(x, beta, gamma, num_groups, channel_axis=1, batch_axis=0, eps=1e-05,
                        output_stat=False):
    """Normalize each sample over groups of ``channels / num_groups`` channels."""
    return _fb.group_normalization(x, beta, gamma, num_groups, channel_axis, _as_list(batch_axis),
                                   eps, gamma is None, beta is None, n_outputs=3 if output_stat else 1)
