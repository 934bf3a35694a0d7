"""The transpose of a linear op, from the op itself (nnabla's ``UnaryDataGrad`` idea).

For an op linear in its input 0, ``y = A x`` (Pad, Slice, Shift, sum and average pooling,
Interpolate, STFT, the corner gather of the warps...), the gradient ``dx = A^T dy`` is what its
first-order backward kernel computes. :class:`LinearAdjoint` makes that a node of its own: its
forward runs the source op's backward kernel, its backward runs the source op's forward (the
transpose of ``A^T`` is ``A``), and its grad rule (``backward_function/adjoint.py``) builds the
source op again. So the grad rule of every such op is one line, and ``nn.grad`` goes to any order.

The source op is given by type name and arguments; its backward must not read the values of
input 0 or of the outputs (true of a linear map). Inputs after the output gradients are held
fixed (GridCorners' coordinates): they are passed to the source op and get no gradient. An
affine op (Pad with a constant, ONNXResize's extrapolation) is given with its constant zero,
which is its linear part.
"""
import numpy as np

from .registry import REGISTRY, Op, register


@register(name="LinearAdjoint")
class LinearAdjoint(Op):
    """Internal: ``dx = A^T (dy_0, ...)`` of the linear op ``source`` (arguments
    ``source_args``, input names ``source_inputs``) applied to an input of shape ``x_shape``.
    Inputs: the gradients of the source's first ``n_dy`` outputs, then the source's inputs
    after the first (held fixed). Output: the gradient of the source's input 0."""

    def __init__(self, input_names=(), source="", source_args=None, source_inputs=("x",), x_shape=(),
                 n_dy=1):
        super().__init__(input_names, source=source, source_args=dict(source_args or {}),
                         source_inputs=tuple(source_inputs), x_shape=tuple(x_shape), n_dy=int(n_dy))
        if source not in REGISTRY:
            self.fail("unknown source op {!r}", source)
        self.held = tuple(range(self.n_dy, self.n_dy + len(self.source_inputs) - 1))
        self.no_grad_inputs = self.held

    def setup(self, *shapes):
        dys, held = shapes[:self.n_dy], shapes[self.n_dy:]
        if len(held) != len(self.source_inputs) - 1:
            self.fail("{} takes {} inputs after the {} output gradient(s), got {}", self.source,
                      len(self.source_inputs) - 1, self.n_dy, len(held))
        self.op = REGISTRY[self.source](input_names=self.source_inputs, **self.source_args)
        self.y_shapes = [tuple(s) for s in self.op.setup(self.x_shape, *held)]
        if [tuple(s) for s in dys] != self.y_shapes[:self.n_dy]:
            self.fail("gradient shapes {} do not match the outputs {} of {} on an input of shape {}",
                      [tuple(s) for s in dys], self.y_shapes[:self.n_dy], self.source, self.x_shape)
        return [self.x_shape]

    def _output_grads(self, dys, dtype):
        """The source's output gradients: the given ones, zeros for outputs not differentiated."""
        return list(dys) + [np.zeros(s, dtype) for s in self.y_shapes[self.n_dy:]]

    def forward(self, inputs, outputs):
        dys, held = inputs[:self.n_dy], list(inputs[self.n_dy:])
        dx = outputs[0]
        grads = self._output_grads(dys, dx.dtype)
        # input 0 and the outputs are never read by a linear op's backward: the arrays of the
        # right shapes stand in for them
        self.op.backward([dx] + held, grads, grads, [dx] + held, [True] + [False] * len(held),
                         [False] * (1 + len(held)))

    def backward(self, inputs, outputs, output_grads, input_grads, propagate_down, accum):
        if not any(propagate_down[:self.n_dy]):
            return
        held = list(inputs[self.n_dy:])
        ys = []   # the source's outputs: written straight into the gradients they overwrite
        for k, shape in enumerate(self.y_shapes):
            if k < self.n_dy and propagate_down[k] and not accum[k]:
                ys.append(input_grads[k])
            else:
                ys.append(np.empty(shape, output_grads[0].dtype))
        self.op.forward([output_grads[0]] + held, ys)
        for k in range(self.n_dy):
            if propagate_down[k] and accum[k]:
                input_grads[k] += ys[k]

    def grad_depends_input_data(self, i, j):
        return j >= self.n_dy

    def grad_depends_output_data(self, i, o):
        return False
