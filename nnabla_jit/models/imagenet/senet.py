"""SENet-154 (Hu et al., Squeeze-and-Excitation Networks, https://arxiv.org/abs/1709.01507):
ResNeXt-like bottlenecks (64 groups) with squeeze-and-excitation; weights: ``SENet-154.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from .resnet import residual_stages
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["SENet"]

_STAGES = (3, 8, 36, 3)
_GROUPS = 64
_REDUCTION = 16


def squeeze_excitation(layers, h, reduction=_REDUCTION):
    """Scale each channel by a gate computed from the channels' means."""
    c = h.shape[1]
    s = F.average_pooling(h, h.shape[2:], h.shape[2:])
    s = F.relu(layers.conv(s, c // reduction, 1, bias=True, name="se_reduce"))
    s = F.sigmoid(layers.conv(s, c, 1, bias=True, name="se_expand"))
    return h * s


def se_block(layers, h, width, stride):
    r = layers.conv_bn(h, 2 * width, 1, name="conv1")
    r = layers.conv_bn(r, 4 * width, 3, stride, group=_GROUPS, name="conv2")
    r = layers.conv_bn(r, 4 * width, 1, relu=False, name="conv3")
    r = squeeze_excitation(layers, r)
    shortcut = h
    if h.shape[1] != 4 * width or stride != 1:   # SENet-154's strided projections are 3x3
        shortcut = layers.conv_bn(h, 4 * width, 3 if stride > 1 else 1, stride, relu=False,
                                  name="shortcut")
    return r, shortcut


class SENet(ImageNetBase):
    """SENet-154.

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'lastconv'``, ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling",
        "lastconv": "Add2_7_RepeatStart_4[1]",
        "lastconv+relu": "ReLU_25_RepeatStart_4[1]",
    }
    _NNP_POOLING = ("AveragePooling", True)
    _NNP_DROPOUTS = ("Dropout",)

    def __init__(self):
        self._load_nnp("SENet-154.nnp", "SENet-154/SENet-154.nnp")

    def _build(self, layers, x):
        with parameter_scope("stem"):       # three 3x3 convolutions instead of one 7x7
            h = layers.conv_bn(x, 64, 3, 2, name="conv1")
            h = layers.conv_bn(h, 64, 3, name="conv2")
            h = layers.conv_bn(h, 128, 3, name="conv3")
        h = layers.max_pool(h, 3, 2, pad=1)
        h = residual_stages(layers, h, _STAGES, se_block)
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        h = layers.dropout(h, 0.2)
        layers.mark("classifier", layers.affine(h, 1000, name="fc"))
