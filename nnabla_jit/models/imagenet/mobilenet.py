"""MobileNet (Howard et al., https://arxiv.org/abs/1704.04861) and MobileNetV2 (Sandler et al.,
Inverted Residuals and Linear Bottlenecks, https://arxiv.org/abs/1801.04381); weights:
``MobileNet.nnp``, ``MobileNet-v2.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["MobileNet", "MobileNetV2"]

# (output maps, stride) of the depthwise-separable layers after the first convolution
_V1 = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
# (expansion, output maps, repeats, first stride) of the inverted-residual stages
_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
       (6, 320, 1, 1)]


class MobileNet(ImageNetBase):
    """MobileNet (width 1.0).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'`` (the last batch
    normalization, before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling",
        "lastconv": "BatchNormalization_19",
        "lastconv+relu": "ReLU_19",
    }

    def __init__(self):
        self._load_nnp("MobileNet.nnp", "MobileNet/MobileNet.nnp")

    def _build(self, layers, x):
        h = layers.conv_bn(x, 32, 3, 2, name="conv1")
        for k, (maps, stride) in enumerate(_V1):
            with parameter_scope("separable{}".format(k + 1)):
                h = layers.conv_bn(h, h.shape[1], 3, stride, group=h.shape[1], name="depthwise")
                h = layers.conv_bn(h, maps, 1, relu=False, name="pointwise")
            h = F.relu(layers.mark("lastconv", h) if k == len(_V1) - 1 else h)
        h = layers.mark("lastconv+relu", h)
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        layers.mark("classifier", layers.affine(h, 1000, name="fc"))


class MobileNetV2(ImageNetBase):
    """MobileNetV2 (width 1.0).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'`` (the 1280-map
    convolution's batch normalization, before its ReLU6), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Reshape",
        "pool": "AveragePooling",
        "lastconv": "BatchNormalization_2",
        "lastconv+relu": "ReLU_2",
    }
    _NNP_AUGMENTATION = None
    _NNP_DROP_FUNCTIONS = ("ImageAugmentationX",)
    _NNP_INPUT = "ImageAugmentationX"      # nnabla drops the augmentation and feeds its output

    def __init__(self):
        self._load_nnp("MobileNet-v2.nnp", "MobileNet-v2/MobileNet-v2.nnp")

    def _build(self, layers, x):
        h = F.relu6(layers.conv_bn(x, 32, 3, 2, relu=False, name="conv1"))
        block = 0
        for expansion, maps, repeats, stride in _V2:
            for r in range(repeats):
                block += 1
                with parameter_scope("block{}".format(block)):
                    inp = h
                    if expansion != 1:
                        h = F.relu6(layers.conv_bn(h, expansion * h.shape[1], 1, relu=False, name="expand"))
                    h = F.relu6(layers.conv_bn(h, h.shape[1], 3, stride if r == 0 else 1,
                                               group=h.shape[1], relu=False, name="depthwise"))
                    h = layers.conv_bn(h, maps, 1, relu=False, name="project")
                    if r > 0:
                        h = h + inp
        h = layers.mark("lastconv", layers.conv_bn(h, 1280, 1, relu=False, name="conv_last"))
        h = layers.mark("lastconv+relu", F.relu6(h))
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        layers.mark("classifier", layers.affine(layers.dropout(h, 0.2), 1000, name="fc"))
