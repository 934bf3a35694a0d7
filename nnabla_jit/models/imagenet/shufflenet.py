"""ShuffleNet (Zhang et al., ShuffleNet: An Extremely Efficient Convolutional Neural Network for
Mobile Devices, https://arxiv.org/abs/1707.01083), 3 groups, at 0.5x, 1.0x and 2.0x width;
weights: ``ShuffleNet.nnp``, ``ShuffleNet-0.5x.nnp``, ``ShuffleNet-2.0x.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["ShuffleNet", "ShuffleNet10", "ShuffleNet05", "ShuffleNet20"]

GROUPS = 3
_REPEATS = (4, 8, 4)
_WIDTHS = (240, 480, 960)       # at 1.0x with 3 groups
_FILES = {10: ("ShuffleNet.nnp", "ShuffleNet/ShuffleNet.nnp"),
          5: ("ShuffleNet-.05x.nnp", "ShuffleNet-0.5x/ShuffleNet-0.5x.nnp"),
          20: ("ShuffleNet-2.0x.nnp", "ShuffleNet-2.0x/ShuffleNet-2.0x.nnp")}


def channel_shuffle(h, groups):
    n, c, height, width = h.shape
    h = F.reshape(h, (n, groups, c // groups, height, width))
    return F.reshape(F.transpose(h, (0, 2, 1, 3, 4)), (n, c, height, width))


def shuffle_unit(layers, h, maps, stride, first):
    """Grouped 1x1, channel shuffle, depthwise 3x3 (stride), grouped 1x1; added to the input,
    or, when strided, concatenated with its 3x3 average pooling."""
    mid = maps // 4
    branch_maps = maps - h.shape[1] if stride == 2 else maps
    g = 1 if first else GROUPS       # the first unit's input (the stem's maps) is not grouped
    r = layers.conv_bn(h, mid, 1, group=g, name="compress")
    r = channel_shuffle(r, GROUPS) if g > 1 else r
    r = layers.conv_bn(r, mid, 3, stride, group=mid, relu=False, name="depthwise")
    r = layers.conv_bn(r, branch_maps, 1, group=GROUPS, relu=False, name="expand")
    if stride == 2:
        return F.relu(F.concatenate(F.average_pooling(h, (3, 3), (2, 2), pad=(1, 1)), r, axis=1)), None
    return None, r + h


class ShuffleNet(ImageNetBase):
    """ShuffleNet with ``scaling_factor`` 10 (1.0x), 5 (0.5x) or 20 (2.0x) of the channels.

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'`` (the last unit's sum,
    before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling",
        "lastconv": "Add2_3_RepeatStart_3[2]",
        "lastconv+relu": "ReLU_8_RepeatStart_3[2]",
    }

    def __init__(self, scaling_factor=10):
        if scaling_factor not in _FILES:
            raise ValueError("ShuffleNet: scaling_factor must be one of {}, got {}".format(
                sorted(_FILES), scaling_factor))
        self.scaling_factor = scaling_factor
        self._load_nnp(*_FILES[scaling_factor])

    def _build(self, layers, x):
        scale = self.scaling_factor / 10.0
        h = layers.conv_bn(x, 24, 3, 2, name="conv1")
        h = layers.max_pool(h, 3, 2, pad=1)
        for s, (n, width) in enumerate(zip(_REPEATS, _WIDTHS)):
            maps = int(width * scale)
            for u in range(n):
                with parameter_scope("stage{}_unit{}".format(s + 2, u + 1)):
                    strided, added = shuffle_unit(layers, h, maps, 2 if u == 0 else 1, s == 0 and u == 0)
                if strided is not None:
                    h = strided
                else:
                    last = s == len(_REPEATS) - 1 and u == n - 1
                    h = F.relu(layers.mark("lastconv", added) if last else added)
        h = layers.mark("lastconv+relu", h)
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        layers.mark("classifier", layers.affine(h, 1000, name="fc"))


class ShuffleNet10(ShuffleNet):
    """ShuffleNet(10): 1.0x."""

    def __init__(self):
        super().__init__(10)


class ShuffleNet05(ShuffleNet):
    """ShuffleNet(5): 0.5x."""

    def __init__(self):
        super().__init__(5)


class ShuffleNet20(ShuffleNet):
    """ShuffleNet(20): 2.0x."""

    def __init__(self):
        super().__init__(20)
