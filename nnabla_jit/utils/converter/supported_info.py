"""The file formats and extensions ``nnabla_jit convert`` reads and writes (nnabla's
``supported_info``; TensorFlow's formats and C source are not among them, see the README)."""
import collections

__all__ = ["extensions", "formats"]

_SupportedInfo = collections.namedtuple("_SupportedInfo", "import_name export_name")

extensions = _SupportedInfo(
    import_name=[".nnp", ".nntxt", ".prototxt", ".protobuf", ".h5", ".onnx"],
    export_name=[".nnp", ".nntxt", ".prototxt", ".protobuf", ".h5", ".nnb", ".onnx"])
formats = _SupportedInfo(import_name=["NNP", "ONNX"], export_name=["NNP", "NNB", "ONNX"])
