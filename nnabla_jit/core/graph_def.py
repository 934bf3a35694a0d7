"""Graphs captured from models (nnabla's ``nnabla.core.graph_def``).

    x = nn.ProtoVariable((4, 3, 32, 32))
    with nn.graph_def.graph() as g:          # or the global default graph
        y = model(x)                          # a Module, or plain F / PF calls
    y2 = g(nn.Variable.from_numpy_array(data))   # the same network on other inputs
    g.save("model.nnp"); g3 = nn.graph_def.load("model.nnp")

A :class:`ProtoVariable` is a placeholder Variable: functions applied to it build an ordinary
nnabla_jit graph, nothing is computed. When a top-level Module call returns (or a graph is
asked for), the graph built from the placeholders since the last capture is written as one
network (nnabla's ``Network`` message, the ``.nnp`` format) named after the Module, the
``graph_name`` in effect, or the ``graph(name=...)``. The network's parameters are the Variables
the model used (shared with it), kept in the graph's parameter scope under their paths.
"""
import weakref
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from ..context import context_scope, get_current_context
from .. import parameter as _param
from ..parameter import get_parameter, get_parameter_or_create, get_parameters, set_parameter
from ..serialization import nnp
from ..serialization import parameters as params_io
from ..serialization.graph_export import network_to_proto
from ..serialization.graph_import import ProtoFunction, ProtoNetwork as _ImportedNetwork
from ..serialization.graph_import import _with_batch
from ..serialization.initializers import initializer_from_proto
from ..serialization.proto import nnabla_pb2
from ..graph import upstream_functions
from .graph_optimizer import rename_variable
from ..variable import Variable
from ..utils.converter.nnabla.expander import expand_loops

__all__ = ["ProtoVariable", "ProtoFunction", "ProtoNetwork", "ProtoGraph", "ProtoGraphBuilder",
           "FlatModule", "graph", "graph_name", "module_scope", "current_graph_builder",
           "current_network", "current_module", "reset_default_graph", "get_default_graph",
           "get_default_graph_by_variable", "create_graph_from_variable", "load", "save"]


class ProtoVariable(Variable):
    """A placeholder input of a graph to capture: ``nn.ProtoVariable(shape, name=None,
    need_grad=False, var_type='Buffer')``. It is a Variable (functions accept it); creating it
    registers it with the current graph builder."""

    def __init__(self, shape, name=None, need_grad=False, var_type="Buffer"):
        super().__init__(shape, need_grad=need_grad)
        self.name = name or ""
        self.type = var_type
        _pending_inputs.append(weakref.ref(self))

    @property
    def variable_instance(self):
        return self


# Placeholders not yet part of a captured network, in creation order (weakly held). They are
# shared by all builders: a placeholder made outside a ``graph()`` block may feed a model
# called inside it.
_pending_inputs = []


def _alive_pending():
    alive = [r() for r in _pending_inputs]
    _pending_inputs[:] = [weakref.ref(v) for v in alive if v is not None]
    return [v for v in alive if v is not None]


def _create_initializer(v, rng):
    """The initializer (``shape -> ndarray``) a network file names for variable ``v`` (with an
    ``initializer`` of ``type`` and ``multiplier``), drawing from ``rng``; None if none."""
    if getattr(v, "initializer", None) is None:
        return None
    return initializer_from_proto(v.initializer, rng)


def _unique(names, base):
    """``base``, or ``base_1``, ``base_2``, ... if taken; records it in ``names``."""
    k = names.get(base, 0)
    names[base] = k + 1
    return base if k == 0 else "{}_{}".format(base, k)


