"""nnabla's ``normalization_functions``: the Python-level normalization wrappers of ``F``
(``batch_normalization(..., output_stat)`` and friends), mapped onto the registered ops."""
import numpy as np

from . import function_bases as _fb


def _axes(x, axis):
    if axis is None:
        return tuple(range(len(x.shape)))
    if isinstance(axis, (int, np.integer)):
        return (int(axis),)
    return tuple(int(a) for a in axis)


def batch_normalization(x, beta, gamma, mean, variance, axes=[1], decay_rate=0.9, eps=1e-05,
                        batch_stat=True, output_stat=False, n_outputs=None):
    """Batch normalization. With ``batch_stat`` the batch statistics are used and the running
    ``mean``/``variance`` are updated by ``decay_rate``; ``output_stat`` also returns the batch
    mean and variance."""
    n = 3 if (output_stat and batch_stat) else 1
    return _fb.batch_normalization(x, beta, gamma, mean, variance, _axes(x, axes), decay_rate, eps,
                                   batch_stat, gamma is None, beta is None, n_outputs=n)


def layer_normalization(x, beta, gamma, batch_axis=0, eps=1e-05, output_stat=False):
    """Normalize each sample over all but the batch axes."""
    n = 3 if output_stat else 1
    return _fb.layer_normalization(x, beta, gamma, _axes(x, batch_axis), eps, gamma is None,
                                   beta is None, n_outputs=n)


def instance_normalization(x, beta, gamma, channel_axis=1, batch_axis=0, eps=1e-05, output_stat=False):
    """Normalize each sample and channel over the remaining axes."""
    n = 3 if output_stat else 1
    return _fb.instance_normalization(x, beta, gamma, channel_axis, _axes(x, batch_axis), eps,
                                      gamma is None, beta is None, n_outputs=n)


def group_normalization(x, beta, gamma, num_groups, channel_axis=1, batch_axis=0, eps=1e-05,
                        output_stat=False):
    """Normalize each sample over groups of ``num_groups`` channels."""
    n = 3 if output_stat else 1
    return _fb.group_normalization(x, beta, gamma, num_groups, channel_axis, _axes(x, batch_axis),
                                   eps, gamma is None, beta is None, n_outputs=n)
