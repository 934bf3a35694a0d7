"""NmsDetection2d and ONNXNonMaxSuppression against straightforward NumPy NMS."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.testing import check_forward


def _var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


def iou(a, b):
    """IoU of (x0, y0, x1, y1) boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def greedy(scores, boxes, threshold):
    """Indices kept by greedy NMS over decreasing scores (ties: lower index first)."""
    kept = []
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if scores[i] > 0 and all(iou(boxes[i], boxes[j]) <= threshold for j in kept):
            kept.append(i)
    return kept


# ------------------------------------------------------------------------------ NmsDetection2d
def nms_detection2d_ref(x, thresh=0.5, nms=0.45, nms_per_class=True):
    y = x.copy()
    for b in range(x.shape[0]):
        cx, cy, w, h = x[b, :, 0], x[b, :, 1], x[b, :, 2], x[b, :, 3]
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
        obj = np.where(x[b, :, 4] < thresh, 0, x[b, :, 4])
        probs = obj[:, None] * x[b, :, 5:]
        probs = np.where(probs < thresh, 0, probs)
        y[b, :, 4], y[b, :, 5:] = obj, probs
        if nms_per_class:
            for c in range(probs.shape[1]):
                kept = greedy(probs[:, c], boxes, nms)
                y[b, :, 5 + c] = np.where(np.isin(np.arange(len(obj)), kept), probs[:, c], 0)
        else:
            dropped = ~np.isin(np.arange(len(obj)), greedy(obj, boxes, nms))
            y[b, dropped, 4:] = 0
    return y


@given(st.integers(0, 2 ** 16), st.booleans(), st.sampled_from([(0.5, 0.45), (0.2, 0.3)]))
def test_nms_detection2d(seed, per_class, thresholds):
    rng = np.random.RandomState(seed)
    x = rng.rand(2, 12, 7)
    x[:, :, 2:4] *= 0.4
    thresh, nms = thresholds
    check_forward(lambda v: F.nms_detection2d(v, thresh, nms, per_class), [x],
                  lambda a: nms_detection2d_ref(a, thresh, nms, per_class))


def test_nms_detection2d_example():
    x = np.zeros((1, 3, 6))
    x[0, :, :4] = [[0.5, 0.5, 0.2, 0.2], [0.52, 0.5, 0.2, 0.2], [0.2, 0.2, 0.1, 0.1]]
    x[0, :, 4] = [0.9, 0.8, 0.3]
    x[0, :, 5] = [0.9, 0.7, 1.0]
    y = F.nms_detection2d(_var(x))
    y.forward()
    np.testing.assert_allclose(y.d[0, :, 4:], [[0.9, 0.81], [0.8, 0], [0, 0]], rtol=1e-6)


def test_nms_detection2d_passes_no_gradient():
    x = _var(np.random.rand(1, 4, 6), need_grad=True)
    y = F.nms_detection2d(x * 1)
    y.forward()
    x.g = 0
    y.backward(np.ones(y.shape))
    np.testing.assert_array_equal(x.g, 0)


def test_nms_detection2d_errors():
    with pytest.raises(ValueError, match="NmsDetection2d.*\\(B, N, 5 \\+ C\\)"):
        F.nms_detection2d(_var(np.ones((2, 3, 4))))


# ------------------------------------------------------------------------------ ONNX NMS
def onnx_nms_ref(boxes, scores, center_point_box, max_out, iou_threshold, score_threshold):
    rows = []
    for b in range(boxes.shape[0]):
        bx = boxes[b]
        if center_point_box:
            corners = np.stack([bx[:, 0] - bx[:, 2] / 2, bx[:, 1] - bx[:, 3] / 2,
                                bx[:, 0] + bx[:, 2] / 2, bx[:, 1] + bx[:, 3] / 2], 1)
        else:
            corners = np.stack([np.minimum(bx[:, 1], bx[:, 3]), np.minimum(bx[:, 0], bx[:, 2]),
                                np.maximum(bx[:, 1], bx[:, 3]), np.maximum(bx[:, 0], bx[:, 2])], 1)
        for c in range(scores.shape[1]):
            s = np.where(scores[b, c] > score_threshold, scores[b, c], 0)
            rows += [(b, c, i) for i in greedy(s, corners, iou_threshold)[:max_out]]
    return np.array(rows, np.uint64).reshape(-1, 3)


@given(st.integers(0, 2 ** 16), st.integers(0, 1), st.integers(0, 4),
       st.sampled_from([(0.0, 0.0), (0.5, 0.2), (0.3, 0.6)]))
def test_onnx_non_max_suppression(seed, center, max_out, thresholds):
    rng = np.random.RandomState(seed)
    boxes, scores = rng.rand(2, 10, 4), rng.rand(2, 3, 10)
    boxes[..., 2:] = boxes[..., :2] + rng.uniform(-0.5, 0.5, (2, 10, 2))
    iou_t, score_t = thresholds
    want = onnx_nms_ref(boxes.astype(np.float32), scores.astype(np.float32), center, max_out,
                        iou_t, score_t)
    y = F.onnx_non_max_suppression(_var(boxes), _var(scores), center, max_out, iou_t, score_t)
    y.forward()
    assert y.d.dtype == np.uint64
    np.testing.assert_array_equal(y.d, want)


def test_onnx_non_max_suppression_shape_follows_the_data():
    boxes = _var([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 10, 1, 11], [0, 100, 1, 101]]])
    scores = _var([[[0.9, 0.8, 0.7, 0.1]]])
    y = F.onnx_non_max_suppression(boxes, scores, max_output_boxes_per_class=4, iou_threshold=0.5,
                                   score_threshold=0.2)
    assert y.shape == (2, 3)   # known when the graph is built, as in nnabla
    y.forward()
    np.testing.assert_array_equal(y.d, [[0, 0, 0], [0, 0, 2]])
    scores.d = [[[0.9, 0.8, 0.7, 0.6]]]
    y.forward()
    np.testing.assert_array_equal(y.d, [[0, 0, 0], [0, 0, 2], [0, 0, 3]])
    assert F.onnx_non_max_suppression(boxes, scores).shape == (0, 3)   # max 0 boxes: none


def test_onnx_non_max_suppression_is_not_differentiable():
    """nn.grad refuses it; backward passes over it, leaving the inputs' gradients, as nnabla's."""
    boxes, scores = _var(np.random.rand(1, 3, 4), True), _var(np.random.rand(1, 1, 3), True)
    y = F.onnx_non_max_suppression(boxes, scores, max_output_boxes_per_class=2)
    with pytest.raises(ValueError, match="ONNXNonMaxSuppression has no grad rule"):
        nn.grad([y], [boxes])
    y.forward()
    boxes.g = 3
    y.backward()
    np.testing.assert_array_equal(boxes.g, 3)
    with pytest.raises(ValueError, match="ONNXNonMaxSuppression.*boxes"):
        F.onnx_non_max_suppression(_var(np.ones((1, 3, 5))), _var(np.ones((1, 1, 3))))
