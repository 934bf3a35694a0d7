"""Batch normalization and its family on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context, run, written_on_device

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def positive(*shape):
    return rng.uniform(0.5, 1.5, shape).astype(np.float32)


def bn_inputs(shape, axis=1):
    stat = tuple(s if a == axis else 1 for a, s in enumerate(shape))
    return [signed(*shape), signed(*stat), positive(*stat), signed(*stat), positive(*stat)]


CASES = [
    ("training", lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v), bn_inputs((3, 2, 2, 2))),
    ("inference",
     lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, batch_stat=False),
     bn_inputs((2, 3, 2))),
    ("last axis", lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, axes=[2]),
     bn_inputs((2, 2, 3), axis=2)),
    ("fused with z", lambda x, b, g, m, v, z: F.fused_batch_normalization(x, b, g, m, v, z),
     bn_inputs((2, 2, 3)) + [signed(2, 2, 3)]),
    ("output stats",
     lambda x, b, g, m, v: sum(F.batch_normalization(x, b, g, m, v, output_stat=True)),
     bn_inputs((4, 2))),
    ("tensor normalization", lambda x, b, g: F.tensor_normalization(x, (1,), b, g),
     bn_inputs((2, 3, 2))[:3]),
    ("weight standardization", lambda w: F.weight_standardization(w), [signed(3, 2, 2)]),
    ("gradients accumulate",
     lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v) * 2.0
     + F.batch_normalization(x, b, g, m, v, batch_stat=False),
     bn_inputs((2, 2, 3))),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_standardization(name, build, arrays):
    no_grad = (3, 4) if len(arrays) >= 5 else ()
    assert_same_on_cuda(build, *arrays, no_grad=no_grad, rtol=1e-4, atol=1e-5)


def test_running_statistics_are_updated_on_the_device():
    arrays = bn_inputs((3, 2, 2))
    build = (lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, decay_rate=0.7))
    _, cpu = run(nn.Context(), build, arrays, no_grad=(3, 4))
    _, gpu = run(cuda_context(), build, arrays, no_grad=(3, 4))
    for k in (3, 4):
        assert written_on_device(gpu[k].data)
        np.testing.assert_allclose(gpu[k].d, cpu[k].d, rtol=1e-5, atol=1e-6)
        assert not np.allclose(gpu[k].d, arrays[k])


def test_per_element_parameters_run_the_cpu_kernels():
    x = signed(2, 3, 2)
    y, _ = run(cuda_context(), lambda x: F.layer_normalization(x, None, None), [x])
    assert not written_on_device(y.data)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(batch=st.integers(1, 3), channels=st.integers(1, 3), size=st.integers(1, 3),
       without=st.sampled_from(["x", "beta", "gamma", "none"]))
def test_drawn_batch_normalizations(batch, channels, size, without):
    arrays = bn_inputs((batch, channels, size))
    no_grad = (3, 4) + ({"x": (0,), "beta": (1,), "gamma": (2,), "none": ()}[without])
    assert_same_on_cuda(lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v), *arrays,
                        no_grad=no_grad, rtol=1e-4, atol=1e-5)
