"""Behaviours the differential fixtures found differing from nnabla 1.39, second part: each class
of them checked against nnabla beyond the recorded case (argument checks, dtypes, gradients at
kinks and ties), pinned here with what nnabla 1.39 gives (recorded with its oracle)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
import nnabla_jit.functions as F


def var(a, need_grad=False, dtype=np.float32):
    return nn.Variable.from_numpy_array(np.asarray(a, dtype), need_grad=need_grad)


def zeros(*shape):
    return var(np.zeros(shape))


def run(y):
    y.forward()
    return y.d


def grads(y, inputs, dy):
    """Each input's gradient from y's backward (accum False) with y's gradient ``dy``."""
    for v in inputs:
        v.g = 0
    y.g = dy
    y.parent.backward(inputs, [y], accum=[False] * len(inputs))
    return [v.g.copy() for v in inputs]


# ------------------------------------------------------------------ checks nnabla makes
# Each call raises on nnabla 1.39 (a RuntimeError from its setup); OpValueError is one.
REFUSED = {
    "max_pooling with a 1-d kernel": lambda: F.max_pooling(zeros(2, 3, 5), (2,)),
    "average_pooling with a 1-d kernel": lambda: F.average_pooling(zeros(2, 3, 5, 5), (2,)),
    "quantize_linear onto an empty axis": lambda: F.quantize_linear(zeros(2, 0, 4), zeros(1, 1, 1), zeros(1, 1, 1)),
    "dequantize_linear onto an empty axis": lambda: F.dequantize_linear(zeros(0, 3), zeros(1, 1), zeros(1, 1)),
    "fused_convolution bias with batch norm": lambda: FB.fused_convolution(
        zeros(2, 3, 5, 5), zeros(4, 3, 3, 3), zeros(4), *[zeros(1, 4, 1, 1) for _ in range(4)]),
    "fused_convolution z of another rank": lambda: FB.fused_convolution(
        zeros(2, 3, 5, 5), zeros(4, 3, 3, 3), z=zeros(4, 3, 3)),
    "min_max_quantize x_min_max with 1-d ranges": lambda: F.min_max_quantize(
        zeros(2, 3, 4), zeros(1), zeros(1), zeros(1), zeros(1), x_min_max=True),
    "onnx_non_max_suppression max_output_boxes_per_class=-1": lambda: FB.onnx_non_max_suppression(
        zeros(1, 3, 4), zeros(1, 2, 3), max_output_boxes_per_class=-1),
    "onnx_resize of 4 axes": lambda: FB.onnx_resize(zeros(1, 2, 4, 4), scales=(1.5, 1.0, 2.0, 2.0)),
    "onnx_resize of no axis": lambda: FB.onnx_resize(zeros(1, 2, 4, 4), sizes=(1, 2, 4, 4)),
    "onnx_resize tf_crop_and_resize without roi": lambda: FB.onnx_resize(
        zeros(1, 2, 4, 4), scales=(1.0, 1.0, 2.0, 2.0), coordinate_transformation_mode="tf_crop_and_resize"),
    "onnx_resize mode outside its choices": lambda: FB.onnx_resize(zeros(1, 2, 4, 4), scales=(1.0, 1.0, 2.0, 2.0),
                                                                   mode="bogus"),
    "random_flip base_axis=ndim": lambda: F.random_flip(zeros(2, 3, 5, 5), base_axis=4),
    "random_crop base_axis=-ndim-1": lambda: F.random_crop(zeros(2, 3, 5, 5), (3, 3), base_axis=-5),
    "random_erase n=0": lambda: F.random_erase(zeros(2, 3, 5, 5), n=0),
    "random_erase 4 axes after base_axis=-4": lambda: F.random_erase(zeros(2, 3, 5, 5), base_axis=-4),
    "spectral_norm dim=-1": lambda: F.spectral_norm(zeros(4, 3, 2), zeros(2), dim=-1),
    "spectral_norm eps=0": lambda: F.spectral_norm(zeros(4, 3, 2), zeros(4), eps=0.0),
    "weight_normalization eps=0": lambda: F.weight_normalization(zeros(4, 3, 2), zeros(4), eps=0.0),
    "unique axis out of range with flatten": lambda: FB.unique(zeros(8), axis=1),
    "norm_normalization axis named twice": lambda: F.norm_normalization(zeros(2, 3, 4), axes=(0, -3)),
    "layer_normalization batch axis named twice": lambda: F.layer_normalization(
        zeros(2, 3, 4), zeros(1, 3, 4), zeros(1, 3, 4), batch_axis=(0, 0)),
    "instance_normalization batch axis on the channel axis": lambda: F.instance_normalization(
        zeros(2, 3, 4), zeros(1, 3, 1), zeros(1, 3, 1), batch_axis=(1,)),
    "group_normalization batch axis on the channel axis": lambda: F.group_normalization(
        zeros(2, 4, 3), zeros(1, 4, 1), zeros(1, 4, 1), num_groups=2, batch_axis=(0, 1, 2)),
    "gather_nd with no index rows": lambda: F.gather_nd(zeros(4, 3), var(np.zeros((0, 5)), dtype=np.int32)),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_refused_as_by_nnabla(what):
    op = what.split()[0]
    camel = "".join(w.upper() if w in ("nms", "onnx") else w.capitalize() for w in op.split("_"))
    pattern = "(?i)({}|{})".format(op, camel.replace("OnnxNonMaxSuppression", "ONNXNonMaxSuppression"))
    with pytest.raises(RuntimeError, match=pattern):   # the one line names the op
        run(REFUSED[what]())


def test_clip_grad_by_norm_with_an_axis_named_twice_refuses_its_backward():
    x = var(np.ones((2, 3, 4)), need_grad=True)
    y = F.clip_grad_by_norm(x, axes=(0, 0))
    run(y)   # nnabla's forward computes
    with pytest.raises(RuntimeError, match="ClipGradByNorm: axes"):
        y.backward()


# ------------------------------------------------------------------ forms nnabla takes
def test_onnx_resize_reads_roi_only_for_tf_crop_and_resize():
    y = FB.onnx_resize(zeros(1, 2, 4, 4), roi=(0.0, 0.0, 1.0, 1.0), scales=(1.0, 1.0, 2.0, 2.0))
    assert run(y).shape == (1, 2, 8, 8)


@pytest.mark.parametrize("mode, expected", [
    ("nearest", [0, 1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 7]),
    ("linear", [1 / 3, 1, 5 / 3, 7 / 3, 3, 3, 13 / 3, 5, 17 / 3, 19 / 3, 7, 7]),
])
def test_onnx_resize_tf_half_pixel_for_nn(mode, expected):
    x = var(np.arange(8.0).reshape(1, 1, 2, 4))
    y = FB.onnx_resize(x, scales=(1.0, 1.0, 1.0, 1.5), mode=mode,
                       coordinate_transformation_mode="tf_half_pixel_for_nn")
    np.testing.assert_allclose(run(y).ravel(), expected, rtol=1e-6)


@pytest.mark.parametrize("base_axis", [-3, 1])
def test_random_erase_counts_a_negative_base_axis_from_ndim(base_axis):
    assert run(F.random_erase(zeros(2, 3, 5, 5), base_axis=base_axis)).shape == (2, 3, 5, 5)


@pytest.mark.parametrize("x_shape, expected", [((4,), (1,)), ((2, 4), (2, 1)), ((2, 3, 4), (2, 3, 1))])
def test_random_choice_shape_empty_draws_one_per_population(x_shape, expected):
    y = F.random_choice(zeros(*x_shape), var(np.ones(x_shape)), shape=())
    assert run(y).shape == expected


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.float64, np.uint8])
def test_identity_and_unlink_keep_the_input_dtype(dtype):
    x = var(np.arange(6).reshape(2, 3), need_grad=True, dtype=dtype)
    for f in (F.identity, F.unlink):
        y = run(f(x))
        assert y.dtype == dtype
        np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3))
    z = F.mul_scalar(F.identity(x), 2.0)   # the next op computes in float32
    assert run(z).dtype == np.float32
    z.backward()
    np.testing.assert_array_equal(x.g, np.full((2, 3), 2.0))


