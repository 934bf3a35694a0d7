"""``nnabla.utils.rnn``: padding and packing variable-length sequences.

    import nnabla_jit as nn
    import nnabla_jit.utils.rnn as rnn_utils

    nn.set_auto_forward(True)
    seqs = [nn.Variable.from_numpy_array(np.ones((n, 2)) * n) for n in (2, 3, 1)]
    packed = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    padded, lengths = rnn_utils.pad_packed_sequence(packed, batch_first=True)

A :class:`PackedSequence` holds the packed rows (``data``, ``(sum(lengths), *)``), the batch size
of every time step and, when the sequences had to be sorted by decreasing length, the
permutation that sorted them and its inverse. As in nnabla, the values of the lengths are read
when the graph is built, so these functions are meant for dynamic mode (``nn.auto_forward()``)
or for length Variables that already hold their values.
"""
import numpy as np

from .. import functions as F
from ..ndarray import NdArray
from ..variable import Variable

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pack_sequence",
           "pad_packed_sequence"]


class PackedSequence:
    """Packed sequences: ``data`` (N, *), ``batch_sizes`` (T,), and ``sorted_indices`` /
    ``unsorted_indices`` (None when the input was already sorted by decreasing length)."""

    def __init__(self):
        self.data = None
        self.batch_sizes = None
        self.sorted_indices = None
        self.unsorted_indices = None

    def __str__(self):
        return "data={}, batch_sizes={}, sorted_indices={}, unsorted_indices={}".format(
            self.data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)


def _host_values(v):
    if isinstance(v, Variable):
        return np.asarray(v.d)
    if isinstance(v, NdArray):
        return np.asarray(v.data)
    return np.asarray(v)


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Stack Variables of shapes (T_i, *) into one (T, B, *) (or (B, T, *)) Variable, filling
    the steps after each sequence's end with ``padding_value``; T = max T_i."""
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        if extra:
            s = F.pad(s, (0, extra) + (0, 0) * (len(s.shape) - 1), constant_value=padding_value)
        padded.append(s)
    return F.stack(*padded, axis=0 if batch_first else 1)


def pack_padded_sequence(padded_sequence, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded (T, B, *) (or (B, T, *)) batch of sequences of the given ``lengths``.

    With ``enforce_sorted`` the lengths must already decrease; otherwise the batch is sorted
    first (stably) and the permutation is kept in the result to undo it when unpacking.
    """
    sorted_indices = unsorted_indices = None
    if not enforce_sorted:
        values = _host_values(lengths).astype(np.int64).reshape(-1)
        order = np.argsort(-values, kind="stable")
        sorted_indices = Variable.from_numpy_array(order)
        unsorted_indices = Variable.from_numpy_array(np.argsort(order))
        lengths = Variable.from_numpy_array(values[order])
        padded_sequence = F.gather(padded_sequence, sorted_indices, axis=0 if batch_first else 1)
    data, batch_sizes = F.pack_padded_sequence(padded_sequence, lengths, batch_first)
    packed = PackedSequence()
    packed.data = data
    packed.batch_sizes = batch_sizes
    packed.sorted_indices = sorted_indices
    packed.unsorted_indices = unsorted_indices
    return packed


def pack_sequence(sequences, batch_first=False, enforce_sorted=True):
    """Pack a list of Variables of shapes (T_i, *) (pad them, then pack). ``batch_first`` is
    accepted for nnabla's signature; the packed layout does not depend on it."""
    padded = pad_sequence(sequences)
    lengths = Variable.from_numpy_array(np.array([s.shape[0] for s in sequences], np.int64))
    return pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Unpack a :class:`PackedSequence` into a padded Variable (the inverse of packing, in the
    original batch order) and the lengths; ``total_length`` pads the time axis further."""
    steps = sequence.batch_sizes.shape[0]
    if total_length is not None and total_length < steps:
        raise ValueError("pad_packed_sequence: total_length ({}) must be at least the maximum "
                         "length ({})".format(total_length, steps))
    padded, lengths = F.pad_packed_sequence(
        sequence.data, sequence.batch_sizes, batch_first, padding_value,
        -1 if total_length is None else total_length)
    if sequence.unsorted_indices is not None:
        padded = F.gather(padded, sequence.unsorted_indices, axis=0 if batch_first else 1)
        lengths = F.gather(lengths, sequence.unsorted_indices, axis=0)
    return padded, lengths


def _rnn_cell(x, h, w, b, nonlinearity):
    """One Elman step: ``act(concat(x, h) @ w.T + b)``; ``w`` is (H, I + H)."""
    h_t = F.affine(F.concatenate(x, h, axis=1), F.transpose(w, (1, 0)), b)
    return F.tanh(h_t) if nonlinearity == "tanh" else F.relu(h_t)


def _create_fixed_length_rnn(xs0, h0, w0, w, b, num_layers, nonlinearity, num_directions, with_bias):
    """``F.rnn`` composed of affine steps over time and layers (nnabla's reference helper).

    xs0 (T, B, I), h0 (L, D, B, H), w0 (D, H, I + H), w (L - 1, D, H, D * H + H) or None,
    b (L, D, H) or None. Returns ys (T, B, D * H) and hn (L, D, B, H).
    """
    batch_size, hidden_size = xs0.shape[1], h0.shape[3]
    xs = [xs0[0]] if xs0.shape[0] == 1 else list(F.split(xs0, axis=0))
    hn = []
    for layer in range(num_layers):
        wl = w0 if layer == 0 else w[layer - 1]
        h = h0[layer, 0]
        bias = b[layer, 0] if with_bias else None
        hs = []
        for x in xs:
            h = _rnn_cell(x, h, wl[0], bias, nonlinearity)
            hs.append(h)
        hn.append(h)
        if num_directions == 2:
            h = h0[layer, 1]
            bias = b[layer, 1] if with_bias else None
            for t in reversed(range(len(xs))):
                h = _rnn_cell(xs[t], h, wl[1], bias, nonlinearity)
                hs[t] = F.concatenate(hs[t], h, axis=1)
            hn.append(h)
        xs = hs
    ys = F.stack(*xs, axis=0)
    hn = F.reshape(F.stack(*hn, axis=0), (num_layers, num_directions, batch_size, hidden_size))
    return ys, hn
