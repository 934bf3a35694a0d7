"""ONNX converters of nnabla functions, one module per family; ``EXPORTERS`` maps each
function name to its converter (see ``table.py``)."""
from . import (activation, arithmetic, array, detection, geometric, indexing, loss, neural,  # noqa: F401
               normalization, quantization, recurrent, reduction, signal, validation)
from .table import EXPORTERS, exports

__all__ = ["EXPORTERS", "exports"]
