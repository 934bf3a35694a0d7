"""``convert``, ``dump`` and ``nnb_template``: model files between formats, and what they contain.

NNP means any of ``.nnp``, ``.nntxt``/``.prototxt``, ``.protobuf`` and ``.h5`` (parameters).
ONNX goes through ``nnabla_jit.serialization.onnx``: ``nnp_from_onnx(path) -> NnpContents`` and
``export_nnp(contents, path, opset=None)``. NNB (``.nnb``) and CSRC (``-O CSRC``, a directory)
are nnabla-c-runtime's formats (``nnabla_jit.utils.converter.nnablart``). NNP input is read as
nnabla's converter reads it: ``-E`` keeps one executor, and repeat/recurrent loops are unrolled
unless ``--nnp-no-expand-network``. TensorFlow and TFLite formats are not provided (they need
TensorFlow).
"""
import argparse
import os
from collections import OrderedDict

from ...serialization import nnp
from .. import converter
from ..converter.nnabla import NnpImporter
from ..converter.nnabla.importer import ImportedNnp
from . import CommandError, batch_size_argument, split_network

__all__ = ["add_convert_command", "add_dump_command", "add_nnb_template_command", "convert_command",
           "dump_command", "nnb_template_command", "read_model", "resolve_file_format"]

_NNP_EXTENSIONS = (".nnp", ".nntxt", ".prototxt", ".protobuf", ".h5")
_IMPORT_FORMATS = ("NNP", "ONNX")
_EXPORT_FORMATS = ("NNP", "NNB", "CSRC", "ONNX")
_TENSORFLOW_FORMATS = ("TF_CKPT_V1", "TF_CKPT_V2", "TF_PB", "SAVED_MODEL", "TFLITE")


def _format_of(path, given, what):
    known = _IMPORT_FORMATS if what == "import" else _EXPORT_FORMATS
    if given:
        fmt = given.upper()
        if fmt in _TENSORFLOW_FORMATS:
            raise CommandError("{} format {}: TensorFlow and TFLite conversion is not provided by "
                               "nnabla_jit (it needs TensorFlow); go through ONNX".format(what, fmt))
        if fmt not in known:
            raise CommandError("{} format must be one of {}, got '{}'".format(
                what, ", ".join(known), given))
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext in _NNP_EXTENSIONS:
        return "NNP"
    if ext == ".onnx":
        return "ONNX"
    if ext == ".nnb" and what == "export":
        return "NNB"
    if ext in (".pb", ".ckpt", ".meta", ".tflite"):
        raise CommandError("'{}': TensorFlow and TFLite conversion is not provided by nnabla_jit "
                           "(it needs TensorFlow); go through ONNX".format(path))
    raise CommandError("cannot tell the {} format of '{}' (use .nnp, .nntxt, .prototxt, .protobuf, "
                       ".h5, .onnx{}, or give -{})".format(
                           what, path, " or .nnb" if what == "export" else "",
                           "I" if what == "import" else "O"))


def resolve_file_format(args, import_files, export_file=None):
    """Fill ``args.import_format`` (and ``args.export_format``) from the file names."""
    args.import_format = sorted({_format_of(f, args.import_format, "import") for f in import_files})[0]
    if export_file is not None:
        args.export_format = _format_of(export_file, args.export_format, "export")


def _onnx(what):
    """The ONNX module, or a clear error if it is not there (yet)."""
    try:
        from ...serialization import onnx as onnx_io
        onnx_io.require_onnx()
    except ImportError as e:
        raise CommandError("{}: ONNX support (nnabla_jit.serialization.onnx) is not available: {}"
                           .format(what, e)) from None
    return onnx_io


def import_nnp(files, args=None, expand_network="if-repeated"):
    """The NNP files as nnabla's converter imports them (:class:`NnpImporter`), with the
    import options of ``args`` (-E, --nnp-no-expand-network)."""
    if getattr(args, "nnp_no_expand_network", False):
        expand_network = False
    return NnpImporter(*files, expand_network=expand_network,
                       executor_index=getattr(args, "nnp_import_executor_index", None)).execute()