class ProtoNetwork(_ImportedNetwork):
    """One captured or loaded network: ``inputs`` / ``outputs`` (names), ``variables``,
    ``parameters`` and ``functions`` (by name, in execution order). Calling it builds the
    network's graph on the given input Variables (or on new ones of the recorded shapes) with
    the owning graph's parameters."""

    def __init__(self, owner, proto, batch_size=None, input_order=None):
        super().__init__(proto, batch_size)
        self.owner = weakref.ref(owner)
        for pf in self.functions.values():
            pf.owner = weakref.ref(self)    # graph_optimizer finds a function's network so
        if input_order is not None:     # the order the model took them in
            self.inputs = [n for n in input_order if n in self.inputs]

    @property
    def current_context(self):
        return self.owner().current_context

    def __getitem__(self, item):
        return getattr(self, item)

    def forward_sequence(self):
        """The functions in execution order."""
        return list(self.functions.values())

    def __call__(self, *args, **kwargs):
        owner = self.owner()
        if kwargs.get("ctx") is not None:
            owner.current_context = kwargs["ctx"]
        batch = kwargs.get("batch_size") or (args[0].shape[0] if args and args[0].shape else None) \
            or self.batch_size
        if args and len(args) != len(self.inputs):
            raise ValueError("network '{}': {} inputs given, it takes {} ({})".format(
                self.name, len(args), len(self.inputs), ", ".join(self.inputs)))
        with _param.parameter_scope("", owner.parameter_scope), context_scope(owner.current_context):
            for k, name in enumerate(self.inputs):
                pv = self.variables[name]
                if args:
                    pv.variable_instance = args[k]
                else:
                    pv.variable_instance = Variable(_with_batch(pv.shape, batch))
            rng = np.random.RandomState(0)
            for pv in self.parameters.values():
                if pv.required or pv.parent:
                    existing = get_parameter(pv.name)
                    pv.variable_instance = existing if existing is not None else \
                        get_parameter_or_create(pv.name, pv.shape,
                                                initializer_from_proto(pv.proto.initializer, rng))
            for pf in self.functions.values():
                self._build_function(pf, batch)
        outputs = [self.variables[n].variable_instance for n in self.outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def as_proto(self):
        """The network as nnabla's ``Network`` message (reflecting any renaming)."""
        net = nnabla_pb2.Network(name=self.name, batch_size=int(self.batch_size or 1))
        for pv in list(self.variables.values()) + list(self.parameters.values()):
            v = net.variable.add()
            v.CopyFrom(pv.proto)
            v.name = pv.name
            del v.shape.dim[:]
            v.shape.dim.extend(int(d) for d in pv.shape)
        for pf in self.functions.values():
            f = net.function.add()
            f.CopyFrom(pf.proto)
            f.name = pf.name
            del f.input[:]
            f.input.extend(pf.inputs)
            del f.output[:]
            f.output.extend(pf.outputs)
        return net

    def save(self, filename, include_parameter=False, variable_batch_size=True, extension=".nnp"):
        """Write this network (and the parameters it uses) to ``filename``."""
        self.owner().save(filename, include_parameter, variable_batch_size, extension, networks=[self])


class ProtoGraph:
    """The networks captured in one ``graph()`` scope (or loaded from one file), by name, and
    the parameter scope they take their parameters from."""

    def __init__(self, networks=None, parameter_scope=None):
        self.networks = networks if networks is not None else OrderedDict()
        self.parameter_scope = parameter_scope if parameter_scope is not None else OrderedDict()
        self._context = None
        self.global_variables = {}
        self.executors = OrderedDict()   # name -> Executor message (kept from a loaded file)

    def __contains__(self, item):
        return item in self.networks

    def __getitem__(self, item):
        return self.networks[item]

    def __setitem__(self, key, value):
        self.networks[key] = value

    def __getattr__(self, item):
        networks = self.__dict__.get("networks")
        if networks is not None and item in networks:
            return networks[item]
        raise AttributeError("ProtoGraph has no network or attribute {!r} (networks: {})".format(
            item, list(networks or [])))

    def get(self, key, value=None):
        return self.networks.get(key, value)

    @property
    def current_context(self):
        return self._context if self._context is not None else get_current_context()

    @current_context.setter
    def current_context(self, ctx):
        self._context = ctx

    def get_parameters(self, grad_only=False):
        with _param.parameter_scope("", self.parameter_scope):
            return get_parameters(grad_only=grad_only)

    def set_parameter(self, key, param):
        with _param.parameter_scope("", self.parameter_scope):
            set_parameter(key, param)

    def set_parameters(self, params):
        for k, v in params.items():
            self.set_parameter(k, v)

    def default_graph(self):
        """The first network."""
        if not self.networks:
            raise ValueError("ProtoGraph: no network has been captured or loaded")
        return next(iter(self.networks.values()))

    def __call__(self, *args, **kwargs):
        return self.default_graph()(*args, **kwargs)

    @staticmethod
    def from_proto(proto, batch_size=None, param_scope=None, rng=None):
        g = ProtoGraph(parameter_scope=param_scope)
        for net in proto.network:
            g.networks[net.name] = ProtoNetwork(g, net, batch_size)
        for e in proto.executor:
            g.executors[e.name] = nnabla_pb2.Executor()
            g.executors[e.name].CopyFrom(e)
        return g

    def as_proto(self, include_parameter=False, only_parameter=False, networks=None,
                 variable_batch_size=True):
        proto = nnabla_pb2.NNablaProtoBuf()
        if not only_parameter:
            written = networks or list(self.networks.values())
            for n in written:
                proto.network.add().CopyFrom(n.as_proto())
            # A loaded file's executors are written back with their networks, as nnabla does.
            names = {n.name for n in written}
            for e in self.executors.values():
                if e.network_name in names:
                    proto.executor.add().CopyFrom(e)
        if include_parameter or only_parameter:
            params_io.add_entries_to_proto(proto, params_io.entries_of(self.get_parameters()))
        return proto

    def save(self, filename, include_parameter=False, variable_batch_size=True, extension=".nnp",
             networks=None):
        """Write the networks to ``filename`` (``.nnp`` always holds the parameters)."""
        proto = self.as_proto(networks=networks)
        nnp.write(filename, proto, params_io.entries_of(self.get_parameters()),
                  extension=None if isinstance(filename, str) else extension)

    def expand_loop_control(self):
        return self


class FlatModule:
    """The owner of a network captured from plain F / PF calls (no Module): its parameters
    are those of the current parameter scope."""

    def __init__(self, name):
        self.name = name or "network"

    @staticmethod
    def get_parameters(recursive=True, grad_only=False, memo=None):
        return get_parameters(grad_only=grad_only)

    def get_path_name(self):
        return "@" + self.name


def _captured_network_proto(name, inputs, outputs, params):
    """The ``Network`` message of a captured graph, named as nnabla names captured networks:
    functions by type (``Convolution``, ``Convolution_1``, ...), unnamed inputs by the type
    of their reader (``Affine_in``, ``Affine_in_1``), other buffers ``<Type>_out[_k]``;
    parameters by path. Returns it and the input names in the placeholders' order."""
    temp_in = OrderedDict((v.name or "__input_{}__".format(k), v) for k, v in enumerate(inputs))
    temp_out = OrderedDict((v.name or "__output_{}__".format(k), v) for k, v in enumerate(outputs))
    proto = network_to_proto(name, temp_out, names=temp_in, parameters=params)
    prefix = "@{}/".format(name)
    readers, producers = {}, {}
    for f in proto.function:
        for n in f.input:
            readers.setdefault(n, f.type)
        for n in f.output:
            producers[n] = f.type
    renames = {}
    for v in proto.variable:
        if v.name.startswith(prefix):
            renames[v.name] = v.name[len(prefix):]
    taken = set(renames.values()) | {v.name for v in proto.variable if v.name not in renames}
    counts = {}

    def unique(base):
        k = counts.get(base, 0)
        while True:
            candidate = base if k == 0 else "{}_{}".format(base, k)
            k += 1
            if candidate not in taken:
                counts[base] = k
                taken.add(candidate)
                return candidate
    for v in proto.variable:
        if v.name.startswith("__input_"):
            renames[v.name] = unique("{}_in".format(readers.get(v.name, "Input")))
        elif v.name.startswith("__output_"):
            renames[v.name] = unique("{}_out".format(producers.get(v.name, "Output")))
    for v in proto.variable:
        v.name = renames.get(v.name, v.name)
    for f in proto.function:
        if f.name.startswith(prefix):
            f.name = f.name[len(prefix):]
        f.input[:] = [renames.get(n, n) for n in f.input]
        f.output[:] = [renames.get(n, n) for n in f.output]
    return proto, [renames.get(n, n) for n in temp_in]


def _with_local_parameters(net_name, outputs, inputs, params):
    """``params`` plus the other leaf Variables the graph reads (parameters of modules made
    inside a call, constants), named ``@<network>/<Function>_<input index>`` as nnabla does."""
    params = OrderedDict(params)
    # Variables hash by their buffers, so a parameter's unlinked twin (what PF layers put in
    # the graph) is found as that parameter.
    known = {v: True for v in list(params.values()) + list(inputs)}
    for node in upstream_functions(outputs):
        for k, v in enumerate(node.inputs):
            if v._parent is None and v not in known:
                known[v] = True
                params[_unique(_local_names, "@{}/{}_{}".format(net_name, node.name, k))] = v
    return params


_local_names = {}


def _downstream_outputs(inputs):
    """Alive variables computed from ``inputs`` that no function reads, in the order found."""
    found, seen_nodes, seen_vars = [], set(), set()
    stack = list(reversed(inputs))
    while stack:
        v = stack.pop()
        if id(v) in seen_vars:
            continue
        seen_vars.add(id(v))
        consumers = v.function_references[::-1]   # in the order they were built
        if not consumers and v._parent is not None:
            found.append(v)
        nexts = []
        for f in consumers:
            if id(f) in seen_nodes:
                continue
            seen_nodes.add(id(f))
            nexts.extend(o for o in f.outputs if o is not None)
        stack.extend(reversed(nexts))
    return found


class ProtoGraphBuilder:
    """Collects placeholder inputs and module calls and writes captured networks into its
    :class:`ProtoGraph`."""

    def __init__(self, **kwargs):
        self.networks = OrderedDict()
        self.stack = []
        self.module = None
        self.names = {}
        self.graph_name = kwargs.get("name", None)
        self.proto_graph = ProtoGraph(self.networks, kwargs.get("parameter_scope", None))

    @staticmethod
    def used_inputs():
        return [v for v in _alive_pending() if v.function_references]

    def is_dirty(self):
        return bool(_pending_inputs) and bool(self.used_inputs())

    def get_current(self):
        return self.proto_graph

    def get_module(self):
        if self.module is None:
            self.module = FlatModule(self.graph_name)
        return self.module

    def get_graph(self):
        return self.proto_graph

    def begin_module(self, module):
        self.stack.append(module)
        self.module = module
        return self.proto_graph

    def end_module(self, outputs=None):
        self.stack.pop()
        if self.stack:
            self.module = self.stack[-1]
            return
        if self.is_dirty():
            self.commit_network(outputs)
        self.module = None

    def commit_network(self, outputs=None):
        """Write the graph built from the used placeholders as one network."""
        inputs = self.used_inputs()
        if not inputs:
            return None
        module = self.module if self.module is not None else FlatModule(self.graph_name)
        if self.graph_name:
            name, self.graph_name = self.graph_name, None
        else:
            name = module.name
        name = _unique(self.names, name)
        if outputs is None:
            outputs = _downstream_outputs(inputs)
        elif isinstance(outputs, Variable):
            outputs = [outputs]
        outputs = [o for o in outputs if isinstance(o, Variable)]
        params = _with_local_parameters(name, outputs, inputs, module.get_parameters(grad_only=False))
        proto, input_order = _captured_network_proto(name, inputs, outputs, params)
        network = ProtoNetwork(self.proto_graph, proto, input_order=input_order)
        network._output_variables = [weakref.ref(v) for v in outputs]
        self.networks[name] = network
        for path, param in params.items():
            if path in network.parameters:
                self.proto_graph.set_parameter(path, param)
        used = set(id(v) for v in inputs)
        _pending_inputs[:] = [r for r in _pending_inputs if id(r()) not in used]
        self.module = None
        return network


_default_builder = [ProtoGraphBuilder()]


def __getattr__(name):
    # nnabla's module global holding the builder in use (changes inside ``graph()`` blocks).
    if name == "proto_graph_builder":
        return current_graph_builder()
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))


