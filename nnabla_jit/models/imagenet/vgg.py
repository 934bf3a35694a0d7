"""VGG-11/13/16 (Simonyan and Zisserman, Very Deep Convolutional Networks for Large-Scale Image
Recognition, https://arxiv.org/abs/1409.1556); weights: ``VGG-<n>.nnp``."""
from ... import functions as F
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["VGG", "VGG11", "VGG13", "VGG16"]

# 3x3 convolutions per stage (64, 128, 256, 512, 512 maps), each stage ending in a 2x2 max pooling
_STAGES = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3)}


class VGG(ImageNetBase):
    """VGG with ``num_layers`` of 11, 13 or 16 (no batch normalization).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'`` (the last max pooling), ``'lastconv'``
    (the last convolution, before its ReLU), ``'lastconv+relu'``, ``'lastfeature'`` (the second
    fully connected layer, before its ReLU)."""

    def __init__(self, num_layers=11):
        if num_layers not in _STAGES:
            raise ValueError("VGG: num_layers must be one of {}, got {}".format(sorted(_STAGES), num_layers))
        self.num_layers = num_layers
        last = 13 if num_layers == 16 else 12
        self._KEY_VARIABLE = {
            "classifier": "VGG{}/Affine_3".format(num_layers),
            "pool": "VGG{}/MaxPooling_5".format(num_layers),
            "lastconv": "VGG{}/Convolution_{}".format(num_layers, last),
            "lastconv+relu": "VGG{}/ReLU_{}".format(num_layers, last),
            "lastfeature": "VGG{}/Affine_2".format(num_layers),
        }
        self._NNP_INPUT = "TrainingInput"
        self._NNP_POOLING = (None, False)
        self._NNP_DROPOUTS = ("VGG{}/Dropout_1".format(num_layers), "VGG{}/Dropout_2".format(num_layers))
        self._load_nnp("VGG-{}.nnp".format(num_layers), "VGG-{0}/VGG-{0}.nnp".format(num_layers))

    def _build(self, layers, x):
        h = x
        convs = sum(_STAGES[self.num_layers])
        k = 0
        for s, (n, maps) in enumerate(zip(_STAGES[self.num_layers], (64, 128, 256, 512, 512))):
            for _ in range(n):
                k += 1
                h = layers.conv(h, maps, 3, bias=True, name="conv{}".format(k))
                h = F.relu(layers.mark("lastconv", h) if k == convs else h)
            if s == 4:
                h = layers.mark("lastconv+relu", h)
            h = layers.max_pool(h, 2, 2)
        h = layers.mark("pool", h)
        h = layers.dropout(F.relu(layers.affine(h, 4096, name="fc6")))
        h = layers.mark("lastfeature", layers.affine(h, 4096, name="fc7"))
        h = layers.dropout(F.relu(h))
        layers.mark("classifier", layers.affine(h, 1000, name="fc8"))


class VGG11(VGG):
    """VGG(11)."""

    def __init__(self):
        super().__init__(11)


class VGG13(VGG):
    """VGG(13)."""

    def __init__(self):
        super().__init__(13)


class VGG16(VGG):
    """VGG(16)."""

    def __init__(self):
        super().__init__(16)
