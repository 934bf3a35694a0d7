"""The grad rules' one adjoint mechanism: :func:`linear_adjoint` builds ``dx = A^T dy`` of a
linear op as a LinearAdjoint node (``ops/adjoint.py``), whose own rule builds the op again."""
from ..function import build
from ..ops.adjoint import LinearAdjoint
from ..ops.registry import REGISTRY, grad_rule


def _as_list(outputs):
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def linear_adjoint(source, source_args, x_shape, dys, held=(), source_inputs=("x",)):
    """The gradient of input 0 of the linear op ``source`` (type name, arguments) on an input
    of shape ``x_shape``, from the gradients ``dys`` of its first outputs; ``held`` are the
    op's other inputs (fixed, no gradient), named by ``source_inputs[1:]``."""
    dys = list(dys)
    names = tuple("dy{}".format(k) for k in range(len(dys))) + tuple(source_inputs[1:])
    op = LinearAdjoint(input_names=names, source=source, source_args=source_args,
                       source_inputs=source_inputs, x_shape=tuple(x_shape), n_dy=len(dys))
    return build(op, dys + list(held))


def source_node(source, source_args, x, held=(), source_inputs=("x",)):
    """The outputs (a list) of the op ``source`` applied to ``x`` and the held inputs."""
    op = REGISTRY[source](input_names=tuple(source_inputs), **source_args)
    return _as_list(build(op, [x] + list(held)))


@grad_rule("LinearAdjoint")
def linear_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, source="",
                        source_args=None, source_inputs=("x",), x_shape=(), n_dy=1):
    """The transpose of A^T is A: the source op again, on the incoming gradient."""
    ys = source_node(source, source_args or {}, grad_inputs[0], inputs[n_dy:], source_inputs)
    return ys[:n_dy] + [None] * (len(inputs) - n_dy)
