"""Xception (Chollet, Deep Learning with Depthwise Separable Convolutions,
https://arxiv.org/abs/1610.02357); weights: ``Xception.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["Xception"]


def separable_bn(layers, h, maps, name):
    """A depthwise 3x3 and a pointwise 1x1 convolution, then batch normalization."""
    with parameter_scope(name):
        h = layers.conv(h, h.shape[1], 3, group=h.shape[1], name="depthwise")
        return layers.bn(layers.conv(h, maps, 1, name="pointwise"))


def downsampling_block(layers, h, maps, relu_first=True):
    """Two separable convolutions and a 3x3/2 max pooling, beside a strided 1x1 projection."""
    shortcut = layers.conv_bn(h, maps[-1], 1, 2, relu=False, name="shortcut")
    r = F.relu(h) if relu_first else h
    r = separable_bn(layers, r, maps[0], "sep1")
    r = separable_bn(layers, F.relu(r), maps[1], "sep2")
    return F.max_pooling(r, (3, 3), (2, 2), pad=(1, 1)) + shortcut


class Xception(ImageNetBase):
    """Xception.

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'`` (the last separable
    convolution's batch normalization, before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Unit/Affine",
        "pool": "Unit/AveragePooling",
        "lastconv": "Unit/SeparableConv_13/SepConvBN",
        "lastconv+relu": "Unit/ReLU_14",
    }
    _NNP_AUGMENTATION = "ImageAugmentation"
    _NNP_POOLING = ("Unit/AveragePooling", False)
    _NNP_DROPOUTS = ("Unit/Dropout",)

    def __init__(self):
        self._load_nnp("Xception.nnp", "Xception/Xception.nnp")

    def _input_shape(self):
        return (3, 299, 299)

    def _build(self, layers, x):
        h = layers.conv_bn(x, 32, 3, 2, pad=0, name="conv1")
        h = layers.conv_bn(h, 64, 3, pad=0, name="conv2")
        for k, maps in enumerate((128, 256, 728)):          # entry flow
            with parameter_scope("entry{}".format(k + 1)):
                h = downsampling_block(layers, h, (maps, maps), relu_first=k > 0)
        for k in range(8):                                  # middle flow
            with parameter_scope("middle{}".format(k + 1)):
                r = h
                for j in range(3):
                    r = separable_bn(layers, F.relu(r), 728, "sep{}".format(j + 1))
            h = h + r
        with parameter_scope("exit"):
            h = downsampling_block(layers, h, (728, 1024))
            h = F.relu(separable_bn(layers, h, 1536, "sep3"))
            h = layers.mark("lastconv", separable_bn(layers, h, 2048, "sep4"))
        h = layers.mark("lastconv+relu", F.relu(h))
        h = layers.mark("pool", layers.final_pool(h, (10, 10)))
        layers.mark("classifier", layers.affine(layers.dropout(h, 0.5), 1000, name="fc"))
