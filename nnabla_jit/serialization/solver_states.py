"""Solver states in nnabla's two file layouts, for ``Solver.save_states`` / ``load_states``.

States are an ``OrderedDict`` parameter name -> :class:`SolverStateData` ``(t, pstate)``, where
``t`` is the update count and ``pstate`` an ``OrderedDict`` state name -> ``numpy.ndarray``
(``m``, ``v``, ...). Arrays may also be given as Variables or NdArrays when saving.

- ``.h5``: one group per parameter path (nested, ``fc/affine/W``) with attribute ``index``
  (parameter order), holding one dataset per state (attribute ``index``: state order) and an
  int64 scalar dataset ``t``.
- ``.protobuf``: an ``Optimizer`` message whose ``solver.states`` maps each parameter to a
  ``SolverState`` (``t`` and ``state_parameter``: name -> shape and float data).
"""
import io
import math
import os
from collections import OrderedDict, namedtuple

import numpy as np

from ..ndarray import NdArray, native
from ..variable import Variable
from . import hdf5
from .files import FileFormatError, check_readable, check_shape, extension_of, read_bytes, write_bytes
from .proto import nnabla_pb2

__all__ = ["SolverStateData", "save_states", "load_states", "states_to_h5_bytes",
           "states_from_h5_bytes", "states_from_h5", "states_to_proto", "states_from_proto"]

SolverStateData = namedtuple("SolverStateData", ["t", "pstate"])


def _array(value):
    if isinstance(value, Variable):
        return value.d
    if isinstance(value, NdArray):
        return value.data
    return np.asarray(value)


def _normalized(states):
    out = OrderedDict()
    for name, state in states.items():
        t = getattr(state, "t", None)
        pstate = getattr(state, "pstate", None)
        if t is None or pstate is None:
            t, pstate = state
        out[name] = SolverStateData(int(np.asarray(t)), OrderedDict(
            (k, _array(v)) for k, v in pstate.items()))
    return out


def states_to_h5_bytes(states):
    """The ``.h5`` file of ``states`` as bytes."""
    import h5py
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for i, (name, state) in enumerate(_normalized(states).items()):
            group = f.require_group(name)
            group.attrs["index"] = np.int64(i)
            for j, (sname, value) in enumerate(state.pstate.items()):
                group[sname] = value
                group[sname].attrs["index"] = np.int64(j)
            group["t"] = np.int64(state.t)
    return buf.getvalue()


def states_from_h5_bytes(data, source):
    """States from the bytes of an ``.h5`` solver-state file (``source`` names it in errors)."""
    return states_from_h5(source, data)


def states_from_h5(source, data=None):
    """States of the ``.h5`` solver-state file at path ``source`` (read in place), or of its
    bytes ``data``. Datasets kept in other files or expanding beyond the limits are refused
    (``hdf5.py``)."""
    size = len(data) if data is not None else os.path.getsize(source)
    f = hdf5.open_file(source, data)
    with f:
        found = {}                       # parameter path -> (index, {state: (index, array)}, t)
        try:
            for name in hdf5.checked_datasets(f, source, size):
                if "/" not in name:
                    raise FileFormatError(source, "dataset '{}' is not inside a parameter group; "
                                          "not an nnabla solver-state file".format(name))
                pname, sname = name.rsplit("/", 1)
                ds = f[name]
                entry = found.setdefault(pname, [int(ds.parent.attrs.get("index", 0)), {}, None])
                if sname == "t":
                    entry[2] = int(ds[()])
                else:
                    value = np.asarray(ds[()], native(ds.dtype))   # '>f4' from another machine
                    entry[1][sname] = (int(ds.attrs.get("index", 0)), value)
        except FileFormatError:
            raise
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise FileFormatError(source, "damaged HDF5 solver-state file ({})".format(e)) from None
    states = OrderedDict()
    for pname, (_, pstate, t) in sorted(found.items(), key=lambda kv: (kv[1][0], kv[0])):
        if t is None:
            raise FileFormatError(source, "parameter '{}' has no 't' dataset; not an nnabla "
                                  "solver-state file".format(pname))
        ordered = sorted(pstate.items(), key=lambda kv: (kv[1][0], kv[0]))
        states[pname] = SolverStateData(t, OrderedDict((k, v[1]) for k, v in ordered))
    return states


def states_to_proto(solver_msg, states):
    """Store ``states`` into a ``Solver`` message's ``states`` map."""
    for name, state in _normalized(states).items():
        entry = solver_msg.states[name]
        entry.t = state.t
        for sname, value in state.pstate.items():
            sp = entry.state_parameter[sname]
            sp.shape.dim.extend(int(d) for d in value.shape)
            sp.data.extend(np.asarray(value, np.float32).ravel().tolist())


def states_from_proto(solver_msg, source="<Solver message>"):
    """States from a ``Solver`` message's ``states`` map (protobuf maps keep no order: the
    result is sorted by name)."""
    states = OrderedDict()
    for name, entry in sorted(solver_msg.states.items()):
        pstate = OrderedDict()
        for sname, sp in sorted(entry.state_parameter.items()):
            shape = check_shape(sp.shape.dim, "state '{}' of '{}'".format(sname, name), source)
            if math.prod(shape) != len(sp.data):
                raise FileFormatError(source, "state '{}' of '{}' has shape {} but {} values"
                                      .format(sname, name, shape, len(sp.data)))
            pstate[sname] = np.array(sp.data, np.float32).reshape(shape)
        states[name] = SolverStateData(int(entry.t), pstate)
    return states


def save_states(path, states, extension=None):
    """Write ``states`` to ``path`` (``.h5`` or ``.protobuf``; a file object needs
    ``extension``). The write is atomic."""
    ext = extension_of(path, extension, "save_states")
    if ext == ".h5":
        data = states_to_h5_bytes(states)
    elif ext == ".protobuf":
        msg = nnabla_pb2.Optimizer()
        states_to_proto(msg.solver, states)
        data = msg.SerializeToString()
    else:
        raise ValueError("save_states: unsupported extension '{}' for {}; use .h5 or .protobuf"
                         .format(ext, path))
    write_bytes(path, data)


def load_states(path, extension=None):
    """Read the states written by ``save_states`` (or by nnabla's ``Solver.save_states``)."""
    ext = extension_of(path, extension, "load_states")
    if ext == ".h5" and isinstance(path, (str, os.PathLike)):
        if check_readable(path) == 0:
            raise FileFormatError(path, "the file is empty")
        return states_from_h5(path)
    data = read_bytes(path)
    if not data:
        raise FileFormatError(path, "the file is empty")
    if ext == ".h5":
        return states_from_h5_bytes(data, path)
    if ext == ".protobuf":
        from .nnp import parse_binary     # nnp imports this module
        return states_from_proto(parse_binary(data, path, nnabla_pb2.Optimizer).solver, path)
    raise ValueError("load_states: unsupported extension '{}' for {}; use .h5 or .protobuf"
                     .format(ext, path))
