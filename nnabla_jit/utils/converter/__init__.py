"""Function sets of the file format converter (``nnabla_jit function_info``, ``convert``).

``nnb_functions.NNB_FUNCTIONS`` lists the functions nnabla-c-runtime (the NNB format) supports.
"""
from ...ops.registry import TABLE
from ..inspection import op_status
from .nnb_functions import NNB_FUNCTIONS

__all__ = ["nnabla_function_set", "onnx_function_set", "nnb_function_set", "table_order"]


def nnabla_function_set():
    """nnabla functions nnabla_jit implements (forward kernel registered)."""
    return {r["name"] for r in op_status() if r["forward"] and r["name"] in TABLE}


def onnx_function_set():
    """nnabla functions nnabla_jit can export to ONNX."""
    return {r["name"] for r in op_status() if r["onnx"] and r["name"] in TABLE}


def nnb_function_set():
    """nnabla functions nnabla-c-runtime (NNB) supports."""
    return set(NNB_FUNCTIONS)


def table_order(names):
    """``names`` sorted in nnabla's function-table order (unknown names last, by name)."""
    order = {n: i for i, n in enumerate(TABLE)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))
