"""``NnpLoader``: networks of an ``.nnp`` (or ``.nntxt``/``.protobuf``) as runnable graphs.

    from nnabla_jit.utils.nnp_graph import NnpLoader
    nnp = NnpLoader('model.nnp')
    net = nnp.get_network(nnp.get_network_names()[0], batch_size=1)
    x = list(net.inputs.values())[0]
    y = list(net.outputs.values())[0]
    x.d = data
    y.forward(clear_buffer=True)

As in nnabla, the file's parameters are kept in the loader's own scope; ``get_network`` builds
the graph with them and then registers them in the current parameter scope.
``get_network(..., callback=NnpNetworkPass())`` edits the network while it is built (replace an
input, drop or bypass functions, change a function's arguments, stop at a variable, fix the
parameters), as nnabla's network passes do. Unlike nnabla,
``get_network`` refuses a network whose parameters the file does not hold (nnabla builds it
with freshly initialized parameters, which silently computes garbage).
"""
from collections import OrderedDict

import numpy as np

from ..parameter import get_parameter, parameter_scope, set_parameter
from ..serialization import nnp
from ..serialization.files import file_label
from ..serialization.graph_import import (ProtoFunction, ProtoNetwork, call_proto_function,
                                          check_batch_size)
from ..serialization.parameters import assign_to_scope
from ..variable import Variable
from .converter.nnabla.expander import expand_loops

__all__ = ["NnpLoader", "NnpNetwork", "NnpNetworkPass"]


class NnpNetwork:
    """A graph built from one network of an NNP file.

    Attributes:
        inputs (dict): name -> input Variable (buffers no function produces).
        outputs (dict): name -> output Variable (buffers no function reads).
        variables (dict): name -> Variable, for every variable and parameter.
        proto_network (ProtoNetwork): the network as read, with its functions (None when built
            with an NnpNetworkPass, which edits a copy of the message).
    """

    def __init__(self, proto, batch_size, loader_scope, rng, callback=None):
        if callback is not None:
            self.proto_network = None
            self._variables, self._inputs, self._outputs = _build_with_pass(
                proto, batch_size, loader_scope, callback)
            return
        with parameter_scope("", loader_scope):
            self.proto_network = ProtoNetwork(proto, batch_size).build(rng=rng)
        pn = self.proto_network
        self._inputs = OrderedDict((k, pn.variables[k].variable_instance) for k in pn.inputs)
        self._outputs = OrderedDict((k, pn.variables[k].variable_instance) for k in pn.outputs)
        self._variables = OrderedDict(
            (k, v.variable_instance) for k, v in list(pn.variables.items()) + list(pn.parameters.items())
            if v.variable_instance is not None)
        # Publish the network's parameters to the current scope, as nnabla does.
        with parameter_scope("", loader_scope):
            registered = [(k, get_parameter(k)) for k, v in pn.parameters.items()
                          if v.variable_instance is not None]
        for k, param in registered:
            set_parameter(k, param)

    @property
    def inputs(self):
        return self._inputs

    @property
    def outputs(self):
        return self._outputs

    @property
    def variables(self):
        return self._variables


class NnpLoader:
    """Read an NNP file's networks and parameters.

    Args:
        filepath: path or file object (``.nnp``, ``.nntxt``, ``.prototxt``, ``.protobuf``).
        scope (dict): parameter scope to keep the file's parameters in (default: a new one).
        extension (str): the format of a file object.
    """

    def __init__(self, filepath, scope=None, extension=".nntxt"):
        contents = expand_loops(nnp.read([filepath], extension=extension))
        self._params = scope if scope is not None else OrderedDict()
        with parameter_scope("", self._params):
            assign_to_scope(contents.parameters, filepath)
        self.proto = contents.proto
        self.network_dict = OrderedDict((n.name, n) for n in contents.proto.network)
        self._source = filepath

    def _check_parameters(self, proto):
        """Refuse a network whose parameters the file lacks: nnabla would fill them with their
        initializers (zeros, mostly) and the network would run, computing garbage."""
        used = {n for f in proto.function for n in list(f.input) + list(f.output)}
        with parameter_scope("", self._params):
            missing = [v.name for v in proto.variable if v.type == "Parameter"
                       and v.name in used and get_parameter(v.name) is None]
        if missing:
            raise ValueError("NnpLoader.get_network: network '{}' needs parameters that {} does not "
                             "hold: {}".format(proto.name, file_label(self._source),
                                               ", ".join(missing)))

    def get_network_names(self):
        """Names of the networks in the file."""
        return list(self.network_dict.keys())

    def get_network(self, name, batch_size=None, callback=None):
        """Build network ``name`` (batch size: ``batch_size`` or the file's) -> NnpNetwork."""
        if callback is not None and not isinstance(callback, NnpNetworkPass):
            raise TypeError("NnpLoader.get_network: callback must be an NnpNetworkPass, got {}"
                            .format(type(callback).__name__))
        check_batch_size(batch_size, "NnpLoader.get_network")
        if name not in self.network_dict:
            raise ValueError("NnpLoader.get_network: no network '{}' in the file (it has: {})"
                             .format(name, ", ".join(self.network_dict) or "none"))
        if callback is None:
            # With a pass, functions may be dropped: a missing parameter is refused when used.
            self._check_parameters(self.network_dict[name])
        return NnpNetwork(self.network_dict[name], batch_size, self._params,
                          np.random.RandomState(1223), callback)


