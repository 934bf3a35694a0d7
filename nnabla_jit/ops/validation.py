"""Validation ops: TopNError, BinaryError, ConfusionMatrix. None has a gradient.

Labels follow the class-label losses (``ops/loss.py``): integers or floats holding integers,
negative ones (-inf too) ignored, anything else (NaN, +inf, not below the number of classes) an
error.
"""
import numpy as np
from numba import njit, prange

from .common import label_of, sample_label
from .elementwise import elementwise
from .kernels import parallel_kernel
from .loss import LabelOp
from .registry import register

# no grad rule at all (as in nnabla): nn.grad through it raises
BinaryError = elementwise("BinaryError", "where((x0 >= 0.5) != (x1 >= 0.5), 1.0, 0.0)", grad_rule=False,
                          broadcasts=False)


@njit(cache=True, inline="always")
def top_n_error_at(x3, o, i, k, n):
    """1.0 when at least n other classes of sample (o, i) score >= its label k's score, else 0.0
    (the CUDA kernel compiles its py_func)."""
    v = x3[o, k, i]
    above = 0
    for c in range(x3.shape[1]):
        if c != k and x3[o, c, i] >= v:
            above += 1
    return 1.0 if above >= n else 0.0


@parallel_kernel
def top_n_error_kernel(x3, t3, n, y):
    """y = 1 where at least n other classes score >= the label's score, else 0 (0 for ignored
    labels). Returns the number of invalid labels."""
    O, C, I = x3.shape
    bad = 0
    for r in prange(O * I):
        o, i, k = sample_label(t3, r, C)
        if k < 0:
            bad += 1 if k == -2 else 0
            y[r] = 0.0
            continue
        y[r] = top_n_error_at(x3, o, i, k, n)
    return bad


@register
class TopNError(LabelOp):
    """1 for each sample whose label is not among the n highest scores along ``axis``."""

    def forward(self, inputs, outputs):
        x3, t3 = self.views(inputs)
        self.check_labels(t3, top_n_error_kernel.for_size(x3.size)(x3, t3, self.n, outputs[0].reshape(-1)))


@njit(cache=True)
def confusion_kernel(x3, t3, cm):
    """cm[label, argmax] += 1 per sample (ignored labels skipped). Returns the number of invalid
    labels."""
    O, C, I = x3.shape
    cm[:] = 0
    bad = 0
    for o in range(O):
        for i in range(I):
            k = label_of(t3, o, i, C)
            if k < 0:
                bad += 1 if k == -2 else 0
                continue
            best = 0
            for c in range(1, C):
                if x3[o, c, i] > x3[o, best, i]:
                    best = c
            cm[k, best] += 1
    return bad


@register
class ConfusionMatrix(LabelOp):
    """(classes, classes) int32 counts: row = label, column = predicted (argmax) class."""
    output_dtype = np.dtype(np.int32)

    def setup(self, x, t):
        super().setup(x, t)
        return [(self.shape3[1],) * 2]

    def forward(self, inputs, outputs):
        x3, t3 = self.views(inputs)
        self.check_labels(t3, confusion_kernel(x3, t3, outputs[0]))
