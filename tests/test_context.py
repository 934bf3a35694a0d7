"""Contexts: defaults, scopes, type configurations."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.context import Context


def test_default_and_scoped_context():
    assert nn.get_current_context().backend == ["cpu:float"]
    ctx = Context(["cpu:double"])
    with nn.context_scope(ctx):
        assert nn.get_current_context() is ctx
        y = F.tanh(nn.Variable((2,)))
    assert y.parent.ctx == ctx
    assert nn.get_current_context().backend == ["cpu:float"]
    nn.set_default_context(ctx)
    assert nn.get_current_context() == ctx


def test_half_stores_float16_computes_float32():
    x = nn.Variable.from_numpy_array(np.array([1.0, 2.0], np.float32))
    with nn.context_scope(Context(["cpu:half", "cpu:float"])):
        y = x * 3
    y.forward()
    assert y.d.dtype == np.float16
    np.testing.assert_array_equal(y.d, [3, 6])


def test_context_repr_and_errors():
    assert repr(Context()) == "Context(backend=['cpu:float'], array_class='', device_id='0')"
    with pytest.raises(TypeError, match="set_default_context: expected a Context, got str"):
        nn.set_default_context("cpu")