class NnpNetworkPass:
    """Edits applied to a network while ``NnpLoader.get_network(..., callback=pass)`` builds it.

    The nodes the callbacks get are :class:`PassVariable` / :class:`PassFunction`: ``.name``,
    ``.proto`` (the message, a copy: editing it changes the built graph, not the loader),
    ``.inputs``/``.outputs`` of a function, ``.variable`` (a Variable to use instead of creating
    one) and ``.need_grad`` of a variable.

    Args:
        verbose (int): 1 prints the edits made, 2 also every function created.
    """

    def __init__(self, verbose=0):
        self._variable_callbacks = {}
        self._function_callbacks_by_name = {}
        self._function_callbacks_by_type = {}
        self._passes_by_name = {}
        self._passes_by_type = {}
        self._fix_parameters = False
        self._use_up_to_variables = set()
        self.verbose = print if verbose else _silent
        self.verbose2 = print if verbose > 1 else _silent

    # Decorators registering callbacks.
    def on_function_pass_by_name(self, name):
        """``@pass.on_function_pass_by_name(name)``: ``callback(f, variables, param_scope)`` runs
        on the function named ``name`` before the graph is built (it may rewire or disable it)."""
        def register(callback):
            self._passes_by_name[name] = callback
            return callback
        return register

    def on_function_pass_by_type(self, name):
        """As :meth:`on_function_pass_by_name`. nnabla 1.39 registers these by function *name*
        too (a function whose name is ``name``), and so does nnabla_jit, so that a pass gives
        the same graph on both."""
        return self.on_function_pass_by_name(name)

    def on_generate_variable(self, name):
        """``@pass.on_generate_variable(name)``: ``callback(v) -> v`` runs when variable
        ``name`` is created; setting ``v.variable`` makes the graph use that Variable."""
        def register(callback):
            self._variable_callbacks[name] = callback
            return callback
        return register

    def on_generate_function_by_name(self, name):
        """``@pass.on_generate_function_by_name(name)``: ``callback(f) -> f`` runs before the
        function named ``name`` is created; editing ``f.proto`` changes its arguments."""
        def register(callback):
            self._function_callbacks_by_name[name] = callback
            return callback
        return register

    def on_generate_function_by_type(self, name):
        """As :meth:`on_generate_function_by_name`, for every function of type ``name``."""
        def register(callback):
            self._function_callbacks_by_type[name] = callback
            return callback
        return register

    # Ready-made passes.
    def drop_function(self, *names):
        """Leave out the functions ``names`` (their outputs lose their producer)."""
        def drop(f, variables, param_scope):
            self.verbose('Pass: Deleting {}.'.format(f.name))
            f.disable()
        for name in names:
            self.on_function_pass_by_name(name)(drop)

    def fix_parameters(self):
        """Build with every parameter at ``need_grad=False``."""
        self._fix_parameters = True

    def use_up_to(self, *names):
        """Stop at the variables ``names``: functions that need them are left out."""
        self._use_up_to_variables.update(names)

    def remove_and_rewire(self, name, i=0, o=0):
        """Bypass function ``name``: its ``o``-th output becomes its ``i``-th input."""
        @self.on_function_pass_by_name(name)
        def bypass(f, variables, param_scope):
            fi, fo = f.inputs[i], f.outputs[o]
            self.verbose('Removing {} and rewire input={} and output={}.'.format(
                f.name, fi.name, fo.name))
            fo.rewire_on(fi)
            fo.proto.name = fi.name

    def set_variable(self, name, input_var):
        """Use Variable ``input_var`` as variable ``name`` (an input, typically)."""
        @self.on_generate_variable(name)
        def replace(v):
            self.verbose('Replace {} by {}.'.format(name, input_var))
            v.proto.shape.dim[:] = input_var.shape
            v.variable = input_var
            input_var.name = v.name
            return v

    def force_average_pooling_global(self, name, by_type=False):
        """Make AveragePooling ``name`` (or of type ``name``) pool over the whole image."""
        register = self.on_generate_function_by_type if by_type else self.on_generate_function_by_name

        @register(name)
        def make_global(f):
            pool_shape = f.inputs[0].proto.shape.dim[2:]
            self.verbose('Change strides of {} to {}.'.format(f.name, pool_shape))
            p = f.proto.average_pooling_param
            p.kernel.dim[:] = pool_shape
            p.stride.dim[:] = pool_shape
            return f

    def check_average_pooling_global(self, name, by_type=False):
        """Refuse AveragePooling ``name`` (or of type ``name``) unless it pools globally."""
        register = self.on_generate_function_by_type if by_type else self.on_generate_function_by_name

        @register(name)
        def check_global(f):
            pool_shape = f.inputs[0].proto.shape.dim[2:]
            p = f.proto.average_pooling_param
            if p.kernel.dim[:] != pool_shape or p.stride.dim[:] != pool_shape:
                raise ValueError(
                    "AveragePooling '{}' is not global: the image is {}, the kernel {} and the "
                    "stride {}; consider force_average_pooling_global".format(
                        f.name, list(pool_shape), list(p.kernel.dim), list(p.stride.dim)))
            return f

    def set_batch_normalization_batch_stat_all(self, batch_stat):
        """Set ``batch_stat`` of every BatchNormalization."""
        @self.on_generate_function_by_type('BatchNormalization')
        def set_batch_stat(f):
            self.verbose('Setting batch_stat={} at {}.'.format(batch_stat, f.name))
            f.proto.batch_normalization_param.batch_stat = batch_stat
            return f

    # Called by the builder (nnabla's names: code written for nnabla calls them too).
    def _apply_function_pass_by_name(self, f, variables, param_scope):
        if f.name not in self._passes_by_name:
            return f
        return self._passes_by_name[f.name](f, variables, param_scope)

    def _apply_function_pass_by_type(self, f, variables, param_scope):
        if f.proto.type not in self._passes_by_type:
            return f
        return self._passes_by_type[f.proto.type](f, variables, param_scope)

    def _apply_generate_variable(self, v):
        if v.name in self._variable_callbacks:
            v = self._variable_callbacks[v.name](v)
        if self._fix_parameters:
            v.need_grad = False
        return v

    def _apply_generate_function_by_name(self, f):
        if f.name not in self._function_callbacks_by_name:
            return f
        return self._function_callbacks_by_name[f.name](f)

    def _apply_generate_function_by_type(self, f):
        if f.proto.type not in self._function_callbacks_by_type:
            return f
        return self._function_callbacks_by_type[f.proto.type](f)

    def _apply_use_up_to(self, variables):
        for v in variables:
            if v.name in self._use_up_to_variables:
                self.verbose('Stopping at {}.'.format(v.name))
                v.stop = True


