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


def per_sample(shape, kept):
    return tuple(1 if a in kept else s for a, s in enumerate(shape))


PER_ELEMENT_CASES = [
    ("layer", lambda x, b, g: F.layer_normalization(x, b, g),
     [signed(2, 3, 2), signed(1, 3, 2), positive(1, 3, 2)]),
    ("layer, batch axes apart", lambda x, b, g: F.layer_normalization(x, b, g, batch_axis=[0, 2]),
     [signed(2, 3, 2), signed(*per_sample((2, 3, 2), [0, 2])),
      positive(*per_sample((2, 3, 2), [0, 2]))]),
    ("instance, channel last", lambda x, b, g: F.instance_normalization(x, b, g, channel_axis=2),
     [signed(2, 2, 3), signed(1, 1, 3), positive(1, 1, 3)]),
    ("instance, per-sample gamma", lambda x, b, g: F.instance_normalization(x, b, g),
     [signed(2, 3, 2), signed(1, 3, 1), positive(2, 3, 1)]),
    ("group", lambda x, b, g: F.group_normalization(x, b, g, 2),
     [signed(2, 4, 2), signed(1, 4, 1), positive(1, 4, 1)]),
    ("group, channel last, output stats",
     lambda x, b, g: sum(F.group_normalization(x, b, g, 2, channel_axis=2, output_stat=True)),
     [signed(2, 2, 4), signed(1, 1, 4), positive(1, 1, 4)]),
    ("batch over axes apart", lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, axes=[0, 2]),
     [signed(2, 3, 2), signed(2, 1, 2), positive(2, 1, 2), signed(2, 1, 2), positive(2, 1, 2)]),
    ("gradients accumulate", lambda x, b, g: F.layer_normalization(x, None, None) * 2.0
     + F.instance_normalization(x, b, g) + F.instance_normalization(x, None, g * 0.5),
     [signed(2, 3, 2), signed(1, 3, 1), positive(1, 3, 1)]),
]


@pytest.mark.parametrize("name, build, arrays", PER_ELEMENT_CASES,
                         ids=[c[0] for c in PER_ELEMENT_CASES])
def test_per_element_parameters_and_axes_apart(name, build, arrays):
    no_grad = (3, 4) if len(arrays) >= 5 else ()
    assert_same_on_cuda(build, *arrays, no_grad=no_grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("without", [(0,), (1,), (2,), (1, 2)])
def test_some_gradients_not_propagated(without):
    arrays = [signed(2, 4, 2), signed(1, 4, 1), positive(1, 4, 1)]
    assert_same_on_cuda(lambda x, b, g: F.group_normalization(x, b, g, 2, channel_axis=1,
                                                              batch_axis=[0]),
                        *arrays, no_grad=without, rtol=1e-4, atol=1e-5)


NORM_CASES = [
    ("weight normalization", lambda w, g: F.weight_normalization(w, g, dim=1),
     [signed(2, 3, 2), positive(3)]),
    ("weight normalization, gain only", lambda w, g: F.weight_normalization(w, g, dim=0),
     [signed(3, 2), positive(3)]),
    ("norm normalization, p=3 axes apart", lambda x: F.norm_normalization(x, p=3, axes=[1]),
     [signed(2, 3, 2)]),
    ("norm normalization, p=2", lambda x: F.norm_normalization(x, axes=[0, 1]), [signed(2, 3)]),
]


@pytest.mark.parametrize("name, build, arrays", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_norms(name, build, arrays):
    no_grad = (0,) if name.endswith("gain only") else ()
    assert_same_on_cuda(build, *arrays, no_grad=no_grad, rtol=1e-4, atol=1e-5)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(batch=st.integers(1, 3), channels=st.integers(1, 3), size=st.integers(1, 3),
       without=st.sampled_from(["x", "beta", "gamma", "none"]))
def test_drawn_batch_normalizations(batch, channels, size, without):
    arrays = bn_inputs((batch, channels, size))
    no_grad = (3, 4) + ({"x": (0,), "beta": (1,), "gamma": (2,), "none": ()}[without])
    assert_same_on_cuda(lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v), *arrays,
                        no_grad=no_grad, rtol=1e-4, atol=1e-5)


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 3), min_size=2, max_size=3), data=st.data())
def test_drawn_instance_normalizations(shape, data):
    channel_axis = data.draw(st.integers(0, len(shape) - 1))
    batch_axis = [a for a in range(len(shape)) if a != channel_axis][:1]
    param = tuple(s if a == channel_axis else 1 for a, s in enumerate(shape))
    without = data.draw(st.sampled_from([(), (0,), (1,), (2,)]))
    assert_same_on_cuda(lambda x, b, g: F.instance_normalization(x, b, g, channel_axis, batch_axis),
                        signed(*shape), signed(*param), positive(*param), no_grad=without,
                        rtol=1e-4, atol=1e-5)


