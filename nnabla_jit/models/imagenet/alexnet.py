"""AlexNet (Krizhevsky et al., ImageNet Classification with Deep Convolutional Neural Networks,
NIPS 2012), in its one-tower form with grouped convolutions; weights: ``AlexNet.nnp``."""
from ... import functions as F
from .base import ImageNetBase
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["AlexNet"]


class AlexNet(ImageNetBase):
    """AlexNet.

    ``use_up_to``: ``'classifier'`` (default), ``'pool'`` (the last max pooling),
    ``'lastconv'``, ``'lastconv+relu'``, ``'lastfeature'`` (the second fully connected layer,
    before its ReLU)."""
    _KEY_VARIABLE = {
        "classifier": "TrainNet/Affine_3",
        "pool": "TrainNet/MaxPooling_3",
        "lastconv": "TrainNet/Convolution_5",
        "lastconv+relu": "TrainNet/ReLU_5",
        "lastfeature": "TrainNet/Affine_2",
    }
    _NNP_INPUT = "TrainingInput"
    _NNP_POOLING = (None, False)
    _NNP_DROPOUTS = ("TrainNet/Dropout", "TrainNet/Dropout_2")

    def __init__(self):
        self._load_nnp("AlexNet.nnp", "AlexNet/AlexNet.nnp")

    def _input_shape(self):
        return (3, 227, 227)

    def _build(self, layers, x):
        h = F.relu(layers.conv(x, 96, 11, 4, pad=0, bias=True, name="conv1"))
        h = layers.max_pool(h, 3, 2)
        h = F.relu(layers.conv(h, 256, 5, group=2, bias=True, name="conv2"))
        h = layers.max_pool(h, 3, 2)
        h = F.relu(layers.conv(h, 384, 3, bias=True, name="conv3"))
        h = F.relu(layers.conv(h, 384, 3, group=2, bias=True, name="conv4"))
        h = layers.mark("lastconv", layers.conv(h, 256, 3, group=2, bias=True, name="conv5"))
        h = layers.mark("lastconv+relu", F.relu(h))
        h = layers.mark("pool", layers.max_pool(h, 3, 2))
        h = layers.dropout(F.relu(layers.affine(h, 4096, name="fc6")))
        h = layers.mark("lastfeature", layers.affine(h, 4096, name="fc7"))
        layers.mark("classifier", layers.affine(layers.dropout(F.relu(h)), 1000, name="fc8"))