def _silent(*args, **kwargs):
    pass


class PassVariable:
    """A variable of a network being built with an NnpNetworkPass."""

    def __init__(self, proto):
        self.proto = proto
        self.parent = None          # the PassFunction producing it
        self.readers = []           # the PassFunctions reading it
        self.variable = None        # the Variable built (or given by a pass)
        self.need_grad = None       # None: the parameter's own
        self.stop = False

    @property
    def name(self):
        return self.proto.name

    @property
    def num_referrers(self):
        return len(self.readers)

    def rewire_on(self, var):
        """Take the place of PassVariable ``var``: its producer now produces this one (and this
        one's producer is disabled)."""
        producer = var.parent
        if self.parent is not None:
            self.parent.disable()
        self.parent = producer
        var.parent = None
        if producer is not None:
            producer.outputs = [self if o is var else o for o in producer.outputs]


class PassFunction:
    """A function of a network being built with an NnpNetworkPass."""

    def __init__(self, proto, inputs, outputs):
        self.proto = proto
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.disabled = False
        for v in self.inputs:
            v.readers.append(self)
        for v in self.outputs:
            v.parent = self

    @property
    def name(self):
        return self.proto.name

    def disable(self):
        """Leave this function out of the graph."""
        self.disabled = True
        for v in self.inputs:
            v.readers = [f for f in v.readers if f is not self]
        for v in self.outputs:
            if v.parent is self:
                v.parent = None
        self.inputs, self.outputs = [], []


