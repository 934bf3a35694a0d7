"""``function_info``: which functions a function set supports, optionally within a model.

Sets: the nnabla functions nnabla_jit implements (default), ``-f ONNX`` those it exports to
ONNX, ``-f NNB`` those nnabla-c-runtime supports. With model files, the functions the models
use are intersected with the set, and the ones outside it are listed on stderr. ``-c`` narrows
the set to a target's config file (nnabla's: one function a line, optionally followed by
``, FLOAT32, FIXED16, ...``; ``;`` starts a comment; for ONNX also ``opset_N``). ``--api N``
lists nnabla-c-runtime's functions at API level N (``-1``: only the newest level's number).
``-f ONNX -t`` lists the ONNX operators the models become (``Op@version``), ``-q FUNC`` the
details of one function.
"""
import os
import sys
from collections import OrderedDict

from ...ops.registry import TABLE
from .. import converter
from ..converter.api_levels import get_api_level_info
from ..converter.settings_file import dump_settings
from . import CommandError
from .model_files import import_nnp, onnx_module, read_model

__all__ = ["FuncInfo", "NnablaHandler", "NncrHandler", "OnnxHandler", "add_function_info_command",
           "function_info_command", "read_config", "read_config_types"]

_HEADERS = {
    "NNABLA": ("", "nnabla_jit does not implement the following functions in model:"),
    "NNB": ("nnabla-c-runtime currently support the following functions in model:",
            "nnabla-c-runtime currently does not support the following functions in model:"),
    "ONNX": ("nnabla_jit supports the following onnx functions in model:",
             "nnabla_jit does not support the following onnx functions in model:"),
}


def read_config_types(path):
    """{function: [types]} of a target config file (nnabla's format, see module doc)."""
    if not os.path.isfile(path):
        raise CommandError("config file '{}' does not exist".format(path))
    return converter.func_dict_import_config(path)


def read_config(path):
    """The function names of a target config file."""
    return set(read_config_types(path))


class FuncInfo:
    """The parsed arguments of the running ``function_info`` (nnabla's module-level holder)."""
    params = None


def _model_functions(params):
    used = set()
    for f in params.files:
        imported = import_nnp([f], params, expand_network=not params.nnp_no_expand_network)
        used |= {fn.type for net in imported.protobuf.network for fn in net.function}
    return used


def _function_set(name):
    if name == "NNABLA":
        return converter.nnabla_function_set()
    if name == "NNB":
        return converter.nnb_function_set()
    return converter.onnx_function_set()


class _Handler:
    set_name = "NNABLA"

    def __init__(self, params=None):
        self.params = params or FuncInfo.params
        self.supported = _function_set(self.set_name)
        self.unsupported = set()
        self.types = None
        if self.params.files:
            used = _model_functions(self.params)
            self.unsupported = used - self.supported
            self.supported &= used
        self.supported -= set(self.params.exclude)
        if self.params.config:
            self._apply_config()

    def _apply_config(self):
        self.types = read_config_types(self.params.config)
        self.supported &= set(self.types)

    def _write_list(self, names):
        if self.params.output and os.path.splitext(self.params.output)[1].lower() == ".yaml":
            by_category = OrderedDict()
            for n in names:
                spec = TABLE.get(n)
                category = spec.category if spec else "Other"
                by_category.setdefault(category, OrderedDict())[n] = OrderedDict(
                    [("func_type", ",".join((self.types or {}).get(n, ["ALL"])))])
            with open(self.params.output, "w") as f:
                f.write(dump_settings(by_category) if by_category else "{}\n")
        elif self.params.output:
            with open(self.params.output, "w") as f:
                f.write("\n".join(names) + ("\n" if names else ""))
        else:
            header = _HEADERS[self.set_name][0] if self.params.files else ""
            if header:
                print(header)
            for n in names:
                print(n)

    def execute(self):
        if self.params.query:
            return self.query(self.params.query)
        self._write_list(converter.table_order(self.supported))
        if self.unsupported:
            print(_HEADERS[self.set_name][1], file=sys.stderr)
            for n in converter.table_order(self.unsupported):
                print(n, file=sys.stderr)
        return True

    def query(self, name):
        spec = TABLE.get(name)
        if spec is None:
            raise CommandError("-q: no function named '{}'".format(name))
        print("{}:".format(name))
        print("  category: {}".format(spec.category))
        print("  inputs: [{}]".format(", ".join(str(i) for i in spec.inputs)))
        print("  arguments: [{}]".format(", ".join("{}:{}".format(a.name, a.type) for a in spec.args)))
        print("  outputs: [{}]".format(", ".join(spec.outputs)))
        print("  supported: {}".format("yes" if name in _function_set(self.set_name) else "no"))
        return True