INFERENCE_CASES = [
    ("plain", lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, batch_stat=False),
     bn_inputs((2, 3, 2))),
    ("z and relu", lambda x, b, g, m, v, z: F.fused_batch_normalization(
        x, b, g, m, v, z, batch_stat=False), bn_inputs((2, 2, 3)) + [signed(2, 2, 3)]),
    ("channel last", lambda x, b, g, m, v: F.batch_normalization(
        x, b, g, m, v, axes=[2], batch_stat=False), bn_inputs((2, 2, 3), axis=2)),
    ("channels apart", lambda x, b, g, m, v: F.batch_normalization(
        x, b, g, m, v, axes=[0, 2], batch_stat=False), bn_inputs((2, 3, 2), axis=1)[:1]
     + [signed(2, 1, 2), positive(2, 1, 2), signed(2, 1, 2), positive(2, 1, 2)]),
    ("no gamma", lambda x, b, m, v: F.batch_normalization(x, b, None, m, v, batch_stat=False),
     [a for k, a in enumerate(bn_inputs((3, 2, 2))) if k != 2]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, build, arrays", INFERENCE_CASES,
                         ids=[c[0] for c in INFERENCE_CASES])
def test_fused_inference_launch_equals_the_two_launches(monkeypatch, name, build, arrays, dtype):
    """NNABLA_JIT_CUDA_FUSED_INFERENCE: one launch computing the statistics and the affine map
    gives the two launches' outputs and gradients to the last bit, and the CPU's."""
    from nnabla_jit.cuda_ops import normalization
    arrays = [a.astype(dtype) for a in arrays]
    no_grad = tuple(range(len(arrays) - 2, len(arrays))) if name != "z and relu" else (3, 4)
    results = []
    for fused in (True, False):
        monkeypatch.setattr(normalization, "FUSED_INFERENCE", fused)
        y, xs = run(cuda_context(), build, arrays, no_grad=no_grad)
        results.append([y.d.copy()] + [x.g.copy() for x in xs if x.need_grad])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    assert_same_on_cuda(build, *arrays, no_grad=no_grad, rtol=1e-4, atol=1e-5)


TRAINING_CASES = [
    ("plain", lambda x, b, g, m, v: F.batch_normalization(x, b, g, m, v, decay_rate=0.7),
     bn_inputs((3, 2, 2, 2))),
    ("z and relu", lambda x, b, g, m, v, z: F.fused_batch_normalization(x, b, g, m, v, z),
     bn_inputs((2, 2, 3)) + [signed(2, 2, 3)]),
    ("output stats", lambda x, b, g, m, v: sum(F.batch_normalization(
        x, b, g, m, v, output_stat=True)), bn_inputs((4, 2))),
    ("channels apart", lambda x, b, g, m, v: F.batch_normalization(
        x, b, g, m, v, axes=[0, 2]), bn_inputs((2, 3, 2), axis=1)[:1]
     + [signed(2, 1, 2), positive(2, 1, 2), signed(2, 1, 2), positive(2, 1, 2)]),
    ("gradients accumulate, inference too", lambda x, b, g, m, v: F.batch_normalization(
        x, b, g, m, v) * 2.0 + F.batch_normalization(x, b, g, m, v, batch_stat=False),
     bn_inputs((2, 2, 3))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, build, arrays", TRAINING_CASES,
                         ids=[c[0] for c in TRAINING_CASES])
def test_fused_statistics_launch_equals_the_two_launches(monkeypatch, name, build, arrays,
                                                         dtype):
    """NNABLA_JIT_CUDA_FUSED_STATISTICS: the batch sums and the statistics in one launch, and
    backward's sums and coefficients in one, give the two launches' outputs, gradients and
    running statistics to the last bit."""
    from nnabla_jit.cuda_ops import normalization
    arrays = [a.astype(dtype) for a in arrays]
    results = []
    for fused in (True, False):
        monkeypatch.setattr(normalization, "FUSED_STATISTICS", fused)
        y, xs = run(cuda_context(), build, arrays, no_grad=(3, 4))
        results.append([y.d.copy()] + [x.d.copy() for x in xs[3:5]]
                       + [x.g.copy() for x in xs if x.need_grad])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
