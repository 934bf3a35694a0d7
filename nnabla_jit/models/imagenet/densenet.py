"""DenseNet-161 (Huang et al., Densely Connected Convolutional Networks,
https://arxiv.org/abs/1608.06993); weights: ``DenseNet-161.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["DenseNet"]

_GROWTH = 48
_BLOCKS = (6, 12, 36, 24)
_BOTTLENECK = 4       # the 1x1 convolution before each 3x3 one has 4 x growth maps


class DenseNet(ImageNetBase):
    """DenseNet-161 (growth rate 48, 96 maps after the stem).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'`` (the final batch
    normalization, before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "DenseNet/Affine",
        "pool": "DenseNet/AveragePooling_4",
        "lastconv": "DenseNet/BatchNormalization_5",
        "lastconv+relu": "DenseNet/ReLU_5",
    }
    _NNP_POOLING = ("DenseNet/AveragePooling_4", False)
    _NNP_NETWORK = "Train"

    def __init__(self):
        self._load_nnp("DenseNet-161.nnp", "DenseNet-161/DenseNet-161.nnp")

    def _build(self, layers, x):
        h = layers.conv_bn(x, 2 * _GROWTH, 7, 2, name="conv1")
        h = layers.max_pool(h, 3, 2, pad=1)
        for b, n in enumerate(_BLOCKS):
            for k in range(n):
                with parameter_scope("block{}_layer{}".format(b + 1, k + 1)):
                    new = layers.conv(layers.bn(h, relu=True, name="bn1"), _BOTTLENECK * _GROWTH, 1, name="conv1")
                    new = layers.conv(layers.bn(new, relu=True, name="bn2"), _GROWTH, 3, name="conv2")
                h = F.concatenate(h, new, axis=1)
            if b < len(_BLOCKS) - 1:      # transition: halve the maps and the resolution
                with parameter_scope("transition{}".format(b + 1)):
                    h = layers.conv(layers.bn(h, relu=True), h.shape[1] // 2, 1)
                h = F.average_pooling(h, (2, 2), (2, 2))
        h = layers.mark("lastconv", layers.bn(h, name="bn_last"))
        h = layers.mark("lastconv+relu", F.relu(h))
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        layers.mark("classifier", layers.affine(h, 1000, name="fc"))