def _connected(variables):
    return OrderedDict((k, v) for k, v in variables.items() if v.parent is not None or v.readers)


def _forward_order(variables):
    """Functions needed by the network's outputs, producers first; a function reading a
    stopped variable (``use_up_to``), directly or not, is disabled and left out."""
    order, seen = [], set()

    def visit(vs):
        stop = False
        for v in vs:
            stop |= v.stop
            f = v.parent
            if f is None or id(f) in seen:
                continue
            seen.add(id(f))
            if visit(f.inputs):
                f.disable()
                stop = True
                continue
            order.append(f)
        return stop
    visit([v for v in _connected(variables).values() if not v.readers])
    return order


def _build_with_pass(proto, batch_size, loader_scope, callback):
    """Build network message ``proto`` editing it with NnpNetworkPass ``callback`` ->
    (variables, inputs, outputs), dicts name -> Variable."""
    network = type(proto)()
    network.CopyFrom(proto)     # passes edit the messages: keep the loader's intact
    batch = batch_size or network.batch_size or 1
    variables = OrderedDict((v.name, PassVariable(v)) for v in network.variable)
    for f in network.function:
        missing = [n for n in list(f.input) + list(f.output) if n not in variables]
        if missing:
            raise ValueError("network '{}': function '{}' uses variable '{}', which the network "
                             "does not declare".format(network.name, f.name, missing[0]))
        PassFunction(f, [variables[n] for n in f.input], [variables[n] for n in f.output])

    for f in _forward_order(variables):
        if not f.disabled:
            callback._apply_function_pass_by_type(f, variables, loader_scope)
            callback._apply_function_pass_by_name(f, variables, loader_scope)
    for f in _forward_order(variables):
        callback._apply_use_up_to(f.inputs)

    def variable_of(v):
        if v.variable is not None:
            return v.variable
        v = callback._apply_generate_variable(v)
        if v.variable is not None:
            return v.variable
        shape = tuple(batch if d < 0 else int(d) for d in v.proto.shape.dim)
        if v.proto.type != "Parameter":
            v.variable = Variable(shape)
        else:
            with parameter_scope("", loader_scope):
                param = get_parameter(v.name)
            if param is None:
                raise ValueError("NnpLoader.get_network: network '{}' needs parameter '{}', which "
                                 "the file does not hold".format(network.name, v.name))
            if param.shape != shape:
                raise ValueError("NnpLoader.get_network: network '{}': parameter '{}' has shape "
                                 "{} in the file, the network declares {}".format(
                                     network.name, v.name, param.shape, shape))
            v.variable = param.get_unlinked_variable(need_grad=v.need_grad)
            set_parameter(v.name, v.variable)   # published to the current scope, as nnabla
        v.variable.name = v.name
        return v.variable

    built = 0
    for f in _forward_order(variables):
        f = callback._apply_generate_function_by_type(f)
        f = callback._apply_generate_function_by_name(f)
        inputs = [variable_of(v) for v in f.inputs]
        pf = ProtoFunction(f.proto, network.name)   # read after the passes edited the message
        callback.verbose2('Creating function {}: {} --> {}.'.format(
            f.name, [v.name for v in f.inputs], [v.name for v in f.outputs]))
        outs = call_proto_function(pf, inputs, batch, network.name)
        for v, out in zip(f.outputs, outs):
            v.variable = out
            out.name = v.name
        built += 1
    callback.verbose2('Created {} functions.'.format(built))

    connected = _connected(variables)
    all_vars = OrderedDict((v.name, v.variable) for v in connected.values())
    inputs = OrderedDict((v.name, v.variable) for v in connected.values()
                         if v.parent is None and v.proto.type != "Parameter")
    outputs = OrderedDict((v.name, v.variable) for v in connected.values() if not v.readers)
    return all_vars, inputs, outputs
