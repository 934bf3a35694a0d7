"""``encode_param`` and ``decode_param``: parameters as one text file per parameter.

A parameter's file is ``<name>.txt`` in the directory, the name percent-quoted with ``/``
written as ``~`` (``affine/W`` -> ``affine~W.txt``); its first line is the shape as a Python
tuple, then one value per line (nnabla's layout, so either library reads the other's files).
"""
import os
import urllib.parse

import numpy as np

from ...logger import logger
from ...parameter import get_parameters, load_parameters, save_parameters, set_parameter
from ...variable import Variable
from . import CommandError

__all__ = ["add_decode_param_command", "add_encode_param_command", "decode_param_command",
           "encode_param_command", "get_parameters", "load_param_in_txt", "load_parameters",
           "save_param_in_txt", "save_parameters", "set_parameter"]


def save_param_in_txt(x, filepath):
    """Write array ``x`` to ``filepath``: its shape, then one value per line."""
    with open(filepath, "w") as output:
        print(tuple(np.shape(x)), file=output)
        np.asarray(x).tofile(output, sep="\n")


def _parse_shape(line, filepath):
    text = line.strip()
    if not (text.startswith("(") and text.endswith(")")):
        raise CommandError("{}: first line must be the shape as a tuple like (2, 3), got {!r}"
                           .format(filepath, line))
    try:
        return tuple(int(d) for d in text[1:-1].split(",") if d.strip())
    except ValueError:
        raise CommandError("{}: bad shape line {!r}".format(filepath, line)) from None


def load_param_in_txt(name, filepath):
    """Read a parameter file written by :func:`save_param_in_txt` into parameter ``name``."""
    try:
        with open(filepath, "r", encoding="utf-8") as f:
            first, _, rest = f.read().partition("\n")
    except UnicodeDecodeError:
        raise CommandError("{}: not a parameter text file (it is not UTF-8 text)".format(filepath)) from None
    shape = _parse_shape(first, filepath)
    try:
        values = np.array(rest.split(), dtype=np.float32)
    except ValueError as e:
        raise CommandError("{}: the values after the shape line must be numbers ({})".format(filepath, e)) from None
    if values.size != int(np.prod(shape)):
        raise CommandError("{}: shape {} needs {} values, the file has {}".format(
            filepath, shape, int(np.prod(shape)), values.size))
    variable = Variable(shape, need_grad=True)
    variable.d = values.reshape(shape)
    set_parameter(name, variable)


def _file_name(key):
    return urllib.parse.quote(key, safe="/ ").replace("/", "~") + ".txt"


def decode_param_command(args, **kwargs):
    if not args.param:
        raise CommandError("give the parameter file with -p/--param")
    os.makedirs(args.outdir, exist_ok=True)
    logger.log(99, "Loading parameters...")
    load_parameters(args.param)
    for key, variable in get_parameters(grad_only=False).items():
        logger.log(99, key)
        save_param_in_txt(variable.d, os.path.join(args.outdir, _file_name(key)))
    logger.log(99, "Decode Parameter Completed.")
    return True


def encode_param_command(args, **kwargs):
    if not args.param:
        raise CommandError("give the parameter file to write with -p/--param")
    if not os.path.isdir(args.indir):
        raise CommandError("input directory '{}' {}".format(
            args.indir, "is a file" if os.path.exists(args.indir) else "does not exist"))
    logger.log(99, "Loading parameters...")
    names = [n for n in sorted(os.listdir(args.indir)) if os.path.isfile(os.path.join(args.indir, n))]
    if not names:
        raise CommandError("input directory '{}' holds no parameter files (decode_param writes them)"
                           .format(args.indir))
    for file_name in names:
        path = os.path.join(args.indir, file_name)
        key = urllib.parse.unquote(os.path.splitext(file_name)[0].replace("~", "/"))
        logger.log(99, key)
        load_param_in_txt(key, path)
    logger.log(99, "Saving parameters...")
    save_parameters(args.param)
    logger.log(99, "Encode Parameter Completed.")
    return True


def add_decode_param_command(subparsers):
    sub = subparsers.add_parser("decode_param", help="Decode parameter to plain text.",
                                description="Write each parameter of a parameter file (.h5, "
                                            ".protobuf, .nnp) as a text file in OUTDIR.")
    sub.add_argument("-p", "--param", help="path to parameter file", required=False)
    sub.add_argument("-o", "--outdir", help="output directory", required=True)
    sub.set_defaults(func=decode_param_command)
    return sub


def add_encode_param_command(subparsers):
    sub = subparsers.add_parser("encode_param", help="Encode plain text to parameter format.",
                                description="Read the text files of INDIR (as decode_param "
                                            "writes them) into a parameter file.")
    sub.add_argument("-i", "--indir", help="input directory", required=True)
    sub.add_argument("-p", "--param", help="path to parameter file", required=False)
    sub.set_defaults(func=encode_param_command)
    return sub
