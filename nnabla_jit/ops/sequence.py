"""Packed variable-length sequences: PackPaddedSequence and PadPackedSequence.

A packed sequence stores, time step after time step, the rows of the sequences still running
at that step: ``batch_sizes[t]`` rows for step t, so it is ``(sum(lengths), *)``. As in nnabla
the sequences must be sorted by decreasing length (``nnabla_jit.utils.rnn`` sorts them when
asked), and the output shapes follow the *values* of ``lengths`` / ``batch_sizes``: these ops
are ``data_dependent``, their shapes are computed when the graph is built (which needs those
values then, as nnabla's dynamic mode does) and again at every forward.
"""
import numpy as np
from numba import njit

from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def node_op(outputs):
    """The forward op (it knows the lengths and batch sizes its shapes were computed from)."""
    return next(o for o in outputs if o is not None).parent.op


def pack_padded_sequence_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                  accum):
    if not propagate_down[0]:
        return
    dx = input_grads[0]
    if not accum[0]:
        dx.fill(0)
    pack_rows(time_major(dx, op.batch_first), as_rows(output_grads[0]), op.batch_sizes, False, True)


def pad_packed_sequence_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                 accum):
    if not propagate_down[0]:
        return
    pack_rows(time_major(output_grads[0], op.batch_first), as_rows(input_grads[0]), op.batch_sizes,
              True, accum[0])


@njit(cache=True)
def pack_rows(padded, packed, batch_sizes, to_packed, accumulate):
    """Move rows between a time-major padded (T, B, F) array (any strides) and a packed
    (N, F) one, in either direction, overwriting or adding into the destination."""
    n = 0
    for t in range(batch_sizes.size):
        for b in range(batch_sizes[t]):
            for f in range(packed.shape[1]):
                if to_packed:
                    if accumulate:
                        packed[n, f] += padded[t, b, f]
                    else:
                        packed[n, f] = padded[t, b, f]
                elif accumulate:
                    padded[t, b, f] += packed[n, f]
                else:
                    padded[t, b, f] = packed[n, f]
            n += 1


def time_major(padded, batch_first):
    """The (T, B, F) view of a padded (T, B, *) or (B, T, *) array."""
    a = padded.reshape(padded.shape[:2] + (int(np.prod(padded.shape[2:])),))
    return a.transpose(1, 0, 2) if batch_first else a


def as_rows(packed):
    """The (N, F) view of a packed (N, *) array."""
    return packed.reshape(packed.shape[0], int(np.prod(packed.shape[1:])))


def _values(op, array, name):
    if array is None:
        op.fail("the values of {} are needed when the graph is built (their shape depends on "
                "them); give a Variable that holds data, or build under nn.auto_forward()", name)
    return np.asarray(array).reshape(-1).astype(np.int64)


@register
class PackPaddedSequence(Op):
    data_dependent = True
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)
    batch_sizes = None   # int64 (T,), from the lengths of the last build or forward

    def setup(self, padded, lengths):
        if len(padded) < 2:
            self.fail("padded_sequence of shape {} needs a time and a batch axis", padded)
        seq_len, batch = (padded[1], padded[0]) if self.batch_first else padded[:2]
        if tuple(lengths) != (batch,):
            self.fail("lengths of shape {} must be ({},), one per sequence of padded_sequence {}",
                      lengths, batch, padded)
        self.seq_len, self.rest = seq_len, tuple(padded[2:])
        n = seq_len * batch if self.batch_sizes is None else int(self.batch_sizes.sum())
        return [(n,) + self.rest, (seq_len,)]

    def output_dtypes(self, compute_dtype, n_outputs):
        return [compute_dtype, np.int32]

    def output_specs(self, inputs):
        lengths = _values(self, inputs[1], "lengths")
        if lengths.size and (lengths.min() < 0 or lengths.max() > self.seq_len):
            self.fail("lengths {} must lie in [0, {}] (the time axis of padded_sequence)",
                      lengths.tolist(), self.seq_len)
        if np.any(np.diff(lengths) > 0):
            self.fail("lengths {} must be sorted in decreasing order (use nnabla_jit.utils.rnn."
                      "pack_padded_sequence(..., enforce_sorted=False) to sort them)",
                      lengths.tolist())
        self.batch_sizes = (lengths[None, :] > np.arange(self.seq_len)[:, None]).sum(axis=1)
        dtype = inputs[0].dtype if inputs[0] is not None else np.float32
        return [((int(lengths.sum()),) + self.rest, dtype), ((self.seq_len,), np.int32)]

    def forward(self, inputs, outputs):
        pack_rows(time_major(inputs[0], self.batch_first), as_rows(outputs[0]), self.batch_sizes,
                  True, False)
        outputs[1][...] = self.batch_sizes

    backward = pack_padded_sequence_backward

    def grad_depends_input_data(self, i, j):
        return False   # the batch sizes are kept on the op


@register
class PadPackedSequence(Op):
    data_dependent = True
    keep_input_dtypes = (1,)
    no_grad_inputs = (1,)
    batch_sizes = None   # int64 (T,), from the last build or forward
    lengths = None       # int64 (B,)

    def setup(self, packed, batch_sizes):
        if len(packed) < 1 or len(batch_sizes) != 1:
            self.fail("packed_sequence of shape {} and batch_sizes of shape {} must be (N, *) "
                      "and (T,)", packed, batch_sizes)
        self.rest = tuple(packed[1:])
        seq_len = batch_sizes[0]
        if 0 <= self.total_length < seq_len:
            self.fail("total_length {} must be at least the longest length, {}", self.total_length,
                      seq_len)
        self.out_len = max(seq_len, self.total_length)
        batch = 0 if self.lengths is None else self.lengths.size
        return self._shapes(batch)

    def _shapes(self, batch):
        time_batch = (batch, self.out_len) if self.batch_first else (self.out_len, batch)
        return [time_batch + self.rest, (batch,)]

    def output_dtypes(self, compute_dtype, n_outputs):
        return [compute_dtype, np.int32]

    def output_specs(self, inputs):
        sizes = _values(self, inputs[1], "batch_sizes")
        n = None if inputs[0] is None else inputs[0].shape[0]
        if np.any(np.diff(sizes) > 0) or (sizes.size and sizes.min() < 0):
            self.fail("batch_sizes {} must be non-negative and non-increasing", sizes.tolist())
        if n is not None and sizes.sum() != n:
            self.fail("batch_sizes {} add up to {}, but packed_sequence has {} rows",
                      sizes.tolist(), int(sizes.sum()), n)
        self.batch_sizes = sizes
        batch = int(sizes[0]) if sizes.size else 0
        self.lengths = (sizes[None, :] > np.arange(batch)[:, None]).sum(axis=1)
        dtype = inputs[0].dtype if inputs[0] is not None else np.float32
        shapes = self._shapes(batch)
        return [(shapes[0], dtype), (shapes[1], np.int32)]

    def forward(self, inputs, outputs):
        padded = outputs[0]
        padded.fill(self.padding_value)
        pack_rows(time_major(padded, self.batch_first), as_rows(inputs[0]), self.batch_sizes,
                  False, False)
        outputs[1][...] = self.lengths

    backward = pad_packed_sequence_backward

    def grad_depends_input_data(self, i, j):
        return False   # the batch sizes are kept on the op
