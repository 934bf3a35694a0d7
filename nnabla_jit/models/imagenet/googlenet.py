"""GoogLeNet (Szegedy et al., Going Deeper with Convolutions,
https://arxiv.org/abs/1409.4842): nine inception modules, two auxiliary classifiers used in
training; weights: ``GoogLeNet.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import AuxTowerModel, ImageNetBase  # noqa: F401  (nnabla's module exposes ImageNetBase)
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["GoogLeNet"]

# the inception modules: maps of the 1x1 branch, the 3x3 branch's reduction and output, the
# 5x5 branch's reduction and output, and the pooling branch's projection; "pool": 3x3/2 max pooling
_MODULES = [("3a", (64, 96, 128, 16, 32, 32)), ("3b", (128, 128, 192, 32, 96, 64)), "pool",
            ("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)),
            ("4c", (128, 128, 256, 24, 64, 64)), ("4d", (112, 144, 288, 32, 64, 64)),
            ("4e", (256, 160, 320, 32, 128, 128)), "pool",
            ("5a", (256, 160, 320, 32, 128, 128)), ("5b", (384, 192, 384, 48, 128, 128))]
_AUX_AFTER = {"4a": 1, "4d": 2}    # the auxiliary classifiers branch off these modules


def _conv_relu(layers, h, maps, kernel, stride=1, name=None):
    return F.relu(layers.conv(h, maps, kernel, stride, bias=True, name=name))


def inception(layers, h, maps):
    b1, r3, b3, r5, b5, bp = maps
    one = _conv_relu(layers, h, b1, 1, name="1x1")
    three = _conv_relu(layers, _conv_relu(layers, h, r3, 1, name="3x3_reduce"), b3, 3, name="3x3")
    five = _conv_relu(layers, _conv_relu(layers, h, r5, 1, name="5x5_reduce"), b5, 5, name="5x5")
    pool = F.max_pooling(h, (3, 3), (1, 1), pad=(1, 1))
    return F.concatenate(one, three, five, _conv_relu(layers, pool, bp, 1, name="pool_proj"), axis=1)


def auxiliary_classifier(layers, h):
    h = F.average_pooling(h, (5, 5), (3, 3))
    h = _conv_relu(layers, h, 128, 1, name="conv")
    h = layers.dropout(F.relu(layers.affine(h, 1024, name="fc1")), 0.7)
    return layers.affine(h, 1000, name="fc2")


class GoogLeNet(AuxTowerModel):
    """GoogLeNet (Inception v1).

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'prepool'`` (the last inception
    module's output). ``model(..., with_aux_tower=True)`` (training) also builds the two auxiliary
    classifiers; the network then has their outputs too (``returns_net=True``)."""
    _KEY_VARIABLE = {
        "classifier": "Affine_5",
        "pool": "AveragePooling_3",
        "prepool": "Concatenate_9",
        "_aux_classifier_1": "Affine_2",
        "_branching_point_1": "AveragePooling",
        "_aux_classifier_2": "Affine_4",
        "_branching_point_2": "AveragePooling_2",
    }
    _NNP_POOLING = ("AveragePooling_3", False)
    _NNP_DROPOUTS = ("Dropout_3",)
    _NNP_NETWORK = "Train"

    def __init__(self):
        self._load_nnp("GoogLeNet.nnp", "GoogLeNet/GoogLeNet.nnp")

    # nnabla's edits of the file: with the auxiliary towers their losses are left out, without
    # them the towers are (from the modules they branch off)
    _AUX_LOSSES = ("Affine_2", "SoftmaxCrossEntropy", "MulScalarLoss1",
                   "Affine_4", "SoftmaxCrossEntropy_2", "MulScalarLoss2")
    _AUX_TOWERS = ("AveragePooling", "Convolution_22", "ReLU_22", "Affine", "ReLU_23", "Dropout",
                   "Affine_2", "SoftmaxCrossEntropy", "MulScalarLoss1",
                   "AveragePooling_2", "Convolution_41", "ReLU_42", "Affine_3", "ReLU_43",
                   "Dropout_2", "Affine_4", "SoftmaxCrossEntropy_2", "MulScalarLoss2")

    def _network_from_nnp(self, x, use_up_to, training, force_global_pooling, check_global_pooling, verbose):
        if self._with_aux:
            cuts, drops = ("_aux_classifier_1", "_aux_classifier_2"), self._AUX_LOSSES
        else:
            cuts, drops = ("_branching_point_1", "_branching_point_2"), self._AUX_TOWERS
        return super()._network_from_nnp(x, use_up_to, training, force_global_pooling,
                                         check_global_pooling, verbose, cuts, drops)

    def _build(self, layers, x):
        h = _conv_relu(layers, x, 64, 7, 2, name="conv1")
        h = layers.max_pool(h, 3, 2, pad=1)
        h = _conv_relu(layers, h, 64, 1, name="conv2_reduce")
        h = _conv_relu(layers, h, 192, 3, name="conv2")
        h = layers.max_pool(h, 3, 2, pad=1)
        for module in _MODULES:
            if module == "pool":
                h = layers.max_pool(h, 3, 2, pad=1)
                continue
            name, maps = module
            with parameter_scope("inception_" + name):
                h = inception(layers, h, maps)
            if self._with_aux and name in _AUX_AFTER:
                with parameter_scope("aux{}".format(_AUX_AFTER[name])):
                    layers.extra_outputs["aux{}".format(_AUX_AFTER[name])] = auxiliary_classifier(layers, h)
        h = layers.mark("prepool", h)
        h = layers.mark("pool", layers.final_pool(h, (7, 7)))
        layers.mark("classifier", layers.affine(layers.dropout(h, 0.4), 1000, name="fc"))
