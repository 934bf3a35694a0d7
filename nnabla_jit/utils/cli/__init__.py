"""The ``nnabla_jit`` command (also ``python -m nnabla_jit``): nnabla_cli's subcommands.

    nnabla_jit train -c config.nnp -o outdir          train from an NNP's optimizer settings
    nnabla_jit forward -c model.nnp -d data.csv -o out run executors over a CSV dataset
    nnabla_jit infer -c model.nnp -o out input.bin     run executors on raw binary inputs
    nnabla_jit convert in.nnp out.nnp                  NNP <-> NNP/nntxt/protobuf/h5 (and ONNX)
    nnabla_jit convert in.nnp out.nnb                  nnabla-c-runtime's NNB (-O CSRC: C source)
    nnabla_jit nnb_template in.nnp settings.yaml       the settings file of convert -s
    nnabla_jit dump model.nnp                          executors, functions, variables
    nnabla_jit function_info [-f NNB|ONNX] [model.nnp] supported function sets
    nnabla_jit plot_series / plot_timer                 plot monitor files (PNG)
    nnabla_jit draw_graph model.nnp                    draw networks (SVG or PNG)
    nnabla_jit optimize in.nnp out.nnp                 converter leftovers (matmul+add) into Affine
    nnabla_jit encode_param / decode_param             parameters <-> one text file each
    nnabla_jit conv_dataset data.csv data.cache        a CSV dataset into a file cache
    nnabla_jit profile -c train.nnp -o outdir          time every step of the optimizers
    nnabla_jit compare_with_cpu -c a.nnp -c2 b.nnp -o outdir   two contexts' results side by side
    nnabla_jit create_tar / upload                     a CSV dataset for Neural Network Console
    nnabla_jit create_image_classification_dataset ... folders of images -> an image dataset
    nnabla_jit create_object_detection_dataset ...    labelled images -> a detection dataset
    nnabla_jit cache info|clear|warm                    show, empty or fill the kernel cache
    nnabla_jit version

``-m/--mpi`` before the command runs it in every process of an MPI launch (``mpirun -np 2
nnabla_jit -m train ...``): a data-parallel communicator is made first, and a rank whose command
fails aborts the whole job, so the other ranks do not wait for it forever. The ``nnabla_cli``
console script is the same command. Every subcommand has ``--help``. A failing command prints one
line saying what went wrong, naming the file, and exits with 1 (a traceback only for a bug).
"""
import argparse
import csv
import errno
import os
import sys
import zipfile

__all__ = ["main", "run_parsed", "version_string", "batch_size_argument"]


class CommandError(Exception):
    """A user-facing failure of a subcommand (bad argument, missing file, ...)."""


