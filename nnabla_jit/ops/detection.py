"""Object-detection post-processing: NmsDetection2d (YOLO-style) and ONNXNonMaxSuppression.

Both are greedy non-maximum suppression: visit the boxes by decreasing score (ties by index)
and drop every later box whose IoU with a kept one exceeds the threshold. Neither passes a
gradient: NmsDetection2d's backward gives zero, as nnabla's does; ONNXNonMaxSuppression
outputs integer indices.
"""
import numpy as np
from numba import njit

from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def zero_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0] and not accum[0]:
        input_grads[0].fill(0)


INDEX_DTYPE = np.dtype(np.uint64)   # nnabla's index outputs are size_t


@njit(cache=True, inline="always")
def _iou(a0, a1, a2, a3, b0, b1, b2, b3):
    """IoU of two boxes given as (low_0, low_1, high_0, high_1) corners."""
    w = min(a2, b2) - max(a0, b0)
    h = min(a3, b3) - max(a1, b1)
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a2 - a0) * (a3 - a1) + (b2 - b0) * (b3 - b1) - inter
    return inter / union if union > 0 else 0.0


@njit(cache=True)
def _suppress(order, score, corners, threshold):
    """Greedy NMS over ``order``: zero score[j] of each later box overlapping a kept one."""
    for a in range(order.size):
        i = order[a]
        if score[i] == 0:
            continue
        for b in range(a + 1, order.size):
            j = order[b]
            if score[j] != 0 and _iou(corners[i, 0], corners[i, 1], corners[i, 2], corners[i, 3],
                                      corners[j, 0], corners[j, 1], corners[j, 2],
                                      corners[j, 3]) > threshold:
                score[j] = 0.0


@njit(cache=True)
def nms_detection2d_kernel(x, y, thresh, nms, per_class):
    """x, y: (B, N, 5 + C) rows (x, y, w, h, objectness, class probabilities...)."""
    B, N, K = x.shape
    corners = np.empty((N, 4))
    for b in range(B):
        for n in range(N):
            cx, cy, w, h = x[b, n, 0], x[b, n, 1], x[b, n, 2], x[b, n, 3]
            corners[n, 0], corners[n, 1] = cx - w / 2, cy - h / 2
            corners[n, 2], corners[n, 3] = cx + w / 2, cy + h / 2
            for k in range(4):
                y[b, n, k] = x[b, n, k]
            objectness = x[b, n, 4]
            if objectness < thresh:
                objectness = 0.0
            y[b, n, 4] = objectness
            for k in range(5, K):
                p = objectness * x[b, n, k]
                y[b, n, k] = p if p >= thresh else 0.0
        if per_class:
            for k in range(5, K):
                score = y[b, :, k].copy()
                _suppress(np.argsort(-score, kind="mergesort"), score, corners, nms)
                y[b, :, k] = score
        else:
            score = y[b, :, 4].copy()
            _suppress(np.argsort(-score, kind="mergesort"), score, corners, nms)
            for n in range(N):
                if score[n] == 0:
                    y[b, n, 4:] = 0.0


@register
class NmsDetection2d(Op):
    """YOLO post-processing: class probabilities times objectness, thresholded, then NMS per
    class (or over boxes by objectness); suppressed scores become 0."""

    def setup(self, x):
        if len(x) != 3 or x[2] < 5:
            self.fail("input of shape {} must be (B, N, 5 + C): x, y, w, h, objectness, "
                      "class probabilities", x)
        return [tuple(x)]

    def forward(self, inputs, outputs):
        nms_detection2d_kernel(inputs[0], outputs[0], self.thresh, self.nms, self.nms_per_class)

    backward = zero_backward

    def grad_depends_input_data(self, i, j):
        return False


@njit(cache=True)
def onnx_nms_kernel(boxes, scores, center_point_box, max_per_class, iou_threshold,
                    score_threshold, selected):
    """Rows (batch, class, box) of the kept boxes into ``selected``; returns their count."""
    B, N, _ = boxes.shape
    C = scores.shape[1]
    corners = np.empty((N, 4))
    count = 0
    for b in range(B):
        for n in range(N):
            if center_point_box:
                cx, cy, w, h = boxes[b, n, 0], boxes[b, n, 1], boxes[b, n, 2], boxes[b, n, 3]
                corners[n, 0], corners[n, 1] = cx - w / 2, cy - h / 2
                corners[n, 2], corners[n, 3] = cx + w / 2, cy + h / 2
            else:   # (y1, x1, y2, x2), any diagonal
                corners[n, 0] = min(boxes[b, n, 1], boxes[b, n, 3])
                corners[n, 1] = min(boxes[b, n, 0], boxes[b, n, 2])
                corners[n, 2] = max(boxes[b, n, 1], boxes[b, n, 3])
                corners[n, 3] = max(boxes[b, n, 0], boxes[b, n, 2])
        for c in range(C):
            order = np.argsort(-scores[b, c], kind="mergesort")
            kept = np.empty(N, np.int64)
            n_kept = 0
            for a in range(N):
                i = order[a]
                # a score equal to the threshold is kept, as nnabla keeps it
                if n_kept >= max_per_class or scores[b, c, i] < score_threshold:
                    break
                ok = True
                for t in range(n_kept):
                    j = kept[t]
                    if _iou(corners[i, 0], corners[i, 1], corners[i, 2], corners[i, 3],
                            corners[j, 0], corners[j, 1], corners[j, 2], corners[j, 3]) > iou_threshold:
                        ok = False
                        break
                if ok:
                    kept[n_kept] = i
                    n_kept += 1
                    if selected.shape[0] > 0:
                        selected[count, 0], selected[count, 1], selected[count, 2] = b, c, i
                    count += 1
    return count


@register
class ONNXNonMaxSuppression(Op):
    """ONNX NonMaxSuppression: (M, 3) rows (batch, class, box) of the selected boxes, as
    unsigned integers; M depends on the data."""
    data_dependent = True
    no_grad_inputs = (0, 1)

    def setup(self, boxes, scores):
        if len(boxes) != 3 or boxes[2] != 4 or len(scores) != 3 or scores[0] != boxes[0] \
                or scores[2] != boxes[1]:
            self.fail("boxes {} must be (B, N, 4) and scores {} must be (B, C, N)", boxes, scores)
        if self.center_point_box not in (0, 1):
            self.fail("center_point_box={} must be 0 or 1", self.center_point_box)
        if self.max_output_boxes_per_class < 0:
            self.fail("max_output_boxes_per_class={} must not be negative", self.max_output_boxes_per_class)
        self.selected = None
        return [(0, 3)]

    def select(self, boxes, scores):
        B, C, N = scores.shape
        limit = min(self.max_output_boxes_per_class, N)
        buffer = np.empty((B * C * limit, 3), np.int64)
        n = onnx_nms_kernel(boxes, scores, self.center_point_box, limit, self.iou_threshold,
                            self.score_threshold, buffer)
        return buffer[:n]

    def output_specs(self, inputs):
        boxes, scores = inputs
        if boxes is None or scores is None:
            return None
        self.selected = self.select(boxes, scores)
        return [(self.selected.shape, INDEX_DTYPE)]

    def forward(self, inputs, outputs):
        outputs[0][...] = self.selected
