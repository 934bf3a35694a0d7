"""The grad rules' adjoint mechanisms (``ops/adjoint.py``): :func:`linear_adjoint` builds
``dx = A^T dy`` of a linear op as a LinearAdjoint node, whose own rule builds the op again;
:func:`bilinear_adjoint` builds nnabla's ``<Op>DataGrad`` / ``<Op>FilterGrad`` of a bilinear op,
whose rules build the op and the partner adjoint."""
from ..function import build
from ..ops.adjoint import BILINEAR_SOURCES, LinearAdjoint
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


def bilinear_adjoint(type_name, source_args, out_shape, dy, other):
    """nnabla's ``<Op>DataGrad(dy, w)`` (dx, ``out_shape`` the shape of x) or
    ``<Op>FilterGrad(dy, x)`` (dw, ``out_shape`` the shape of w) of the bilinear op ``<Op>``
    with arguments ``source_args``."""
    cls = REGISTRY[type_name]
    op = cls(input_names=("dy", "xw"[1 - cls.wrt]), out_shape=tuple(out_shape), **source_args)
    return build(op, [dy, other])


def _bilinear_adjoint_rule(type_name):
    cls = REGISTRY[type_name]
    partner = cls.source + ("FilterGrad" if cls.wrt == 0 else "DataGrad")

    def rule(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
        """d dy = the source op with the incoming gradient in place of the input this node is
        the gradient of; d other = the partner adjoint of dy and the incoming gradient."""
        g, (dy, other) = grad_inputs[0], inputs
        slots = [None, None]
        slots[cls.wrt], slots[1 - cls.wrt] = g, other
        d_dy = source_node(cls.source, args, slots[0], [slots[1]], ("x", "w"))[0]
        return [d_dy, bilinear_adjoint(partner, args, input_shapes[1], dy, g)]
    rule.__name__ = rule.__qualname__ = "{}_grad".format(type_name)
    return rule


for _source in BILINEAR_SOURCES:
    for _name in (_source + "DataGrad", _source + "FilterGrad"):
        grad_rule(_name)(_bilinear_adjoint_rule(_name))
