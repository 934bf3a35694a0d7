"""Inception-v3 (Szegedy et al., Rethinking the Inception Architecture for Computer Vision,
https://arxiv.org/abs/1512.00567); weights: ``Inception-v3.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import AuxTowerModel, ImageNetBase  # noqa: F401  (nnabla's module exposes ImageNetBase)
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["InceptionV3"]


def _cbr(layers, h, maps, kernel, stride=1, pad=None, name=None):
    """Convolution, batch normalization, ReLU (every convolution of the network)."""
    return layers.conv_bn(h, maps, kernel, stride, pad=pad, name=name)


def _avg3(h):
    return F.average_pooling(h, (3, 3), (1, 1), pad=(1, 1))


def _max3(h):
    return F.max_pooling(h, (3, 3), (2, 2))


def module_a(layers, h, pool_maps):
    b1 = _cbr(layers, h, 64, 1, name="b1")
    b5 = _cbr(layers, _cbr(layers, h, 48, 1, name="b5_1"), 64, 5, name="b5_2")
    b3 = _cbr(layers, _cbr(layers, _cbr(layers, h, 64, 1, name="b3_1"), 96, 3, name="b3_2"), 96, 3, name="b3_3")
    return F.concatenate(b1, b5, b3, _cbr(layers, _avg3(h), pool_maps, 1, name="pool"), axis=1)


def module_b(layers, h):        # 35x35 -> 17x17
    b3 = _cbr(layers, h, 384, 3, 2, pad=0, name="b3")
    d = _cbr(layers, _cbr(layers, h, 64, 1, name="b3dbl_1"), 96, 3, name="b3dbl_2")
    d = _cbr(layers, d, 96, 3, 2, pad=0, name="b3dbl_3")
    return F.concatenate(b3, d, _max3(h), axis=1)


def module_c(layers, h, c7):    # factorized 7x7 convolutions
    b1 = _cbr(layers, h, 192, 1, name="b1")
    b7 = _cbr(layers, h, c7, 1, name="b7_1")
    b7 = _cbr(layers, _cbr(layers, b7, c7, (1, 7), name="b7_2"), 192, (7, 1), name="b7_3")
    d = _cbr(layers, h, c7, 1, name="b7dbl_1")
    for k, (maps, kernel) in enumerate([(c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))]):
        d = _cbr(layers, d, maps, kernel, name="b7dbl_{}".format(k + 2))
    return F.concatenate(b1, b7, d, _cbr(layers, _avg3(h), 192, 1, name="pool"), axis=1)


def module_d(layers, h):        # 17x17 -> 8x8
    b3 = _cbr(layers, _cbr(layers, h, 192, 1, name="b3_1"), 320, 3, 2, pad=0, name="b3_2")
    b7 = _cbr(layers, h, 192, 1, name="b7_1")
    b7 = _cbr(layers, _cbr(layers, b7, 192, (1, 7), name="b7_2"), 192, (7, 1), name="b7_3")
    b7 = _cbr(layers, b7, 192, 3, 2, pad=0, name="b7_4")
    return F.concatenate(b3, b7, _max3(h), axis=1)


def module_e(layers, h):        # expanded filter banks
    b1 = _cbr(layers, h, 320, 1, name="b1")
    b3 = _cbr(layers, h, 384, 1, name="b3_1")
    b3 = F.concatenate(_cbr(layers, b3, 384, (1, 3), name="b3_2a"), _cbr(layers, b3, 384, (3, 1), name="b3_2b"), axis=1)
    d = _cbr(layers, _cbr(layers, h, 448, 1, name="b3dbl_1"), 384, 3, name="b3dbl_2")
    d = F.concatenate(_cbr(layers, d, 384, (1, 3), name="b3dbl_3a"), _cbr(layers, d, 384, (3, 1), name="b3dbl_3b"), axis=1)
    return F.concatenate(b1, b3, d, _cbr(layers, _avg3(h), 192, 1, name="pool"), axis=1)


def auxiliary_classifier(layers, h):
    h = F.average_pooling(h, (5, 5), (3, 3))
    h = _cbr(layers, h, 128, 1, name="conv1")
    h = _cbr(layers, h, 768, 5, pad=0, name="conv2")
    return layers.affine(h, 1000, name="fc")


class InceptionV3(AuxTowerModel):
    """Inception-v3.

    ``use_up_to``: ``'classifier'`` (default), ``'pool'``, ``'prepool'`` (the last module's
    output). ``model(..., training=True, with_aux_tower=True)`` also builds the auxiliary
    classifier and returns both outputs (the main classifier's first)."""
    _KEY_VARIABLE = {
        "classifier": "Affine",
        "pool": "AveragePooling_2",
        "prepool": "Inception_11/Concatenate",
        "_aux_classifier": "Affine_2",
        "_include_no_aux": "Conv_6/Convolution",
    }
    _NNP_NETWORK = "Train"
    _NNP_INPUT = "Iv3TrainInput"
    _NNP_AUGMENTATION = "ImageAugmentation"
    _NNP_POOLING = ("AveragePooling_2", False)
    _NNP_DROPOUTS = ("Dropout",)
    # nnabla's edits of the file: with the auxiliary tower its loss is left out, without it the tower
    _AUX_LOSS = ("Affine_2", "SoftmaxCrossEntropy_2", "MulScalar_2")
    _AUX_TOWER = ("Conv_6/Convolution", "Conv_6/BatchNormalization", "Conv_6/ReLU", "AveragePooling",
                  "Conv_7/Convolution", "Conv_7/BatchNormalization", "Conv_7/ReLU") + _AUX_LOSS

    def __init__(self):
        self._load_nnp("Inception-v3.nnp", "Inception-v3/Inception-v3.nnp")

    def _input_shape(self):
        return (3, 299, 299)

    def __call__(self, input_var=None, use_from=None, use_up_to="classifier", training=False,
                 force_global_pooling=False, check_global_pooling=True, returns_net=False, verbose=0,
                 with_aux_tower=False):
        if with_aux_tower and not training:
            raise ValueError("InceptionV3: the auxiliary tower is for training: with_aux_tower=True "
                             "needs training=True")
        return super().__call__(input_var, use_from, use_up_to, training, force_global_pooling,
                                check_global_pooling, returns_net, verbose, with_aux_tower)

    def _network_from_nnp(self, x, use_up_to, training, force_global_pooling, check_global_pooling, verbose):
        cuts, drops = (("_aux_classifier",), self._AUX_LOSS) if self._with_aux else \
            (("_include_no_aux",), self._AUX_TOWER)
        return super()._network_from_nnp(x, use_up_to, training, force_global_pooling,
                                         check_global_pooling, verbose, cuts, drops)

    def _build(self, layers, x):
        h = _cbr(layers, x, 32, 3, 2, pad=0, name="conv1")
        h = _cbr(layers, h, 32, 3, pad=0, name="conv2")
        h = _cbr(layers, h, 64, 3, name="conv3")
        h = F.max_pooling(h, (3, 3), (2, 2))
        h = _cbr(layers, h, 80, 1, name="conv4")
        h = _cbr(layers, h, 192, 3, pad=0, name="conv5")
        h = F.max_pooling(h, (3, 3), (2, 2))
        for k, pool_maps in enumerate((32, 64, 64)):
            with parameter_scope("mixed_a{}".format(k + 1)):
                h = module_a(layers, h, pool_maps)
        with parameter_scope("mixed_b"):
            h = module_b(layers, h)
        for k, c7 in enumerate((128, 160, 160, 192)):
            with parameter_scope("mixed_c{}".format(k + 1)):
                h = module_c(layers, h, c7)
        if self._with_aux:
            with parameter_scope("aux"):
                layers.extra_outputs["aux"] = auxiliary_classifier(layers, h)
        with parameter_scope("mixed_d"):
            h = module_d(layers, h)
        for k in range(2):
            with parameter_scope("mixed_e{}".format(k + 1)):
                h = module_e(layers, h)
        h = layers.mark("prepool", h)
        h = layers.mark("pool", layers.final_pool(h, (8, 8)))
        layers.mark("classifier", layers.affine(layers.dropout(h, 0.2), 1000, name="fc"))
