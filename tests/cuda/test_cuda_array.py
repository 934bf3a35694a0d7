"""The array ops on the device against the CPU kernels (tiny shapes)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit.functions as F

from .compare import assert_same_on_cuda

rng = np.random.RandomState(0)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [
    ("reshape", lambda x: F.reshape(x, (3, 2)), [signed(2, 3)]),
    ("transpose", lambda x: F.transpose(x, (2, 0, 1)), [signed(2, 3, 2)]),
    ("slice with negative step", lambda x: F.slice(x, (0, 3), (2, 0), (1, -2)), [signed(2, 4)]),
    ("concatenate", lambda a, b: F.concatenate(a, b, axis=1), [signed(2, 1, 2), signed(2, 2, 2)]),
    ("stack", lambda a, b: F.stack(a, b, axis=1), [signed(2, 3), signed(2, 3)]),
    ("split", lambda x: sum(y * (k + 1.0) for k, y in enumerate(F.split(x, axis=1))),
     [signed(2, 3, 2)]),
    ("broadcast", lambda x: F.broadcast(x, (2, 3, 2)), [signed(1, 3, 1)]),
    ("broadcast_to", lambda x, y: F.broadcast_to(x, y, axis=1), [signed(2, 3, 2), signed(3)]),
    ("tile", lambda x: F.tile(x, (2, 1, 2)), [signed(2, 3)]),
    ("flip", lambda x: F.flip(x, (0, 2)), [signed(2, 2, 3)]),
    ("pad constant", lambda x: F.pad(x, (1, 2), constant_value=0.5), [signed(2, 3)]),
    ("pad reflect", lambda x: F.pad(x, (1, 1, 2, 1), mode="reflect"), [signed(2, 3)]),
    ("shift", lambda x: F.shift(x, (1, -1), border_mode="reflect"), [signed(3, 3)]),
    ("gradients accumulate", lambda x: F.transpose(x, (1, 0)) * 2.0 + F.transpose(x, (1, 0)),
     [signed(2, 3)]),
]


@pytest.mark.parametrize("name, build, arrays", CASES, ids=[c[0] for c in CASES])
def test_array_ops(name, build, arrays):
    no_grad = (0,) if name == "broadcast_to" else ()
    assert_same_on_cuda(build, *arrays, no_grad=no_grad)


def test_one_input_of_a_concatenation_without_gradient():
    assert_same_on_cuda(lambda a, b: F.concatenate(a, b, axis=0), signed(1, 2), signed(2, 2),
                        no_grad=(0,))


@settings(max_examples=2, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_drawn_slices_and_transposes(shape, data):
    starts = [data.draw(st.integers(0, s - 1)) for s in shape]
    steps = [data.draw(st.sampled_from([1, 2, -1])) for _ in shape]
    stops = [s if step > 0 else -len(shape) - 10 for s, step in zip(shape, steps)]
    perm = data.draw(st.permutations(range(len(shape))))
    x = signed(*shape)
    assert_same_on_cuda(lambda x: F.transpose(F.slice(x, starts, [min(e, s) if e > 0 else None
                                                                 for e, s in zip(stops, shape)],
                                                      steps), perm), x)
