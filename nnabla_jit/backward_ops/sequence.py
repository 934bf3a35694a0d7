"""Backward of PackPaddedSequence and PadPackedSequence (each is the other's adjoint)."""
import numpy as np


def _node_op(outputs):
    """The forward op (it knows the lengths and batch sizes its shapes were computed from)."""
    return next(o for o in outputs if o is not None).parent.op


def pack_padded_sequence_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                  accum):
    from ..ops.sequence import as_rows, pack_rows, time_major
    if not propagate_down[0]:
        return
    dx = grad_inputs[0]
    if not accum[0]:
        dx.fill(0)
    pack_rows(time_major(dx, op.batch_first), as_rows(grad_outputs[0]), op.batch_sizes, False, True)


def pad_packed_sequence_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down,
                                 accum):
    from ..ops.sequence import as_rows, pack_rows, time_major
    if not propagate_down[0]:
        return
    pack_rows(time_major(grad_outputs[0], op.batch_first), as_rows(grad_inputs[0]), op.batch_sizes,
              True, accum[0])


def pack_padded_sequence_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                              batch_first=False):
    """d padded = pad_packed_sequence(d packed) to the padded length, with zeros for the
    sequences of length 0 (unpacking only sees the batch sizes, so it ends before them)."""
    from .. import functions as F
    from ..variable import Variable
    op = _node_op(outputs)
    batch_sizes = Variable.from_numpy_array(op.batch_sizes.astype(np.int32))
    padded, _ = F.pad_packed_sequence(grad_inputs[0], batch_sizes, batch_first, 0.0, op.seq_len)
    batch_axis = 0 if batch_first else 1
    missing = input_shapes[0][batch_axis] - padded.shape[batch_axis]
    if missing:
        padded = F.pad(padded, (0, missing) + (0, 0) * (len(input_shapes[0]) - batch_axis - 1))
    return [padded, None]


def pad_packed_sequence_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                             batch_first=False, padding_value=0.0, total_length=-1):
    """d packed = pack_padded_sequence(d padded) (padding positions get no gradient)."""
    from .. import functions as F
    from ..variable import Variable
    op = _node_op(outputs)
    packed, _ = F.pack_padded_sequence(grad_inputs[0], Variable.from_numpy_array(op.lengths),
                                       batch_first)
    return [packed, None]
