"""YOLOv2 (Redmon and Farhadi, YOLO9000: Better, Faster, Stronger,
https://arxiv.org/abs/1612.08242): Darknet-19 features, a passthrough from the 26x26 map and
five anchor boxes per cell; weights: ``yolov2-voc.nnp``, ``yolov2-coco.nnp``."""
import numpy as np

from ... import functions as F
from ...initializer import ConstantInitializer
from ...parameter import get_parameter_or_create, parameter_scope
from ...variable import Variable
from .base import ObjectDetection
from ...utils.nnp_graph import NnpNetworkPass  # noqa: F401  (nnabla's module exposes it)

__all__ = ["YoloV2"]

# the anchor boxes (width, height in cells of the 13x13 grid) Darknet's configurations give
ANCHORS = {
    "voc": [(1.3221, 1.73145), (3.19275, 4.00944), (5.05587, 8.09892), (9.47112, 4.84053),
            (11.2364, 10.0071)],
    "coco": [(0.57273, 0.677385), (1.87446, 2.06253), (3.33843, 5.47434), (7.88282, 3.52778),
             (9.77052, 9.16828)],
}
CLASSES = {"voc": 20, "coco": 80}
# Darknet-19's convolutions: (maps, kernel); "pool" is a 2x2/2 max pooling; "route" marks the
# 26x26 map the passthrough takes
_DARKNET19 = [(32, 3), "pool", (64, 3), "pool", (128, 3), (64, 1), (128, 3), "pool",
              (256, 3), (128, 1), (256, 3), "pool", (512, 3), (256, 1), (512, 3), (256, 1), (512, 3),
              "route", "pool", (1024, 3), (512, 1), (1024, 3), (512, 1), (1024, 3)]


def _conv_leaky(layers, h, maps, kernel, name):
    with parameter_scope(name):
        return F.leaky_relu(layers.bn(layers.conv(h, maps, kernel)), 0.1)