class NnablaHandler(_Handler):
    set_name = "NNABLA"

    def execute(self):
        if self.params.api != 0:
            levels = get_api_level_info()
            levels.set_api_level(self.params.api)
            print("API_LEVEL: {}".format(levels.get_current_level()))
            if self.params.api != -1:
                for func in levels.get_function_list():
                    print(levels.get_func_uniq_name(func))
            return True
        return super().execute()


class NncrHandler(_Handler):
    set_name = "NNB"

    def _apply_config(self):
        super()._apply_config()
        self.unsupported |= set(self.types) - self.supported - set(self.params.exclude)

    def query(self, name):
        super().query(name)
        levels = get_api_level_info()
        if name in levels.get_function_list():
            print("  uniq_name: {}".format(levels.get_func_uniq_name(name)))
            print("  id: {}".format(levels.get_func_id(name)))
        return True


class OnnxHandler(_Handler):
    set_name = "ONNX"

    def _apply_config(self):
        config = self.params.config
        if config.startswith("opset_") and not os.path.exists(config):
            opset = int(config[len("opset_"):])
            onnx_io = onnx_module("function_info -f ONNX")
            if opset not in onnx_io.export_opsets():
                self.supported = set()
            self.types = None
            return
        super()._apply_config()

    def execute(self):
        if self.params.target:
            return self._targets()
        return super().execute()

    def _targets(self):
        """The ONNX operators (Op@version that introduced it) the model files export to."""
        if not self.params.files:
            raise CommandError("-t lists the ONNX operators of model files; give the .nnp files")
        onnx_io = onnx_module("function_info -f ONNX")
        import onnx   # present: onnx_module checked it
        opset = onnx_io.parse_opset(self.params.config if (self.params.config or "").startswith("opset_")
                                    else None)
        targets = set()
        for f in self.params.files:
            model = onnx_io.nnp_to_model(read_model([f], None, self.params), opset, f)
            for node in model.graph.node:
                schema = onnx.defs.get_schema(node.op_type, max_inclusive_version=opset,
                                              domain=node.domain)
                targets.add("{}@{}".format(node.op_type, schema.since_version))
        self._write_list(sorted(targets))
        return True


def function_info_command(args):
    FuncInfo.params = args
    set_name = (args.all_support or "NNABLA").upper()
    handlers = {"NNABLA": NnablaHandler, "NNB": NncrHandler, "ONNX": OnnxHandler}
    if set_name not in handlers:
        raise CommandError("unknown function set '{}' (use NNB or ONNX)".format(args.all_support))
    return handlers[set_name](args).execute()


def add_function_info_command(subparsers):
    sub = subparsers.add_parser(
        "function_info", help="Output function info.",
        description="List the functions of a function set: nnabla_jit's (default), ONNX export "
                    "(-f ONNX) or nnabla-c-runtime (-f NNB); with model files, only those the "
                    "models use (unsupported ones go to stderr).")
    sub.add_argument("files", metavar="FILE", nargs="*", help="model files whose functions to check")
    sub.add_argument("-o", "--output", default=None,
                     help="write the list to this file (.yaml: by category, with the config's types)")
    sub.add_argument("-f", "--all_support", default=None, help="function set: NNB or ONNX")
    sub.add_argument("-c", "--config", default=None,
                     help="user config file for target constraint (ONNX: also opset_N)")
    sub.add_argument("-x", "--exclude", action="append", default=[], help="leave out this function")
    sub.add_argument("-t", "--target", action="store_true",
                     help="[ONNX] list the ONNX operators the model files export to")
    sub.add_argument("-q", "--query", default=None, help="query the detail of a function")
    sub.add_argument("--nnp-no-expand-network", action="store_true",
                     help="[import][NNP] do not expand networks with repeat or recurrent.")
    sub.add_argument("--api", type=int, default=0,
                     help="list nnabla-c-runtime's functions at this API level (-1: its number)")
    sub.set_defaults(func=function_info_command)
    return sub
