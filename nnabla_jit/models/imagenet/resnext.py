"""ResNeXt-50/101, 32x4d (Xie et al., Aggregated Residual Transformations for Deep Neural
Networks, https://arxiv.org/abs/1611.05431); weights: Sony's ``ResNeXt-<n>.nnp``."""
from .base import ImageNetBase
from .resnet import bottleneck_block, classifier, residual_stages, resnet_stem
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["ResNeXt", "ResNeXt50", "ResNeXt101"]

_STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
CARDINALITY = 32


def resnext_block(layers, h, width, stride):
    """A bottleneck whose 3x3 convolution has 32 groups of 4 x (width / 64) x ... channels:
    twice the width of ResNet's (32 x 4d at the first stage)."""
    return bottleneck_block(layers, h, width, stride, group=CARDINALITY, mid=2 * width)


class ResNeXt(ImageNetBase):
    """ResNeXt with ``num_layers`` of 50 or 101 (cardinality 32, 4 channels per group).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'``, ``'lastconv+relu'``
    (as ResNet)."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling",
        "lastconv": "Add2_7_RepeatStart_4[1]",
        "lastconv+relu": "ReLU_25_RepeatStart_4[1]",
    }

    def __init__(self, num_layers=50):
        if num_layers not in _STAGES:
            raise ValueError("ResNeXt: num_layers must be one of {}, got {}".format(sorted(_STAGES), num_layers))
        self.num_layers = num_layers
        self._load_nnp("ResNeXt-{}.nnp".format(num_layers), "ResNeXt-{0}/ResNeXt-{0}.nnp".format(num_layers))

    def _build(self, layers, x):
        h = residual_stages(layers, resnet_stem(layers, x), _STAGES[self.num_layers],
                            resnext_block)
        classifier(layers, h)


class ResNeXt50(ResNeXt):
    """ResNeXt(50)."""

    def __init__(self):
        super().__init__(50)


class ResNeXt101(ResNeXt):
    """ResNeXt(101)."""

    def __init__(self):
        super().__init__(101)
