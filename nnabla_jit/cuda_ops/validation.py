"""CUDA kernels of TopNError and ConfusionMatrix (BinaryError is an elementwise table line):
one thread per sample, labels decoded by the CPU's ``label_of`` and invalid ones counted into
mapped host memory, as the label losses do (``loss.py``). Neither has a gradient."""
from ..ops.validation import top_n_error_at as cpu_top_n_error_at
from . import device
from .loss import checked_labels, counted_label
from .registry import device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

top_n_error_at = device_function(cpu_top_n_error_at.py_func)   # a sample's error, as the CPU's


@kernel
def top_n_error_kernel(x3, t3, n, y, bad):
    """y = 1 where at least n other classes score >= the label's score, else 0 (0 for ignored
    labels); bad[0] counts invalid labels."""
    r = cuda.grid(1)
    if r < t3.size:   # one thread per sample
        o, i, k = counted_label(t3, r, x3.shape[2], x3.shape[1], bad)
        if k < 0:
            y[r] = 0.0
            return
        y[r] = top_n_error_at(x3, o, i, k, n)


@kernel
def confusion_kernel(x3, t3, cm, bad):
    """cm[label, argmax] += 1 per sample (cm zeroed before; ignored labels skipped)."""
    r = cuda.grid(1)
    if r < t3.size:   # one thread per sample
        o, i, k = counted_label(t3, r, x3.shape[2], x3.shape[1], bad)
        if k >= 0:
            best = 0
            for c in range(1, x3.shape[1]):
                if x3[o, c, i] > x3[o, best, i]:
                    best = c
            cuda.atomic.add(cm, (k, best), 1)


def _views(op, inputs):
    n_outer, n_class, n_inner = op.shape3
    return inputs[0].reshape(op.shape3), inputs[1].reshape(n_outer, 1, n_inner)


@forward("TopNError")
def top_n_error_forward(op, inputs, outputs):
    x3, t3 = _views(op, inputs)
    y = outputs[0].reshape(outputs[0].size)
    checked_labels(op, t3, lambda bad: device.launch(top_n_error_kernel, y.size, x3, t3, op.n, y,
                                                     bad))


@forward("ConfusionMatrix")
def confusion_matrix_forward(op, inputs, outputs):
    x3, t3 = _views(op, inputs)
    cm = outputs[0]
    device.fill(cm.reshape(cm.size), 0)
    n_outer, _, n_inner = op.shape3
    checked_labels(op, t3, lambda bad: device.launch(confusion_kernel, n_outer * n_inner, x3, t3,
                                                     cm, bad))
