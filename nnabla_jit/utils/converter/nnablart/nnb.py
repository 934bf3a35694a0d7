"""NNB, nnabla-c-runtime's network file, written byte for byte as nnabla 1.39's converter does.

The file is a header of 14 uint32 (format version, API level, then size and list index of
the buffers, variables, functions, inputs and outputs, the number of memory blocks and the
bytes of memory), the memory blocks' offsets (uint32 each), and the memory: blocks of packed
C structs (native alignment, each padded to 4 bytes) that the header and each other refer to
by block index. A variable is ``IiIBi``: id, shape (size, list index), type and fixed-point
position in one byte, data (a block index for parameters, ``-1 - buffer`` for buffers). A
function is its id and implementation (``HH``), inputs and outputs (``iI`` each) and its
arguments packed by the API level's argument codes.

Types come from ``-T`` (every variable) and the settings file (per variable, ``FIXED16_12``
giving the fixed-point position; per function, ``implement``). Parameters are stored as float32,
int16/int8 fixed point (position computed from the values when not given) or packed sign bits.
Generator variables get values drawn at export from NumPy's global generator, as nnabla does,
so those bytes follow its seed.
"""
import math
import struct
from collections import OrderedDict, namedtuple

import numpy as np

from ....ops.registry import TABLE
from ....serialization.files import write_bytes
from ..api_levels import get_api_level_info, type_to_pack_format
from ..settings_file import dump_settings, load_settings
from .network_info import create_nnabart_info, preprocess_for_exporter, revise_buffer_size
from .resolver import Resolver
from .save_variable_buffer import save_variable_buffer

__all__ = ["NN_BINARY_FORMAT_VERSION", "Nnb", "NnbExporter"]

NN_BINARY_FORMAT_VERSION = 2

_List = namedtuple("List", ("size", "list_index"))


class Nnb:
    """The runtime's data type codes and fixed-point limits."""
    NN_DATA_TYPE_FLOAT, NN_DATA_TYPE_INT16, NN_DATA_TYPE_INT8, NN_DATA_TYPE_SIGN = range(4)
    from_type_name = {"FLOAT32": NN_DATA_TYPE_FLOAT, "FIXED16": NN_DATA_TYPE_INT16,
                      "FIXED8": NN_DATA_TYPE_INT8, "SIGN": NN_DATA_TYPE_SIGN}
    fp_pos_max = {NN_DATA_TYPE_INT16: 15, NN_DATA_TYPE_INT8: 7}


def _int_bit_num(values):
    """Integer bits (sign included) a fixed-point type needs for ``values``."""
    magnitude = np.abs(values)
    largest = magnitude.max()
    if largest < 1:
        return 1
    log2 = np.log2(largest)
    if log2.is_integer() and values[magnitude.argmax()] > 0:
        return int(log2) + 2
    return int(np.ceil(log2)) + 1


def _parse_type(option, name):
    parts = option.split("_")
    if parts[0] not in Nnb.from_type_name or len(parts) > 2:
        raise ValueError("variable '{}': type '{}' must be FLOAT32, FIXED16[_POS], FIXED8[_POS] "
                         "or SIGN".format(name, option))
    try:
        fp_pos = int(parts[1]) if len(parts) == 2 else None
    except ValueError:
        raise ValueError("variable '{}': fixed-point position of '{}' is not an integer"
                         .format(name, option)) from None
    return parts[0], fp_pos


