"""A GRU function rewritten into the basic functions nnabla-c-runtime has, as nnabla 1.39's NNB
exporter does it (so the NNB files match byte for byte).

Per layer and direction the gate weights become Affine parameters (``w0``/``w1``: reset and
update gates over ``[x, h]``; ``w2_0``/``w2_1``: the candidate's input and hidden parts;
biases ``b0``..``b3``), named ``@<model>/gru/<w>_nn`` with ``_<k>`` added on reuse, ``<model>``
being ``gru`` (``gru_1``, ... for later GRU functions). Each time step is::

    r = sigmoid(affine([x, h], w0, b0));  z = sigmoid(affine([x, h], w1, b1))
    h = (1 - z) * tanh(affine(x, w2_0, b2) + r * affine(h, w2_1, b3)) + z * h

The small graph built here is then walked depth first from the outputs (inputs in order, each
function once, after its inputs), which gives the functions' order; variables the graph makes
are named ``<model>_<Type>_out_<n>`` in that order, n counting per GRU function.
"""
from collections import OrderedDict

import numpy as np

from ....serialization.function_args import write_args
from ....serialization.proto import nnabla_pb2

__all__ = ["UniqueNames", "unroll_gru"]


class UniqueNames:
    """``name``, then ``name_1``, ``name_2``, ... for a name asked for again."""

    def __init__(self):
        self._count = {}

    def __call__(self, name):
        if name in self._count:
            self._count[name] += 1
            return "{}_{}".format(name, self._count[name])
        self._count[name] = 0
        return name


class _Value:
    def __init__(self, shape, producer=None, name=None):
        self.shape, self.producer, self.name = tuple(int(d) for d in shape), producer, name


class _Call:
    def __init__(self, type_name, inputs, output_shapes, args):
        self.type, self.inputs, self.args = type_name, list(inputs), args
        self.outputs = [_Value(shape, self) for shape in output_shapes]


def _call(type_name, inputs, output_shape, **args):
    return _Call(type_name, inputs, [output_shape], args).outputs[0]


def _take(x, index):
    """``x[index]`` for a tuple of integers: a Slice keeping the indexed axes, then a Reshape."""
    rest = list(x.shape[len(index):])
    sliced = _call("Slice", [x], [1] * len(index) + rest, start=list(index) + [0] * len(rest),
                   stop=[i + 1 for i in index] + rest, step=[1] * len(x.shape))
    return _call("Reshape", [sliced], rest, shape=rest, inplace=True)


def _affine(x, w, b):
    return _call("Affine", [x, w] + ([b] if b is not None else []), (x.shape[0], w.shape[1]),
                 base_axis=1)


def _concatenate(a, b):
    return _call("Concatenate", [a, b], (a.shape[0], a.shape[1] + b.shape[1]), axis=1)


def _unary(type_name, x, **args):
    return _call(type_name, [x], x.shape, **args)


def _binary(type_name, a, b):
    return _call(type_name, [a, b], a.shape, inplace=False)


def _stack(values):
    return _call("Stack", values, (len(values),) + values[0].shape, axis=0)


def _step(x, h, p):
    xh = _concatenate(x, h)
    r = _unary("Sigmoid", _affine(xh, p["w0_nn"], p["b0"]))
    z = _unary("Sigmoid", _affine(xh, p["w1_nn"], p["b1"]))
    n = _unary("Tanh", _binary("Add2", _affine(x, p["w2_0_nn"], p["b2"]),
                               _binary("Mul2", r, _affine(h, p["w2_1_nn"], p["b3"]))))
    return _binary("Add2", _binary("Mul2", _unary("RSubScalar", z, val=1.0), n),
                   _binary("Mul2", z, h))


