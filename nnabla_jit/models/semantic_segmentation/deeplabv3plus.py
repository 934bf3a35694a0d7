"""DeepLabV3+ (Chen et al., Encoder-Decoder with Atrous Separable Convolution for Semantic
Image Segmentation, https://arxiv.org/abs/1802.02611): an aligned Xception-65 with atrous
convolutions, atrous spatial pyramid pooling and a decoder; weights:
``DeepLabV3-<dataset>-os-<stride>.nnp``."""
from ... import functions as F
from ...parameter import parameter_scope
from .base import SemanticSegmentation
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["DeepLabV3plus"]

CLASSES = 21     # Pascal VOC's 20 and the background


def separable(layers, h, maps, stride=1, dilation=1, name=None):
    """Depthwise 3x3 (atrous), batch normalization, ReLU, pointwise 1x1, batch normalization;
    the ReLU after it is the caller's."""
    with parameter_scope(name):
        h = layers.conv_bn(h, h.shape[1], 3, stride, group=h.shape[1], dilation=dilation, name="depthwise")
        return layers.conv_bn(h, maps, 1, relu=False, name="pointwise")


def xception_block(layers, h, maps, stride, dilation=1, skip="conv"):
    """Three separable convolutions, the last strided, added to the input ('sum'), or to its
    strided 1x1 projection ('conv'). Returns the sum and the second convolution's output (the
    decoder's low-level features, taken from the second entry block)."""
    r = h
    for k in range(3):
        r = separable(layers, F.relu(r), maps[k], stride if k == 2 else 1, dilation, "sep{}".format(k + 1))
        if k == 1:
            second = r
    shortcut = layers.conv_bn(h, maps[2], 1, stride, relu=False, name="shortcut") if skip == "conv" else h
    return r + shortcut, second


class DeepLabV3plus(SemanticSegmentation):
    """DeepLabV3+ trained on ``dataset`` 'voc' or 'voc-coco', with ``output_stride`` 16 (atrous
    rates 6, 12, 18) or 8 (12, 24, 36).

    ``use_up_to``: ``'segmentation'`` (default; the class scores per pixel, (N, 21, H, W)),
    ``'lastconv'`` (the decoder's last batch normalization, before its ReLU),
    ``'lastconv+relu'``."""
    _KEY_VARIABLE = {
        "segmentation": "y",
        "lastconv": "BatchNormalization_146_Output",
        "lastconv+relu": "ReLU_82_Output",
    }
    _NNP_NETWORK = "runtime"
    _NNP_INPUT = "x"
    _NNP_AUGMENTATION = None
    _NNP_POOLING = (None, False)

    def __init__(self, dataset="voc", output_stride=16):
        if dataset not in ("voc", "voc-coco"):
            raise ValueError('DeepLabV3plus: dataset must be chosen from ["voc", "voc-coco"], got {!r}'.format(dataset))
        if output_stride not in (16, 8):
            raise ValueError("DeepLabV3plus: output_stride must be 16 or 8, got {!r}".format(output_stride))
        self._dataset_name = dataset
        self._output_stride = output_stride
        name = "DeepLabV3-{}-os-{}.nnp".format(dataset, output_stride)
        self._load_nnp(name, name)

    def _input_shape(self):
        return (3, 513, 513)

    def __call__(self, input_var=None, use_from=None, use_up_to="segmentation", training=False,
                 returns_net=False, verbose=0):
        """Build the network on ``input_var`` up to ``use_up_to``."""
        return super().__call__(input_var, use_from, use_up_to, training, False, False, returns_net, verbose)

    def _network_from_nnp(self, x, use_up_to, training, force_global_pooling, check_global_pooling, verbose):
        if tuple(x.shape[2:]) != self.input_shape[1:]:
            raise NotImplementedError(
                "DeepLabV3plus: the network of the .nnp is built at its own input size {} only "
                "(nnabla rewrites its pooling and resizing for other sizes; not provided), got {}"
                .format(self.input_shape[1:], x.shape[2:]))
        return super()._network_from_nnp(x, use_up_to, training, False, False, verbose)

    def _build(self, layers, x):
        os8 = self._output_stride == 8
        rates = (12, 24, 36) if os8 else (6, 12, 18)
        with parameter_scope("entry"):
            h = layers.conv_bn(x, 32, 3, 2, name="conv1")
            h = layers.conv_bn(h, 64, 3, name="conv2")
            with parameter_scope("block1"):
                h, _ = xception_block(layers, h, (128, 128, 128), 2)
            with parameter_scope("block2"):
                h, low_level = xception_block(layers, h, (256, 256, 256), 2)
            with parameter_scope("block3"):
                h, _ = xception_block(layers, h, (728, 728, 728), 1 if os8 else 2)
        middle_dilation = 2 if os8 else 1
        for k in range(16):
            with parameter_scope("middle{}".format(k + 1)):
                h, _ = xception_block(layers, h, (728, 728, 728), 1, middle_dilation, skip="sum")
        with parameter_scope("exit"):
            with parameter_scope("block1"):
                h, _ = xception_block(layers, h, (728, 1024, 1024), 1, middle_dilation)
            exit_dilation = 4 if os8 else 2
            for k, maps in enumerate((1536, 1536, 2048)):
                h = F.relu(separable(layers, h, maps, 1, exit_dilation, "sep{}".format(k + 1)))
        with parameter_scope("aspp"):
            branches = [layers.conv_bn(h, 256, 1, name="conv1x1")]
            for k, rate in enumerate(rates):
                branches.append(F.relu(separable(layers, h, 256, 1, rate, "atrous{}".format(k + 1))))
            pooled = F.average_pooling(h, h.shape[2:], h.shape[2:])
            pooled = layers.conv_bn(pooled, 256, 1, name="image_pooling")
            branches.append(F.interpolate(pooled, output_size=h.shape[2:], mode="linear", align_corners=True))
            h = layers.conv_bn(F.concatenate(*branches, axis=1), 256, 1, name="projection")
            h = layers.dropout(h, 0.1)
        with parameter_scope("decoder"):
            low = layers.conv_bn(low_level, 48, 1, name="low_level")
            h = F.interpolate(h, output_size=low.shape[2:], mode="linear", align_corners=True)
            h = F.relu(separable(layers, F.concatenate(h, low, axis=1), 256, name="sep1"))
            h = layers.mark("lastconv", separable(layers, h, 256, name="sep2"))
            h = layers.mark("lastconv+relu", F.relu(h))
            h = layers.conv(h, CLASSES, 1, bias=True, name="logits")
        layers.mark("segmentation", F.interpolate(h, output_size=x.shape[2:], mode="linear", align_corners=True))
