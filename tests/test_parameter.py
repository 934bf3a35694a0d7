"""Parameter scopes and the parameter registry (seed 004, "Parametric Function")."""
import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.parameter import get_parameter, get_parameter_or_create, set_parameter


def test_scopes_nest_and_order_is_creation_order():
    with nn.parameter_scope("affine1"):
        get_parameter_or_create("affine/W", (2, 3))
        get_parameter_or_create("affine/b", (3,))
    with nn.parameter_scope("foo"):
        get_parameter_or_create("affine/W", (2, 3))
        with nn.parameter_scope("bar"):
            get_parameter_or_create("affine/W", (3, 4))
    assert list(nn.get_parameters()) == ["affine1/affine/W", "affine1/affine/b", "foo/affine/W",
                                         "foo/bar/affine/W"]
    with nn.parameter_scope("foo"):
        assert list(nn.get_parameters()) == ["affine/W", "bar/affine/W"]
        assert list(nn.get_current_parameter_scope()) == ["affine", "bar"]
        nn.clear_parameters()
    assert list(nn.get_parameters()) == ["affine1/affine/W", "affine1/affine/b"]
    with nn.parameter_scope("a/b") as scope:
        assert nn.get_current_parameter_scope() is scope
    private = {}
    with nn.parameter_scope("net", scope=private):
        get_parameter_or_create("w", (1,))
    assert list(private["net"]) == ["w"] and "net" not in nn.get_parameters()


def test_get_parameter_or_create_returns_unlinked_twin():
    p = get_parameter_or_create("w", (2,), np.array([1.0, 2.0], np.float32))
    stored = get_parameter("w")
    assert p == stored and p is not stored
    p.d[0] = 5
    assert stored.d[0] == 5
    again = get_parameter_or_create("w", (2,))
    np.testing.assert_array_equal(again.d, [5, 2])
    with pytest.raises(ValueError, match="shape"):
        get_parameter_or_create("w", (3,))


def test_grad_only_and_need_grad_flags():
    get_parameter_or_create("a", (1,), need_grad=True)
    get_parameter_or_create("b", (1,), need_grad=False)
    assert list(nn.get_parameters()) == ["a"]
    assert list(nn.get_parameters(grad_only=False)) == ["a", "b"]
    v = get_parameter_or_create("a", (1,), as_need_grad=False)
    assert not v.need_grad and get_parameter("a").need_grad
    with nn.no_grad():
        assert not get_parameter_or_create("a", (1,)).need_grad


def test_initializers_callable_and_array():
    v = get_parameter_or_create("c", (2, 2), lambda shape: np.full(shape, 7.0))
    assert v.d.dtype == np.float32 and np.all(v.d == 7)
    with pytest.raises(ValueError, match=r"initializer array of shape \(3,\) for shape \(2,\)"):
        get_parameter_or_create("d", (2,), np.zeros(3))
    set_parameter("e/f", nn.Variable((1,)))
    assert "e/f" in nn.get_parameters(grad_only=False)