def current_graph_builder():
    return _default_builder[-1]


def current_network():
    return current_graph_builder().get_current()


def current_module():
    return current_graph_builder().get_module()


@contextmanager
def module_scope(pgb, module):
    """What a Module method runs in: nested calls are parts of the outermost one, whose
    return captures a network if it was given placeholders."""
    pgb.begin_module(module)
    result = {}
    try:
        yield result
    finally:
        pgb.end_module(result.get("outputs"))


@contextmanager
def graph_name(name):
    """Name the network captured in this block."""
    builder = current_graph_builder()
    previous, builder.graph_name = builder.graph_name, name
    try:
        yield builder.proto_graph
    finally:
        if builder.is_dirty():
            builder.commit_network()
        builder.graph_name = previous


@contextmanager
def graph(**kwargs):
    """``with nn.graph_def.graph(name=None, parameter_scope=None) as g:`` captures the
    networks built in the block into ``g`` (a :class:`ProtoGraph`)."""
    builder = ProtoGraphBuilder(**kwargs)
    _default_builder.append(builder)
    try:
        yield builder.proto_graph
    finally:
        if builder.is_dirty():
            builder.commit_network()
        _default_builder.pop()


def reset_default_graph():
    """Forget everything captured in the global default graph (and unused placeholders)."""
    _default_builder[0] = ProtoGraphBuilder()
    _pending_inputs.clear()


