"""The optional ``onnx`` / ``onnxruntime`` packages, imported only when ONNX work is asked for.

The rest of nnabla_jit (and the op tables of this package, which ``exportable_ops()`` reads)
must import without them.
"""

__all__ = ["OnnxUnavailableError", "require_onnx"]

# ONNX TensorProto element types (stable across onnx releases), so that the converter tables
# need not import onnx.
FLOAT, UINT8, INT8, INT32, INT64, BOOL, DOUBLE, UINT64 = 1, 2, 3, 6, 7, 9, 11, 13


class OnnxUnavailableError(ImportError):
    """The ``onnx`` package is not installed."""


def require_onnx(what="ONNX conversion"):
    """The ``onnx`` module, or an error saying how to install it."""
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
        import onnx.reference  # noqa: F401
    except ImportError as e:
        raise OnnxUnavailableError(
            "{} needs the 'onnx' package (pip install 'nnabla_jit[onnx]'): {}".format(what, e)) from None
    return onnx
