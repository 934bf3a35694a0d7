"""Bad input gets a clear error that names the op, the argument and the shapes."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F


def test_affine_wrong_weight_shape_names_both_shapes():
    x = nn.Variable((4, 3))
    w = nn.Variable((5, 2))
    with pytest.raises(ValueError, match=r"Affine.*\(5, 2\).*\(4, 3\)"):
        F.affine(x, w)


def test_broadcast_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"Add2.*\(2, 3\).*\(4,\)"):
        F.add2(nn.Variable((2, 3)), nn.Variable((4,)))


def test_axis_out_of_range():
    with pytest.raises(ValueError, match=r"Sum: axis 3 is out of range"):
        F.sum(nn.Variable((2, 3)), axis=3)
    with pytest.raises(ValueError, match="Softmax: axis"):
        F.softmax(nn.Variable((2, 3)), axis=-3)


def test_bad_argument_values():
    with pytest.raises(ValueError, match="Reshape"):
        F.reshape(nn.Variable((2, 3)), (4, 2))
    with pytest.raises(ValueError, match=r"Transpose.*permutation"):
        F.transpose(nn.Variable((2, 3)), (0, 0))
    with pytest.raises(ValueError, match=r"pad.*mode"):
        F.pad(nn.Variable((2, 3)), (1, 1), mode="wrap")
    with pytest.raises(TypeError, match="missing .*argument.*'axes'"):
        F.transpose(nn.Variable((2, 3)))


def test_non_variable_input():
    with pytest.raises(TypeError, match=r"Tanh.*Variable or NdArray.*ndarray"):
        F.tanh(np.ones(3))


def test_d_with_wrong_shape():
    x = nn.Variable((2, 2))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 2\)"):
        x.d = np.ones(3)


def test_backward_with_nothing_to_differentiate(monkeypatch):
    from nnabla_jit import graph
    x = nn.Variable((2,))
    y = F.tanh(x)
    y.forward()
    y.backward()   # nnabla: nothing needs a gradient, so nothing happens
    np.testing.assert_array_equal(x.g, 0)
    monkeypatch.setattr(graph, "STRICT_GRAD", True)   # NNABLA_JIT_STRICT_GRAD=1
    graph.graph_changed()
    with pytest.raises(ValueError, match="need_grad=True"):
        y.backward()
