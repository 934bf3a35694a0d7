"""Communicators for data-parallel training (nnabla's ``nnabla.communicators``, imported as C).

    # mpirun -n 2 python train.py
    comm = C.MultiProcessDataParallelCommunicator(ctx)
    comm.init()
    di = di.slice(rng=None, num_of_slices=comm.size, slice_pos=comm.rank)
    ...
    loss.forward()
    solver.zero_grad()
    loss.backward()
    comm.all_reduce([v.grad for v in nn.get_parameters().values()], division=True)
    solver.update()

The processes talk through MPI (mpi4py, the ``mpi`` extra: ``pip install nnabla_jit[mpi]``
brings mpi4py and an MPI runtime with its ``mpirun``). A script that is not started by an MPI
launcher, or started with one process, gets a communicator of size 1 whose collectives leave the
data as it is (``division`` divides by 1), so the same script runs alone without MPI.

Collectives take ``NdArray`` objects (``v.grad``, ``v.data``) and write their results back into
them. Values are reduced in float32 (float64 when an array holds float64); float16 arrays are
widened for the reduction and keep their type.

Processes on one machine share its cores: ``init()`` gives each of the ``k`` ranks on a machine
``cores // k`` kernel threads (numba's), instead of every rank starting a full set that then
contend for the same cores. A user's own setting wins: ``NUMBA_NUM_THREADS`` in the environment,
or ``numba.set_num_threads`` called before ``init()``.

A failing process ends the whole job. Once ``init()`` has joined an MPI launch of more than one
process, an exception that nothing catches is printed as usual and then aborts every process
(``MPI_Abort``), so the others do not wait forever in their next collective for a rank that is
gone; ``mpirun`` then exits non-zero with that rank's traceback in its output (nnabla's CLI kills
itself under ``-m``; nnabla's API leaves the other ranks hanging). A rank that leaves another way
while the others still expect it in a collective (``sys.exit(1)``, ``os._exit``, a caught error
followed by a return) must call ``comm.abort()`` itself.

``DataParallelCommunicator`` is the other kind: several devices driven by one process (one
network copy per device, their gradients summed by ``allreduce()``).
"""
import os
import sys
import time

import numba
import numpy as np

from .context import Context
from .ndarray import NdArray

__all__ = ["Communicator", "DataParallelCommunicator", "MultiProcessDataParallelCommunicator", "MultiProcessCommunicator",
           "MultiProcessDataParalellCommunicator", "Comm", "Dist", "CommunicatorBackwardCallback",
           "Context"]

# Environment variables through which MPI launchers tell a process how many were started
# (Open MPI; MPICH's and Intel MPI's hydra).
_LAUNCHER_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
# How long a rank that failed waits, its error printed, before it aborts the job: the launcher
# forwards a rank's output asynchronously and drops what it has not forwarded yet when the job
# aborts (on a busy machine the error line itself was lost).
ABORT_GRACE_SECONDS = 1.0