def get_default_graph(*args, **kwargs):
    """The global (or innermost ``graph()``) ProtoGraph, or its network named ``name``."""
    name = args[0] if args and isinstance(args[0], str) else kwargs.get("name")
    builder = current_graph_builder()
    if builder.is_dirty():
        builder.commit_network()
    if name is None:
        return builder.proto_graph
    return builder.proto_graph.networks.get(name)


def _name_in_network(network, v):
    """The name ``v`` (a variable the network was captured with, or a name) has in it."""
    if isinstance(v, str):
        return v
    for r, name in zip(getattr(network, "_output_variables", []), network.outputs):
        if r() is v:
            return name
    for name, pv in network.variables.items():
        if pv is v or getattr(pv, "variable_instance", None) is v:
            return name
    if getattr(v, "name", "") in network.variables:
        return v.name
    raise ValueError("executor: {} is not a variable of network '{}'".format(v, network.name))


def _executor_from_dict(e, network):
    """An ``Executor`` message from nnabla's executor dict; an ``output`` given as
    {name: variable} renames those variables of ``network`` first, as nnabla does."""
    outputs = e.get("output", [])
    if isinstance(outputs, dict):
        renames = {_name_in_network(network, v): n for n, v in outputs.items()}
        rename_variable(network, {old: new for old, new in renames.items() if old != new})
        outputs = list(outputs)
    remap = e.get("remp", {})   # nnabla's key (sic): variable name -> data name
    m = nnabla_pb2.Executor(name=e["name"], network_name=e["network"])
    m.no_image_normalization = bool(e.get("no_image_normalization", False))
    m.num_evaluations = int(e.get("num_evaluations", 0))
    m.repeat_evaluation_type = e.get("repeat_evaluation_type", "")
    m.need_back_propagation = bool(e.get("need_back_propagation", False))
    for vname in e.get("data", []):
        m.data_variable.add(variable_name=vname, data_name=remap.get(vname, vname))
    for vname in outputs:
        m.output_variable.add(variable_name=vname, data_name=remap.get(vname, vname))
    for vname in e.get("generator_variables", []):
        m.generator_variable.add(variable_name=vname, type="Constant", multiplier=0)
    for name in network.parameters:
        m.parameter_variable.add(variable_name=name)
    return m


