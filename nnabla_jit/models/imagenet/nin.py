"""Network in Network (Lin et al., https://arxiv.org/abs/1312.4400), the ImageNet model: four
stages of a convolution followed by two 1x1 ones ("mlpconv"); weights: ``NIN.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["NIN"]

# (maps, kernel, stride, padding) of each mlpconv stage's first convolution; the two 1x1 after
# it have the same maps, except the last stage's, which ends in the 1000 classes
_STAGES = [(96, 11, 4, 0), (256, 5, 1, 2), (384, 3, 1, 1), (1024, 3, 1, 1)]


class NIN(ImageNetBase):
    """Network in Network.

    ``use_up_to``: ``'classifier'`` (default; the pooled 1000 maps, flat), ``'pool'``,
    ``'lastconv'`` (the last 1x1 convolution, before its ReLU), ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "classifier": "NIN/Reshape",
        "pool": "NIN/AveragePooling",
        "lastconv": "NIN/Convolution_3",
        "lastconv+relu": "NIN/ReLU_3",
    }
    _NNP_INPUT = "TrainingInput"
    _NNP_POOLING = ("NIN/AveragePooling", False)
    _NNP_DROPOUTS = ("NIN/Dropout",)

    def __init__(self):
        self._load_nnp("NIN.nnp", "NIN/NIN.nnp")

    def _input_shape(self):
        return (3, 227, 227)

    def _build(self, layers, x):
        h = x
        for s, (maps, kernel, stride, pad) in enumerate(_STAGES):
            last_stage = s == len(_STAGES) - 1
            with parameter_scope("mlpconv{}".format(s + 1)):
                h = F.relu(layers.conv(h, maps, kernel, stride, pad=pad, bias=True, name="conv"))
                h = F.relu(layers.conv(h, maps, 1, bias=True, name="cccp1"))
                h = layers.conv(h, 1000 if last_stage else maps, 1, bias=True, name="cccp2")
            if last_stage:
                h = layers.mark("lastconv+relu", F.relu(layers.mark("lastconv", h)))
            else:
                h = layers.max_pool(F.relu(h), 3, 2)
            if s == 2:
                h = layers.dropout(h, 0.5)
        h = layers.mark("pool", layers.final_pool(h, (6, 6)))
        layers.mark("classifier", F.reshape(h, (h.shape[0], h.shape[1])))
