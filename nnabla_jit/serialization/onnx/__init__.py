"""ONNX export and import (``pip install 'nnabla_jit[onnx]'``).

    from nnabla_jit.serialization import onnx as nnabla_onnx
    nnabla_onnx.export("model.onnx", {"y": y}, {"x": x}, opset=17)   # a graph
    nnabla_onnx.export_nnp("model.nnp", "model.onnx")                  # an .nnp's executor
    net = nnabla_onnx.import_onnx("model.onnx")                       # -> Variables
    net.inputs["x"].d = data; net.outputs["y"].forward()
    contents = nnabla_onnx.nnp_from_onnx("model.onnx")                # -> NnpContents

The mapping tables (``exporters/``: nnabla function -> ONNX nodes, ``importers/``: ONNX op ->
nnabla functions) are plain Python; ``onnx`` itself is imported when a conversion runs, so
``exportable_ops()`` works without it.
"""
from .builder import Unsupported
from .dependencies import OnnxUnavailableError, require_onnx
from .export import (DEFAULT_OPSET, OLDEST_EXPORT_OPSET, OnnxExportError, check_exportable, export,
                     export_nnp, export_opsets, exportable_ops, nnp_to_model, parse_opset, to_model)
from .importer import (OnnxConstantRequired, OnnxImportError, OnnxNetwork, import_onnx, import_opsets,
                       importable_ops, nnp_from_onnx)

__all__ = ["DEFAULT_OPSET", "OLDEST_EXPORT_OPSET", "OnnxConstantRequired", "OnnxExportError",
           "OnnxImportError", "OnnxNetwork", "OnnxUnavailableError", "Unsupported", "check_exportable", "export",
           "export_nnp", "export_opsets", "exportable_ops", "import_onnx", "import_opsets", "importable_ops",
           "nnp_from_onnx", "nnp_to_model", "parse_opset", "require_onnx", "to_model"]
