"""What the nnabla-c-runtime exporters (NNB, C source) need of an NNP: the first executor's
network, its inputs, outputs and parameters, and per-variable buffer sizes.

``create_nnabart_info(proto, parameters, batch_size)`` takes an ``NNablaProtoBuf`` and
{parameter name: array}; ``preprocess_for_exporter(info, 'NNB' | 'CSRC')`` rewrites weights
into the runtime's layout (Affine weights transposed; binary convolutions keep one unused
weight value), as nnabla's exporters do.
"""
from collections import OrderedDict
from functools import partial

import numpy as np

__all__ = ["CSRC_PREPROCESS_LIST", "NNB_PREPROCESS_LIST", "NetworkInfo", "PREPROCESS_DICT",
           "affine_transpose_weight", "calc_shape_size", "create_nnabart_info", "generate_value",
           "pack_bin_conv_unused_weight", "preprocess_for_exporter", "revise_buffer_size"]


def calc_shape_size(shape, batch_size):
    """Number of items of a proto Shape, -1 dimensions being ``batch_size``."""
    size = 1
    for d in shape.dim:
        size *= batch_size if d < 0 else d
    return size


def generate_value(type, dims, multiplier):
    """Values of a generator variable (Normal, Uniform or Constant), float32."""
    if type == "Normal":
        value = np.random.randn(*dims) * multiplier
    elif type == "Uniform":
        value = np.random.uniform(-multiplier, multiplier, size=dims)
    elif type == "Constant":
        value = np.ones(dims) * multiplier
    else:
        raise ValueError('Generator type "{}" is not supported.'.format(type))
    return value.astype(np.float32)


class NetworkInfo:
    """The network of executor 0 and what the exporters derive from it (see module doc)."""


def create_nnabart_info(proto, parameters, batch_size):
    if not proto.executor:
        raise ValueError("the NNP has no executor; the C runtime formats export executor 0")
    executor = proto.executor[0]
    network = next((n for n in proto.network if n.name == executor.network_name), None)
    if network is None:
        raise ValueError("network '{}' of executor '{}' is not in the NNP".format(
            executor.network_name, executor.name))
    print("Using network [{}].".format(executor.network_name))
    info = NetworkInfo()
    info._batch_size = network.batch_size if batch_size < 0 else batch_size
    info._network_name = executor.network_name
    info._variables = OrderedDict((v.name, v) for v in network.variable)
    # Parameter values as float64 arrays, the precision nnabla's exporters compute in.
    info._parameters = OrderedDict((name, np.asarray(data, dtype=np.float32).astype(np.float64).ravel())
                                   for name, data in parameters.items())
    info._generator_variables = OrderedDict()
    for g in executor.generator_variable:
        shape = [d if d > 0 else info._batch_size for d in info._variables[g.variable_name].shape.dim]
        info._generator_variables[g.variable_name] = generate_value(g.type, shape, g.multiplier)
    info._num_of_gen_variables = len(executor.generator_variable)

    def sizes(names):
        return [calc_shape_size(info._variables[n].shape, info._batch_size) for n in names]

    info._input_variables = [d.variable_name for d in executor.data_variable]
    info._num_of_inputs = len(info._input_variables)
    info._input_buffer_sizes = sizes(info._input_variables)
    info._output_variables = [o.variable_name for o in executor.output_variable]
    info._num_of_outputs = len(info._output_variables)
    info._output_buffer_sizes = sizes(info._output_variables)
    info._param_variables = [p.variable_name for p in executor.parameter_variable]
    info._num_of_params = len(info._param_variables)
    info._network = network
    info._convert_context = {}
    _set_buffers(info, lambda v: calc_shape_size(v.shape, info._batch_size))
    for v in network.variable:
        if v.type == "Parameter" and v.name not in info._parameters and \
                any(v.name in f.input for f in network.function):
            raise ValueError("parameter '{}' of network '{}' has no value in the input files"
                             .format(v.name, network.name))
    return info


def _set_buffers(info, size_of):
    """One buffer per Buffer variable, in variable order (the buffer planner shares them)."""
    info._variable_sizes = []
    info._variable_buffer_index = OrderedDict()
    info._variable_buffer_size = OrderedDict()
    info._buffer_ids = {}
    for n, v in enumerate(info._network.variable):
        size = size_of(v)
        info._variable_sizes.append(size)
        if v.type == "Buffer":
            index = len(info._variable_buffer_index)
            info._variable_buffer_index[index] = [n]
            info._buffer_ids[n] = index
            info._variable_buffer_size[index] = size


_BYTES_PER_ITEM = {"FLOAT32": 4, "FIXED16": 2, "FIXED8": 1}


def revise_buffer_size(info, settings):
    """Buffer sizes in bytes by the settings' variable types (NNB version 3 and later)."""
    types = settings["variables"]
    _set_buffers(info, lambda v: calc_shape_size(v.shape, info._batch_size) * _BYTES_PER_ITEM.get(
        types.get(v.name, "FLOAT32").split("_")[0], 4))


def _transpose_affine_weights(indices, info, func):
    done = info._convert_context.setdefault("Affine", set())
    for index in indices:
        name = func.input[index]
        if name in done:
            return
        if name not in info._parameters:
            print("WARNING: affine weight is not transposed. Since it is not included in .nntxt/.nnp")
            continue
        rows = int(info._variables[name].shape.dim[0])
        info._parameters[name] = info._parameters[name].reshape(rows, -1).T.ravel()
        done.add(name)


def _keep_one_weight_value(index, info, func):
    name = func.input[index]
    info._parameters[name] = info._parameters[name][:1]


affine_transpose_weight = _transpose_affine_weights
pack_bin_conv_unused_weight = _keep_one_weight_value

# Per exporter, function type -> rewrite(info, func) of its weights.
NNB_PREPROCESS_LIST = {
    "Affine": partial(affine_transpose_weight, [1]),
    "BinaryConnectAffine": partial(affine_transpose_weight, [1, 2]),
    "BinaryWeightAffine": partial(affine_transpose_weight, [1, 2]),
    "BinaryWeightConvolution": partial(pack_bin_conv_unused_weight, 1),
    "BinaryConnectConvolution": partial(pack_bin_conv_unused_weight, 1),
}
CSRC_PREPROCESS_LIST = {
    "Affine": partial(affine_transpose_weight, [1]),
    "BinaryConnectAffine": partial(affine_transpose_weight, [1, 2]),
    "BinaryWeightAffine": partial(affine_transpose_weight, [1, 2]),
}
PREPROCESS_DICT = {"CSRC": CSRC_PREPROCESS_LIST, "NNB": NNB_PREPROCESS_LIST}


def preprocess_for_exporter(info, exporter_name):
    table = PREPROCESS_DICT.get(exporter_name, {})
    for func in info._network.function:
        if func.type in table:
            table[func.type](info, func)
