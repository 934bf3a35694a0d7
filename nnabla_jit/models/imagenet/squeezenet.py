"""SqueezeNet v1.0 and v1.1 (Iandola et al., https://arxiv.org/abs/1602.07360); weights:
``SqueezeNet-1.0.nnp``, ``SqueezeNet-1.1.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["SqueezeNet", "SqueezeNetV10", "SqueezeNetV11"]

# fire modules (squeeze maps, expand maps of each branch); "pool" marks a 3x3/2 max pooling
_LAYOUT = {
    "v1.0": (96, 7, ["pool", (16, 64), (16, 64), (32, 128), "pool", (32, 128), (48, 192), (48, 192),
                     (64, 256), "pool", (64, 256)]),
    "v1.1": (64, 3, ["pool", (16, 64), (16, 64), "pool", (32, 128), (32, 128), "pool", (48, 192),
                     (48, 192), (64, 256), (64, 256)]),
}


def fire(layers, h, squeeze, expand):
    """Squeeze to ``squeeze`` maps with 1x1 convolutions, expand with 1x1 and 3x3 ones side by side."""
    s = F.relu(layers.conv(h, squeeze, 1, bias=True, name="squeeze"))
    return F.concatenate(F.relu(layers.conv(s, expand, 1, bias=True, name="expand1x1")),
                         F.relu(layers.conv(s, expand, 3, bias=True, name="expand3x3")), axis=1)


class SqueezeNet(ImageNetBase):
    """SqueezeNet of ``version`` 'v1.0' or 'v1.1'.

    ``use_up_to``: ``'classifier'`` (default; the pooled 1000 maps, flat), ``'pool'``,
    ``'lastconv'`` (the 1000-map convolution, before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "{prefix}Reshape",
        "pool": "{prefix}AveragePooling",
        "lastconv": "{prefix}Convolution_2",
        "lastconv+relu": "{prefix}ReLU_2",
    }
    _NNP_INPUT = "TrainingInput"

    def __init__(self, version="v1.1"):
        if version not in _LAYOUT:
            raise ValueError("SqueezeNet: version must be 'v1.0' or 'v1.1', got {!r}".format(version))
        self.version = version
        self._prefix = "SqueezeNet/" if version == "v1.1" else ""
        self._KEY_FORMAT = {"prefix": self._prefix}
        self._NNP_POOLING = ("{}AveragePooling".format(self._prefix), False)
        self._NNP_DROPOUTS = ("{}Dropout".format(self._prefix),)
        self._load_nnp("SqueezeNet-{}.nnp".format(version[1:]), "SqueezeNet-{0}/SqueezeNet-{0}.nnp".format(version[1:]))

    def _input_shape(self):
        return (3, 227, 227)

    def _build(self, layers, x):
        maps, kernel, body = _LAYOUT[self.version]
        h = F.relu(layers.conv(x, maps, kernel, 2, pad=0, bias=True, name="conv1"))
        for k, part in enumerate(body):
            if part == "pool":
                h = layers.max_pool(h, 3, 2)
            else:
                with parameter_scope("fire{}".format(k + 1)):
                    h = fire(layers, h, *part)
        h = layers.dropout(h, 0.5)
        h = layers.mark("lastconv", layers.conv(h, 1000, 1, bias=True, name="conv10"))
        h = layers.mark("lastconv+relu", F.relu(h))
        h = layers.mark("pool", layers.final_pool(h, (13, 13)))
        layers.mark("classifier", F.reshape(h, (h.shape[0], h.shape[1])))


class SqueezeNetV10(SqueezeNet):
    """SqueezeNet('v1.0')."""

    def __init__(self):
        super().__init__("v1.0")


class SqueezeNetV11(SqueezeNet):
    """SqueezeNet('v1.1')."""

    def __init__(self):
        super().__init__("v1.1")