def batch_size_argument(text):
    """argparse type of ``-b/--batch-size``: a positive integer, or -1 for the file's."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a positive integer or -1, got {!r}".format(text)) from None
    if value != -1 and value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer, or -1 for the file's batch "
                                         "size, got {}".format(value))
    return value


def version_string():
    import nnabla_jit
    return "Version:{}, Build:nnabla_jit".format(nnabla_jit.__version__)


def _version_command(args):
    print(version_string())
    return True


def build_parser():
    from . import (cache, compare_with_cpu, conv_dataset, convert, create_image_classification_dataset,
                   create_object_detection_dataset, draw_graph, encode_decode_param, forward,
                   func_info, optimize_model, plot, profile, train, uploader)
    parser = argparse.ArgumentParser(
        prog="nnabla_cli" if sys.argv and os.path.basename(sys.argv[0]) == "nnabla_cli" else "nnabla_jit",
        description="Command line interface for nnabla_jit ({})".format(version_string()))
    parser.add_argument("-m", "--mpi", action="store_true", help="exec with mpi.")
    subparsers = parser.add_subparsers(title="subcommands", metavar="COMMAND", dest="command")
    train.add_train_command(subparsers)
    forward.add_infer_command(subparsers)
    forward.add_forward_command(subparsers)
    encode_decode_param.add_encode_param_command(subparsers)
    encode_decode_param.add_decode_param_command(subparsers)
    profile.add_profile_command(subparsers)
    conv_dataset.add_conv_dataset_command(subparsers)
    compare_with_cpu.add_compare_with_cpu_command(subparsers)
    create_image_classification_dataset.add_create_image_classification_dataset_command(subparsers)
    create_object_detection_dataset.add_create_object_detection_dataset_command(subparsers)
    uploader.add_upload_command(subparsers)
    uploader.add_create_tar_command(subparsers)
    convert.add_convert_command(subparsers)
    convert.add_dump_command(subparsers)
    convert.add_nnb_template_command(subparsers)
    func_info.add_function_info_command(subparsers)
    plot.add_plot_series_command(subparsers)
    plot.add_plot_timer_command(subparsers)
    draw_graph.add_draw_graph_command(subparsers)
    optimize_model.add_optimize_command(subparsers)
    cache.add_cache_command(subparsers)
    sub = subparsers.add_parser("version", help="Print version and build number.",
                                description="Print version and build number.")
    sub.set_defaults(func=_version_command)
    return parser


def _start_communicator():
    """The data-parallel communicator of an MPI launch: on the GPUs where the CUDA extension
    works, else on the CPU."""
    # Imported only under -m: the communicator module is needed by MPI runs alone.
    from ..communicator_util import create_communicator
    try:
        from ...ext_utils import import_extension_module
        import_extension_module("cudnn")
        extension = "cudnn"
    except ImportError:
        extension = "cpu"
    try:
        create_communicator(extension_module=extension)
    except ImportError as e:
        raise CommandError("-m/--mpi: cannot start MPI (pip install nnabla_jit[mpi] gives mpi4py "
                           "and an MPI runtime): {}".format(e)) from None


def main(argv=None):
    """Run the command line; returns the exit status (0 on success). The console script
    exits with it."""
    parser = build_parser()
    return run_parsed(parser, parser.parse_args(argv))


# What a user's mistake or the machine's state raises (a missing, unreadable or malformed file, a
# full disk, too little memory, an input nested too deeply): one line, never a traceback. Any
# other exception is a bug of nnabla_jit and keeps its traceback.
_USER_ERRORS = (CommandError, OSError, ValueError, KeyError, NotImplementedError, MemoryError,
                RecursionError, csv.Error, EOFError, zipfile.BadZipFile)

# Argument names (argparse dests) whose values are files or folders the command reads or writes:
# named by errors that cannot name a file themselves (MemoryError, RecursionError, a write that
# fails with ENOSPC or EFBIG).
_INPUT_ARGUMENTS = ("config", "config2", "param", "dataset", "files", "input", "inputs", "input_file",
                    "infile", "indir", "source", "sourcedir", "filename")
_OUTPUT_ARGUMENTS = ("outdir", "output", "output_file", "outfile", "output_dir", "destination",
                     "result_outdir")


def _files_named(args, dests):
    names = []
    for dest in dests:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v and v not in names:
                names.append(v)
    return ", ".join(names) if names else "its arguments"


def describe_error(error, args):
    """The one line that tells a user what went wrong."""
    inputs = _files_named(args, _INPUT_ARGUMENTS)
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        names = error.filename if error.filename2 is None else "{} -> {}".format(
            error.filename, error.filename2)
        return "{}: {}".format(names, error.strerror)
    if isinstance(error, OSError) and error.strerror:
        if error.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) and "cannot write" not in error.strerror:
            return "{} (writing {})".format(error.strerror, _files_named(args, _OUTPUT_ARGUMENTS))
        return error.strerror
    if isinstance(error, MemoryError):
        return "not enough memory to run {} on {}{}".format(
            args.command, inputs, " ({})".format(error) if str(error) else "")
    if isinstance(error, RecursionError):
        return "{} is nested too deeply for {} to follow ({})".format(inputs, args.command, error)
    if isinstance(error, UnicodeDecodeError):
        return "{} holds text that is not UTF-8 ({})".format(inputs, error)
    if isinstance(error, csv.Error):
        return "{} is not a well-formed CSV file ({})".format(inputs, error)
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error) or "{} failed on {} ({})".format(args.command, inputs, type(error).__name__)


def _abort_other_ranks():
    """Under -m, a failing rank ends the MPI job: the other ranks would wait for it in their
    next collective forever (nnabla's CLI kills itself there)."""
    from ..communicator_util import current_communicator
    comm = current_communicator()
    if comm is not None and comm.size > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        comm.abort()


def run_parsed(parser, args):
    """Run the subcommand of ``args`` (parsed by ``parser``); returns the exit status."""
    if "func" not in args:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.mpi:
            _start_communicator()
        status = 0 if args.func(args) else 1
    except _USER_ERRORS as e:
        print("{} {}: error: {}".format(parser.prog, args.command, describe_error(e, args)),
              file=sys.stderr)
        status = 1
    if status and args.mpi:
        _abort_other_ranks()
    return status
