"""Make a captured or loaded network's batch dimension variable (nnabla's
``nnabla.core.variable_batch_size``): the batch size is what the inputs of the first function
with a ``base_axis`` have before that axis; variables with that first dimension get ``-1``, and
the shape arguments of Reshape, Broadcast, Constant and the random generators start with -1."""
import numpy as np

__all__ = ["variable_batch_size"]

_SHAPED_GENERATORS = ("Constant", "Rand", "Randint", "Randn", "RandBinomial", "RandBeta", "RandGamma")


def _batch_size(network):
    for pf in network.forward_sequence():
        base_axis = pf.args.get("base_axis", 0)
        if base_axis:
            for name in pf.inputs:
                if name in network.variables:
                    return int(np.prod(network.variables[name].shape[:base_axis]))
    return None


def variable_batch_size(network):
    """Rewrite ``network`` in place (nothing changes if no function has a ``base_axis``)."""
    batch = _batch_size(network)
    if batch is None:
        return
    parameter_only = []      # outputs of functions reading only parameters: no batch axis
    for pf in network.forward_sequence():
        if not any(n in network.variables and n not in parameter_only for n in pf.inputs):
            parameter_only.extend(pf.outputs)
            continue
        shape = pf.args.get("shape")
        if pf.type == "Reshape" or pf.type in _SHAPED_GENERATORS:
            if shape and shape[0] == batch:
                pf.args["shape"] = [-1] + list(shape[1:])
        elif pf.type == "Broadcast" and shape:
            in_shape = [batch] + list(network.variables[pf.inputs[0]].shape[1:])
            diff = len(shape) - len(in_shape)
            if diff > 0 and int(np.prod(shape[:diff + 1])) == batch:
                pf.args["shape"] = [-1] + list(shape[diff + 1:])
            elif diff <= 0 and shape[0] == batch:
                pf.args["shape"] = [-1] + list(shape[1:])
    for pv in network.variables.values():
        if pv.shape and pv.name not in parameter_only and pv.shape[0] == batch:
            pv.shape = (-1,) + tuple(pv.shape[1:])
    network.batch_size = batch