def _abort_job(mpi_comm):
    """Flush this rank's output, give the launcher a moment to forward it, end the MPI job."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_SECONDS)
    finally:
        mpi_comm.Abort(1)


def _launched_size():
    for name in _LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 1


def threads_per_rank(ranks_on_node, usable_cores, machine_cores):
    """How many kernel threads one of ``ranks_on_node`` processes on a machine should run.

    ``usable_cores`` are the cores this process may run on (its affinity), ``machine_cores``
    the machine's. A launcher that bound the process to fewer cores than the machine has
    already gave it its share, so it uses all of them; otherwise the machine's cores are
    divided among the ranks (at least one thread each)."""
    if usable_cores < machine_cores:
        return max(1, usable_cores)
    return max(1, machine_cores // max(1, ranks_on_node))


def _share_cores(ranks_on_node):
    """Set this process's numba threads to its share of the machine (``threads_per_rank``),
    unless the user chose them: ``NUMBA_NUM_THREADS`` set, or ``numba.set_num_threads`` called
    (the thread count then differs from numba's default). Returns the count now in use."""
    default = numba.config.NUMBA_NUM_THREADS
    if ranks_on_node <= 1 or "NUMBA_NUM_THREADS" in os.environ or numba.get_num_threads() != default:
        return numba.get_num_threads()
    machine = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else machine
    numba.set_num_threads(min(default, threads_per_rank(ranks_on_node, usable, machine)))
    return numba.get_num_threads()


def _abort_on_uncaught_exception(world):
    """Make an uncaught exception in this process end the MPI job (``world.Abort``) once Python
    has printed it, instead of leaving the other ranks blocked in a collective (see the module
    docstring). The hook in place before runs first."""
    printed_by = sys.excepthook

    def abort_after(kind, value, tb):
        try:
            printed_by(kind, value, tb)
        finally:
            _abort_job(world)

    sys.excepthook = abort_after


# ----------------------------------------------------------------------------- transports
class _Done:
    """A request that completed at once (what a single process's non-blocking calls return)."""

    def Wait(self):
        pass


class _SingleProcessGroup:
    """The collectives among one process: the data already is the result."""

    size = 1
    rank = 0

    def allreduce(self, buf):
        pass

    def iallreduce(self, buf):
        return _Done()

    def bcast(self, buf, root):
        pass

    def reduce(self, buf, root):
        pass

    def allgather(self, send, recv):
        recv[...] = send

    def reduce_scatter(self, send, recv):
        recv[...] = send

    def barrier(self):
        pass


class _MPIGroup:
    """The collectives among the processes of an mpi4py communicator, on contiguous numpy
    buffers."""

    def __init__(self, mpi, comm):
        self._mpi = mpi
        self._comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()

    def allreduce(self, buf):
        self._comm.Allreduce(self._mpi.IN_PLACE, buf, op=self._mpi.SUM)

    def iallreduce(self, buf):
        return self._comm.Iallreduce(self._mpi.IN_PLACE, buf, op=self._mpi.SUM)

    def bcast(self, buf, root):
        self._comm.Bcast(buf.view(np.uint8), root=root)   # a copy: bytes suit every type

    def reduce(self, buf, root):
        if self.rank == root:
            self._comm.Reduce(self._mpi.IN_PLACE, buf, op=self._mpi.SUM, root=root)
        else:
            self._comm.Reduce(buf, None, op=self._mpi.SUM, root=root)

    def allgather(self, send, recv):
        self._comm.Allgather(send.reshape(-1).view(np.uint8), recv.reshape(-1).view(np.uint8))

    def reduce_scatter(self, send, recv):
        self._comm.Reduce_scatter_block(send, recv, op=self._mpi.SUM)

    def barrier(self):
        self._comm.Barrier()


# ----------------------------------------------------------------------------- helpers
def _ndarrays(data, what):
    """``data`` (an NdArray or a list of them) as a list, checked."""
    arrays = [data] if isinstance(data, NdArray) else data
    if not isinstance(arrays, (list, tuple)):
        raise TypeError("{}: data must be an NdArray or a list of NdArrays (e.g. [v.grad for v in "
                        "params.values()]), got {}".format(what, type(data).__name__))
    for k, a in enumerate(arrays):
        if not isinstance(a, NdArray):
            raise TypeError("{}: item {} of data is a {}, not an NdArray (pass v.grad or v.data)"
                            .format(what, k, type(a).__name__))
    return list(arrays)


def _one_per_rank(ndarray_list, ndarray, link, group, what):
    """``ndarray_list`` as a list, checked to hold one NdArray shaped like ``ndarray`` per
    process of ``group`` (all_gather's outputs, reduce_scatter's inputs)."""
    if not isinstance(ndarray, NdArray):
        raise TypeError("{}: ndarray must be an NdArray, got {}".format(what, type(ndarray).__name__))
    arrays = _ndarrays(ndarray_list, what)
    if len(arrays) != link.size or any(a.shape != ndarray.shape for a in arrays):
        raise ValueError("{}: ndarray_list must hold {} NdArrays of shape {} (one per process of "
                         "group '{}'), got shapes {}".format(
                             what, link.size, ndarray.shape, group, [a.shape for a in arrays]))
    return arrays


def _reduce_dtype(dtypes):
    """The type values are reduced in: float32, or what the arrays need beyond it."""
    dtype = np.result_type(np.float32, *dtypes)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _pack(arrays, dtype, scale=1.0):
    """One contiguous buffer holding the values of the NdArrays ``arrays``, times ``scale``."""
    buf = np.empty(sum(a.size for a in arrays), dtype)
    offset = 0
    for a in arrays:
        chunk = buf[offset:offset + a.size]
        np.copyto(chunk, a.data.reshape(-1), casting="unsafe")
        if scale != 1.0:
            chunk *= scale
        offset += a.size
    return buf


def _unpack(buf, arrays, keep_dtype=True):
    """Write consecutive parts of ``buf`` back into ``arrays`` (converted to the buffer's type
    first unless ``keep_dtype``)."""
    offset = 0
    for a in arrays:
        if not keep_dtype and a.dtype != buf.dtype:
            a.cast(buf.dtype)
        np.copyto(a.data, buf[offset:offset + a.size].reshape(a.shape), casting="unsafe")
        offset += a.size


# ----------------------------------------------------------------------------- communicators
class Communicator:
    """What nnabla's communicators share: contexts and parameters, groups of ranks, and the
    collectives (``all_reduce``, ``bcast``, ``reduce``, ``all_gather``, ``reduce_scatter``,
    ``all_reduce_callback``, ``barrier``). This class itself connects one process with
    itself; subclasses connect more (``_connect`` and ``_make_group``)."""

    def __init__(self, ctx):
        if not isinstance(ctx, Context):
            raise TypeError("{}: ctx must be a Context (e.g. get_extension_context('cpu')), got {}"
                            .format(type(self).__name__, type(ctx).__name__))
        self._ctx = ctx
        self._ctx_params = []
        self._world = None
        self._local_rank = 0
        self._groups = {}        # name -> ranks
        self._group_links = {}   # name -> transport, for the groups this rank is in

    # ------------------------------------------------------------------ set-up
    def init(self):
        """Connect to the other processes. Call it before any collective (nnabla: after the
        parameters are added with ``add_context_and_parameters``)."""
        if self._world is None:
            self._world, self._local_rank = self._connect()
            ranks = list(range(self._world.size))
            self._groups = {"world": ranks}
            self._group_links = {"world": self._world}

    def _connect(self):
        """The transport among all processes and this process's rank on its machine."""
        return _SingleProcessGroup(), 0

    def _started(self, what):
        if self._world is None:
            raise RuntimeError("{}.{}: call init() first".format(type(self).__name__, what))
        return self._world

    @property
    def name(self):
        """The communicator's name."""
        return type(self).__name__

    @property
    def size(self):
        """Number of processes."""
        return self._started("size").size

    @property
    def rank(self):
        """This process's rank, 0 <= rank < size."""
        return self._started("rank").rank

    @property
    def local_rank(self):
        """This process's rank among the processes on its machine (the GPU it should use)."""
        self._started("local_rank")
        return self._local_rank

    def add_context_and_parameters(self, ctx_param_dict):
        """Register ``(ctx, {name: Variable})``, the parameters ``allreduce()`` reduces."""
        if (not isinstance(ctx_param_dict, tuple) or len(ctx_param_dict) != 2
                or not isinstance(ctx_param_dict[0], Context) or not hasattr(ctx_param_dict[1], "values")):
            raise TypeError("{}.add_context_and_parameters: expected a tuple (Context, dict of "
                            "Variables), got {!r}".format(type(self).__name__, ctx_param_dict))
        self._ctx_params.append((ctx_param_dict[0], dict(ctx_param_dict[1])))

    def clear_context_parameters(self):
        """Forget every registered context and parameter."""
        self._ctx_params = []

    # ------------------------------------------------------------------ groups
    def new_group(self, name_ranks, ranks=None):
        """Create the group ``(name, ranks)`` (``new_group(name, ranks)`` works too); collectives
        take its name as ``group``. Every process in ``ranks`` must call it. Returns the name."""
        world = self._started("new_group")
        name = name_ranks
        if ranks is None:
            if not isinstance(name_ranks, (tuple, list)) or len(name_ranks) != 2:
                raise TypeError("new_group: expected (name, ranks), got {!r}".format(name_ranks))
            name, ranks = name_ranks
        ranks = [int(r) for r in ranks]
        if not isinstance(name, str) or not name:
            raise ValueError("new_group: the name must be a non-empty string, got {!r}".format(name))
        if name in self._groups:
            raise ValueError("new_group: a group named '{}' exists already ({})"
                             .format(name, self._groups[name]))
        if not ranks or len(set(ranks)) != len(ranks) or not all(0 <= r < world.size for r in ranks):
            raise ValueError("new_group: ranks {} must be distinct ranks in [0, {})"
                             .format(ranks, world.size))
        self._groups[name] = ranks
        if world.rank in ranks:
            self._group_links[name] = self._make_group(ranks)
        return name

    def _make_group(self, ranks):
        """The transport among ``ranks`` (which include this process)."""
        return _SingleProcessGroup()

    def list_groups(self):
        """Dict of group name -> ranks ('world' included)."""
        return {name: list(ranks) for name, ranks in self._groups.items()}

    def find_group(self, group):
        """The ranks of ``group``, or [] when there is no such group."""
        return list(self._groups.get(group, []))

    def _link(self, group, what):
        self._started(what)
        link = self._group_links.get(group)
        if link is None:
            if group not in self._groups:
                raise ValueError("{}: no group named '{}' (groups: {})"
                                 .format(what, group, sorted(self._groups)))
            raise ValueError("{}: rank {} is not in group '{}' (ranks {})"
                             .format(what, self.rank, group, self._groups[group]))
        return link

    def _group_rank(self, group, rank, what):
        """The position of world rank ``rank`` in ``group``."""
        ranks = self._groups[group]
        if rank not in ranks:
            raise ValueError("{}: rank {} is not in group '{}' (ranks {})".format(what, rank, group, ranks))
        return ranks.index(rank)

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, data, division=False, inplace=False, group="world"):
        """Sum ``data`` (an NdArray or a list of them) over the processes of ``group``, each
        getting the result; ``division`` divides it by the number of processes. ``inplace``
        reduces array by array instead of through one packed buffer (less memory, more calls);
        the results land in the same arrays either way."""
        link = self._link(group, "all_reduce")
        arrays = _ndarrays(data, "all_reduce")
        if not arrays:
            return
        dtype = _reduce_dtype([a.dtype for a in arrays])
        for part in ([[a] for a in arrays] if inplace else [arrays]):
            buf = _pack(part, dtype)
            link.allreduce(buf)
            if division:
                buf /= link.size
            _unpack(buf, part)

    def allreduce(self, division=False, inplace=False):
        """Deprecated (use ``all_reduce``): all-reduce the gradients of the parameters added by
        ``add_context_and_parameters``."""
        grads = [v.grad for _, params in self._ctx_params for v in params.values()]
        self.all_reduce(grads, division=division, inplace=inplace)

    def all_reduce_callback(self, data, pack_size, division=False, group="world", scale_grad=1,
                            keep_dtype=False):
        """A callback for ``loss.backward(communicator_callbacks=...)`` that all-reduces the
        gradients ``data`` while backward runs: each is sent as soon as the function using it
        has back-propagated, in packs of at least ``pack_size`` values; backward returns once
        all have arrived. ``scale_grad`` multiplies the gradients before they are summed (to
        undo a loss scale); unless ``keep_dtype`` float16 gradients come back as float32.
        Parameters used by more than one function (shared, as in RNNs) are not supported,
        as in nnabla: all-reduce those after backward with ``all_reduce``."""
        link = self._link(group, "all_reduce_callback")
        arrays = _ndarrays(data, "all_reduce_callback")
        if int(pack_size) < 1:
            raise ValueError("all_reduce_callback: pack_size must be positive, got {}".format(pack_size))
        return _AllReduceCallback(link, arrays, int(pack_size), bool(division), float(scale_grad),
                                  bool(keep_dtype))

    def bcast(self, data, src, inplace=False, group="world"):
        """Copy ``data`` of rank ``src`` into ``data`` of every process of ``group``."""
        link = self._link(group, "bcast")
        root = self._group_rank(group, src, "bcast")
        arrays = _ndarrays(data, "bcast")
        if not arrays:
            return
        dtype = np.result_type(*[a.dtype for a in arrays])
        for part in ([[a] for a in arrays] if inplace else [arrays]):
            buf = _pack(part, dtype)
            link.bcast(buf, root)
            _unpack(buf, part)

    def reduce(self, data, dst, division=False, inplace=False, group="world"):
        """Sum ``data`` over the processes of ``group`` into ``data`` of rank ``dst`` (the
        others keep theirs); ``division`` divides by the number of processes."""
        link = self._link(group, "reduce")
        root = self._group_rank(group, dst, "reduce")
        arrays = _ndarrays(data, "reduce")
        if not arrays:
            return
        dtype = _reduce_dtype([a.dtype for a in arrays])
        for part in ([[a] for a in arrays] if inplace else [arrays]):
            buf = _pack(part, dtype)
            link.reduce(buf, root)
            if link.rank == root:
                if division:
                    buf /= link.size
                _unpack(buf, part)

    def all_gather(self, ndarray, ndarray_list, group="world"):
        """Gather ``ndarray`` of every process of ``group``: ``ndarray_list[i]`` receives the
        one of the group's i-th rank."""
        link = self._link(group, "all_gather")
        outputs = _one_per_rank(ndarray_list, ndarray, link, group, "all_gather")
        send = np.ascontiguousarray(ndarray.data)
        recv = np.empty((link.size,) + send.shape, send.dtype)
        link.allgather(send, recv)
        for k, o in enumerate(outputs):
            np.copyto(o.data, recv[k], casting="unsafe")

    def reduce_scatter(self, ndarray_list, ndarray, division=False, group="world"):
        """Sum ``ndarray_list`` over the processes of ``group``; the group's i-th rank receives
        the sum of the i-th arrays in ``ndarray``."""
        link = self._link(group, "reduce_scatter")
        inputs = _one_per_rank(ndarray_list, ndarray, link, group, "reduce_scatter")
        dtype = _reduce_dtype([a.dtype for a in inputs] + [ndarray.dtype])
        send = _pack(inputs, dtype)
        recv = np.empty(ndarray.size, dtype)
        link.reduce_scatter(send, recv)
        if division:
            recv /= link.size
        _unpack(recv, [ndarray])

    def barrier(self):
        """Wait until every process has reached this call."""
        self._started("barrier").barrier()

    # ------------------------------------------------------------------ for synchronized ops
    # F.sync_batch_normalization's op holds numpy arrays, not NdArrays; it calls these two.
    def _gather_stats(self, local, group="world"):
        """The 1-d float64 array ``local`` of every process of ``group``, stacked by rank."""
        link = self._link(group, "sync_batch_normalization")
        local = np.ascontiguousarray(local, np.float64)
        gathered = np.empty((link.size,) + local.shape, np.float64)
        link.allgather(local, gathered)
        return gathered

    def _sum_arrays(self, buf, group="world"):
        """Sum the float64 array ``buf`` over the processes of ``group``, in place."""
        self._link(group, "sync_batch_normalization").allreduce(buf)

    def abort(self):
        """End every process at once (a failed run)."""
        self._started("abort")
        os._exit(1)


