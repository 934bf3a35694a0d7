"""``convert`` and ``dump``: model files between formats, and what they contain.

NNP means any of ``.nnp``, ``.nntxt``/``.prototxt``, ``.protobuf`` and ``.h5`` (parameters).
ONNX goes through ``nnabla_jit.serialization.onnx``: ``nnp_from_onnx(path) -> NnpContents`` and
``export_nnp(contents, path, opset=None)``, both showing tqdm progress (functions converted,
external data written: parameters beyond protobuf's 2 GB go to ``<output>.data``).
"""
import os

from ...serialization import nnp
from . import CommandError, batch_size_argument

__all__ = ["add_convert_command", "add_dump_command", "read_model"]

_NNP_EXTENSIONS = (".nnp", ".nntxt", ".prototxt", ".protobuf", ".h5")


def _format_of(path, given, what):
    if given:
        fmt = given.upper()
        if fmt not in ("NNP", "ONNX"):
            raise CommandError("{} format must be NNP or ONNX, got '{}'".format(what, given))
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext in _NNP_EXTENSIONS:
        return "NNP"
    if ext == ".onnx":
        return "ONNX"
    raise CommandError("cannot tell the {} format of '{}' (use .nnp, .nntxt, .prototxt, .protobuf, "
                       ".h5 or .onnx, or give -{})".format(what, path, "I" if what == "import" else "O"))


def _onnx(what):
    """The ONNX module, or a clear error if it is not there (yet)."""
    try:
        from ...serialization import onnx as onnx_io
        onnx_io.require_onnx()
    except ImportError as e:
        raise CommandError("{}: ONNX support (nnabla_jit.serialization.onnx) is not available: {}"
                           .format(what, e)) from None
    return onnx_io


def read_model(files, import_format=None, progress=False):
    """NnpContents of the input files (NNP files merged; or one ONNX file, with a tqdm bar over
    its nodes when ``progress``)."""
    formats = {_format_of(f, import_format, "import") for f in files}
    if formats == {"NNP"}:
        return nnp.read(files)
    if len(files) != 1:
        raise CommandError("ONNX input must be a single file, got {}".format(len(files)))
    onnx_io = _onnx("import")
    if not hasattr(onnx_io, "nnp_from_onnx"):
        raise CommandError("import: nnabla_jit.serialization.onnx has no nnp_from_onnx()")
    return onnx_io.nnp_from_onnx(files[0], progress=progress)


def convert_command(args):
    if len(args.files) < 2:
        raise CommandError("give the input file(s) and then the output file")
    inputs, output = args.files[:-1], args.files[-1]
    if os.path.exists(output) and not args.force:
        raise CommandError("'{}' exists; use -f/--force to overwrite it".format(output))
    contents = read_model(inputs, args.import_format, progress=True)
    if args.batch_size > 0:
        for net in contents.proto.network:
            net.batch_size = args.batch_size
    export_format = _format_of(output, args.export_format, "export")
    if export_format == "ONNX":
        _onnx("export").export_nnp(contents, output, opset=args.define_version, progress=True)
        print("Converted {} -> {}".format(", ".join(inputs), output))
        return True
    parameters = [] if args.nnp_exclude_parameter else contents.parameters
    if args.nnp_parameter_nntxt:
        parameter_format = ".nntxt"
    elif args.nnp_exclude_parameter:
        parameter_format = None
    else:
        parameter_format = ".h5" if args.nnp_parameter_h5 else ".protobuf"
    nnp.write(output, contents.proto, parameters, parameter_format=parameter_format)
    print("Converted {} -> {}".format(", ".join(inputs), output))
    return True


def add_convert_command(subparsers):
    sub = subparsers.add_parser(
        "convert", help="File format converter.",
        description="Convert model files. The last FILE is the output; its extension chooses the "
                    "format: .nnp (zip of network.nntxt and parameters), .nntxt/.prototxt "
                    "(text, parameters included), .protobuf (binary, parameters included), .h5 "
                    "(parameters only), .onnx. Several NNP inputs (e.g. a .nntxt and an .h5) "
                    "are merged.")
    sub.add_argument("files", metavar="FILE", nargs="+", help="input file(s), then the output file")
    sub.add_argument("-I", "--import-format", default=None,
                     help="[import] NNP or ONNX (default: from the extension)")
    sub.add_argument("-O", "--export-format", default=None,
                     help="[export] NNP or ONNX (default: from the extension)")
    sub.add_argument("-f", "--force", action="store_true", help="[export] overwrite the output file")
    sub.add_argument("-b", "--batch-size", type=batch_size_argument, default=-1,
                     help="[export] batch size written into the networks (default: keep)")
    sub.add_argument("--nnp-parameter-h5", action="store_true",
                     help="[export][NNP] store parameters as parameter.h5 (default: parameter.protobuf)")
    sub.add_argument("--nnp-parameter-nntxt", action="store_true",
                     help="[export][NNP] store parameters inside network.nntxt")
    sub.add_argument("--nnp-exclude-parameter", action="store_true",
                     help="[export][NNP] write no parameters")
    sub.add_argument("-d", "--define_version", "--opset", default=None,
                     help="[export][ONNX] opset version, 7 to the installed onnx's newest, "
                          "e.g. opset_11 or 11 (default 17)")
    sub.set_defaults(func=convert_command)
    return sub


