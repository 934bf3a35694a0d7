"""C source for nnabla-c-runtime (``convert -O CSRC``), as nnabla 1.39's converter writes it.

``CsrcExporter(nnp, batch_size).execute(folder)`` writes, for the first executor's network
``<name>``: ``<name>_inference.h/.c`` (a context struct holding every variable and function
of the network, its allocation, the input/output/parameter accessors and the inference that
calls the runtime's ``exec_<function>`` in order), ``<name>_parameters.h/.c`` (the parameter
values as float arrays; only when there are parameters), ``<name>_example.c`` (reads the
inputs from files, writes the outputs) and a ``GNUmakefile``. Buffer variables share the
buffers the NNB exporter plans (:mod:`.save_variable_buffer`); Affine weights are stored
transposed; generator variables get values drawn at export. Data types are float only: the
C source ignores ``-T`` and settings files, as nnabla does. Functions are written as they are
(nnabla unrolls GRU for NNB, not here). The fixed text is :mod:`.csrc_text`.
"""
import os

import numpy as np

from ....ops.registry import TABLE
from ....serialization.files import name_as_file_name, write_bytes
from . import csrc_text as text
from .network_info import create_nnabart_info, preprocess_for_exporter
from .save_variable_buffer import save_variable_buffer

__all__ = ["CsrcExporter"]


def _argument_value(spec, value, snake_name):
    """The C expression of a scalar argument (lists are written element by element)."""
    if spec.type == "bool":
        return "1" if value else "0"
    if spec.choices:
        return "{}_{}_{}".format(snake_name, spec.name, value).upper()
    if hasattr(value, "extend"):    # other repeated fields print as Python lists
        return format(list(value))
    return format(value)


class _Function:
    """One network function as the C source needs it: index, proto, snake name, and its
    arguments as (name, list of ints) or (name, C expression)."""

    def __init__(self, index, proto):
        if proto.type not in TABLE:
            raise ValueError("function '{}': {} is no nnabla function; the C source calls "
                             "nnabla-c-runtime's".format(proto.name, proto.type))
        spec = TABLE[proto.type]
        self.index, self.proto, self.snake = index, proto, spec.snake_name
        self.arguments = []
        params = getattr(proto, "{}_param".format(spec.snake_name)) if spec.args else None
        for arg in spec.args:
            value = getattr(params, arg.name)
            if arg.type == "Shape":
                self.arguments.append((arg.name, [int(d) for d in value.dim]))
            elif arg.type == "repeated int64":
                self.arguments.append((arg.name, [int(d) for d in value]))
            else:
                self.arguments.append((arg.name, _argument_value(arg, value, spec.snake_name)))

    def lists(self):
        return [(name, value) for name, value in self.arguments if isinstance(value, list)]