def read_model(files, import_format=None, args=None):
    """NnpContents of the input files (NNP files merged; or one ONNX file)."""
    formats = {_format_of(f, import_format, "import") for f in files}
    if formats == {"NNP"}:
        return import_nnp(files, args).contents
    if len(files) != 1:
        raise CommandError("ONNX input must be a single file, got {}".format(len(files)))
    onnx_io = _onnx("import")
    if not hasattr(onnx_io, "nnp_from_onnx"):
        raise CommandError("import: nnabla_jit.serialization.onnx has no nnp_from_onnx()")
    return onnx_io.nnp_from_onnx(files[0])


def _function_config(path):
    """The function names of a ``-c`` target config (one a line, ``FUNC, TYPE, ...``; ``;``
    comments), as function_info reads it."""
    if not os.path.isfile(path):
        raise CommandError("config file '{}' does not exist".format(path))
    return converter.func_set_import_config(path)


def _supported_set(args):
    """The functions the target takes: ``-c``'s list (for ONNX within what exports), else all."""
    if args.export_format == "ONNX":
        supported = converter.onnx_function_set()
        return supported & _function_config(args.config) if args.config else supported
    return _function_config(args.config) if args.config else converter.nnabla_function_set()


def _nnb_version(args):
    if not args.define_version:
        return 2
    if not args.define_version.startswith("nnb_"):
        raise CommandError("-d for NNB is nnb_<version>, e.g. nnb_3; got '{}'".format(args.define_version))
    return int(args.define_version.split("_", 1)[1])


def _runtime_batch_size(args):
    # nnabla_cli's convert writes the C runtime formats for batch size 1 unless -b says otherwise.
    return 1 if args.batch_size is None else args.batch_size


def _export(args, imported, output):
    if args.export_format == "NNB":
        from ..converter.nnablart import NnbExporter
        NnbExporter(imported, _runtime_batch_size(args), nnb_version=_nnb_version(args),
                    api_level=args.api).execute(output, None, args.settings, args.default_variable_type)
        return
    if args.export_format == "CSRC":
        raise CommandError("CSRC (C source for nnabla-c-runtime) is not written by nnabla_jit yet; "
                           "convert to .nnb, which the runtime loads")
    contents = imported.contents
    if args.batch_size is not None and args.batch_size > 0:
        for net in contents.proto.network:
            net.batch_size = args.batch_size
    if args.export_format == "ONNX":
        _onnx("export").export_nnp(contents, output, opset=args.define_version)
        return
    parameters = [] if args.nnp_exclude_parameter else contents.parameters
    if args.nnp_parameter_nntxt:
        parameter_format = ".nntxt"
    elif args.nnp_exclude_parameter:
        parameter_format = None
    else:
        parameter_format = ".h5" if args.nnp_parameter_h5 else ".protobuf"
    nnp.write(output, contents.proto, parameters, parameter_format=parameter_format)


def _import(args, inputs):
    if args.import_format == "NNP":
        runtime = args.export_format in ("NNB", "CSRC")
        expand = False if args.nnp_no_expand_network else (True if runtime else "if-repeated")
        return import_nnp(inputs, args, expand_network=expand)
    if args.export_format in ("NNB", "CSRC"):
        raise CommandError("{} is written from NNP input; convert the ONNX file to .nnp first"
                           .format(args.export_format))
    contents = read_model(inputs, args.import_format, args)
    parameters = OrderedDict((p.name, p.data) for p in contents.parameters)
    return ImportedNnp(contents.proto, parameters, (), contents)