@pytest.mark.parametrize("scores, threshold, kept", [
    ([0.0, 0.0, 0.0], 0.0, [[0, 0, 0], [0, 0, 2]]),
    ([0.5, 0.3, 0.5], 0.5, [[0, 0, 0], [0, 0, 2]]),
    ([0.2, 0.3, 0.4], 0.3, [[0, 0, 2], [0, 0, 1]]),
    ([0.2, 0.3, 0.4], 0.5, []),
])
def test_onnx_non_max_suppression_keeps_a_score_equal_to_the_threshold(scores, threshold, kept):
    boxes = var([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [2, 2, 3, 3]]])
    y = FB.onnx_non_max_suppression(boxes, var([[scores]]), max_output_boxes_per_class=3, iou_threshold=0.5,
                                    score_threshold=threshold)
    assert run(y).tolist() == kept


# ------------------------------------------------------------------ gradients at kinks and ties
KINKS = np.array([[-2.0, -1.0, 0.0, 0.0], [1.0, 2.0, 6.0, -3.0]])


def _dy(shape):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 5 + 1).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prelu_crelu_and_absolute_error_at_zero(dtype):
    x = var(KINKS, True, dtype)
    w = var([0.25], True, dtype)
    gx, _ = grads(run_node(F.prelu(x, w)), [x, w], _dy((2, 4)))
    np.testing.assert_allclose(gx.ravel(), [0.25, 0.5, 3.0, 4.0, 5.0, 1.0, 2.0, 0.75])
    gx, = grads(run_node(F.crelu(x)), [x], _dy((2, 8)))
    np.testing.assert_allclose(gx.ravel(), [-5.0, -1.0, -2.0, -3.0, 4.0, 5.0, 1.0, -1.0])
    t = var(np.zeros((2, 4)), True, dtype)
    gx, gt = grads(run_node(F.absolute_error(x, t)), [x, t], _dy((2, 4)))
    np.testing.assert_allclose(gx.ravel(), [-1.0, -2.0, -3.0, -4.0, 5.0, 1.0, 2.0, -3.0])
    np.testing.assert_allclose(gt.ravel(), -gx.ravel())