def get_default_graph_by_variable(proto_variable):
    """The network of the default graph that has ``proto_variable`` among its outputs."""
    builder = current_graph_builder()
    if builder.is_dirty():
        builder.commit_network()
    for network in builder.proto_graph.networks.values():
        if any(r() is proto_variable for r in getattr(network, "_output_variables", [])):
            return network
        if proto_variable.name and proto_variable.name in network.outputs:
            return network
    raise ValueError("{} is not the output variable of any network".format(proto_variable))


def create_graph_from_variable(name, variables, names=None, parameter_scope=None):
    """A ProtoGraph with one network ``name`` computing ``variables`` (a Variable or a list),
    from an ordinary graph already built; its parameters are those of ``parameter_scope`` (or
    the current scope) that the graph uses."""
    outputs = [variables] if isinstance(variables, Variable) else list(variables)
    given = {v: n for n, v in (names or {}).items() if isinstance(v, Variable)}   # as nnabla: names win
    out_names = OrderedDict((given.get(v) or v.name or "y{}".format(k), v) for k, v in enumerate(outputs))
    if parameter_scope is not None:
        with _param.parameter_scope("", parameter_scope):
            params = get_parameters(grad_only=False)
    else:
        params = get_parameters(grad_only=False)
    proto = network_to_proto(name, out_names, names=names, parameters=params)
    g = ProtoGraph()
    network = ProtoNetwork(g, proto)
    network._output_variables = [weakref.ref(v) for v in outputs]
    g.networks[name] = network
    for path, param in params.items():
        if path in network.parameters:
            g.set_parameter(path, param)
    return g


