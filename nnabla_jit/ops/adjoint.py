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


class BilinearAdjoint(Op):
    """The two transposes of a bilinear op ``y = B(x, w)`` (Affine, Convolution, Deconvolution):
    nnabla's ``<Op>DataGrad(dy, w) = dx`` and ``<Op>FilterGrad(dy, x) = dw``, nodes of their own
    so that ``nn.grad`` goes to any order. ``wrt`` is the source input the output is the
    gradient of (0: x, 1: w); input 1 holds the other source input. Everything runs on the
    source op's own kernels: the forward is its backward for slot ``wrt``; the backward is its
    forward (d dy = B with ``wrt`` = the incoming gradient) and its backward for the other slot
    (the partner adjoint). ``args`` are the source's arguments, as in nnabla; the output shape
    (the shape of ``x`` or ``w``, not derivable from the inputs) is ``out_shape``.
    """
    source = ""   # the bilinear op's type name; set with wrt by each registered subclass
    wrt = 0

    def __init__(self, input_names=(), out_shape=(), **source_args):
        super().__init__(input_names, **source_args)
        self.out_shape = tuple(out_shape)

    def setup(self, dy, other):
        self.op = REGISTRY[self.source](input_names=("x", "w"), **self.args)
        slots = [None, None]
        slots[self.wrt], slots[1 - self.wrt] = self.out_shape, tuple(other)
        self.y_shape = tuple(self.op.setup(*slots)[0])
        if tuple(dy) != self.y_shape:
            self.fail("dy of shape {} is not the shape {} of {}'s output for x of shape {} and w of "
                      "shape {}", tuple(dy), self.y_shape, self.source, slots[0], slots[1])
        return [self.out_shape]

    def _slot_grad(self, slot, filled, other, dy, out, accum):
        """out (+)= the source's gradient wrt input ``slot`` for output gradient dy, the other
        input holding ``other``; the slot itself is not read (bilinear), ``filled`` stands in."""
        slots = [None, None]
        slots[slot], slots[1 - slot] = filled, other
        grads, pd, acc = [None, None], [False, False], [False, False]
        grads[slot], pd[slot], acc[slot] = out, True, accum
        self.op.forget_forward()   # no forward of the source came before: keep nothing from one
        self.op.backward(slots, [dy], [dy], grads, pd, acc)

    def forward(self, inputs, outputs):
        dy, other = inputs
        self._slot_grad(self.wrt, outputs[0], other, dy, outputs[0], False)

    def backward(self, inputs, outputs, output_grads, input_grads, propagate_down, accum):
        dy, other = inputs
        g = output_grads[0]
        if propagate_down[1]:   # the partner adjoint: the source's backward for the other slot
            self._slot_grad(1 - self.wrt, input_grads[1], g, dy, input_grads[1], accum[1])
        if propagate_down[0]:   # d dy = B(g in slot wrt, other)
            slots = [None, None]
            slots[self.wrt], slots[1 - self.wrt] = g, other
            y = np.empty(self.y_shape, g.dtype) if accum[0] else input_grads[0]
            self.op.forward(slots, [y])
            if accum[0]:
                input_grads[0] += y

    def grad_depends_input_data(self, i, j):
        return i != j   # d dy reads the other input, d other reads dy

    def grad_depends_output_data(self, i, o):
        return False


BILINEAR_SOURCES = ("Affine", "Convolution", "Deconvolution")
for _source in BILINEAR_SOURCES:
    for _wrt, _suffix, _other in ((0, "DataGrad", "w"), (1, "FilterGrad", "x")):
        register(name=_source + _suffix)(type(_source + _suffix, (BilinearAdjoint,), {
            "source": _source, "wrt": _wrt, "__module__": __name__,
            "__doc__": "nnabla's {}{}(dy, {}): d{} of {}.".format(_source, _suffix, _other,
                                                                  "xw"[_wrt], _source)}))