class MultiProcessDataParallelCommunicator(Communicator):
    """The communicator of data-parallel training with one process per device, over MPI
    (mpi4py); of size 1 when the script was not started by an MPI launcher with more than one
    process.

    Args:
        ctx (Context): the context the processes compute in.
    """

    def _connect(self):
        size = _launched_size()
        if size <= 1:
            return _SingleProcessGroup(), 0
        try:
            from mpi4py import MPI
        except ImportError:
            raise ImportError("{}: the script was started by an MPI launcher with {} processes, "
                              "but mpi4py is not installed; install the MPI extra: pip install "
                              "'nnabla_jit[mpi]'".format(type(self).__name__, size)) from None
        self._mpi = MPI
        world = MPI.COMM_WORLD
        node = world.Split_type(MPI.COMM_TYPE_SHARED)   # the ranks on this machine
        local_rank, local_size = node.Get_rank(), node.Get_size()
        node.Free()
        _share_cores(local_size)
        if world.Get_size() > 1:
            _abort_on_uncaught_exception(world)
        return _MPIGroup(MPI, world), local_rank

    def _make_group(self, ranks):
        if not isinstance(self._world, _MPIGroup):
            return _SingleProcessGroup()
        world = self._world._comm
        return _MPIGroup(self._mpi, world.Create_group(world.Get_group().Incl(ranks)))

    def abort(self):
        """End every process at once (a failed run)."""
        world = self._started("abort")
        if isinstance(world, _MPIGroup):
            _abort_job(world._comm)
        os._exit(1)


