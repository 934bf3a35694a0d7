"""The export table: nnabla function name -> converter ``fn(g, n)``.

A converter gets the :class:`~..builder.GraphBuilder` ``g`` and the node view ``n``
(``export.NodeView``: ONNX input names, table slots, arguments, shapes) and returns the ONNX
name of each output. It raises :class:`~..builder.Unsupported` for arguments (or an opset) it
cannot express.
"""

__all__ = ["EXPORTERS", "exports"]

EXPORTERS = {}


def exports(*names):
    """Register the decorated converter for the nnabla functions ``names``."""
    def deco(fn):
        for name in names:
            if name in EXPORTERS:
                raise RuntimeError("ONNX export: {} has two converters".format(name))
            EXPORTERS[name] = fn
        return fn
    return deco