def load(filename, batch_size=None, exclude_parameter=False, parameter_only=False,
         extension=".nntxt", parameter_scope=None, rng=None):
    """Read ``filename`` (``.nnp``, ``.nntxt``, ``.protobuf``, ``.h5``, or a list of them) as a
    ProtoGraph; the parameters go to ``parameter_scope`` (default: the graph's own)."""
    files = filename if isinstance(filename, (list, tuple)) else [filename]
    contents = expand_loops(nnp.read(files, extension=extension, exclude_parameter=exclude_parameter,
                                     parameter_only=parameter_only))
    scope = parameter_scope if parameter_scope is not None else OrderedDict()
    with _param.parameter_scope("", scope):
        params_io.assign_to_scope(contents.parameters, files[0])
    return ProtoGraph.from_proto(contents.proto, batch_size=batch_size, param_scope=scope, rng=rng)


def save(filename, content, include_parameters=False, variable_batch_size=True, extension=".nnp",
         executors=None):
    """Write a ProtoGraph or ProtoNetwork to ``filename``; ``executors`` (nnabla's list of
    dicts: ``name``, ``network``, ``data``, ``output`` as names or {name: variable}, ...) are
    written with it, their outputs named as the dicts say."""
    if isinstance(content, (list, tuple)):
        content = content[0]
    if executors is not None:
        graph = content if isinstance(content, ProtoGraph) else content.owner()
        if isinstance(executors, dict):
            executors = [executors]
        graph.executors = OrderedDict(
            (e["name"], _executor_from_dict(e, graph.networks[e["network"]])) for e in executors)
    if isinstance(content, ProtoNetwork):
        content.save(filename, include_parameters, variable_batch_size, extension)
    elif isinstance(content, ProtoGraph):
        content.save(filename, include_parameters, variable_batch_size, extension)
    else:
        raise TypeError("graph_def.save: expected a ProtoGraph or ProtoNetwork, got {}".format(
            type(content).__name__))