class DataParallelCommunicator(Communicator):
    """nnabla's single-process data parallelism: one copy of the network per device, each built
    under its own context and parameter scope, driven in turn by one process. Register every
    copy's parameters with ``add_context_and_parameters((ctx, params))``, ``init()``, and after
    the copies' backward ``allreduce()`` sums their gradients (``division``: averages) and
    writes the result into every copy, so their solvers take the same step::

        comm = C.DataParallelCommunicator(ctx)
        for i, ctx_i in enumerate(ctxs):
            with nn.parameter_scope("device{}".format(i)):
                comm.add_context_and_parameters((ctx_i, nn.get_parameters()))
        comm.init()
        ...
        comm.allreduce(division=True)

    ``size`` is the number of devices (copies) and ``rank`` 0. The other collectives take one
    NdArray per device (``data[i]`` on device ``i``): ``all_reduce`` leaves the sum in each,
    ``bcast`` copies device ``src``'s to all, ``reduce`` sums into device ``dst``'s. Any
    context works (the copies' arrays are read and written through their NdArrays)."""

    def init(self):
        if not self._ctx_params:
            raise RuntimeError("DataParallelCommunicator.init: add each device's parameters with "
                               "add_context_and_parameters((ctx, params)) first")
        first = [v.shape for v in self._ctx_params[0][1].values()]
        for k, (_, params) in enumerate(self._ctx_params[1:], 1):
            shapes = [v.shape for v in params.values()]
            if shapes != first:
                raise ValueError("DataParallelCommunicator.init: device {} has parameters of "
                                 "shapes {}, device 0 has {}; every device must hold a copy of the "
                                 "same network".format(k, shapes, first))
        super().init()

    @property
    def size(self):
        """Number of devices (network copies)."""
        self._started("size")
        return len(self._ctx_params)

    def _per_device(self, data, what):
        arrays = _ndarrays(data, what)
        if len(arrays) != self.size:
            raise ValueError("DataParallelCommunicator.{}: data must hold one NdArray per device "
                             "({}), got {}".format(what, self.size, len(arrays)))
        if any(a.shape != arrays[0].shape for a in arrays):
            raise ValueError("DataParallelCommunicator.{}: the devices' arrays differ in shape: {}"
                             .format(what, [a.shape for a in arrays]))
        return arrays

    def _sum(self, arrays, division):
        total = _pack([arrays[0]], _reduce_dtype([a.dtype for a in arrays]))
        for a in arrays[1:]:
            total += _pack([a], total.dtype)
        if division:
            total /= len(arrays)
        return total

    def allreduce(self, division=False, inplace=False):
        """Sum (``division``: average) each parameter's gradient over the devices' copies and
        write it into every copy. ``inplace`` is accepted for nnabla's signature (arrays are
        reduced one parameter at a time either way)."""
        self._started("allreduce")
        copies = [list(params.values()) for _, params in self._ctx_params]
        for same in zip(*copies):
            grads = [v.grad for v in same]
            total = self._sum(grads, division)
            for g in grads:
                _unpack(total, [g])

    def all_reduce(self, data, division=False, inplace=False, group="world"):
        """Sum ``data`` (one NdArray per device) over the devices into each of them."""
        self._started("all_reduce")
        arrays = self._per_device(data, "all_reduce")
        total = self._sum(arrays, division)
        for a in arrays:
            _unpack(total, [a])

    def bcast(self, data, src, inplace=False, group="world"):
        """Copy device ``src``'s array into every device's."""
        self._started("bcast")
        arrays = self._per_device(data, "bcast")
        if not 0 <= src < len(arrays):
            raise ValueError("DataParallelCommunicator.bcast: src={} is not a device in [0, {})"
                             .format(src, len(arrays)))
        for k, a in enumerate(arrays):
            if k != src:
                np.copyto(a.data, arrays[src].data, casting="unsafe")

    def reduce(self, data, dst, division=False, inplace=False, group="world"):
        """Sum ``data`` (one NdArray per device) into device ``dst``'s."""
        self._started("reduce")
        arrays = self._per_device(data, "reduce")
        if not 0 <= dst < len(arrays):
            raise ValueError("DataParallelCommunicator.reduce: dst={} is not a device in [0, {})"
                             .format(dst, len(arrays)))
        _unpack(self._sum(arrays, division), [arrays[dst]])

    def _unsupported(self, what):
        raise NotImplementedError("DataParallelCommunicator.{}: not provided for devices in one "
                                  "process (MultiProcessDataParallelCommunicator has it)".format(what))

    def all_gather(self, ndarray, ndarray_list, group="world"):
        self._unsupported("all_gather")

    def reduce_scatter(self, ndarray_list, ndarray, division=False, group="world"):
        self._unsupported("reduce_scatter")

    def all_reduce_callback(self, data, pack_size, division=False, group="world", scale_grad=1,
                            keep_dtype=False):
        self._unsupported("all_reduce_callback")

    def new_group(self, name_ranks, ranks=None):
        self._unsupported("new_group")

    def _gather_stats(self, local, group="world"):
        # the copies run one after the other: no copy can wait for the others' statistics
        self._unsupported("sync_batch_normalization")

    _sum_arrays = _gather_stats


