"""ONNX converters of nnabla functions, one module per family; ``EXPORTERS`` maps each
function name to its converter (see ``table.py``)."""
from . import activation, arithmetic, array, indexing, loss, neural, normalization, recurrent, reduction, signal  # noqa: F401
from .table import EXPORTERS, exports

__all__ = ["EXPORTERS", "exports"]
