"""Edits of captured networks (nnabla's ``nnabla.core.graph_optimizer``): remove a function
(rewiring its readers to its input) and rename variables."""
from ..logger import logger

__all__ = ["remove_function", "rename_variable", "IdentityRemover"]


def remove_function(pf, renamed, network=None):
    """Remove the single-input function ``pf`` from its network, joining its input and output
    into one variable; ``renamed`` (dict) gets old name -> kept name. ``network`` defaults to
    the network that owns ``pf``."""
    network = network if network is not None else pf.owner()
    input_name = next((n for n in pf.inputs), None)
    if input_name is None or len(pf.outputs) != 1:
        raise ValueError("remove_function: {} must have an input and exactly one output".format(pf.name))
    source = network.variables.get(input_name) or network.parameters[input_name]
    output_name = pf.outputs[0]
    out = network.variables[output_name]
    readers_of_input = [f for f in source.required if f != pf.name]
    if out.required or output_name not in network.outputs:
        # The output's readers read the input instead; the output disappears.
        for reader in out.required:
            f = network.functions[reader]
            f.inputs = [input_name if n == output_name else n for n in f.inputs]
        source.required = readers_of_input + list(out.required)
        network.outputs = [input_name if n == output_name else n for n in network.outputs]
        renamed[output_name] = input_name
        del network.variables[output_name]
        logger.info("proto_variable:{} is deleted, {} is kept.".format(output_name, input_name))
    else:
        # A network output keeps its name: the input's producer writes it directly.
        if source.parent is not None:
            producer = network.functions[source.parent]
            producer.outputs = [output_name if n == input_name else n for n in producer.outputs]
        for reader in readers_of_input:
            f = network.functions[reader]
            f.inputs = [output_name if n == input_name else n for n in f.inputs]
        out.parent = source.parent
        out.required = readers_of_input
        network.inputs = [output_name if n == input_name else n for n in network.inputs]
        renamed[input_name] = output_name
        network.variables.pop(input_name, None)
        logger.info("proto_variable:{} is deleted, {} is kept.".format(input_name, output_name))
    del network.functions[pf.name]
    logger.info("proto_function:{} is deleted.".format(pf.name))


def rename_variable(proto_network, renames):
    """Rename buffers of ``proto_network``: ``renames`` is {old name: new name}; the new names
    must not be taken."""
    for old, new in renames.items():
        if old not in proto_network.variables:
            raise ValueError("rename_variable: {} is not found in network '{}'".format(
                old, proto_network.name))
        pv = proto_network.variables.pop(old)
        pv.name = new
        pv.proto.name = new
        proto_network.variables[new] = pv
        if pv.parent is not None:
            f = proto_network.functions[pv.parent]
            f.outputs = [new if n == old else n for n in f.outputs]
        for reader in pv.required:
            f = proto_network.functions[reader]
            f.inputs = [new if n == old else n for n in f.inputs]
    proto_network.inputs = [renames.get(n, n) for n in proto_network.inputs]
    proto_network.outputs = [renames.get(n, n) for n in proto_network.outputs]


class IdentityRemover:
    """A pass removing Identity functions (those ``is_required(pf)`` accepts, if given)."""

    def __init__(self, renamed=None, is_required=None):
        self.renamed = renamed if renamed is not None else {}
        self.is_required = is_required

    def __call__(self, pf, network=None):
        if pf.type == "Identity" and (self.is_required is None or self.is_required(pf)):
            remove_function(pf, self.renamed, network)