def convert_command(args):
    if len(args.files) < 2:
        raise CommandError("give the input file(s) and then the output file")
    inputs, output = args.files[:-1], args.files[-1]
    resolve_file_format(args, inputs, output)
    if os.path.exists(output) and not args.force and args.export_format != "CSRC":
        raise CommandError("'{}' exists; use -f/--force to overwrite it".format(output))
    imported = _import(args, inputs)
    supported = _supported_set(args)
    if not split_network.needs_split(args, imported, supported):
        _export(args, imported, output)
        print("Converted {} -> {}".format(", ".join(inputs), output))
        return True
    network_name = imported.protobuf.executor[0].network_name
    for net in list(imported.protobuf.network):
        if net.name != network_name:
            imported.protobuf.network.remove(net)
    parts = []
    for start, end in split_network.split_ranges(args, imported, supported):
        name = split_network.split_output_name(output, start, end)
        print("   Shrink {} to {}.".format(start, end))
        print("    Output to [{}]".format(name))
        part = split_network.shrink(imported, start, end)
        _export(args, part, name)
        parts.append((name, part))
    print(split_network.ranges_summary(parts))
    return True


def add_import_arguments(sub):
    """nnabla_cli's import options (convert, dump, nnb_template)."""
    sub.add_argument("-I", "--import-format", default=None,
                     help="[import] NNP or ONNX (default: from the extension)")
    sub.add_argument("-E", "--nnp-import-executor-index", type=int, default=None,
                     help="[import][NNP] import only specified executor.")
    sub.add_argument("--nnp-exclude-preprocess", action="store_true",
                     help="[import][NNP] EXPERIMENTAL exclude preprocess functions when import "
                          "(accepted; nnabla 1.39 does not act on it either).")
    sub.add_argument("--nnp-no-expand-network", action="store_true",
                     help="[import][NNP] do not expand networks with repeat or recurrent.")


def _not_provided(option, why):
    def check(value):
        raise argparse.ArgumentTypeError("{} is not provided by nnabla_jit: {}".format(option, why))
    return check


