"""``NnpLoader``: networks of an ``.nnp`` (or ``.nntxt``/``.protobuf``) as runnable graphs.

    from nnabla_jit.utils.nnp_graph import NnpLoader
    nnp = NnpLoader('model.nnp')
    net = nnp.get_network(nnp.get_network_names()[0], batch_size=1)
    x = list(net.inputs.values())[0]
    y = list(net.outputs.values())[0]
    x.d = data
    y.forward(clear_buffer=True)

As in nnabla, the file's parameters are kept in the loader's own scope; ``get_network`` builds
the graph with them and then registers them in the current parameter scope. Unlike nnabla,
``get_network`` refuses a network whose parameters the file does not hold (nnabla builds it
with freshly initialized parameters, which silently computes garbage).
"""
from collections import OrderedDict

import numpy as np

from ..parameter import get_parameter, parameter_scope, set_parameter
from ..serialization import nnp
from ..serialization.files import file_label
from ..serialization.graph_import import ProtoNetwork, check_batch_size
from ..serialization.parameters import assign_to_scope

__all__ = ["NnpLoader", "NnpNetwork"]


class NnpNetwork:
    """A graph built from one network of an NNP file.

    Attributes:
        inputs (dict): name -> input Variable (buffers no function produces).
        outputs (dict): name -> output Variable (buffers no function reads).
        variables (dict): name -> Variable, for every variable and parameter.
        proto_network (ProtoNetwork): the network as read, with its functions.
    """

    def __init__(self, proto, batch_size, loader_scope, rng):
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
        contents = nnp.read([filepath], extension=extension)
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
        if callback is not None:
            raise NotImplementedError("NnpLoader.get_network: callback (NnpNetworkPass) is not "
                                      "supported by nnabla_jit")
        check_batch_size(batch_size, "NnpLoader.get_network")
        if name not in self.network_dict:
            raise ValueError("NnpLoader.get_network: no network '{}' in the file (it has: {})"
                             .format(name, ", ".join(self.network_dict) or "none"))
        self._check_parameters(self.network_dict[name])
        return NnpNetwork(self.network_dict[name], batch_size, self._params,
                          np.random.RandomState(1223))
