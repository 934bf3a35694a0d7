"""``function_info``: which functions a function set supports, optionally within a model.

Sets: the nnabla functions nnabla_jit implements (default), ``-f ONNX`` those it exports to
ONNX, ``-f NNB`` those nnabla-c-runtime supports. With model files, the functions the models
use are intersected with the set, and the ones outside it are listed on stderr.
"""
import sys

from .. import converter
from . import CommandError
from .convert import read_model

__all__ = ["add_function_info_command"]

_HEADERS = {
    "NNABLA": ("", "nnabla_jit does not implement the following functions in model:"),
    "NNB": ("nnabla-c-runtime currently support the following functions in model:",
            "nnabla-c-runtime currently does not support the following functions in model:"),
    "ONNX": ("nnabla_jit supports the following onnx functions in model:",
             "nnabla_jit does not support the following onnx functions in model:"),
}


def _function_set(name):
    if name == "NNABLA":
        return converter.nnabla_function_set()
    if name == "NNB":
        return converter.nnb_function_set()
    if name == "ONNX":
        return converter.onnx_function_set()
    raise CommandError("unknown function set '{}' (use NNB or ONNX)".format(name))


def function_info_command(args):
    set_name = (args.all_support or "NNABLA").upper()
    supported = _function_set(set_name)
    unsupported = set()
    if args.files:
        used = {f.type for net in read_model(args.files).proto.network for f in net.function}
        unsupported = used - supported
        supported &= used
    supported -= set(args.exclude)
    names = converter.table_order(supported)
    if args.output:
        with open(args.output, "w") as f:
            f.write("\n".join(names) + ("\n" if names else ""))
    else:
        header = _HEADERS[set_name][0] if args.files else ""
        if header:
            print(header)
        for n in names:
            print(n)
    if unsupported:
        print(_HEADERS[set_name][1], file=sys.stderr)
        for n in converter.table_order(unsupported):
            print(n, file=sys.stderr)
    return True


def add_function_info_command(subparsers):
    sub = subparsers.add_parser(
        "function_info", help="Output function info.",
        description="List the functions of a function set: nnabla_jit's (default), ONNX export "
                    "(-f ONNX) or nnabla-c-runtime (-f NNB); with model files, only those the "
                    "models use (unsupported ones go to stderr).")
    sub.add_argument("files", metavar="FILE", nargs="*", help="model files whose functions to check")
    sub.add_argument("-o", "--output", default=None, help="write the list to this file")
    sub.add_argument("-f", "--all_support", default=None, help="function set: NNB or ONNX")
    sub.add_argument("-x", "--exclude", action="append", default=[], help="leave out this function")
    sub.set_defaults(func=function_info_command)
    return sub