def add_convert_command(subparsers):
    sub = subparsers.add_parser(
        "convert", help="File format converter.",
        description="Convert model files. The last FILE is the output; its extension chooses the "
                    "format: .nnp (zip of network.nntxt and parameters), .nntxt/.prototxt "
                    "(text, parameters included), .protobuf (binary, parameters included), .h5 "
                    "(parameters only), .onnx, .nnb (nnabla-c-runtime); -O CSRC writes C source "
                    "into a directory. Several NNP inputs (e.g. a .nntxt and an .h5) are merged.")
    sub.add_argument("files", metavar="FILE", nargs="+", help="input file(s), then the output file")
    tensorflow = "TensorFlow import/export needs TensorFlow, which nnabla_jit does not use"
    sub.add_argument("--outputs", type=_not_provided("--outputs", tensorflow), default=None,
                     help="[import][tensorflow] output node names (not provided: no TensorFlow)")
    sub.add_argument("--inputs", type=_not_provided("--inputs", tensorflow), default=None,
                     help="[import][tensorflow] input node names (not provided: no TensorFlow)")
    add_import_arguments(sub)
    sub.add_argument("-O", "--export-format", default=None,
                     help="[export] NNP, NNB, CSRC or ONNX (default: from the extension; CSRC must "
                          "be given)")
    sub.add_argument("-f", "--force", action="store_true", help="[export] overwrite the output file")
    sub.add_argument("-b", "--batch-size", type=batch_size_argument, default=None,
                     help="[export] batch size (NNP, ONNX: written into the networks, default "
                          "keep; NNB, CSRC: default 1)")
    sub.add_argument("-S", "--split", default=None,
                     help="[export] with -E: write function ranges of the executor's network as "
                          "files <name>_<first>_<last><ext> (e.g. \"1-9\", \"1-2,5-\")")
    sub.add_argument("-d", "--define_version", "--opset", default=None,
                     help="[export][ONNX] opset version, 11 to the installed onnx's newest, "
                          "e.g. opset_11 or 11 (default 17); [export][NNB] binary format version, "
                          "e.g. nnb_3")
    sub.add_argument("--enable-optimize-pb", action="store_true",
                     help="[export][tensorflow] (not provided: no TensorFlow)")
    sub.add_argument("--channel-last", "--channel_last", action="store_true",
                     help="[export][TFLite] (not provided: no TensorFlow)")
    sub.add_argument("--quantization", action="store_true",
                     help="[export][TFLite] (not provided: no TensorFlow)")
    sub.add_argument("--dataset", type=_not_provided("--dataset", tensorflow), default=None,
                     help="[export][TFLite] (not provided: no TensorFlow)")
    sub.add_argument("--ir_version", type=int, default=None,
                     help="[export][ONNX] IR version (default: the installed onnx's)")
    sub.add_argument("-c", "--config", default=None,
                     help="[export] file listing the functions the target supports (one a line, "
                          "as function_info -o writes it); the network is split around the others")
    sub.add_argument("--nnp-parameter-h5", action="store_true",
                     help="[export][NNP] store parameters as parameter.h5 (default: parameter.protobuf)")
    sub.add_argument("--nnp-parameter-nntxt", action="store_true",
                     help="[export][NNP] store parameters inside network.nntxt")
    sub.add_argument("--nnp-exclude-parameter", action="store_true",
                     help="[export][NNP] write no parameters")
    sub.add_argument("--nnp-version", default=None,
                     help="[export][NNP] nnp version to write (accepted; nnabla_jit writes its own)")
    sub.add_argument("-T", "--default-variable-type", nargs=1, default=["FLOAT32"],
                     help="[export][NNB] default type of variables: FLOAT32, FIXED16, FIXED8, "
                          "SIGN (parameters only)")
    sub.add_argument("-s", "--settings", nargs=1, default=None,
                     help="[export][NNB] settings in YAML (as nnb_template writes it)")
    sub.add_argument("--api", type=int, default=-1,
                     help="[export][NNB] API level to convert to (default: the highest)")
    sub.set_defaults(func=convert_command)
    return sub


# ------------------------------------------------------------------------------------ nnb_template
def nnb_template_command(args):
    if len(args.files) < 2:
        raise CommandError("give the input file(s) and then the settings file to write")
    inputs, output = args.files[:-1], args.files[-1]
    resolve_file_format(args, inputs)
    if args.import_format != "NNP":
        raise CommandError("nnb_template reads NNP input")
    from ..converter.nnablart import NnbExporter
    imported = import_nnp(inputs, args, expand_network=not args.nnp_no_expand_network)
    batch_size = imported.protobuf.network[0].batch_size if args.batch_size < 0 else args.batch_size
    NnbExporter(imported, batch_size, api_level=args.api).execute(
        None, output, None, args.default_variable_type)
    print("Wrote {}".format(output))
    return True


def add_nnb_template_command(subparsers):
    sub = subparsers.add_parser(
        "nnb_template", help="Generate NNB config file template.",
        description="Write the settings file of `convert -s` for a model: every variable's type "
                    "(-T) and every function's implementation, to edit for quantization.")
    sub.add_argument("files", metavar="FILE", nargs="+",
                     help="File to generate NNB config file template. The last is setting yaml file.")
    add_import_arguments(sub)
    sub.add_argument("-b", "--batch-size", type=batch_size_argument, default=-1,
                     help="[export] overwrite batch size.")
    sub.add_argument("-T", "--default-variable-type", nargs=1, default=["FLOAT32"],
                     help="Default type of variable")
    sub.add_argument("--api", type=int, default=-1,
                     help="Set API Level to convert to, default is highest API Level.")
    sub.set_defaults(func=nnb_template_command)
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
    contents = read_model(args.files, args.import_format, args)
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
    add_import_arguments(sub)
    sub.set_defaults(func=dump_command)
    return sub
