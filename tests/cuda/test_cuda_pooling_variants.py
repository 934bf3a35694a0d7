"""Unpooling, pooling's double backward (MaxPoolingBackward, and the MaxPoolingGather its
gradient builds) and RoiAlign on the device against the CPU kernels (tiny shapes: the simulator
is slow)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _max_pooling_backward(**args):
    return lambda dy, x: F.max_pooling_backward(dy, x, **args)


UNPOOLING = [
    ("2-d", lambda x: F.unpooling(x, (2, 3)), [signed(1, 2, 2, 2)]),
    ("1-d", lambda x: F.unpooling(x, (3,)), [signed(2, 3)]),
    ("channel-last", lambda x: F.unpooling(x, (2, 1), channel_last=True), [signed(2, 2, 3, 2)]),
    ("gradients accumulate", lambda x: F.unpooling(x, (2, 2)) * 2.0 + F.unpooling(x, (2, 2)),
     [signed(1, 1, 2, 3)]),
]


@pytest.mark.parametrize("name, build, arrays", UNPOOLING, ids=[c[0] for c in UNPOOLING])
def test_unpooling(name, build, arrays):
    assert_same_on_cuda(build, *arrays)


# x is drawn without ties, so the winners are one per window on both sides.
MAX_POOLING_BACKWARD = [
    ("overlapping windows", _max_pooling_backward(kernel=(2, 2), stride=(1, 1)),
     [signed(1, 2, 2, 2), signed(1, 2, 3, 3)]),
    ("padded, partial windows",
     _max_pooling_backward(kernel=(2, 3), stride=(2, 2), pad=(1, 1), ignore_border=False),
     [signed(1, 1, 2, 3), signed(1, 1, 3, 4)]),
    ("channel-last", _max_pooling_backward(kernel=(2, 2), channel_last=True),
     [signed(1, 2, 2, 2), signed(1, 4, 4, 2)]),
    ("gradients accumulate",
     lambda dy, x: (F.max_pooling_backward(dy, x, (2, 2)) * 2.0
                    + F.max_pooling_backward(dy, x, (2, 2))),
     [signed(1, 1, 2, 2), signed(1, 1, 4, 4)]),
]


@pytest.mark.parametrize("name, build, arrays", MAX_POOLING_BACKWARD,
                         ids=[c[0] for c in MAX_POOLING_BACKWARD])
def test_max_pooling_backward(name, build, arrays):
    """The gradient with respect to dy is MaxPoolingGather; x gets none."""
    assert_same_on_cuda(build, *arrays, no_grad=(1,))


def test_max_pooling_double_backward_on_the_device():
    """nn.grad of MaxPooling's gradient: MaxPoolingBackward, MaxPoolingGather (its gradient
    with respect to dy) and, backward through that, the gather's and MaxPoolingBackward's own
    backward all run as CUDA kernels."""
    x_value, seed = signed(1, 2, 4, 4), signed(1, 2, 4, 4)

    def second_order(ctx):
        with nn.context_scope(ctx):
            x = nn.Variable.from_numpy_array(x_value, need_grad=True)
            dy = nn.Variable.from_numpy_array(np.ones((1, 2, 2, 2), np.float32), need_grad=True)
            y = F.max_pooling(x, (2, 2))
            dx = nn.grad([y], [x], grad_outputs=[dy])[0]
            z = F.sum(F.max_pooling(dx * nn.Variable.from_numpy_array(seed), (2, 2)) ** 2)
            ddy = nn.grad([z], [dy])[0]
        ddy.forward()
        dy.grad.zero()
        ddy.backward(np.linspace(-1, 1, ddy.size).reshape(ddy.shape).astype(np.float32))
        return dx, ddy, dy

    on_cpu, on_gpu = second_order(nn.Context()), second_order(cuda_context())
    assert written_on_device(on_gpu[0].data) and written_on_device(on_gpu[1].data)
    assert written_on_device(on_gpu[2].grad)
    for a, b in zip((v.d for v in on_gpu[:2]), (v.d for v in on_cpu[:2])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(on_gpu[2].g, on_cpu[2].g, rtol=1e-5, atol=1e-6)


# Boxes (batch index, x1, y1, x2, y2): one past the border, one small, one in image 1.
BOXES = np.array([[0, -1.0, 0.5, 3.5, 4.5], [1, 1.0, 1.0, 2.5, 2.0], [1, 0.0, 0.0, 4.0, 3.0]],
                 np.float32)


@pytest.mark.parametrize("channel_last, sampling_ratio", [(False, -1), (True, 2)],
                         ids=["adaptive grid", "channel-last, fixed grid"])
def test_roi_align(channel_last, sampling_ratio):
    x = signed(2, 4, 5, 2) if channel_last else signed(2, 2, 4, 5)
    assert_same_on_cuda(
        lambda x, boxes: (F.roi_align(x, boxes, (2, 3), (0.9, 1.1), sampling_ratio, channel_last)
                          + F.roi_align(x, boxes, (2, 3), (0.9, 1.1), sampling_ratio,
                                        channel_last)),
        x, BOXES, no_grad=(1,))


def test_roi_align_with_a_box_of_no_image_fails_as_on_the_cpu():
    boxes = BOXES.copy()
    boxes[1, 0] = 2
    with nn.context_scope(cuda_context()):
        y = F.roi_align(nn.Variable.from_numpy_array(signed(2, 1, 3, 3)),
                        nn.Variable.from_numpy_array(boxes), (2, 2))
    with pytest.raises(ValueError, match=r"RoiAlign: box batch indices .* must lie in \[0, 2\)"):
        y.forward()
