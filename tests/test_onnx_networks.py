"""Classic image-classification networks both ways through ONNX, at small widths and
resolutions but with each architecture's own building blocks and the op patterns of the ONNX
model zoo's files (Caffe2-, MXNet- and PyTorch-made: LRN, grouped and depthwise convolution,
channel shuffle by Reshape/Transpose, concatenated branches, global average pooling, Dropout
with its mask output, Flatten, Reshape by a Shape/Gather/Unsqueeze/Concat chain, Gemm, Clip as
ReLU6 (attributes before opset 11, inputs after), BatchNormalization, Sum, Unsqueeze whose
axes are an input).

ONNX -> nnabla_jit -> ONNX: onnxruntime's outputs of the helper-built model equal nnabla_jit's
of the imported network, and onnxruntime's of its re-export (checked with
``check_model(full_check=True)``). nnabla_jit -> ONNX -> nnabla_jit: networks built with PF
export, onnxruntime agrees with nnabla_jit, and the import of the export agrees again."""
from collections import OrderedDict

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
nnabla_onnx = pytest.importorskip("nnabla_jit.serialization.onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RTOL, ATOL = 1e-4, 1e-4


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_nnabla(net_inputs, net_outputs, feeds):
    for k, v in feeds.items():
        net_inputs[k].d = v
    nn.forward_all(list(net_outputs.values()))
    return [np.array(v.d) for v in net_outputs.values()]


def assert_close(got, want, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape, (what, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=what)


# ------------------------------------------------------------------------------------ ONNX side
class Net:
    """An ONNX graph written with onnx.helper, one building block per method, in the form the
    opset asks for."""

    def __init__(self, opset, seed=0):
        self.opset = opset
        self.rng = np.random.RandomState(seed)
        self.nodes, self.initializers, self.count = [], [], 0

    def name(self, base):
        self.count += 1
        return "{}_{}".format(base, self.count)

    def const(self, array, base="w"):
        name = self.name(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, scale=None):
        scale = scale or 1.0 / np.sqrt(np.prod(shape[1:]))
        return self.const((self.rng.randn(*shape) * scale).astype(np.float32))

    def op(self, op_type, inputs, n_outputs=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_outputs == 1 else outs

    # --- layers ----------------------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=True, pads=None, auto_pad=None):
        """``k``: a size or (height, width); ``auto_pad`` (SAME_UPPER ...) instead of pads."""
        kh, kw = (k, k) if isinstance(k, int) else k
        inputs = [x, self.weight(cout, cin // group, kh, kw)]
        if bias:
            inputs.append(self.const(self.rng.randn(cout).astype(np.float32) * 0.1))
        padding = {"auto_pad": auto_pad} if auto_pad else {"pads": pads or [pad] * 4}
        return self.op("Conv", inputs, kernel_shape=[kh, kw], strides=[stride, stride], group=group, **padding)

    def bn(self, x, c):
        stats = [self.rng.uniform(0.5, 1.5, c), self.rng.randn(c) * 0.1, self.rng.randn(c) * 0.1,
                 self.rng.uniform(0.5, 1.5, c)]
        spatial = {"spatial": 1} if self.opset < 9 else {}   # as opset 7/8 files write it
        return self.op("BatchNormalization", [x] + [self.const(s.astype(np.float32)) for s in stats],
                       epsilon=1e-5, **spatial)

    def relu(self, x):
        return self.op("Relu", [x])

    def conv_bn_relu(self, x, cin, cout, k, **kw):
        return self.relu(self.bn(self.conv(x, cin, cout, k, bias=False, **kw), cout))

    def relu6(self, x):
        if self.opset < 11:
            return self.op("Clip", [x], min=0.0, max=6.0)
        return self.op("Clip", [x, self.const(np.float32(0), "min"), self.const(np.float32(6), "max")])

    def max_pool(self, x, k, stride, pad=0, pads=None, **kw):
        return self.op("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=pads or [pad] * 4, **kw)

    def avg_pool(self, x, k, stride, pad=0, **kw):
        return self.op("AveragePool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, **kw)

    def lrn(self, x):
        return self.op("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)

    def dropout(self, x, mask=True):
        """Dropout at inference, with its mask output (unused, as in exported files)."""
        if self.opset >= 12:
            return self.op("Dropout", [x, self.const(np.float32(0.5), "ratio")], n_outputs=1 + mask)[0] \
                if mask else self.op("Dropout", [x, self.const(np.float32(0.5), "ratio")])
        outs = self.op("Dropout", [x], n_outputs=1 + mask, ratio=0.5)
        return outs[0] if mask else outs

    def gemm(self, x, cin, cout):
        return self.op("Gemm", [x, self.weight(cout, cin), self.const(np.zeros(cout, np.float32))],
                       alpha=1.0, beta=1.0, transB=1)

    def unsqueeze(self, x, axes):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.op("Constant", [], value=numpy_helper.from_array(
                np.asarray(axes, np.int64)))])
        return self.op("Unsqueeze", [x], axes=list(axes))

    def torch_flatten(self, x):
        """PyTorch's ``x.view(x.size(0), -1)``: Shape, Gather, Unsqueeze, Concat, Reshape."""
        batch = self.op("Gather", [self.op("Shape", [x]), self.const(np.int64(0), "index")], axis=0)
        shape = self.op("Concat", [self.unsqueeze(batch, [0]), self.const(np.array([-1], np.int64), "rest")],
                        axis=0)
        return self.op("Reshape", [x, shape])

    def reshape(self, x, shape, by_constant_node=False):
        array = np.asarray(shape, np.int64)
        if by_constant_node:
            return self.op("Reshape", [x, self.op("Constant", [], value=numpy_helper.from_array(array))])
        return self.op("Reshape", [x, self.const(array, "shape")])

    def channel_shuffle(self, x, groups, c, h, w):
        y = self.reshape(x, [1, groups, c // groups, h, w])
        y = self.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
        return self.reshape(y, [1, c, h, w])

    def model(self, x_shape, y, classes=5):
        graph = helper.make_graph(
            self.nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, [x_shape[0], classes])],
            initializer=self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = helper.find_min_ir_version_for(opsets)
        if model.ir_version < 4:   # as in the zoo's old files: initializers are graph inputs too
            graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                               for t in self.initializers)
            model.graph.CopyFrom(graph)
        onnx.checker.check_model(model, full_check=True)
        return model


def alexnet(opset):
    """Caffe's AlexNet (bvlc_alexnet): LRN after the first two convolutions, two-group
    convolutions, Reshape by an initializer, Gemm with transB, Dropout, Softmax."""
    n = Net(opset)
    h = n.max_pool(n.lrn(n.relu(n.conv("x", 3, 8, 5, stride=2))), 3, 2)
    h = n.max_pool(n.lrn(n.relu(n.conv(h, 8, 12, 3, pad=1, group=2))), 3, 2)
    h = n.relu(n.conv(h, 12, 12, 3, pad=1))
    h = n.max_pool(n.relu(n.conv(h, 12, 8, 3, pad=1, group=2)), 2, 2)
    h = n.reshape(h, [1, -1])
    h = n.dropout(n.relu(n.gemm(h, 8, 10)))
    return n.model((1, 3, 33, 33), n.op("Softmax", [n.gemm(h, 10, 5)]))


def vgg(opset):
    """VGG (MXNet's vgg16 with batch normalization): 3x3 convolutions in blocks, max pooling,
    Flatten, Gemm, Dropout."""
    n = Net(opset)
    h = n.max_pool(n.relu(n.conv(n.relu(n.conv("x", 3, 4, 3, pad=1)), 4, 4, 3, pad=1)), 2, 2)
    h = n.max_pool(n.relu(n.bn(n.conv(h, 4, 8, 3, pad=1), 8)), 2, 2)
    h = n.dropout(n.relu(n.gemm(n.op("Flatten", [h], axis=1), 8 * 4 * 4, 12)), mask=False)
    return n.model((2, 3, 16, 16), n.gemm(h, 12, 5))


def resnet(opset):
    """ResNet v1: stem conv 7x7 / BN / max pool, a basic block with an identity shortcut
    (Add) and one with a strided 1x1 projection (Caffe2's Sum), global average pooling."""
    n = Net(opset)
    h = n.max_pool(n.conv_bn_relu("x", 3, 8, 7, stride=2, pad=3), 3, 2, pad=1)
    r = n.bn(n.conv(n.conv_bn_relu(h, 8, 8, 3, pad=1), 8, 8, 3, pad=1, bias=False), 8)
    h = n.relu(n.op("Add", [h, r]))
    r = n.bn(n.conv(n.conv_bn_relu(h, 8, 16, 3, stride=2, pad=1), 16, 16, 3, pad=1, bias=False), 16)
    shortcut = n.bn(n.conv(h, 8, 16, 1, stride=2, bias=False), 16)
    h = n.relu(n.op("Sum", [shortcut, r]))
    h = n.op("Flatten", [n.op("GlobalAveragePool", [h])])
    return n.model((2, 3, 32, 32), n.gemm(h, 16, 5))


def densenet(opset):
    """DenseNet (Caffe2's densenet121): pre-activation BN/ReLU/conv bottlenecks whose outputs
    are concatenated to their inputs, a transition with 2x2 average pooling, a 1x1
    convolution classifier, Reshape to [0, -1] (0: the input's size), Softmax."""
    n = Net(opset)
    h = n.max_pool(n.conv_bn_relu("x", 3, 8, 3, stride=2, pad=1), 3, 2, pad=1)
    c = 8
    for _ in range(2):
        b = n.conv(n.relu(n.bn(h, c)), c, 8, 1, bias=False)
        b = n.conv(n.relu(n.bn(b, 8)), 8, 4, 3, pad=1, bias=False)
        h, c = n.op("Concat", [h, b], axis=1), c + 4
    h = n.avg_pool(n.conv(n.relu(n.bn(h, c)), c, 8, 1, bias=False), 2, 2)
    h = n.op("GlobalAveragePool", [n.relu(n.bn(h, 8))])
    return n.model((1, 3, 24, 24), n.op("Softmax", [n.reshape(n.conv(h, 8, 5, 1), [0, -1])]))


def inception(opset):
    """GoogLeNet / Inception v1: LRN, max pooling with asymmetric (ceil-mode) pads, an
    inception module of four concatenated branches, Inception v3's factorized 1x7 and 7x1
    convolutions, average pooling, Dropout, Reshape by a Constant node, Gemm."""
    n = Net(opset)
    h = n.lrn(n.max_pool(n.relu(n.conv("x", 3, 8, 5, stride=2, pad=2)), 3, 2, pads=[0, 0, 1, 1]))
    b1 = n.relu(n.conv(h, 8, 4, 1))
    b2 = n.relu(n.conv(n.relu(n.conv(h, 8, 4, 1)), 4, 6, 3, pad=1))
    b3 = n.relu(n.conv(n.relu(n.conv(h, 8, 2, 1)), 2, 3, 5, pad=2))
    b4 = n.relu(n.conv(n.max_pool(h, 3, 1, pad=1), 8, 3, 1))
    h = n.op("Concat", [b1, b2, b3, b4], axis=1)
    # Inception v3's factorized 1x7 / 7x1 convolutions, with BN, added back
    f = n.conv_bn_relu(n.conv_bn_relu(h, 16, 8, (1, 7), pads=[0, 3, 0, 3]), 8, 16, (7, 1), pads=[3, 0, 3, 0])
    h = n.op("Add", [h, f])
    h = n.dropout(n.avg_pool(h, 4, 4))
    return n.model((1, 3, 31, 31), n.op("Softmax", [n.gemm(n.reshape(h, [1, -1], by_constant_node=True), 16 * 4, 5)]))


def squeezenet(opset):
    """SqueezeNet: fire modules (1x1 squeeze, concatenated 1x1 and 3x3 expands), ceil-mode
    max pooling (opset 10 on), Dropout, a convolution classifier, global average pooling,
    Softmax of the 4-d pooled map."""
    n = Net(opset)
    ceil = {"ceil_mode": 1} if opset >= 10 else {}
    h = n.max_pool(n.relu(n.conv("x", 3, 8, 3, stride=2)), 3, 2, **ceil)
    for cin in (8, 8):
        s = n.relu(n.conv(h, cin, 2, 1))
        h = n.op("Concat", [n.relu(n.conv(s, 2, 4, 1)), n.relu(n.conv(s, 2, 4, 3, pad=1))], axis=1)
    h = n.relu(n.conv(n.dropout(h), 8, 5, 1))
    # Caffe2's files take the softmax of the pooled (1, classes, 1, 1) map (flattened from axis
    # 1 before opset 13)
    probabilities = n.op("Softmax", [n.op("GlobalAveragePool", [h])], axis=1)
    return n.model((1, 3, 26, 26), n.op("Flatten", [probabilities]))


def shufflenet(opset):
    """ShuffleNet v1 (Caffe2): grouped 1x1 convolutions, a channel shuffle by
    Reshape/Transpose/Reshape, a strided depthwise 3x3, an average-pooled shortcut
    concatenated to the branch; v2's split (Split), concatenation and shuffle; ReduceMean."""
    n = Net(opset)
    h = n.max_pool(n.conv_bn_relu("x", 3, 8, 3, stride=2, pad=1), 3, 2, pad=1)      # 8 x 8 x 8
    b = n.conv_bn_relu(h, 8, 8, 1, group=2)
    b = n.channel_shuffle(b, 2, 8, 8, 8)
    b = n.bn(n.conv(b, 8, 8, 3, stride=2, pad=1, group=8, bias=False), 8)
    b = n.bn(n.conv(b, 8, 8, 1, group=2, bias=False), 8)
    h = n.relu(n.op("Concat", [n.avg_pool(h, 3, 2, pad=1, count_include_pad=0), b], axis=1))  # 16 x 4 x 4
    if opset >= 13:
        left, right = n.op("Split", [h, n.const(np.array([8, 8], np.int64), "split")], n_outputs=2, axis=1)
    else:
        left, right = n.op("Split", [h], n_outputs=2, axis=1, split=[8, 8])
    right = n.conv_bn_relu(right, 8, 8, 1)
    right = n.bn(n.conv(right, 8, 8, 3, pad=1, group=8, bias=False), 8)
    h = n.channel_shuffle(n.op("Concat", [left, n.conv_bn_relu(right, 8, 8, 1)], axis=1), 2, 16, 4, 4)
    if opset >= 18:
        h = n.op("ReduceMean", [h, n.const(np.array([2, 3], np.int64), "axes")], keepdims=0)
    else:
        h = n.op("ReduceMean", [h], axes=[2, 3], keepdims=0)
    return n.model((1, 3, 32, 32), n.gemm(h, 16, 5))


def mobilenet(opset):
    """MobileNet v2 (PyTorch-made): inverted residuals of 1x1 expand / depthwise 3x3 / 1x1
    project with BN and ReLU6 (Clip), Add, global average pooling, PyTorch's
    Shape/Gather/Unsqueeze/Concat/Reshape flatten, Dropout, Gemm."""
    n = Net(opset)
    # TensorFlow-converted files pad the strided stem with auto_pad SAME_UPPER
    stem = {"auto_pad": "SAME_UPPER"} if opset >= 13 else {"pad": 1}
    h = n.relu6(n.bn(n.conv("x", 3, 8, 3, stride=2, bias=False, **stem), 8))
    for stride in (1, 2):
        e = n.relu6(n.bn(n.conv(h, 8, 16, 1, bias=False), 16))
        e = n.relu6(n.bn(n.conv(e, 16, 16, 3, stride=stride, pad=1, group=16, bias=False), 16))
        e = n.bn(n.conv(e, 16, 8, 1, bias=False), 8)
        h = n.op("Add", [h, e]) if stride == 1 else e
    h = n.torch_flatten(n.op("GlobalAveragePool", [h]))
    return n.model((1, 3, 16, 16), n.gemm(n.dropout(h), 8, 5))


ONNX_NETWORKS = [(alexnet, 7), (vgg, 8), (resnet, 9), (densenet, 9), (inception, 9), (squeezenet, 10),
                 (shufflenet, 13), (shufflenet, 9), (mobilenet, 7), (mobilenet, 13), (resnet, 18)]


@pytest.mark.parametrize("build,opset", ONNX_NETWORKS,
                         ids=["{}-{}".format(b.__name__, o) for b, o in ONNX_NETWORKS])
def test_onnx_network_imports_and_exports_back(build, opset):
    model = build(opset)
    ops = {node.op_type for node in model.graph.node}
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    feeds = {"x": np.random.RandomState(3).randn(*shape).astype(np.float32)}
    want = run_ort(model, feeds)
    with nn.parameter_scope("imported"):
        net = nnabla_onnx.import_onnx(model)
    got = run_nnabla(net.inputs, net.outputs, feeds)
    assert_close(got, want, "nnabla_jit's import of {}".format(sorted(ops)))
    export_opset = max(opset, nnabla_onnx.export_opsets()[0])
    back = nnabla_onnx.to_model(net.outputs, net.inputs, export_opset)
    assert back.opset_import[0].version == export_opset
    assert_close(run_ort(back, feeds), want, "onnxruntime on the re-export")


def full_resnet18(opset):
    """ResNet-18 at its real widths (64 to 512 channels, 11.7 M parameters) and resolution."""
    n = Net(opset)
    h = n.max_pool(n.conv_bn_relu("x", 3, 64, 7, stride=2, pad=3), 3, 2, pad=1)
    c = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            r = n.bn(n.conv(n.conv_bn_relu(h, c, width, 3, stride=s, pad=1), width, width, 3, pad=1, bias=False),
                     width)
            shortcut = h if (s, c) == (1, width) else n.bn(n.conv(h, c, width, 1, stride=s, bias=False), width)
            h, c = n.relu(n.op("Add", [shortcut, r])), width
    h = n.op("Flatten", [n.op("GlobalAveragePool", [h])])
    return n.model((1, 3, 224, 224), n.gemm(h, 512, 1000), classes=1000)


@pytest.mark.slow
def test_full_size_resnet18():
    test_onnx_network_imports_and_exports_back(full_resnet18, 9)


# ------------------------------------------------------------------------------------ nnabla_jit side
def _init_batch_norm_statistics():
    rng = np.random.RandomState(5)
    for path, p in nn.get_parameters(grad_only=False).items():
        if path.endswith("/mean"):
            p.d = rng.randn(*p.shape) * 0.1
        elif path.endswith("/var"):
            p.d = rng.uniform(0.5, 1.5, p.shape)


def nn_resnet(x):
    def cbr(h, maps, k, stride=1, name=""):
        h = PF.convolution(h, maps, (k, k), pad=(k // 2, k // 2), stride=(stride, stride), with_bias=False,
                           name=name)
        return F.relu(PF.batch_normalization(h, batch_stat=False, name=name + "_bn"))
    h = F.max_pooling(cbr(x, 8, 3, name="stem"), (3, 3), (2, 2), pad=(1, 1), ignore_border=True)
    r = PF.batch_normalization(PF.convolution(cbr(h, 8, 3, name="b1a"), 8, (3, 3), pad=(1, 1), name="b1b"),
                               batch_stat=False, name="b1b_bn")
    h = F.relu(F.add2(h, r))
    h = F.global_average_pooling(cbr(h, 16, 3, stride=2, name="b2"))
    return PF.affine(h, 5, name="fc")


def nn_squeezenet(x):
    h = F.max_pooling(F.relu(PF.convolution(x, 8, (3, 3), stride=(2, 2), name="conv1")), (3, 3), (2, 2))
    s = F.relu(PF.convolution(h, 2, (1, 1), name="squeeze"))
    h = F.concatenate(F.relu(PF.convolution(s, 4, (1, 1), name="e1")),
                      F.relu(PF.convolution(s, 4, (3, 3), pad=(1, 1), name="e3")), axis=1)
    h = F.relu(PF.convolution(h, 5, (1, 1), name="classifier"))
    return F.softmax(F.reshape(F.average_pooling(h, h.shape[2:]), (h.shape[0], 5)))


def nn_shufflenet(x):
    h = F.relu(PF.convolution(x, 8, (3, 3), pad=(1, 1), stride=(2, 2), name="stem"))
    b = F.relu(PF.batch_normalization(PF.convolution(h, 8, (1, 1), group=2, name="g1"), batch_stat=False,
                                      name="g1_bn"))
    n, c, hh, ww = b.shape
    b = F.reshape(F.transpose(F.reshape(b, (n, 2, c // 2, hh, ww)), (0, 2, 1, 3, 4)), (n, c, hh, ww))
    b = PF.depthwise_convolution(b, (3, 3), pad=(1, 1), stride=(2, 2), name="dw")
    b = PF.convolution(b, 8, (1, 1), group=2, name="g2")
    h = F.concatenate(F.average_pooling(h, (3, 3), (2, 2), pad=(1, 1), including_pad=False), b, axis=1)
    left, right = F.split(F.reshape(F.relu(h), (n, 2, 8) + h.shape[2:]), axis=1)
    h = F.concatenate(left, F.relu(PF.convolution(right, 8, (1, 1), name="right")), axis=1)
    return PF.affine(F.mean(h, axis=(2, 3)), 5, name="fc")


def nn_mobilenet(x):
    h = F.relu6(PF.batch_normalization(PF.convolution(x, 8, (3, 3), pad=(1, 1), stride=(2, 2), name="stem"),
                                       batch_stat=False, name="stem_bn"))
    e = F.relu6(PF.convolution(h, 16, (1, 1), name="expand"))
    e = F.relu6(PF.batch_normalization(PF.depthwise_convolution(e, (3, 3), pad=(1, 1), name="dw"),
                                       batch_stat=False, name="dw_bn"))
    h = F.add2(h, PF.convolution(e, 8, (1, 1), name="project"))
    h = F.clip_by_value(F.global_average_pooling(h), -6.0, 6.0)
    return PF.affine(h, 5, name="fc")


def nn_inception(x):
    h = F.max_pooling(F.relu(PF.convolution(x, 8, (5, 5), pad=(2, 2), stride=(2, 2), name="conv1")), (2, 2))
    branches = [F.relu(PF.convolution(h, 4, (1, 1), name="b1")),
                F.relu(PF.convolution(F.relu(PF.convolution(h, 4, (1, 1), name="b2a")), 6, (3, 3), pad=(1, 1),
                                      name="b2b")),
                F.relu(PF.convolution(F.max_pooling(h, (3, 3), (1, 1), pad=(1, 1)), 3, (1, 1), name="b4"))]
    h = F.average_pooling(F.concatenate(*branches, axis=1), (4, 4))
    return F.softmax(PF.affine(h, 5, name="fc"))


NNABLA_NETWORKS = [nn_resnet, nn_squeezenet, nn_shufflenet, nn_mobilenet, nn_inception]


@pytest.mark.parametrize("build", NNABLA_NETWORKS, ids=[b.__name__ for b in NNABLA_NETWORKS])
def test_nnabla_network_exports_and_imports_back(build):
    nn.clear_parameters()
    x = nn.Variable((2, 3, 16, 16))
    with nn.parameter_scope(build.__name__):
        y = build(x)
    _init_batch_norm_statistics()
    feeds = {"x": np.random.RandomState(4).randn(*x.shape).astype(np.float32)}
    inputs, outputs = OrderedDict(x=x), OrderedDict(y=y)
    want = run_nnabla(inputs, outputs, feeds)
    model = nnabla_onnx.to_model(outputs, inputs, nnabla_onnx.DEFAULT_OPSET)
    assert_close(run_ort(model, feeds), want, "onnxruntime on the export")
    with nn.parameter_scope("imported"):
        net = nnabla_onnx.import_onnx(model)
    assert_close(run_nnabla(net.inputs, net.outputs, feeds), want, "nnabla_jit's import of the export")
    nn.clear_parameters()
