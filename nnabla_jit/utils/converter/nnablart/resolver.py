"""Network rewrites before the NNB export, as nnabla's: GRU functions are unrolled into basic
functions (:mod:`.gru_unroll`); a rebuilt network keeps the variables its functions use, in
their old places, the new ones after. Parameters no function uses are dropped from the
executor's list; the new GRU parameters follow the old ones."""
from collections import OrderedDict

from .gru_unroll import UniqueNames, unroll_gru

__all__ = ["Resolver"]


class Resolver:
    def __init__(self, nnp):
        self._nnp = nnp
        self._unique = UniqueNames()

    def _rebuild(self, network):
        variables = OrderedDict((v.name, v) for v in network.variable)
        functions = []
        for func in network.function:
            if func.type != "GRU":
                functions.append(func)
                continue
            made, unrolled, parameters = unroll_gru(func, variables, self._nnp.parameters,
                                                    self._unique)
            for v in made:
                variables[v.name] = v
            functions += unrolled
            self._nnp.parameters.update(parameters)
        used = {name for f in functions for name in list(f.input) + list(f.output)}
        kept = [v for v in variables.values() if v.name in used]
        network.ClearField("function")
        network.function.extend(functions)
        network.ClearField("variable")
        network.variable.extend(kept)

    def execute(self):
        proto = self._nnp.protobuf
        for network in proto.network:
            if any(f.type == "GRU" for f in network.function):
                self._rebuild(network)
        used = {i for network in proto.network for func in network.function for i in func.input}
        exe = proto.executor[0] if proto.executor else None
        if exe is not None:
            exe.ClearField("parameter_variable")
            for name in self._nnp.parameters:
                if name in used:
                    exe.parameter_variable.add().variable_name = name
        return self._nnp
