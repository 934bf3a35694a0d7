"""nnabla's per-type function classes (``nnabla_jit.function.Affine(ctx, **args)``) and
``Function.arguments``."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function as function
import nnabla_jit.functions as F


def test_a_function_class_builds_the_node_as_F_does():
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3).astype(np.float32))
    w = nn.Variable.from_numpy_array(rng.randn(3, 4).astype(np.float32))
    affine = function.Affine(nn.get_current_context(), base_axis=1)
    assert affine.name == "Affine"
    y = affine(x, w)
    assert y.parent.info.type_name == "Affine"
    y.forward()
    np.testing.assert_allclose(y.d, x.d @ w.d, rtol=1e-5)
    concat = function.Concatenate(nn.get_current_context(), axis=0)
    z = concat(x, x, x, auto_forward=True)       # a variadic input, run at once
    np.testing.assert_allclose(z.d, np.concatenate([x.d] * 3))
    assert function.Reshape(nn.get_current_context(), shape=(3, 2))(x).shape == (3, 2)


def test_function_class_errors_name_the_function():
    with pytest.raises(AttributeError, match="NoSuchOp"):
        function.NoSuchOp
    with pytest.raises(TypeError, match="Affine: unknown argument.*foo"):
        function.Affine(nn.get_current_context(), foo=1)
    with pytest.raises(TypeError, match="Affine: 1 inputs given"):
        function.Affine(nn.get_current_context())(nn.Variable((2, 3)))


def test_arguments_are_nnablas_lists():
    x = nn.Variable((2, 3, 4))
    y = F.reshape(x, (2, -1))
    assert y.parent.arguments == {"shape": [2, -1], "inplace": True}
    assert F.concatenate(x, x, axis=1).parent.arguments == {"axis": 1}
