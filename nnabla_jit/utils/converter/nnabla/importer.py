"""``NnpImporter``: NNP files (``.nnp``, ``.nntxt``, ``.protobuf``, ``.h5``) as the converter
commands use them: one ``NNablaProtoBuf`` (``protobuf``), the parameters by name
(``parameters``: name -> float32 array, in reading order), and the files of other types
(``other_files``), and ``contents`` (the :class:`~nnabla_jit.serialization.nnp.NnpContents`
read, with that proto). Options as nnabla's: ``executor_index`` keeps only that executor and its
network; ``expand_network`` (the default of the commands) unrolls repeat/recurrent loops with
:class:`~.expander.NnpExpander` (``"if-repeated"``: only when a network has loops, which
leaves the function order of other files as written).
"""
from collections import OrderedDict

import numpy as np

from ....serialization import nnp as nnp_files
from ....serialization.proto import nnabla_pb2
from .expander import expand_loops

__all__ = ["NnpImporter", "ImportedNnp"]

_NNP_EXTENSIONS = (".nnp", ".nntxt", ".prototxt", ".protobuf", ".h5")


class ImportedNnp:
    """What :meth:`NnpImporter.execute` returns (see module doc)."""

    def __init__(self, protobuf, parameters, other_files=(), contents=None):
        self.protobuf = protobuf
        self.parameters = parameters
        self.other_files = list(other_files)
        self.contents = contents   # the NnpContents read, its proto replaced by ``protobuf``


def _shrink_to_executor(proto, executor):
    network = next((n for n in proto.network if n.name == executor.network_name), None)
    if network is None:
        raise ValueError("executor '{}' names network '{}', which the files do not have".format(
            executor.name, executor.network_name))
    shrunk = nnabla_pb2.NNablaProtoBuf()
    shrunk.CopyFrom(proto)
    for field in ("optimizer", "monitor", "network", "executor"):
        shrunk.ClearField(field)
    shrunk.network.add().CopyFrom(network)
    shrunk.executor.add().CopyFrom(executor)
    return shrunk


class NnpImporter:
    def __init__(self, *files, expand_network=False, executor_index=None):
        self._files = files
        self._expand_network = expand_network
        self._executor_index = executor_index

    def execute(self):
        nnp_inputs = [f for f in self._files if str(f).lower().endswith(_NNP_EXTENSIONS)]
        others = [f for f in self._files if f not in nnp_inputs]
        contents = nnp_files.read(nnp_inputs)
        proto = contents.proto
        parameters = OrderedDict((p.name, np.asarray(p.data, dtype=np.float32))
                                 for p in contents.parameters)
        if self._executor_index is not None:
            if not 0 <= self._executor_index < len(proto.executor):
                raise ValueError("-E/--nnp-import-executor-index {}: the files have {} executor(s)"
                                 .format(self._executor_index, len(proto.executor)))
            executor = proto.executor[self._executor_index]
            proto = _shrink_to_executor(proto, executor)
        contents.proto = proto
        if self._expand_network:
            expand_loops(contents, always=self._expand_network != "if-repeated")
            proto = contents.proto
        return ImportedNnp(proto, parameters, others, contents)
