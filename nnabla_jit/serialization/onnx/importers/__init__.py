"""nnabla_jit builders of ONNX ops, one module per family; ``IMPORTERS`` maps each ONNX op type
to its converter (see ``table.py``)."""
from . import (composite, detection, elementwise, layers, quantization, recurrent, reduction,  # noqa: F401
               signal, tensor)
from .table import IMPORTERS, imports

__all__ = ["IMPORTERS", "imports"]