class CsrcExporter:
    """``CsrcExporter(nnp, batch_size).execute(folder)``; ``nnp`` is what
    :class:`~nnabla_jit.utils.converter.nnabla.NnpImporter` returns."""

    def __init__(self, nnp, batch_size):
        self._info = create_nnabart_info(nnp.protobuf, nnp.parameters, batch_size)
        # Sizes before the exporter's rewrites, in the order the files list the parameters.
        self._parameter_sizes = [int(np.size(v)) for v in nnp.parameters.values()]
        preprocess_for_exporter(self._info, "CSRC")
        info = self._info
        # the network's name starts every file name: never a path out of the output folder
        self._name = name_as_file_name(info._network_name, "network name", nnp.contents.source
                                       if nnp.contents is not None else "the NNP")
        self._prefix = "nnablart_{}".format(self._name.lower())
        self._functions = [_Function(n, f) for n, f in enumerate(info._network.function)]
        self._index_of = {v.name: n for n, v in enumerate(info._network.variable)}
        self._parameter_variables = [n for n, v in enumerate(info._network.variable)
                                     if v.type == "Parameter"]
        for name in info._param_variables:
            if name not in self._index_of:
                raise ValueError("parameter '{}' of executor 0 is not a variable of network '{}'"
                                 .format(name, self._name))

    def _slots(self, **slots):
        return dict(name=self._name, NAME=self._name.upper(), prefix=self._prefix,
                    PREFIX=self._prefix.upper(), **slots)

    def _shape(self, variable):
        return [self._info._batch_size if d < 0 else int(d) for d in variable.shape.dim]

    # ------------------------------------------------------------------------------ parameters
    def _parameters_files(self):
        info = self._info
        header = text.PARAMETERS_H.format(**self._slots(declarations="extern void* {}_parameters[{}];"
                                                        .format(self._name, len(info._parameters))))
        arrays = []
        for n in self._parameter_variables:
            v = info._network.variable[n]
            arrays += ["", "// {}".format(v.name), "float {}_parameter{}[] = {{".format(self._name, n)]
            arrays += ["    {:>20},".format(str(float(d))) for d in info._parameters[v.name]]
            arrays.append("};")
        arrays += ["", "void* {}_parameters[] ={{".format(self._name)]
        arrays += ["    (void*){}_parameter{},".format(self._name, n) for n in self._parameter_variables]
        arrays.append("};")
        source = text.PARAMETERS_C.format(**self._slots(arrays="\n".join(arrays)))
        return {"_parameters.h": header, "_parameters.c": source}

    # ------------------------------------------------------------------------------ header
    def _inference_h(self):
        info, prefix = self._info, self._prefix.upper()
        parameters = ""
        if info._parameters:
            parameters = text.PARAMETER_BUFFER_H.format(**self._slots(
                count=len(info._parameters),
                sizes="\n".join("#define {}_PARAM{}_SIZE ({})".format(prefix, n, size)
                                for n, size in enumerate(self._parameter_sizes))))
        return text.INFERENCE_H.format(**self._slots(
            inputs=info._num_of_inputs, outputs=info._num_of_outputs,
            input_sizes="\n".join("#define {}_INPUT{}_SIZE ({})".format(prefix, n, s)
                                  for n, s in enumerate(info._input_buffer_sizes)),
            output_sizes="\n".join("#define {}_OUTPUT{}_SIZE ({})".format(prefix, n, s)
                                   for n, s in enumerate(info._output_buffer_sizes)),
            parameter_declarations=parameters))

    # ------------------------------------------------------------------------------ source
    def _context_members(self, buffer_count):
        info = self._info
        lines = ["    void *buffer_pool[{}];".format(buffer_count),
                 "    void *param_pool[{}];".format(len(info._parameters)),
                 "    rt_buffer_allocate_type_t variable_buffers_allocate_type[{}];".format(
                     len(info._variable_sizes)),
                 "", "    // Variables"]
        for n, v in enumerate(info._network.variable):
            lines += ["    rt_variable_t v{}; ///< {}".format(n, v.name),
                      "    int v{}_shape[{}];".format(n, len(v.shape.dim))]
        lines += ["", "    // Functions"]
        for f in self._functions:
            n = f.index
            lines += ["    rt_function_t f{}; ///< {}".format(n, f.proto.type),
                      "    rt_variable_t* f{}_inputs[{}];".format(n, len(f.proto.input)),
                      "    rt_variable_t* f{}_outputs[{}];".format(n, len(f.proto.output))]
            if f.arguments:
                lines.append("    {}_local_context_t *f{}_local_context;".format(f.snake, n))
            lines += ["    int f{}_local_context_shape_{}[{}];".format(n, name, len(values))
                      for name, values in f.lists()]
        return "\n".join(lines)

    def _globals(self, buffer_sizes):
        lines = ["int actual_buf_sizes[{}] = {{".format(len(buffer_sizes))]
        lines += ["    {},".format(s) for s in buffer_sizes]
        lines += ["};", "",
                  "void *(*rt_variable_malloc_func)(size_t size) = malloc;",
                  "void (*rt_variable_free_func)(void *ptr) = free;", "",
                  "void *(*rt_malloc_func)(size_t size) = malloc;",
                  "void (*rt_free_func)(void *ptr) = free;", ""]
        for name, values in self._info._generator_variables.items():
            values = values.ravel()
            lines.append("float {}[{}] = {{".format(name, len(values)))
            lines += ["    {},".format(value) for value in values]
            lines.append("};")
        return "\n".join(lines)

    def _allocate(self, buffer_count, buffer_of):
        info = self._info
        lines = ["    // Variable buffer",
                 "    for (int i = 0; i < {}; i++) {{".format(buffer_count),
                 "        c->buffer_pool[i] = malloc(sizeof(float) * actual_buf_sizes[i]);",
                 "        memset(c->buffer_pool[i], 0, sizeof(float) * actual_buf_sizes[i]);",
                 "    }", "    if(params) {"]
        for pool, n in enumerate(self._parameter_variables):
            lines += ["        c->variable_buffers_allocate_type[{}] = "
                      "RT_BUFFER_ALLOCATE_TYPE_ALLOCATED;".format(n),
                      "        c->param_pool[{}] = *params++;".format(pool)]
        lines.append("    } else {")
        for pool, n in enumerate(self._parameter_variables):
            lines += ["        c->variable_buffers_allocate_type[{}] = RT_BUFFER_ALLOCATE_TYPE_MALLOC;"
                      .format(n),
                      "        c->param_pool[{}] = *params++;".format(pool),
                      "        c->param_pool[{}] = malloc(sizeof(float) * {});".format(
                          pool, info._variable_sizes[n])]
        lines += ["    }", "", "    // Variables"]
        pool_of = {n: pool for pool, n in enumerate(self._parameter_variables)}
        for n, v in enumerate(info._network.variable):
            shape = self._shape(v)
            lines += ["    // {}".format(v.name),
                      "    (c->v{}).type = NN_DATA_TYPE_FLOAT;".format(n),
                      "    (c->v{}).shape.size = {};".format(n, len(shape))]
            lines += ["    c->v{}_shape[{}] = {};".format(n, d, size) for d, size in enumerate(shape)]
            lines.append("    (c->v{0}).shape.data = c->v{0}_shape;".format(n))
            if v.name in info._generator_variables:
                data = v.name
            elif v.type == "Parameter":
                data = "c->param_pool[{}]".format(pool_of[n])
            else:   # a buffer no function uses gets the first one
                data = "c->buffer_pool[{}]".format(buffer_of.get(n, 0))
            lines.append("    (c->v{}).data = {};".format(n, data))
        lines += ["", "    // Functions"]
        for f in self._functions:
            lines += self._function_setup(f)
        return "\n".join(lines)

    def _function_setup(self, f):
        n = f.index
        lines = ["    // {}".format(f.proto.type)]
        if f.arguments:
            lines.append("    c->f{}_local_context = malloc(sizeof({}_local_context_t));".format(n, f.snake))
        lines.append("    (c->f{}).num_of_inputs = {};".format(n, len(f.proto.input)))
        lines += ["    (c->f{}_inputs)[{}] = &(c->v{});".format(n, i, self._index_of[name])
                  for i, name in enumerate(f.proto.input)]
        lines += ["    (c->f{0}).inputs = c->f{0}_inputs;".format(n),
                  "    (c->f{}).num_of_outputs = {};".format(n, len(f.proto.output))]
        lines += ["    (c->f{}_outputs)[{}] = &(c->v{});".format(n, i, self._index_of[name])
                  for i, name in enumerate(f.proto.output)]
        lines.append("    (c->f{0}).outputs = c->f{0}_outputs;".format(n))
        if not f.arguments:
            lines.append("    (c->f{}).local_context = 0;".format(n))
        else:
            lines.append("    (c->f{0}).local_context = c->f{0}_local_context;".format(n))
        for name, value in f.arguments:
            if not isinstance(value, list):
                lines.append("    (c->f{}_local_context)->{} = {};".format(n, name, value))
                continue
            arg = "arg_f{}_{}".format(n, name)
            lines += ["    rt_list_t {};".format(arg),
                      "    {}.size = {};".format(arg, len(value)),
                      "    {}.data = c->f{}_local_context_shape_{};".format(arg, n, name)]
            lines += ["    {}.data[{}] = {};".format(arg, i, d) for i, d in enumerate(value)]
            lines.append("    (c->f{}_local_context)->{} = {};".format(n, name, arg))
        lines.append("    allocate_{}_local_context(&(c->f{}));".format(f.snake, n))
        return lines

    def _free(self, buffer_count):
        lines = ["", "    for (int i = 0; i < {}; i++) {{".format(buffer_count),
                 "        free(c->buffer_pool[i]);", "    }"]
        for pool, n in enumerate(self._parameter_variables):
            lines += ["    if(c->variable_buffers_allocate_type[{}] == RT_BUFFER_ALLOCATE_TYPE_MALLOC) {{"
                      .format(n),
                      "        free(c->param_pool[{}]);".format(pool), "    }"]
        for f in self._functions:
            lines += ["    free_{}_local_context(&(c->f{}));".format(f.snake, f.index),
                      "    if (c->f{}.local_context != 0) {{".format(f.index),
                      "        rt_free_func(c->f{}.local_context);".format(f.index),
                      "        c->f{}.local_context = 0;".format(f.index), "    }"]
        return "\n".join(lines)

    def _cases(self, names):
        return "\n".join("        case {}: return (c->v{}).data;".format(n, self._index_of[name])
                         for n, name in enumerate(names))

    def _inference_c(self):
        info = self._info
        buffer_sizes, buffer_of = save_variable_buffer(info)
        parameter_buffer = ""
        if info._parameters:
            parameter_buffer = text.PARAMETER_BUFFER_C.format(**self._slots(
                cases=self._cases(info._param_variables)))
        return text.INFERENCE_C.format(**self._slots(
            context_members=self._context_members(len(buffer_sizes)),
            globals=self._globals(buffer_sizes),
            allocate=self._allocate(len(buffer_sizes), buffer_of),
            free=self._free(len(buffer_sizes)),
            input_cases=self._cases(info._input_variables),
            output_cases=self._cases(info._output_variables),
            parameter_buffer=parameter_buffer,
            executions="\n".join("    exec_{}(&(c->f{}));".format(f.snake, f.index)
                                 for f in self._functions)))

    # ------------------------------------------------------------------------------ example
    def _example_c(self):
        info, prefix = self._info, self._prefix
        includes = ['#include "{}_inference.h"'.format(self._name)]
        if info._parameters:
            includes.append('#include "{}_parameters.h"'.format(self._name))
        read, write = [], []
        for n in range(info._num_of_inputs):
            read += ['    FILE* input{} = fopen(argv[{}], "rb");'.format(n, n + 1),
                     "    assert(input{});".format(n),
                     "    int input_read_size{0} = fread({1}_input_buffer(context, {0}), sizeof(float), "
                     "{2}_INPUT{0}_SIZE, input{0});".format(n, prefix, prefix.upper()),
                     "    assert(input_read_size{0} == {1}_INPUT{0}_SIZE);".format(n, prefix.upper()),
                     "    fclose(input{});".format(n), ""]
        argument = info._num_of_inputs + 1
        for n in range(info._num_of_outputs):
            write += ["    char* output_filename{} = malloc(strlen(argv[{}]) + 10);".format(n, argument),
                      '    sprintf(output_filename{0}, "%s_{0}.bin", argv[{1}]);'.format(n, argument),
                      '    FILE* output{0} = fopen(output_filename{0}, "wb");'.format(n),
                      "    assert(output{});".format(n),
                      "    int output_write_size{0} = fwrite({1}_output_buffer(context, {0}), "
                      "sizeof(float), {2}_OUTPUT{0}_SIZE, output{0});".format(n, prefix, prefix.upper()),
                      "    assert(output_write_size{0} == {1}_OUTPUT{0}_SIZE);".format(n, prefix.upper()),
                      "    fclose(output{});".format(n),
                      "    free(output_filename{});".format(n), ""]
        return text.EXAMPLE_C.format(**self._slots(
            includes="\n".join(includes), inputs=info._num_of_inputs,
            parameters="{}_parameters".format(self._name) if info._parameters else "0",
            read_inputs="\n".join(read), write_outputs="\n".join(write)))

    # ------------------------------------------------------------------------------ the files
    def files(self):
        """{file name: text} of everything :meth:`execute` writes."""
        c_files = {}
        if self._info._parameters:
            c_files.update(self._parameters_files())
        c_files["_inference.h"] = self._inference_h()
        c_files["_inference.c"] = self._inference_c()
        c_files["_example.c"] = self._example_c()
        files = {self._name + suffix: text.generated_file("//", body) for suffix, body in c_files.items()}
        files["GNUmakefile"] = text.generated_file("#", text.GNUMAKEFILE.format(**self._slots(
            parameters_c=" {}_parameters.c".format(self._name) if self._info._parameters else "")))
        return files

    def execute(self, folder):
        """Write the files into ``folder`` (made if missing)."""
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise ValueError("CSRC output '{}' is a file; the C source is written into a folder"
                             .format(folder))
        os.makedirs(folder, exist_ok=True)
        for name, contents in self.files().items():
            write_bytes(os.path.join(folder, name), contents.encode("utf-8"))
