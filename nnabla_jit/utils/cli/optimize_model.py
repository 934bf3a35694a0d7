"""``nnabla_jit optimize in.nnp out.nnp`` (nnabla's ``nnabla.utils.cli.optimize_model``):
rewrite the matrix products that ONNX/TensorFlow converters leave in a network back into
``Affine`` functions.

The pattern replaced is what tf2onnx-converted dense layers become in nnabla::

    Reshape(x (B, K) -> (1, B, K)) ; Reshape(W (K, N) -> (1, K, N)) ; BatchMatmul ;
    Reshape(-> (B, N)) [; Add2 with a bias (N,) or its Reshape (1, N)]

which is ``Affine(x, W[, b])``. Everything else is kept as it is. (nnabla's ``.pb``
TensorFlow optimisation needs TensorFlow and is not provided.)
"""
import os
from collections import OrderedDict

from ...core import graph_def
from ...serialization.proto import nnabla_pb2
from . import CommandError

__all__ = ["optimization_command", "optimize_nnp_model_command", "optimize_pb_model_command", "optimize_nnp",
           "add_optimize_command"]


def _single_reader(network, name):
    readers = network.variables[name].required if name in network.variables else []
    return network.functions[readers[0]] if len(readers) == 1 else None


def _producer(network, name):
    pv = network.variables.get(name)
    return network.functions.get(pv.parent) if pv is not None and pv.parent else None


def _dense_layers(network):
    """Each matched pattern: (functions to remove, x, W, b or None, output name, name)."""
    found = []
    for bm in network.functions.values():
        if bm.type != "BatchMatmul" or bm.args.get("transpose_a") or bm.args.get("transpose_b"):
            continue
        rx, rw = (_producer(network, n) for n in bm.inputs)
        out = _single_reader(network, bm.outputs[0])
        if not (rx and rw and out) or {rx.type, rw.type, out.type} != {"Reshape"}:
            continue
        x, w = rx.inputs[0], rw.inputs[0]
        if w not in network.parameters or len(network.parameters[w].shape) != 2:
            continue
        n_out = network.parameters[w].shape[1]
        removed, bias, result = [rx, rw, bm, out], None, out.outputs[0]
        add = _single_reader(network, result)
        if add is not None and add.type == "Add2" and result not in network.outputs:
            other = [n for n in add.inputs if n != result]
            rb = _producer(network, other[0]) if other else None
            source = rb.inputs[0] if rb is not None and rb.type == "Reshape" else (other[0] if other else None)
            if source in network.parameters and int(_size(network.parameters[source].shape)) == n_out:
                bias = source
                removed += [add] + ([rb] if rb is not None and rb.type == "Reshape" else [])
                result = add.outputs[0]
        found.append((removed, x, w, bias, result, bm.name))
    return found


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def optimize_nnp(graph):
    """The default network of ``graph`` (a ProtoGraph) with its dense-layer patterns turned
    into Affine functions, as a new ProtoNetwork of the same graph."""
    network = graph.default_graph()
    layers = _dense_layers(network)
    removed = {f.name for removed_fs, *_ in layers for f in removed_fs}
    affine_at = {layer[0][2].name: layer for layer in layers}     # placed where the matmul was
    proto = nnabla_pb2.Network(name=network.name, batch_size=int(network.batch_size or 1))
    used = set()
    functions = []
    for pf in network.functions.values():
        if pf.name in affine_at:
            _, x, w, b, result, name = affine_at[pf.name]
            f = nnabla_pb2.Function(name=name.replace("BatchMatmul", "Affine"), type="Affine")
            f.input.extend([x, w] + ([b] if b else []))
            f.output.append(result)
            f.affine_param.base_axis = 1
            functions.append(f)
        elif pf.name not in removed:
            functions.append(pf.proto)
    for f in functions:
        used.update(f.input)
        used.update(f.output)
    for pv in list(network.variables.values()) + list(network.parameters.values()):
        if pv.name in used:
            v = proto.variable.add()
            v.CopyFrom(pv.proto)
    for f in functions:
        proto.function.add().CopyFrom(f)
    return graph_def.ProtoNetwork(graph, proto, network.batch_size)


def optimize_nnp_model_command(input_file, output_file):
    g = graph_def.load(input_file)
    network = optimize_nnp(g)
    g.networks = OrderedDict([(network.name, network)] + [
        (k, v) for k, v in g.networks.items() if k != network.name])
    g.save(output_file)


def optimize_pb_model_command(input_pb_file, output_pb_file):
    """nnabla optimises TensorFlow ``.pb`` graphs with its TensorFlow converter package."""
    raise NotImplementedError("optimize: TensorFlow .pb models need nnabla's TensorFlow converter "
                              "(nnabla_converter), which nnabla_jit does not provide")


def optimization_command(args):
    input_file, output_file = args.input_file[0], args.output_file[0]
    ext = os.path.splitext(input_file)[1]
    if os.path.isdir(input_file):
        raise CommandError("'{}' is a directory, not a model file".format(input_file))
    if ext == ".nnp":
        if os.path.splitext(output_file)[1] != ".nnp":
            raise CommandError("output file '{}': optimize writes an .nnp file".format(output_file))
        optimize_nnp_model_command(input_file, output_file)
    elif ext == ".pb":
        optimize_pb_model_command(input_file, output_file)
    else:
        raise CommandError("input file '{}': optimize reads an .nnp file (or a TensorFlow .pb), "
                           "not {}".format(input_file, "'{}'".format(ext) if ext else "a file with no "
                                                                                   "extension"))
    return True


def add_optimize_command(subparsers):
    sub = subparsers.add_parser("optimize", help="Optimize an nnp model (matrix products into Affine).")
    sub.add_argument("input_file", nargs=1, help="Input .nnp model.")
    sub.add_argument("output_file", nargs=1, help="Output optimized .nnp model.")
    sub.set_defaults(func=optimization_command)