class NnbExporter:
    """``NnbExporter(nnp, batch_size, nnb_version=2, api_level=-1).execute(nnb_path,
    settings_template_path, settings_paths, default_type)``. ``nnp`` is what
    :class:`~nnabla_jit.utils.converter.nnabla.NnpImporter` returns."""

    def __init__(self, nnp, batch_size, nnb_version=NN_BINARY_FORMAT_VERSION, api_level=-1):
        nnp = Resolver(nnp).execute()
        self._info = create_nnabart_info(nnp.protobuf, nnp.parameters, batch_size)
        self._api_level_info = get_api_level_info()
        self._api_level_info.set_api_level(api_level)
        self._nnb_version = nnb_version
        preprocess_for_exporter(self._info, "NNB")
        self._memory_index = []
        self._memory_data = bytearray()

    def _alloc(self, data):
        """Append a memory block; returns its index."""
        self._memory_index.append(len(self._memory_data))
        self._memory_data += data
        self._memory_data += b"\0" * (int(math.ceil(len(data) / 4) * 4) - len(data))
        return len(self._memory_index) - 1

    def _alloc_list(self, code, values):
        return _List(len(values), self._alloc(struct.pack("{}{}".format(len(values), code), *values)))

    # ------------------------------------------------------------------------------ variables
    def _parameter_data(self, name, type_name, type_code, fp_pos):
        values = self._info._parameters[name]
        if type_name == "FLOAT32":
            return struct.pack("{}f".format(len(values)), *values), fp_pos
        if type_name == "SIGN":
            if len(values) % 8:
                raise ValueError("parameter '{}': SIGN packs 8 values a byte; it has {}".format(
                    name, len(values)))
            bits = values.astype(np.uint8)
            bits[bits == 255] = 0
            packed = np.packbits(bits.reshape(-1, 8)[:, ::-1].ravel())
            return struct.pack("{}B".format(len(packed)), *packed), fp_pos
        if fp_pos is None:
            fp_pos = Nnb.fp_pos_max[type_code] + 1 - _int_bit_num(values)
        fixed = np.round(values * (1 << fp_pos)).astype(int)
        if type_name == "FIXED16":
            fixed = np.clip(fixed, -0x8000, 0x7fff)
            return struct.pack("{}h".format(len(fixed)), *fixed), fp_pos
        fixed = np.clip(fixed, -128, 127)
        return struct.pack("{}b".format(len(fixed)), *fixed), fp_pos

    def _variables(self, settings, default_type, buffer_of):
        info = self._info
        indexes = []
        for n, v in enumerate(info._network.variable):
            shape = [d if d >= 0 else info._batch_size for d in v.shape.dim]
            shape_list = self._alloc_list("I", shape)
            option = settings["variables"].setdefault(v.name, default_type)
            type_name, fp_pos = _parse_type(option, v.name)
            type_code = Nnb.from_type_name[type_name]
            data_index = -1
            if v.name in info._generator_variables:
                data = info._generator_variables[v.name].ravel().tolist()
                data_index = self._alloc(struct.pack("{}f".format(len(data)), *data))
            elif v.type == "Parameter":
                if v.name not in info._parameters:
                    raise ValueError("parameter '{}' has no value in the input files".format(v.name))
                data, fp_pos = self._parameter_data(v.name, type_name, type_code, fp_pos)
                data_index = self._alloc(data)
            elif v.type == "Buffer":
                if type_code == Nnb.NN_DATA_TYPE_SIGN:
                    raise ValueError("variable '{}': SIGN is for parameters, not buffers".format(v.name))
                if type_code != Nnb.NN_DATA_TYPE_FLOAT and fp_pos is None:
                    raise ValueError("variable '{}': fixed-point buffers need a position, e.g. "
                                     "{}_8 (fp_pos must be specified for Buffer Variable)"
                                     .format(v.name, type_name))
                data_index = -1 - buffer_of[n] if n in buffer_of else -1
            if type_code not in Nnb.fp_pos_max:
                fp_pos = 0
            record = struct.pack("IiIBi", n, shape_list.size, shape_list.list_index,
                                 (fp_pos & 0xf) << 4 | (type_code & 0xf), data_index)
            indexes.append(self._alloc(record))
        return self._alloc_list("I", indexes)

    # ------------------------------------------------------------------------------ functions
    def _arguments(self, f):
        """(struct format, values) of the arguments of proto function ``f`` at this level."""
        spec = TABLE[f.type]
        argcode = self._api_level_info.get_argument_code(f.type)
        if not spec.args:
            if argcode:
                raise ValueError("{} is not supported by API Level:{}.".format(
                    self._api_level_info.get_func_uniq_name(f.type),
                    self._api_level_info.get_current_level()))
            return "", []
        params = getattr(f, "{}_param".format(spec.snake_name))
        fmt, values, position = "", [], 0
        for arg in spec.args:
            code = type_to_pack_format(arg.type)
            if position >= len(argcode):
                print("{}.{} is omitted for lower API Level:{}".format(
                    f.type, arg.name, self._api_level_info.get_current_level()))
                continue
            if argcode[position:position + len(code)] != code:
                raise ValueError("{} is not supported by API Level:{}.".format(
                    self._api_level_info.get_func_uniq_name(f.type),
                    self._api_level_info.get_current_level()))
            position += len(code)
            fmt += code
            value = getattr(params, arg.name)
            if arg.type == "repeated int64":
                values += [len(value), self._alloc(struct.pack("{}i".format(len(value)), *value))]
            elif arg.type == "Shape":
                dims = list(value.dim)
                values += [len(dims), self._alloc(struct.pack("{}i".format(len(dims)), *dims))]
            elif arg.type == "string":
                values.append(arg.choices.index(value))
            else:
                values.append(value)
        return fmt, values

    def _functions(self, settings, index_of):
        levels = self._api_level_info
        indexes = []
        for f in self._info._network.function:
            if f.type not in levels.get_function_list():
                raise ValueError("{}() is not supported in current API Level(={}).".format(
                    f.type, levels.get_current_level()))
            implement = settings["functions"].setdefault(f.name, OrderedDict([("implement", 0)]))
            data = struct.pack("HH", levels.get_func_id(f.type), implement["implement"])
            inputs = self._alloc_list("I", [index_of[i] for i in f.input])
            data += struct.pack("iI", *inputs)
            outputs = self._alloc_list("I", [index_of[o] for o in f.output])
            data += struct.pack("iI", *outputs)
            fmt, values = self._arguments(f)
            if fmt:
                data += struct.pack(fmt, *values)
            indexes.append(self._alloc(data))
        return self._alloc_list("I", indexes)

    # ------------------------------------------------------------------------------ the file
    def execute(self, nnb_output_filename, settings_template_filename=None, settings_filename=None,
                default_type=("FLOAT32",)):
        """Write the NNB (``nnb_output_filename``) and/or the settings template (with every
        variable's type and function's implementation filled in)."""
        settings = OrderedDict()
        if settings_filename:
            path = settings_filename[0] if isinstance(settings_filename, (list, tuple)) else settings_filename
            with open(path) as f:
                settings = load_settings(f.read(), path)
        settings.setdefault("functions", OrderedDict())
        settings.setdefault("variables", OrderedDict())
        if isinstance(default_type, str):
            default_type = [default_type]
        info = self._info
        index_of = {v.name: n for n, v in enumerate(info._network.variable)}
        inputs = self._alloc_list("I", [index_of[i] for i in info._input_variables])
        outputs = self._alloc_list("I", [index_of[o] for o in info._output_variables])
        if self._nnb_version > NN_BINARY_FORMAT_VERSION:
            revise_buffer_size(info, settings)
        buffer_sizes, buffer_of = save_variable_buffer(info)
        buffers = self._alloc_list("I", buffer_sizes)
        variables = self._variables(settings, default_type[0], buffer_of)
        functions = self._functions(settings, index_of)
        header = struct.pack("IIiIiIiIiIiIII", self._nnb_version,
                             self._api_level_info.get_current_level(), *buffers, *variables,
                             *functions, *inputs, *outputs, len(self._memory_index),
                             len(self._memory_data))
        memory = struct.pack("{}I".format(len(self._memory_index)), *self._memory_index)
        if settings_template_filename is not None:
            write_bytes(settings_template_filename, dump_settings(settings).encode("utf-8"))
        if nnb_output_filename is not None:
            write_bytes(nnb_output_filename, header + memory + bytes(self._memory_data))
