"""TopNError and ConfusionMatrix on the device against the CPU kernels; invalid labels raise
the CPU's error."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context

rng = np.random.RandomState(0)
SCORES = rng.uniform(-1, 1, (4, 3, 2)).astype(np.float32)
LABELS = np.array([[[0, 2]], [[1, -1]], [[2, 2]], [[0, 1]]], np.float32)


@pytest.mark.parametrize("build", [lambda x, t: F.top_n_error(x, t, axis=1, n=2),
                                   lambda x, t: F.confusion_matrix(x, t, axis=1)],
                         ids=["top_n_error", "confusion_matrix"])
def test_validation_ops(build):
    assert_same_on_cuda(build, SCORES, LABELS, backward=False, atol=0)


def test_a_label_out_of_range_raises():
    with nn.context_scope(cuda_context()):
        y = F.top_n_error(nn.Variable.from_numpy_array(SCORES),
                          nn.Variable.from_numpy_array(np.full((4, 1, 2), 3, np.float32)), axis=1)
    with pytest.raises(ValueError, match="label 3.0"):
        y.forward()


@pytest.mark.parametrize("label", [np.inf, np.nan, 1e30])
@pytest.mark.parametrize("build", [
    lambda x, t: F.top_n_error(x, t, axis=1),
    lambda x, t: F.confusion_matrix(x, t, axis=1),
    lambda x, t: F.softmax_cross_entropy(x, t, axis=1),
    lambda x, t: F.categorical_cross_entropy(F.softmax(x, axis=1), t, axis=1),
], ids=["top_n_error", "confusion_matrix", "softmax_cross_entropy", "categorical_cross_entropy"])
def test_an_infinite_or_nan_label_raises(build, label):
    labels = LABELS.copy()
    labels[1, 0, 0] = label
    with nn.context_scope(cuda_context()):
        y = build(nn.Variable.from_numpy_array(SCORES), nn.Variable.from_numpy_array(labels))
    with pytest.raises(ValueError, match="is not a class index"):
        y.forward()
