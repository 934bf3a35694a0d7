"""The import table: ONNX op type -> converter ``fn(c, node)``.

A converter gets the ``importer.ImportContext`` ``c`` (``c.var(name)`` -> Variable,
``c.const(name)`` -> numpy array, ``c.shape(name)``, ``c.elem(name)``, ``c.opset``) and the
``importer.OnnxNode`` ``node`` (``inputs``, ``outputs``, ``attr(name, default)``), builds the
node from ``F`` functions and returns its output Variables (or numpy arrays for values known
when importing). It raises :class:`~..builder.Unsupported` for attributes it cannot express.
"""

__all__ = ["IMPORTERS", "imports"]

IMPORTERS = {}


def imports(*op_types):
    """Register the decorated converter for the ONNX ops ``op_types``."""
    def deco(fn):
        for op_type in op_types:
            if op_type in IMPORTERS:
                raise RuntimeError("ONNX import: {} has two converters".format(op_type))
            IMPORTERS[op_type] = fn
        return fn
    return deco
