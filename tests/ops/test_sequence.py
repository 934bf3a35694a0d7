"""PackPaddedSequence / PadPackedSequence and nnabla_jit.utils.rnn (values checked against
nnabla 1.39's outputs for the same inputs)."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.utils.rnn as rnn_utils
from nnabla_jit.testing import check_function


def batch_sizes_of(lengths, steps):
    return (np.asarray(lengths)[None, :] > np.arange(steps)[:, None]).sum(axis=1)


def pack_reference(padded, lengths, batch_first=False):
    time_major = padded.swapaxes(0, 1) if batch_first else padded
    steps = time_major.shape[0]
    sizes = batch_sizes_of(lengths, steps)
    rows = [time_major[t, :sizes[t]] for t in range(steps)]
    return np.concatenate(rows, axis=0), sizes


def pad_reference(packed, batch_sizes, batch_first=False, padding_value=0.0, total_length=-1):
    steps = max(len(batch_sizes), total_length)
    batch = batch_sizes[0]
    out = np.full((steps, batch) + packed.shape[1:], padding_value)
    n = 0
    for t, size in enumerate(batch_sizes):
        out[t, :size] = packed[n:n + size]
        n += size
    lengths = (np.asarray(batch_sizes)[None, :] > np.arange(batch)[:, None]).sum(axis=1)
    return (out.swapaxes(0, 1) if batch_first else out), lengths


@st.composite
def padded_batches(draw):
    steps, batch = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rest = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    lengths = sorted(draw(st.lists(st.integers(0, steps), min_size=batch, max_size=batch)), reverse=True)
    seed = draw(st.integers(0, 2 ** 16))
    padded = np.random.RandomState(seed).uniform(-1, 1, (steps, batch) + rest)
    return padded, np.array(lengths)


@given(padded_batches(), st.booleans())
def test_pack_padded_sequence(case, batch_first):
    padded, lengths = case
    if batch_first:
        padded = padded.swapaxes(0, 1).copy()
    check_function(lambda x, l: F.pack_padded_sequence(x, l, batch_first), [padded, lengths],
                   lambda x, l: pack_reference(x, l, batch_first), wrt=[0])


@given(padded_batches(), st.booleans(), st.sampled_from([0.0, -1.5]), st.integers(0, 2))
def test_pad_packed_sequence(case, batch_first, padding_value, extra_steps):
    padded, lengths = case
    packed, sizes = pack_reference(padded, lengths)
    total = len(sizes) + extra_steps if extra_steps else -1
    assume(sizes[0] > 0)   # with nothing packed there is no batch to pad back to
    check_function(lambda p, s: F.pad_packed_sequence(p, s, batch_first, padding_value, total),
                   [packed, sizes.astype(np.int32)],
                   lambda p, s: pad_reference(p, s, batch_first, padding_value, total),
                   wrt=[0])


def test_values_and_dtypes_match_nnabla():
    x = nn.Variable.from_numpy_array(np.arange(1, 25, dtype=np.float32).reshape(4, 3, 2))
    packed, batch_sizes = F.pack_padded_sequence(x, nn.Variable.from_numpy_array(np.array([4, 2, 1])))
    nn.forward_all([packed, batch_sizes])
    np.testing.assert_array_equal(packed.d[:, 0], [1, 3, 5, 7, 9, 13, 19])
    np.testing.assert_array_equal(batch_sizes.d, [3, 2, 1, 1])
    assert batch_sizes.d.dtype == np.int32
    padded, lengths = F.pad_packed_sequence(packed, batch_sizes, batch_first=True, total_length=5)
    nn.forward_all([padded, lengths])
    assert padded.shape == (3, 5, 2) and lengths.d.dtype == np.int32
    np.testing.assert_array_equal(padded.d[..., 0], [[1, 7, 13, 19, 0], [3, 9, 0, 0, 0], [5, 0, 0, 0, 0]])
    np.testing.assert_array_equal(lengths.d, [4, 2, 1])


def test_round_trip_gradient_in_dynamic_mode():
    """pack then pad (batch_sizes is only known once pack ran, so this is built under
    auto_forward, as in nnabla); gradients reach the valid positions only."""
    rng = np.random.RandomState(0)
    x, lengths = rng.randn(4, 3, 2), np.array([4, 2, 1])

    def round_trip(x, l):
        packed, sizes = F.pack_padded_sequence(x, l)
        return F.pad_packed_sequence(packed * packed, sizes, padding_value=0.5, total_length=6)

    def reference(x, l):
        y = np.full((6, 3, 2), 0.5)
        for b in range(3):
            y[:l[b], b] = x[:l[b], b] ** 2
        return y, l

    with nn.auto_forward():
        check_function(round_trip, [x, lengths], reference, wrt=[0])


def test_shapes_follow_new_lengths_at_forward():
    x = nn.Variable.from_numpy_array(np.ones((4, 3, 2), np.float32))
    lengths = nn.Variable.from_numpy_array(np.array([4, 2, 1]))
    packed, batch_sizes = F.pack_padded_sequence(x, lengths)
    assert packed.shape == (7, 2)
    lengths.d = np.array([3, 3, 1])
    nn.forward_all([packed, batch_sizes])
    assert packed.shape == (7, 2) and list(batch_sizes.d) == [3, 2, 2, 0]
    lengths.d = np.array([2, 1, 1])
    nn.forward_all([packed, batch_sizes])
    assert packed.shape == (4, 2) and list(batch_sizes.d) == [3, 1, 0, 0]


@pytest.mark.parametrize("lengths, message", [
    ([2, 4, 1], "must be sorted in decreasing order"),
    ([5, 2, 1], r"must lie in \[0, 4\]"),
])
def test_bad_lengths_raise(lengths, message):
    x = nn.Variable((4, 3, 2))
    with pytest.raises(ValueError, match="PackPaddedSequence: lengths .*" + message):
        F.pack_padded_sequence(x, nn.Variable.from_numpy_array(np.array(lengths)))


def test_values_needed_when_built():
    x = nn.Variable.from_numpy_array(np.ones((4, 3, 2), np.float32))
    _, batch_sizes = F.pack_padded_sequence(x, nn.Variable.from_numpy_array(np.array([4, 2, 1])))
    with pytest.raises(ValueError, match="PadPackedSequence: the values of batch_sizes are needed"):
        F.pad_packed_sequence(nn.Variable((7, 2)), batch_sizes)
    sizes = nn.Variable.from_numpy_array(np.array([3, 2, 1, 1], np.int32))
    with pytest.raises(ValueError, match="total_length 2 must be at least"):
        F.pad_packed_sequence(nn.Variable((7, 2)), sizes, total_length=2)
    with pytest.raises(ValueError, match="add up to 7, but packed_sequence has 6 rows"):
        F.pad_packed_sequence(nn.Variable.from_numpy_array(np.ones((6, 2))), sizes)


# ------------------------------------------------------------------------------ utils.rnn
def sequences(lengths, need_grad=False):
    return [nn.Variable.from_numpy_array(np.full((n, 2), float(n), np.float32) + np.arange(n)[:, None],
                                         need_grad=need_grad) for n in lengths]


def test_pad_sequence():
    with nn.auto_forward():
        padded = rnn_utils.pad_sequence(sequences([2, 3, 1]), padding_value=9)
        first = rnn_utils.pad_sequence(sequences([2, 3, 1]), batch_first=True)
    assert padded.shape == (3, 3, 2) and first.shape == (3, 3, 2)
    np.testing.assert_array_equal(padded.d[:, :, 0], [[2, 3, 1], [3, 4, 9], [9, 5, 9]])
    np.testing.assert_array_equal(first.d[..., 0], [[2, 3, 0], [3, 4, 5], [1, 0, 0]])


def test_pack_sequence_unsorted_round_trip_matches_nnabla():
    """The example of nnabla's docs: lengths 2, 3, 3, 1, 4, packed with enforce_sorted=False."""
    seqs = sequences([2, 3, 3, 1, 4], need_grad=True)
    with nn.auto_forward():
        packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
        padded, lengths = rnn_utils.pad_packed_sequence(packed, batch_first=True)
    np.testing.assert_array_equal(packed.batch_sizes.d, [5, 4, 3, 1])
    np.testing.assert_array_equal(packed.sorted_indices.d, [4, 1, 2, 0, 3])
    np.testing.assert_array_equal(packed.unsorted_indices.d, [3, 1, 2, 4, 0])
    np.testing.assert_array_equal(packed.data.d[:, 0], [4, 3, 3, 2, 1, 5, 4, 4, 3, 6, 5, 5, 7])
    np.testing.assert_array_equal(lengths.d, [2, 3, 3, 1, 4])
    for b, s in enumerate(seqs):
        n = s.shape[0]
        np.testing.assert_array_equal(padded.d[b, :n], s.d)
        assert not padded.d[b, n:].any()
    for s in seqs:
        s.grad.zero()
    F.sum(padded * padded).backward()
    for s in seqs:
        np.testing.assert_allclose(s.g, 2 * s.d)
    assert "batch_sizes=" in str(packed)


def test_pack_padded_sequence_sorted_and_total_length():
    with nn.auto_forward():
        padded = rnn_utils.pad_sequence(sequences([3, 2, 2]))
        packed = rnn_utils.pack_padded_sequence(padded, nn.Variable.from_numpy_array(np.array([3, 2, 2])))
        out, lengths = rnn_utils.pad_packed_sequence(packed, total_length=5)
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    assert out.shape == (5, 3, 2)
    np.testing.assert_array_equal(out.d[:3], padded.d)
    assert not out.d[3:].any()
    with pytest.raises(ValueError, match="total_length"):
        rnn_utils.pad_packed_sequence(packed, total_length=2)