def space_to_depth(h, stride=2):
    """(N, C, H, W) -> (N, C stride^2, H / stride, W / stride): Darknet's "reorg"."""
    n, c, height, width = h.shape
    h = F.reshape(h, (n, c, height // stride, stride, width // stride, stride))
    h = F.transpose(h, (0, 3, 5, 1, 2, 4))
    return F.reshape(h, (n, c * stride * stride, height // stride, width // stride))


def yolov2_activate(t, anchors, classes):
    """The detection map (N, A (5 + classes), H, W) as (N, A H W, 5 + classes) boxes: centre x, y
    and width, height as fractions of the image, objectness, class probabilities."""
    n, _, height, width = t.shape
    a = len(anchors)
    t = F.transpose(F.reshape(t, (n, a, 5 + classes, height, width)), (0, 1, 3, 4, 2))
    xs = np.arange(width, dtype=np.float32).reshape(1, 1, 1, width, 1)
    ys = np.arange(height, dtype=np.float32).reshape(1, 1, height, 1, 1)
    grid_x = Variable.from_numpy_array(np.broadcast_to(xs, (1, 1, height, width, 1)).copy())
    grid_y = Variable.from_numpy_array(np.broadcast_to(ys, (1, 1, height, width, 1)).copy())
    biases = get_parameter_or_create("biases", (1, a, 1, 1, 2),
                                     ConstantInitializer(0), need_grad=False)
    biases.d = np.asarray(anchors, np.float32).reshape(1, a, 1, 1, 2)
    sl = lambda lo, hi: F.slice(t, (0, 0, 0, 0, lo), (n, a, height, width, hi))   # noqa: E731
    x = (F.sigmoid(sl(0, 1)) + grid_x) / width
    y = (F.sigmoid(sl(1, 2)) + grid_y) / height
    per_cell = Variable.from_numpy_array(1.0 / np.array([width, height], np.float32).reshape(1, 1, 1, 1, 2))
    wh = F.exp(sl(2, 4)) * biases * per_cell
    objectness = F.sigmoid(sl(4, 5))
    probs = F.softmax(sl(5, 5 + classes), axis=4)
    boxes = F.concatenate(x, y, wh, objectness, probs, axis=4)
    return F.reshape(boxes, (n, a * height * width, 5 + classes))


class YoloV2(ObjectDetection):
    """YOLOv2 trained on ``dataset`` 'voc' (20 classes) or 'coco' (80).

    ``use_up_to``: ``'detection'`` (default; the boxes, (N, 5 H W, 5 + classes): centre x, y,
    width, height as fractions of the image, objectness, class probabilities), ``'convdetect'``
    (the detection convolution's output, (N, 5 (5 + classes), H, W)), ``'lastconv'`` (the
    features before it, after their activation). H, W = input size / 32."""
    _KEY_VARIABLE = {
        "detection": "y",
        "convdetect": "Reshape_3_Output",
        "lastconv": "Reshape_3_Output",
        "Arange": "Arange_Output",
        "Arange2": "Arange_2_Output",
    }
    _NNP_NETWORK = "runtime"

    def __init__(self, dataset="voc"):
        if dataset not in ANCHORS:
            raise ValueError('YoloV2: dataset must be chosen from ["voc", "coco"], got {!r}'.format(dataset))
        self._dataset_name = dataset
        self._load_nnp("yolov2-{}.nnp".format(dataset), "yolov2-{}.nnp".format(dataset))

    def _input_shape(self):
        return (3, 416, 416)

    def __call__(self, input_var=None, use_from=None, use_up_to="detection", training=False,
                 returns_net=False, verbose=0):
        """Build the detector on ``input_var`` (sides multiples of 32) up to ``use_up_to``."""
        if use_up_to not in ("detection", "convdetect", "lastconv"):
            raise ValueError('The key "{}" is not present in YoloV2. Available keys are {}.'.format(
                use_up_to, ["detection", "convdetect", "lastconv"]))
        x = self.get_input_var(input_var)
        if x.shape[2] % 32 or x.shape[3] % 32:
            raise ValueError("YoloV2: the input's height and width must be multiples of 32, got {}"
                             .format(x.shape[2:]))
        return super().__call__(x, use_from, use_up_to, training, False, False, returns_net, verbose)

    def _network_from_nnp(self, x, use_up_to, training, force_global_pooling, check_global_pooling, verbose):
        if tuple(x.shape[2:]) != self.input_shape[1:]:
            raise NotImplementedError(
                "YoloV2: the network of {}.nnp is built at its own input size {} only (nnabla "
                "rewrites the file's reshapes for other sizes; not provided), got {}".format(
                    "yolov2-" + self._dataset_name, self.input_shape[1:], x.shape[2:]))
        callback = self._nnp_pass(x, training, False, False, verbose)
        callback.use_up_to(self._KEY_VARIABLE[use_up_to])
        if use_up_to != "detection":
            callback.use_up_to(self._KEY_VARIABLE["Arange"], self._KEY_VARIABLE["Arange2"])
            callback.drop_function("Reshape_3", "Arange", "Arange_2")
            if use_up_to == "lastconv":
                callback.drop_function("Convolution_23")
        if not training:
            callback.fix_parameters()
        return self.nnp.get_network(self._NNP_NETWORK, batch_size=x.shape[0], callback=callback)

    _NNP_INPUT = "x"
    _NNP_AUGMENTATION = None
    _NNP_POOLING = (None, False)

    def _build(self, layers, x):
        h, route, k = x, None, 0
        for part in _DARKNET19:
            if part == "pool":
                h = layers.max_pool(h, 2, 2)
            elif part == "route":
                route = h
            else:
                k += 1
                h = _conv_leaky(layers, h, part[0], part[1], "conv{}".format(k))
        h = _conv_leaky(layers, h, 1024, 3, "conv{}".format(k + 1))
        h = _conv_leaky(layers, h, 1024, 3, "conv{}".format(k + 2))
        passthrough = space_to_depth(_conv_leaky(layers, route, 64, 1, "passthrough"))
        h = _conv_leaky(layers, F.concatenate(passthrough, h, axis=1), 1024, 3, "conv{}".format(k + 3))
        h = layers.mark("lastconv", h)
        anchors, classes = ANCHORS[self._dataset_name], CLASSES[self._dataset_name]
        t = layers.mark("convdetect", layers.conv(h, len(anchors) * (5 + classes), 1, bias=True,
                                                  name="detection"))
        layers.mark("detection", yolov2_activate(t, anchors, classes))
