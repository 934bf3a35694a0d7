"""The file format converter's function sets and helpers (``nnabla_jit function_info``,
``convert``; nnabla's ``nnabla.utils.converter``).

``nnb_functions.NNB_FUNCTIONS`` lists the functions nnabla-c-runtime (the NNB format) supports;
``api_levels`` holds the runtime's API levels; ``nnabla`` imports NNP files; ``nnablart``
exports the runtime's formats.
"""
from collections import OrderedDict

from ...ops.registry import TABLE
from ..inspection import op_status
from .api_levels import get_api_level_info, type_to_pack_format
from .nnablart.network_info import calc_shape_size
from .nnb_functions import NNB_FUNCTIONS
from .supported_info import extensions, formats

__all__ = ["nnabla_function_set", "onnx_function_set", "nnb_function_set", "table_order",
           "calc_shape_size", "extensions", "formats", "func_dict_import_config", "func_set_import_config",
           "func_set_import_nnp", "func_set_nnabla_support", "func_set_nncr_support",
           "func_set_onnx_support", "get_api_level_info", "get_function_info", "search_network",
           "select_executor", "type_to_pack_format"]


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


# nnabla's names for the sets and helpers above.
func_set_nnabla_support = nnabla_function_set
func_set_onnx_support = onnx_function_set
func_set_nncr_support = nnb_function_set


def func_dict_import_config(config):
    """{function: [types]} of a target config file: one function a line, optionally followed by
    ``, FLOAT32, FIXED16, FIXED8`` (``ALL`` when none); ``;`` starts a comment line."""
    functions = OrderedDict()
    with open(config) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(";"):
                continue
            fields = [t.strip() for t in line.split(",")]
            types = [t.upper() for t in fields[1:]
                     if t.upper() in ("FLOAT32", "FIXED16", "FIXED8", "ALL")]
            functions[fields[0]] = ["ALL"] if len(fields) == 1 or "ALL" in types else types
    return functions


def func_set_import_config(config):
    """The function names of a target config file (see :func:`func_dict_import_config`)."""
    return set(func_dict_import_config(config))


def select_executor(nnp, name=None):
    """The executor the converters export: the first (as nnabla's)."""
    return nnp.protobuf.executor[0]


def search_network(nnp, name):
    """The network called ``name`` of an imported NNP, or None."""
    return next((n for n in nnp.protobuf.network if n.name == name), None)


def func_set_import_nnp(nnp):
    """The function types of the network of the first executor of an imported NNP."""
    network = search_network(nnp, nnp.protobuf.executor[0].network_name)
    return {f.type for f in network.function} if network is not None else set()


def get_function_info():
    """{function: {'snake_name', 'category', 'inputs', 'arguments': {name: {'type', ...}},
    'outputs'}} from the function table, in table order."""
    info = OrderedDict()
    for name, spec in TABLE.items():
        arguments = OrderedDict()
        for arg in spec.args:
            entry = OrderedDict([("type", arg.type)])
            if arg.default is not None:
                entry["default"] = arg.default
            if arg.choices:
                entry["available_values"] = list(arg.choices)
            arguments[arg.name] = entry
        info[name] = OrderedDict([("snake_name", spec.snake_name), ("category", spec.category),
                                  ("inputs", [str(i) for i in spec.inputs]),
                                  ("arguments", arguments), ("outputs", list(spec.outputs))])
    return info
