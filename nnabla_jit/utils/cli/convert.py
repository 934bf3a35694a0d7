"""``convert`` and ``nnb_template``: model files between formats (nnabla's ``cli.convert``,
which also holds ``dump``: see :mod:`.dump`).

NNP means any of ``.nnp``, ``.nntxt``/``.prototxt``, ``.protobuf`` and ``.h5`` (parameters);
the output's extension (or ``-O``) chooses NNP, ONNX or NNB (``.nnb``, nnabla-c-runtime's network
file, ``nnabla_jit.utils.converter.nnablart``); ``-O CSRC`` writes the runtime's C source into
the output folder. How inputs are read: :mod:`.model_files`. ``-S``
and ``-c`` split the network into parts: :mod:`.split_network`.
"""
import argparse
import os
from collections import OrderedDict

from ...serialization import nnp
from ...serialization.files import write_bytes
from .. import converter
from ..converter.nnabla.importer import ImportedNnp
from ..converter.nnablart import CsrcExporter, NnbExporter
from . import CommandError, batch_size_argument, split_network
from .dump import add_dump_command, dump_command
from .model_files import add_import_arguments, import_nnp, onnx_module, read_model, resolve_file_format

__all__ = ["add_convert_command", "add_dump_command", "add_nnb_template_command", "convert_command",
           "dump_command", "nnb_template_command", "read_model", "resolve_file_format"]


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
        NnbExporter(imported, _runtime_batch_size(args), nnb_version=_nnb_version(args),
                    api_level=args.api).execute(output, None, args.settings, args.default_variable_type)
        return
    if args.export_format == "CSRC":
        CsrcExporter(imported, _runtime_batch_size(args)).execute(output)
        return
    contents = imported.contents
    if args.batch_size is not None and args.batch_size > 0:
        for net in contents.proto.network:
            net.batch_size = args.batch_size
    if args.export_format == "ONNX":
        onnx_io = onnx_module("export")
        if args.ir_version is None:
            onnx_io.export_nnp(contents, output, opset=args.define_version, progress=True)
            return
        import onnx   # present: onnx_module checked it
        if not 3 <= args.ir_version <= onnx.IR_VERSION:
            raise CommandError("--ir_version {}: the installed onnx writes IR versions 3 to {}"
                               .format(args.ir_version, onnx.IR_VERSION))
        model = onnx_io.nnp_to_model(contents, args.define_version)
        model.ir_version = args.ir_version
        write_bytes(output, model.SerializeToString())
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
    contents = read_model(inputs, args.import_format, args, progress=True)
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
                     help="[export][ONNX] opset version, 7 to the installed onnx's newest, "
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