class _Unroller:
    def __init__(self, unique, model):
        self.unique, self.model = unique, model
        self.parameters = OrderedDict()     # name -> (value node, float32 array)

    def _parameter(self, key, array):
        name = self.unique("@{}/gru/{}".format(self.model, key))
        node = _Value(array.shape, name=name)
        self.parameters[name] = (node, np.ascontiguousarray(array, dtype=np.float32))
        return node

    def layer_parameters(self, w, b, hidden):
        """Affine weights and biases of one layer and direction; ``w``: [3, H, in + H]."""
        inputs = w.shape[2] - hidden
        p = {"w0_nn": self._parameter("w0_nn", w[0].T), "w1_nn": self._parameter("w1_nn", w[1].T),
             "w2_0_nn": self._parameter("w2_0_nn", w[2][:, :inputs].T),
             "w2_1_nn": self._parameter("w2_1_nn", w[2][:, inputs:].T)}
        for k in range(4):
            p["b{}".format(k)] = None if b is None else self._parameter("b{}_nn".format(k), b[k])
        return p

    def build(self, x, h0, w0, w, b, layers, directions):
        """(ys, hn) value nodes of the unrolled network."""
        hidden = h0.shape[3]
        xs = [_take(x, (0,))] if x.shape[0] == 1 else \
            _Call("Split", [x], [x.shape[1:]] * x.shape[0], {"axis": 0}).outputs
        last = []
        for layer in range(layers):
            weights = w0 if layer == 0 else w[layer - 1]
            hs = []
            for direction in range(directions):
                p = self.layer_parameters(weights[direction],
                                          None if b is None else b[layer, direction], hidden)
                h = _take(h0, (layer, direction))
                steps = range(len(xs)) if direction == 0 else reversed(range(len(xs)))
                for t in steps:
                    h = _step(xs[t], h, p)
                    if direction == 0:
                        hs.append(h)
                    else:
                        hs[t] = _concatenate(hs[t], h)
                last.append(h)
            xs = hs
        hn = _stack(last)
        hn = _call("Reshape", [hn], (layers, directions) + hn.shape[1:],
                   shape=[layers, directions] + list(hn.shape[1:]), inplace=True)
        return _stack(xs), hn


def _post_order(outputs):
    calls, seen = [], set()

    def visit(call):
        seen.add(id(call))
        for value in call.inputs:
            if value.producer is not None and id(value.producer) not in seen:
                visit(value.producer)
        calls.append(call)

    for value in outputs:
        if value.producer is not None and id(value.producer) not in seen:
            visit(value.producer)
    return calls


def unroll_gru(func, variables, parameters, unique):
    """The unrolling of proto Function ``func`` (type GRU): (variables, functions, parameters),
    variables being proto Variables in naming order, parameters {name: float32 array}.
    ``variables``: the network's {name: proto Variable}; ``parameters``: {name: values}."""
    args = func.gru_param
    layers, directions = args.num_layers, 2 if args.bidirectional else 1

    def parameter(name):
        if name not in parameters:
            raise ValueError("GRU '{}': parameter '{}' has no value in the input files".format(
                func.name, name))
        return np.asarray(parameters[name], dtype=np.float32).reshape(
            [int(d) for d in variables[name].shape.dim])

    x, h0 = (_Value(variables[name].shape.dim, name=name) for name in func.input[:2])
    for value in (x, h0):
        if any(d < 0 for d in value.shape):
            raise ValueError("GRU '{}': input '{}' has shape {}; unrolling needs every dimension "
                             "fixed".format(func.name, value.name, value.shape))
    w = parameter(func.input[3]) if layers > 1 else None
    bias_at = 4 if layers > 1 else 3
    b = parameter(func.input[bias_at]) if len(func.input) > bias_at else None
    model = unique("gru")
    unroller = _Unroller(unique, model)
    ys, hn = unroller.build(x, h0, parameter(func.input[2]), w, b, layers, directions)
    ys.name, hn.name = func.output[0], func.output[1]

    made, functions, counter = OrderedDict(), [], [0]

    def name_of(value):
        if value.name is None:
            value.name = "{}_{}_out_{}".format(model, value.producer.type, counter[0])
            counter[0] += 1
        if value.name not in made:
            v = nnabla_pb2.Variable()
            v.name = value.name
            v.type = "Parameter" if value.name in unroller.parameters else "Buffer"
            v.shape.dim.extend(value.shape)
            made[value.name] = v
        return value.name

    for call in _post_order([ys, hn]):
        f = nnabla_pb2.Function()
        f.name, f.type = call.type, call.type
        f.input.extend(name_of(v) for v in call.inputs)
        f.output.extend(name_of(v) for v in call.outputs)
        write_args(f, call.type, call.args)
        functions.append(f)
    new_parameters = OrderedDict((name, array) for name, (_, array) in unroller.parameters.items())
    return list(made.values()), functions, new_parameters
