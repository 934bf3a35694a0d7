"""``convert -S`` (and ``-c`` with functions the target lacks): an executor's network cut into
runs of functions, each written as its own file ``<name>_<first>_<last><ext>``, as nnabla_cli's
converter does.

``-S 1-9,12-`` names the runs (first-last function positions, either end open); otherwise the
runs are the longest stretches of functions in the target's set, those outside it left out.
A run's inputs are the Buffer inputs of its first function, its outputs the Buffer outputs of
its last one.
"""
import os
from collections import OrderedDict

from ...serialization.proto import nnabla_pb2
from ..converter.nnabla.importer import ImportedNnp
from ..converter.settings_file import quote_scalar
from . import CommandError

__all__ = ["needs_split", "split_ranges", "shrink", "split_output_name", "ranges_summary"]


def _network(imported):
    name = imported.protobuf.executor[0].network_name
    return next(n for n in imported.protobuf.network if n.name == name)


def needs_split(args, imported, supported):
    if args.split is not None:
        if args.nnp_import_executor_index is None:
            raise CommandError('-S/--split needs -E/--nnp-import-executor-index (which executor '
                               'to split)')
        return True
    if not args.config:
        return False
    return not {f.type for f in _network(imported).function} <= supported


def split_ranges(args, imported, supported):
    """[(first, last)] function positions of the runs."""
    functions = _network(imported).function
    last = len(functions) - 1
    if args.split:
        ranges = []
        for part in args.split.split(","):
            ends = part.split("-")
            if len(ends) != 2:
                raise CommandError('-S ranges are "x0-y0,x1-y1,...", got {!r}'.format(part))
            try:
                start = int(ends[0]) if ends[0] else 0
                end = int(ends[1]) if ends[1] else last
            except ValueError:
                raise CommandError('-S ranges are "x0-y0,x1-y1,...", got {!r}'.format(part)) from None
            if not 0 <= start <= end <= last:
                raise CommandError("-S range {!r} must lie in 0 to {}".format(part, last))
            ranges.append((start, end))
        return ranges
    ranges, start = [], 0
    for pos, f in enumerate(functions):
        if f.type not in supported:
            if pos > start:
                ranges.append((start, pos - 1))
            start = pos + 1
    if start <= last:
        ranges.append((start, last))
    return ranges


def shrink(imported, start, end):
    """The functions ``start``..``end`` of the executor's network as their own NNP."""
    if len(imported.protobuf.executor) != 1 or len(imported.protobuf.network) != 1:
        raise CommandError("splitting needs one executor and one network; choose it with -E")
    network, executor = imported.protobuf.network[0], imported.protobuf.executor[0]
    proto = nnabla_pb2.NNablaProtoBuf()
    proto.CopyFrom(imported.protobuf)
    for field in ("network", "executor", "parameter", "optimizer", "monitor"):
        proto.ClearField(field)
    net = proto.network.add()
    net.CopyFrom(network)
    net.ClearField("function")
    used = set()
    for f in network.function[start:end + 1]:
        net.function.add().CopyFrom(f)
        used.update(f.input)
        used.update(f.output)
    net.ClearField("variable")
    types = {}
    for v in network.variable:
        if v.name in used:
            net.variable.add().CopyFrom(v)
            types[v.name] = v.type
    proto.parameter.extend(p for p in imported.protobuf.parameter if p.variable_name in used)
    exe = proto.executor.add()
    exe.CopyFrom(executor)
    for field in ("data_variable", "generator_variable", "output_variable", "parameter_variable"):
        exe.ClearField(field)
    for name in network.function[start].input:
        if types.get(name) == "Buffer":
            exe.data_variable.add().variable_name = name
    exe.generator_variable.extend(g for g in executor.generator_variable if g.variable_name in used)
    for name in network.function[end].output:
        if types.get(name) == "Buffer":
            exe.output_variable.add().variable_name = name
    exe.parameter_variable.extend(p for p in executor.parameter_variable if p.variable_name in used)
    parameters = OrderedDict((k, v) for k, v in imported.parameters.items() if k in used)
    contents = imported.contents
    part = type(contents)()
    part.proto = proto
    part.parameters = [p for p in contents.parameters if p.name in used]
    return ImportedNnp(proto, parameters, imported.other_files, part)


def split_output_name(output, start, end):
    stem, ext = os.path.splitext(output)
    return "{}_{}_{}{}".format(stem, start, end, ext)


def ranges_summary(parts):
    """The inputs and outputs of each written part, in nnabla's YAML layout.
    ``parts``: [(file name, ImportedNnp)]."""
    lines = []
    for name, part in parts:
        name = quote_scalar(name)
        shapes = {v.name: v.shape.dim for v in part.protobuf.network[0].variable}
        exe = part.protobuf.executor[0]
        lines.append("{}:".format(name))
        for title, ports in (("input", exe.data_variable), ("output", exe.output_variable)):
            if not ports:
                lines.append("  {}: []".format(title))
                continue
            lines.append("  {}:".format(title))
            for port in ports:
                dims = ", ".join(str(d) for d in shapes[port.variable_name])
                lines.append("  - name: {}".format(quote_scalar(port.variable_name)))
                lines.append("    shape: {}".format(quote_scalar("({})".format(dims))))
    return "\n".join(lines)
