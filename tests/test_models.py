"""The model zoo (nnabla_jit.models) offline: every model's output shapes and cut points, its
parameter count against the published figure, weights from a local .h5, the one-line notice
without weights, and nnabla's fine-tuning tutorial for a few steps on the digits data.

Graphs are only built (shape inference, parameters initialised), never run, except the
fine-tuning steps on 32x32 images."""
import contextlib
import logging
import os
import zipfile

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.logger import logger
from nnabla_jit.models import imagenet


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No weights: an empty data home and a URL base nothing answers on."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NNABLA_MODELS_URL_BASE", "http://127.0.0.1:9/")
    nn.clear_parameters()
    yield
    nn.clear_parameters()


@contextlib.contextmanager
def logged():
    """The records nnabla_jit's logger emits inside the block."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def trainable_count():
    """Parameters a solver updates (the published figures leave out BN's running statistics)."""
    return sum(p.size for name, p in nn.get_parameters(grad_only=False).items()
               if not name.endswith(("/mean", "/var")))


# model, published parameter count (millions), feature maps at 'lastconv', trained window
IMAGENET = [
    (imagenet.ResNet18, 11.69, 512, 7),       # He et al. 2015 / torchvision
    (imagenet.ResNet34, 21.80, 512, 7),
    (imagenet.ResNet50, 25.56, 2048, 7),      # "25.6M"
    (imagenet.ResNet101, 44.55, 2048, 7),
    pytest.param(imagenet.ResNet152, 60.19, 2048, 7, marks=pytest.mark.slow),
    (imagenet.ResNeXt50, 25.03, 2048, 7),     # Xie et al. 2016: 25.0M (32x4d)
    (imagenet.ResNeXt101, 44.18, 2048, 7),    # 44.2M
    pytest.param(imagenet.SENet, 115.09, 2048, 7, marks=pytest.mark.slow),   # SENet-154
    (imagenet.MobileNet, 4.23, 1024, 7),      # Howard et al. 2017: 4.2M
    (imagenet.MobileNetV2, 3.50, 1280, 7),    # Sandler et al. 2018: 3.4M (3.50M with its 1280-map head)
    (imagenet.SqueezeNetV10, 1.248, 1000, 13),   # Iandola et al. 2016: 1.248M
    (imagenet.SqueezeNetV11, 1.235, 1000, 13),
    pytest.param(imagenet.VGG11, 132.86, 512, 14, marks=pytest.mark.slow),   # Simonyan & Zisserman: 133M
    pytest.param(imagenet.VGG13, 133.05, 512, 14, marks=pytest.mark.slow),   # 133M
    pytest.param(imagenet.VGG16, 138.36, 512, 14, marks=pytest.mark.slow),   # 138M
    pytest.param(imagenet.AlexNet, 60.97, 256, 13, marks=pytest.mark.slow),  # Krizhevsky et al.: 60M
    (imagenet.NIN, 7.60, 1000, 6),            # Lin et al.'s ImageNet model (Caffe zoo, 29 MB of float32)
    (imagenet.DenseNet, 28.68, 2208, 7),      # DenseNet-161: 28.7M (Huang et al. / torchvision)
    (imagenet.GoogLeNet, 7.00, 1024, 7),      # BVLC GoogLeNet without the auxiliary towers: 7.0M
    (imagenet.InceptionV3, 23.83, 2048, 8),   # torchvision: 23.8M without the auxiliary tower
    (imagenet.Xception, 22.86, 2048, 10),     # Chollet 2017 / Keras: 22.9M
    (imagenet.ShuffleNet10, 1.87, 960, 7),    # 1.0x, g=3: the 1.8-1.9M reported for it
    (imagenet.ShuffleNet05, None, 480, 7),    # no published count for the 0.5x and 2.0x widths
    (imagenet.ShuffleNet20, None, 1920, 7),
]


@pytest.mark.parametrize("cls, millions, channels, window", IMAGENET)
def test_imagenet_model_shapes_cut_points_and_parameter_count(cls, millions, channels, window):
    with logged() as records:
        model = cls()
    notice = [r.getMessage() for r in records if "pretrained" in r.getMessage()]
    assert len(notice) == 1 and "{}: no pretrained weights".format(cls.__name__) in notice[0]
    assert len(model.category_names) == 1000
    c, height, width = model.input_shape
    x = nn.Variable((2, c, height, width))
    assert model(x).shape == (2, 1000)
    if millions is not None:
        assert abs(trainable_count() / 1e6 - millions) / millions < 0.01
    params = len(nn.get_parameters(grad_only=False))
    assert model(x, use_up_to="pool").shape[:2] == (2, channels)
    if "lastconv" in model._KEY_VARIABLE:
        lastconv = model(x, use_up_to="lastconv")
        assert lastconv.shape == (2, channels, window, window)
        net = model(x, use_up_to="lastconv+relu", returns_net=True)
        relu = list(net.outputs.values())[0]
        assert relu.shape == lastconv.shape and relu.parent.info.type_name in ("ReLU", "ReLU6")
    else:                                     # GoogLeNet, Inception-v3: the last module's output
        net = model(x, use_up_to="prepool", returns_net=True)
        assert list(net.outputs.values())[0].shape == (2, channels, window, window)
    assert net.inputs["x"] is x
    for key in model._KEY_VARIABLE:           # every cut point of nnabla's builds ('lastfeature', ...)
        if not key.startswith("_"):
            assert model(x, use_up_to=key).shape[0] == 2
    assert len(nn.get_parameters(grad_only=False)) == params    # the calls share the weights
    with pytest.raises(ValueError, match="Available keys"):
        model(x, use_up_to="nowhere")


@pytest.mark.parametrize("cls, towers", [(imagenet.GoogLeNet, 2), (imagenet.InceptionV3, 1)])
def test_auxiliary_towers_for_training(cls, towers):
    model = cls()
    x = nn.Variable((1,) + model.input_shape)
    outputs = model(x, training=True, with_aux_tower=True)
    assert [y.shape for y in outputs] == [(1, 1000)] * (1 + towers)
    with pytest.raises(ValueError, match="internal"):
        model(x, use_up_to=[k for k in model._KEY_VARIABLE if k.startswith("_")][0])


def test_global_pooling_checks_and_forcing():
    model = imagenet.ResNet18()
    x = nn.Variable((1, 3, 64, 64))
    with pytest.raises(ValueError, match="force_global_pooling"):
        model(x)
    assert model(x, force_global_pooling=True, use_up_to="pool").shape[:2] == (1, 512)
    with pytest.raises(ValueError, match="input_var"):
        model(nn.Variable((1, 1, 64, 64)))


def test_training_flag_sets_gradients_and_batch_statistics():
    model = imagenet.ResNet18()
    x = nn.Variable((1, 3, 224, 224))
    y = model(x, training=False)
    assert not y.need_grad                        # no parameter takes a gradient
    functions = []
    y.visit(lambda f: functions.append(f))
    assert all(not f.info.args["batch_stat"] for f in functions if f.info.type_name == "BatchNormalization")
    y = model(x, training=True)
    assert y.need_grad
    functions = []
    y.visit(lambda f: functions.append(f))
    assert all(f.info.args["batch_stat"] for f in functions if f.info.type_name == "BatchNormalization")


def test_weights_from_a_local_h5(tmp_path):
    from nnabla_jit.models.utils import get_model_home
    model = imagenet.ResNet18()
    model(nn.Variable((1, 3, 224, 224)))
    saved = {k: v.d.copy() for k, v in nn.get_parameters(grad_only=False).items()}
    (tmp_path / "h5").mkdir()
    path = get_model_home() + "/imagenet/Resnet-18.h5"
    nn.save_parameters(path)
    nn.clear_parameters()
    model = imagenet.ResNet18()
    model(nn.Variable((1, 3, 224, 224)))
    loaded = nn.get_parameters(grad_only=False)
    assert set(loaded) == set(saved)
    for k, v in saved.items():
        np.testing.assert_array_equal(loaded[k].d, v)


def test_fine_tuning_tutorial_on_digits():
    """nnabla's fine-tuning tutorial (ResNet18 up to 'pool', a new affine layer, Momentum,
    weight decay), a few steps on scikit-learn's digits blown up to 3 x 32 x 32."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = np.kron(digits.images[:, None] / 16.0, np.ones((1, 3, 4, 4))).astype(np.float32)
    labels = digits.target[:, None].astype(np.int32)
    batch_size = 4
    model = imagenet.ResNet18()
    image_train = nn.Variable((batch_size, 3, 32, 32))
    label_train = nn.Variable((batch_size, 1))
    y_train = model(image_train, force_global_pooling=True, use_up_to="pool", training=True)
    with nn.parameter_scope("finetuning_fc"):
        pred_train = PF.affine(y_train, 10)
    image_valid = nn.Variable((batch_size, 3, 32, 32))
    y_valid = model(image_valid, force_global_pooling=True, use_up_to="pool", training=False)
    with nn.parameter_scope("finetuning_fc"):
        pred_valid = PF.affine(y_valid, 10)
    loss_train = F.mean(F.softmax_cross_entropy(pred_train, label_train))
    top_1_error_train = F.mean(F.top_n_error(pred_train, label_train))
    solver = S.Momentum(0.01)
    solver.set_parameters(nn.get_parameters())
    assert any(k.startswith("finetuning_fc") for k in nn.get_parameters())
    assert len(nn.get_parameters()) > 50            # the model's weights train too
    image_train.d, label_train.d = images[:batch_size], labels[:batch_size]
    losses = []
    for i in range(3):
        nn.forward_all([loss_train, top_1_error_train], clear_no_need_grad=True)
        losses.append(float(loss_train.d))
        solver.zero_grad()
        loss_train.backward(clear_buffer=True)
        solver.weight_decay(3e-4)
        solver.update()
    assert losses[-1] < losses[0]
    image_valid.d = images[:batch_size]
    pred_valid.forward(clear_buffer=True)
    assert pred_valid.shape == (batch_size, 10) and np.all(np.isfinite(pred_valid.d))


@pytest.mark.parametrize("dataset, classes, millions", [("voc", 20, 50.68), ("coco", 80, 50.98)])
def test_yolov2_shapes_cut_points_and_parameter_count(dataset, classes, millions):
    from nnabla_jit.models.object_detection import YoloV2
    model = YoloV2(dataset)
    assert len(model.get_category_names()) == classes and model.input_shape == (3, 416, 416)
    x = nn.Variable((2, 3, 416, 416))
    assert model(x).shape == (2, 5 * 13 * 13, 5 + classes)
    # Darknet's yolov2-<dataset>.weights count every value, the batch normalization statistics too
    count = sum(p.size for k, p in nn.get_parameters(grad_only=False).items() if k != "biases")
    assert abs(count / 1e6 - millions) / millions < 0.01
    assert model(x, use_up_to="convdetect").shape == (2, 5 * (5 + classes), 13, 13)
    assert model(x, use_up_to="lastconv").shape == (2, 1024, 13, 13)
    with pytest.raises(ValueError, match="multiples of 32"):
        model(nn.Variable((1, 3, 100, 100)))


def test_yolov2_boxes_on_a_small_image():
    """A forward pass at 64 x 96 (a 2 x 3 grid): the boxes are the detection map decoded as
    YOLOv2 does (sigmoid offsets in their cells, anchors scaled by exp, softmax classes)."""
    from nnabla_jit.models.object_detection import YoloV2
    from nnabla_jit.models.object_detection.yolov2 import ANCHORS
    model = YoloV2("voc")
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).rand(1, 3, 64, 96).astype(np.float32))
    net = model(x, returns_net=True)
    t_var = net.variables["convdetect"]
    t_var.persistent = True
    y = list(net.outputs.values())[0]
    y.forward(clear_buffer=True)
    t = t_var.d.reshape(5, 25, 2, 3).transpose(0, 2, 3, 1)       # anchors, rows, columns, values
    boxes = y.d.reshape(5, 2, 3, 25)
    sigmoid = lambda v: 1 / (1 + np.exp(-v))   # noqa: E731
    cols, rows = np.meshgrid(np.arange(3), np.arange(2))
    anchors = np.array(ANCHORS["voc"])
    tol = dict(rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(boxes[..., 0], (sigmoid(t[..., 0]) + cols) / 3, **tol)
    np.testing.assert_allclose(boxes[..., 1], (sigmoid(t[..., 1]) + rows) / 2, **tol)
    np.testing.assert_allclose(boxes[..., 2], np.exp(t[..., 2]) * anchors[:, 0, None, None] / 3, **tol)
    np.testing.assert_allclose(boxes[..., 3], np.exp(t[..., 3]) * anchors[:, 1, None, None] / 2, **tol)
    np.testing.assert_allclose(boxes[..., 4], sigmoid(t[..., 4]), **tol)
    e = np.exp(t[..., 5:] - t[..., 5:].max(axis=-1, keepdims=True))
    np.testing.assert_allclose(boxes[..., 5:], e / e.sum(axis=-1, keepdims=True), **tol)


@pytest.mark.parametrize("output_stride", [16, 8])
def test_deeplabv3plus_shapes_and_parameter_count(output_stride):
    from nnabla_jit.models.semantic_segmentation import DeepLabV3plus
    model = DeepLabV3plus("voc", output_stride)
    assert model.input_shape == (3, 513, 513) and len(model.category_names) == 20
    x = nn.Variable((1, 3, 513, 513))
    assert model(x).shape == (1, 21, 513, 513)
    assert abs(trainable_count() / 1e6 - 41.05) / 41.05 < 0.01    # Xception-65 DeepLabV3+: 41.0M
    assert model(x, use_up_to="lastconv").shape == (1, 256, 129, 129)
    net = model(x, use_up_to="lastconv+relu", returns_net=True)
    assert list(net.outputs.values())[0].parent.info.type_name == "ReLU"
    dilations = set()
    model(x).visit(lambda f: dilations.add(tuple(f.info.args.get("dilation", ()))) if f.info.type_name == "Convolution" else None)
    assert {(6, 6), (12, 12), (18, 18)} <= dilations if output_stride == 16 else {(12, 12), (24, 24), (36, 36)} <= dilations
    with pytest.raises(ValueError, match="output_stride"):
        DeepLabV3plus("voc", 32)


_TINY_NNTXT = """
network {
  name: "Training"
  batch_size: 1
  variable { name: "InputX" type: "Buffer" shape { dim: -1 dim: 3 dim: 8 dim: 8 } }
  variable { name: "ImageAugmentationX" type: "Buffer" shape { dim: -1 dim: 3 dim: 8 dim: 8 } }
  variable { name: "Convolution/W" type: "Parameter" shape { dim: 4 dim: 3 dim: 3 dim: 3 } }
  variable { name: "Add2_7_RepeatStart_4[0]" type: "Buffer" shape { dim: -1 dim: 4 dim: 8 dim: 8 } }
  variable { name: "ReLU_25_RepeatStart_4[0]" type: "Buffer" shape { dim: -1 dim: 4 dim: 8 dim: 8 } }
  variable { name: "AveragePooling" type: "Buffer" shape { dim: -1 dim: 4 dim: 1 dim: 1 } }
  variable { name: "Affine/W" type: "Parameter" shape { dim: 4 dim: 10 } }
  variable { name: "Affine" type: "Buffer" shape { dim: -1 dim: 10 } }
  function { name: "ImageAugmentationX" type: "Identity" input: "InputX" output: "ImageAugmentationX" }
  function {
    name: "Convolution" type: "Convolution" input: "ImageAugmentationX" input: "Convolution/W"
    output: "Add2_7_RepeatStart_4[0]"
    convolution_param { pad { dim: 1 dim: 1 } stride { dim: 1 dim: 1 } dilation { dim: 1 dim: 1 } group: 1 base_axis: 1 }
  }
  function { name: "ReLU" type: "ReLU" input: "Add2_7_RepeatStart_4[0]" output: "ReLU_25_RepeatStart_4[0]" }
  function {
    name: "AveragePooling" type: "AveragePooling" input: "ReLU_25_RepeatStart_4[0]" output: "AveragePooling"
    average_pooling_param { kernel { dim: 8 dim: 8 } stride { dim: 8 dim: 8 } ignore_border: true pad { dim: 0 dim: 0 } including_pad: true }
  }
  function {
    name: "Affine" type: "Affine" input: "AveragePooling" input: "Affine/W" output: "Affine"
    affine_param { base_axis: 1 }
  }
}
"""


def test_weights_and_network_from_a_local_nnp(tmp_path):
    """A model whose .nnp is in the model home builds the file's network through nnabla's pass
    (input replaced, augmentation bypassed, cut by nnabla's variable names) and its weights."""
    from nnabla_jit.models.utils import get_model_home
    rng = np.random.RandomState(0)
    W, A = rng.randn(4, 3, 3, 3).astype(np.float32), rng.randn(4, 10).astype(np.float32)
    with nn.parameter_scope("tiny"):
        nn.parameter.set_parameter("Convolution/W", nn.Variable.from_numpy_array(W, need_grad=True))
        nn.parameter.set_parameter("Affine/W", nn.Variable.from_numpy_array(A, need_grad=True))
        nn.save_parameters(str(tmp_path / "parameter.h5"))
    nn.clear_parameters()
    path = get_model_home() + "/imagenet/Resnet-18.nnp"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("nnp_version.txt", "0.1\n")
        z.writestr("network.nntxt", _TINY_NNTXT)
        z.write(str(tmp_path / "parameter.h5"), "parameter.h5")
    with logged() as records:
        model = imagenet.ResNet18()
    assert not any("pretrained" in r.getMessage() for r in records)
    assert model.nnp is not None
    x = nn.Variable.from_numpy_array(rng.rand(2, 3, 8, 8).astype(np.float32))
    y = model(x)
    assert y.shape == (2, 10) and not y.need_grad
    y.forward()
    padded = np.pad(x.d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 4, 8, 8), np.float32)
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 8, j:j + 8], W[:, :, i, j])
    expected = np.maximum(conv, 0).mean(axis=(2, 3)) @ A
    np.testing.assert_allclose(y.d, expected, rtol=1e-4, atol=1e-5)
    assert model(x, use_up_to="pool").shape == (2, 4, 1, 1)
    lastconv = model(x, use_up_to="lastconv", returns_net=True)
    assert list(lastconv.outputs) == ["Add2_7_RepeatStart_4[0]"]
    assert model(x, use_up_to="lastconv+relu").parent.info.type_name == "ReLU"
    assert model(x, training=True).need_grad
