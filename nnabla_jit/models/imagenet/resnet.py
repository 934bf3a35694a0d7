"""ResNet-18/34/50/101/152 (He et al., Deep Residual Learning for Image Recognition,
https://arxiv.org/abs/1512.03385); weights: Sony's ``Resnet-<n>.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["ResNet", "ResNet18", "ResNet34", "ResNet50", "ResNet101", "ResNet152"]

# blocks per stage; basic (two 3x3) blocks below 50 layers, bottlenecks (1x1, 3x3, 1x1 x4) above
_STAGES = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def residual_stages(layers, h, stages, block, widths=(64, 128, 256, 512)):
    """The four stages of residual blocks after the stem; ``block(layers, h, width, stride)``
    returns the residual branch's output and the shortcut's. Marks 'lastconv' (the last sum,
    before its ReLU) and returns the network up to 'lastconv+relu'."""
    for s, (n, width) in enumerate(zip(stages, widths)):
        for b in range(n):
            with parameter_scope("stage{}_block{}".format(s + 1, b + 1)):
                branch, shortcut = block(layers, h, width, 2 if b == 0 and s > 0 else 1)
            h = branch + shortcut
            last = s == len(stages) - 1 and b == n - 1
            h = F.relu(layers.mark("lastconv", h) if last else h)
    return layers.mark("lastconv+relu", h)


def _projection(layers, h, maps, stride):
    """The shortcut: identity, or a strided 1x1 convolution where the shape changes."""
    if h.shape[1] == maps and stride == 1:
        return h
    return layers.conv_bn(h, maps, 1, stride, relu=False, name="shortcut")


def basic_block(layers, h, width, stride):
    r = layers.conv_bn(h, width, 3, stride, name="conv1")
    r = layers.conv_bn(r, width, 3, relu=False, name="conv2")
    return r, _projection(layers, h, width, stride)


def bottleneck_block(layers, h, width, stride, group=1, mid=None):
    mid = width if mid is None else mid
    r = layers.conv_bn(h, mid, 1, name="conv1")
    r = layers.conv_bn(r, mid, 3, stride, group=group, name="conv2")
    r = layers.conv_bn(r, 4 * width, 1, relu=False, name="conv3")
    return r, _projection(layers, h, 4 * width, stride)


def resnet_stem(layers, x):
    """7x7/2 convolution with 64 maps and a 3x3/2 max pooling."""
    h = layers.conv_bn(x, 64, 7, 2, name="conv1")
    return layers.max_pool(h, 3, 2, pad=1)


def classifier(layers, h, trained=(7, 7), classes=1000):
    h = layers.mark("pool", layers.final_pool(h, trained))
    return layers.mark("classifier", layers.affine(h, classes, name="fc"))


class ResNet(ImageNetBase):
    """ResNet with ``num_layers`` of 18, 34, 50, 101 or 152.

    ``use_up_to``: ``'classifier'`` (default; the final affine layer's output), ``'pool'`` (the
    global average pooling's), ``'lastconv'`` (the pooling's input before its ReLU) and
    ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling",
        "lastconv": "Add2_7_RepeatStart_4[{index}]",
        "lastconv+relu": "ReLU_25_RepeatStart_4[{index}]",
    }

    def __init__(self, num_layers=18):
        if num_layers not in _STAGES:
            raise ValueError("ResNet: num_layers must be one of {}, got {}".format(sorted(_STAGES), num_layers))
        self.num_layers = num_layers
        self._KEY_FORMAT = {"index": 0 if num_layers == 18 else 1}
        self._load_nnp("Resnet-{}.nnp".format(num_layers), "Resnet-{0}/Resnet-{0}.nnp".format(num_layers))

    def _build(self, layers, x):
        block = basic_block if self.num_layers < 50 else bottleneck_block
        h = residual_stages(layers, resnet_stem(layers, x), _STAGES[self.num_layers], block)
        classifier(layers, h)


class ResNet18(ResNet):
    """ResNet(18)."""

    def __init__(self):
        super().__init__(18)


class ResNet34(ResNet):
    """ResNet(34)."""

    def __init__(self):
        super().__init__(34)


class ResNet50(ResNet):
    """ResNet(50)."""

    def __init__(self):
        super().__init__(50)


class ResNet101(ResNet):
    """ResNet(101)."""

    def __init__(self):
        super().__init__(101)


class ResNet152(ResNet):
    """ResNet(152)."""

    def __init__(self):
        super().__init__(152)
