"""Grad rules of the sequence ops (``ops/sequence.py``): graphs of F ops, differentiable again.

PackPaddedSequence and PadPackedSequence are each the other's adjoint.
"""
import numpy as np

from .. import functions as F
from ..ops.registry import grad_rule
from ..ops.sequence import node_op
from ..variable import Variable


@grad_rule('PackPaddedSequence')
def pack_padded_sequence_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              batch_first=False):
    """d padded = pad_packed_sequence(d packed) to the padded length, with zeros for the
    sequences of length 0 (unpacking only sees the batch sizes, so it ends before them)."""
    op = node_op(outputs)
    batch_sizes = Variable.from_numpy_array(op.batch_sizes.astype(np.int32))
    padded, _ = F.pad_packed_sequence(grad_inputs[0], batch_sizes, batch_first, 0.0, op.seq_len)
    batch_axis = 0 if batch_first else 1
    missing = input_shapes[0][batch_axis] - padded.shape[batch_axis]
    if missing:
        padded = F.pad(padded, (0, missing) + (0, 0) * (len(input_shapes[0]) - batch_axis - 1))
    return [padded, None]


@grad_rule('PadPackedSequence')
def pad_packed_sequence_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                             batch_first=False, padding_value=0.0, total_length=-1):
    """d packed = pack_padded_sequence(d padded) (padding positions get no gradient)."""
    op = node_op(outputs)
    packed, _ = F.pack_padded_sequence(grad_inputs[0], Variable.from_numpy_array(op.lengths),
                                       batch_first)
    return [packed, None]