# ------------------------------------------------------------------------------------ dump
def _dump_verbose(msg, prefix, limit):
    for field, value in msg.ListFields():
        if field.message_type is None and not _repeated(field):
            print("{}:{}: {}".format(":".join(prefix), field.name, value))
        elif _repeated(field):
            items = list(value.items()) if hasattr(value, "items") else list(value)
            print("{} has {} {}(s).".format(":".join(prefix), len(items), field.name))
            for n, item in enumerate(items[:limit] if limit >= 0 else items):
                if hasattr(value, "items"):
                    key, item = item
                    print("{}:{}[{}]: key {}".format(":".join(prefix), field.name, n, key))
                if hasattr(item, "ListFields"):
                    _dump_verbose(item, prefix + ["{}[{}]".format(field.name, n)], limit)
                else:
                    print("{}:{}[{}]: {}".format(":".join(prefix), field.name, n, item))
        else:
            _dump_verbose(value, prefix + [field.name], limit)


def _repeated(field):
    return field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED


def _dump_summary(args, proto, parameter_names):
    nets = {}
    for net in proto.network:
        for var in net.variable:
            if var.type == "Parameter" and parameter_names is not None and var.name not in parameter_names:
                print("[WARNING] parameter '{}' of network '{}' has no value in the file(s)".format(
                    var.name, net.name))
        nets[net.name] = net

    def shape_of(net, name):
        for v in net.variable:
            if v.name == name:
                return list(v.shape.dim)
        return " - "

    def ports(prefix, label, net, entries):
        for i, v in enumerate(entries):
            print("{}{} variable[{}]: Name:{:30} Shape:{}".format(
                prefix, label, i, v.variable_name, shape_of(net, v.variable_name) if net else " - "))

    def functions(prefix, net):
        if net is None:
            return
        if args.dump_variable_name:
            name = args.dump_variable_name
            if any(v.name == name for v in net.variable):
                print("Variable Name: {:20} Shape: {}".format(name, shape_of(net, name)))
            else:
                print("DUMP ERROR: variable {} not found.".format(name))
            return
        if args.dump_functions:
            for i, f in enumerate(net.function):
                fp = "{}  Function[{:^5}]: ".format(prefix, i)
                print("{}Type: {:20} Name: {}".format(fp, f.type, f.name))
                if args.dump_variables:
                    for j, v in enumerate(f.input):
                        print("{}  Input{}: Name: {:20} Shape: {}".format(fp, j, v, shape_of(net, v)))
                    for j, v in enumerate(f.output):
                        print("{} Output{}: Name: {:20} Shape: {}".format(fp, j, v, shape_of(net, v)))

    for i, o in enumerate(proto.optimizer):
        prefix, net = "  Optimizer[{}]: ".format(i), nets.get(o.network_name)
        print("{}{}".format(prefix, o.name))
        ports(prefix, " (In) Data     ", net, o.data_variable)
        ports(prefix, " (In) Generator", net, o.generator_variable)
        ports(prefix, " (Out)Loss     ", net, o.loss_variable)
        functions(prefix, net)
    for i, m in enumerate(proto.monitor):
        prefix, net = "  Monitor  [{}]: ".format(i), nets.get(m.network_name)
        print("{}{}".format(prefix, m.name))
        ports(prefix, " (In) Data     ", net, m.data_variable)
        ports(prefix, " (In) Generator", net, m.generator_variable)
        ports(prefix, " (Out)Monitor  ", net, m.monitor_variable)
        functions(prefix, net)
    for i, e in enumerate(proto.executor):
        prefix, net = "  Executor [{}]: ".format(i), nets.get(e.network_name)
        print("{}{}".format(prefix, e.name))
        ports(prefix, " (In) Data     ", net, e.data_variable)
        ports(prefix, " (In) Generator", net, e.generator_variable)
        ports(prefix, " (Out)Loss     ", net, e.loss_variable)
        ports(prefix, " (Out)Output   ", net, e.output_variable)
        functions(prefix, net)
    if not (proto.optimizer or proto.monitor or proto.executor):
        for name, net in nets.items():
            print("  Network: {} (batch size {}, {} functions, {} variables)".format(
                name, net.batch_size, len(net.function), len(net.variable)))
            functions("  Network: ", net)


def dump_command(args):
    contents = read_model(args.files, args.import_format)
    if args.dump_verbose:
        _dump_verbose(contents.proto, [args.import_format or "NNP"], args.dump_limit)
    else:
        names = {p.name for p in contents.parameters} if contents.parameters else None
        _dump_summary(args, contents.proto, names)
    return True


def add_dump_command(subparsers):
    sub = subparsers.add_parser(
        "dump", help="Dump network with supported format.",
        description="Print the executors, optimizers and monitors of model files, with their "
                    "input/output variables; -F adds the functions, -V their variables, -v every "
                    "field of the file.")
    sub.add_argument("files", metavar="FILE", nargs="+", help="model file(s) (NNP files are merged)")
    sub.add_argument("-v", "--dump-verbose", action="store_true", help="[dump] every field")
    sub.add_argument("-F", "--dump-functions", action="store_true", help="[dump] function list")
    sub.add_argument("-V", "--dump-variables", action="store_true", help="[dump] variable list")
    sub.add_argument("--dump-limit", type=int, default=-1, help="[dump] limit num of items")
    sub.add_argument("-n", "--dump-variable-name", default=None,
                     help="[dump] show only this variable")
    sub.add_argument("-I", "--import-format", default=None,
                     help="[import] NNP or ONNX (default: from the extension)")
    sub.set_defaults(func=dump_command)
    return sub
