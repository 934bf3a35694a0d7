"""The communicator of an MPI-launched CLI run (nnabla's ``nnabla.utils.communicator_util``)."""
import os

from .. import communicators as C
from ..ext_utils import get_extension_context
from ..logger import logger

__all__ = ["create_communicator", "current_communicator", "single_or_rankzero"]

_current = [None]


def current_communicator():
    """The communicator made by ``create_communicator``, or None (a single process)."""
    return _current[0]


# The process-count variables MPI launchers set: Open MPI's, and MPICH/Hydra's (PMI) and PMIx's.
_LAUNCHER_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")


def _launched_by_mpi():
    return any(os.environ.get(name) is not None for name in _LAUNCHER_SIZE_VARIABLES)


def create_communicator(ignore_error=False, extension_module="cudnn", type_config="float"):
    """Under an MPI launcher (Open MPI's ``OMPI_COMM_WORLD_SIZE``, or MPICH's ``PMI_SIZE``,
    set) create and initialise a data-parallel communicator; None when alone. Failures raise
    unless ``ignore_error``."""
    _current[0] = None
    if not _launched_by_mpi():
        return None
    try:
        context = get_extension_context(extension_module, type_config=type_config)
        comm = C.MultiProcessCommunicator(context)
        comm.init()
        context.device_id = str(comm.rank % comm.size)
        _current[0] = comm if comm.size > 1 else None
    except Exception:
        if not ignore_error:
            raise
        logger.warning("Failed to initialize nnabla.communicators.")
        _current[0] = None
    return _current[0]


def single_or_rankzero():
    """True in a single process and in rank 0 of a parallel run."""
    comm = _current[0]
    return not comm or comm.rank == 0