# nnabla's other names for it.
MultiProcessCommunicator = MultiProcessDataParallelCommunicator
MultiProcessDataParalellCommunicator = MultiProcessDataParallelCommunicator
Comm = MultiProcessDataParallelCommunicator
Dist = MultiProcessDataParallelCommunicator


class CommunicatorBackwardCallback:
    """Base of the objects ``backward(communicator_callbacks=...)`` calls:
    ``on_finish_function_backward(function)`` after each function's backward and
    ``on_finish_backward()`` at the end (what ``Communicator.all_reduce_callback`` returns)."""

    def on_finish_function_backward(self, function):
        pass

    def on_finish_backward(self):
        pass


class _AllReduceCallback(CommunicatorBackwardCallback):
    """Sends gradients to the all-reduce as backward finishes with them (see
    ``Communicator.all_reduce_callback``). Every process runs the same graph, so the packs are
    formed in the same order everywhere."""

    def __init__(self, link, arrays, pack_size, division, scale_grad, keep_dtype):
        self._link = link
        self._position = {id(a): k for k, a in enumerate(arrays)}
        self._dtype = _reduce_dtype([a.dtype for a in arrays]) if arrays else np.dtype(np.float32)
        self._pack_size = pack_size
        self._division = division
        self._scale = scale_grad
        self._keep_dtype = keep_dtype
        self._sent = set()
        self._pending = []
        self._pending_size = 0
        self._in_flight = []

    def on_finish_function_backward(self, node):
        """Queue the gradients in the list that this function has just finished writing."""
        this_node = set()
        for v in node.inputs:
            grad = v._body.grad
            k = self._position.get(id(grad))
            if k is None or not v._need_grad or k in this_node:   # x * x: one gradient
                continue
            this_node.add(k)
            if k in self._sent:
                raise RuntimeError("all_reduce_callback: the gradient of a parameter of shape {} "
                                   "was written again by {} after it was sent; parameters "
                                   "shared by several functions are not supported: call "
                                   "comm.all_reduce after backward instead".format(v.shape, node.name))
            self._sent.add(k)
            self._pending.append(grad)
            self._pending_size += grad.size
            if self._pending_size >= self._pack_size:
                self._send()

    def _send(self):
        buf = _pack(self._pending, self._dtype, self._scale)
        self._in_flight.append((self._link.iallreduce(buf), buf, self._pending))
        self._pending, self._pending_size = [], 0

    def on_finish_backward(self):
        """Send what is left, wait for every pack and write the sums back."""
        if self._pending:
            self._send()
        for request, buf, arrays in self._in_flight:
            request.Wait()
            if self._division:
                buf /= self._link.size
            _unpack(buf, arrays, self._keep_dtype)
        self._in_flight = []
        self._sent = set()
