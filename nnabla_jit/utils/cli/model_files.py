"""Model files as the converter commands (``convert``, ``dump``, ``nnb_template``,
``function_info``) read them: formats told by extension or ``-I``/``-O``, NNP files through
:class:`~nnabla_jit.utils.converter.nnabla.NnpImporter` (``-E`` keeps one executor; loops are
unrolled unless ``--nnp-no-expand-network``), ONNX through ``nnabla_jit.serialization.onnx``
(``nnp_from_onnx(path) -> NnpContents``, ``export_nnp(contents, path, opset=None)``).
TensorFlow and TFLite formats are refused with the reason (they need TensorFlow).
"""
import errno
import os

from ..converter.nnabla import NnpImporter
from . import CommandError

__all__ = ["add_import_arguments", "check_model_files", "import_nnp", "onnx_module", "read_model",
           "resolve_file_format"]

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


def onnx_module(what):
    """The ONNX module, or a clear error if it is not there (yet)."""
    try:
        from ...serialization import onnx as onnx_io
        onnx_io.require_onnx()
    except ImportError as e:
        raise CommandError("{}: ONNX support (nnabla_jit.serialization.onnx) is not available: {}"
                           .format(what, e)) from None
    return onnx_io


def check_model_files(files, import_format=None):
    """Refuse, naming it, an input that is missing, a folder, or of no model format: the
    importer would leave it out without a word."""
    for f in files:
        if os.path.isdir(f):
            raise CommandError("'{}' is a directory, not a model file".format(f))
        if not os.path.exists(f):
            raise FileNotFoundError(errno.ENOENT, "no such model file", f)
        _format_of(f, import_format, "import")


def import_nnp(files, args=None, expand_network="if-repeated"):
    """The NNP files as nnabla's converter imports them (:class:`NnpImporter`), with the
    import options of ``args`` (-E, --nnp-no-expand-network)."""
    check_model_files(files, getattr(args, "import_format", None))
    if getattr(args, "nnp_no_expand_network", False):
        expand_network = False
    return NnpImporter(*files, expand_network=expand_network,
                       executor_index=getattr(args, "nnp_import_executor_index", None)).execute()


def read_model(files, import_format=None, args=None, progress=False):
    """NnpContents of the input files (NNP files merged; or one ONNX file, with a tqdm bar over
    its nodes when ``progress``)."""
    check_model_files(files, import_format)
    formats = {_format_of(f, import_format, "import") for f in files}
    if formats == {"NNP"}:
        return import_nnp(files, args).contents
    if len(files) != 1:
        raise CommandError("ONNX input must be a single file, got {}".format(len(files)))
    onnx_io = onnx_module("import")
    if not hasattr(onnx_io, "nnp_from_onnx"):
        raise CommandError("import: nnabla_jit.serialization.onnx has no nnp_from_onnx()")
    return onnx_io.nnp_from_onnx(files[0], progress=progress)


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