def run_node(y):
    y.forward()
    return y


# (row, k, largest, abs) -> nnabla's positions, best first: ties follow its heap
TOP_K = [
    ([1, 0, 0, 1], 2, True, False, [3, 0]),
    ([1, 0, 0, 1], 3, False, False, [2, 1, 0]),
    ([5, 5, 5, 1, 5], 3, True, False, [0, 1, 2]),
    ([5, 5, 5, 1, 5], 3, False, True, [3, 0, 1]),
    ([3, 1, 3, 2, 3, 3], 3, True, False, [4, 0, 2]),
    ([-2, -1, 0, 0], 3, True, False, [3, 2, 1]),
    ([1, 2, 2, 1], 3, False, False, [3, 0, 1]),
    ([2, -2, 1, -1], 3, False, True, [3, 2, 0]),
    ([0, 0, 0, 0], 3, True, True, [0, 1, 2]),
]


@pytest.mark.parametrize("row, k, largest, by_abs, expected", TOP_K)
def test_top_k_data_picks_and_orders_ties_as_nnabla(row, k, largest, by_abs, expected):
    y, index = FB.top_k_data(var([row]), k, abs=by_abs, largest=largest, with_index=True)
    y.forward()
    assert index.d.ravel().tolist() == expected
    np.testing.assert_array_equal(y.d.ravel(), np.asarray(row, np.float32)[expected])


def test_top_k_grad_keeps_the_gradients_nnabla_keeps_among_ties():
    x = var(np.zeros((1, 5)), need_grad=True)
    gx, = grads(run_node(F.top_k_grad(x, 3, abs=True)), [x], np.array([[0.0, 1.0, -2.0, 1.0, 2.0]], np.float32))
    np.testing.assert_array_equal(gx.ravel(), [0.0, 0.0, -2.0, 1.0, 2.0])
