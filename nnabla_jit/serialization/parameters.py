"""Parameter files: nnabla's ``.h5`` and ``.protobuf`` layouts, both directions.

- ``.h5``: one dataset per parameter path in nested groups (``fc1/affine/W``), with attributes
  ``need_grad`` (bool) and ``index`` (the order parameters were saved in).
- ``.protobuf``: ``NNablaProtoBuf.parameter``: ``variable_name``, ``shape``, float ``data``,
  ``need_grad``.

Loading (also from ``.nntxt`` and ``.nnp``) parses and checks the whole file first, then
creates or overwrites the parameters of the current scope: a bad file changes nothing.
"""
import io
import math
import os
from collections import namedtuple
from contextlib import contextmanager

import numpy as np

from ..ndarray import native
from ..parameter import (get_current_parameter_scope, get_parameter, get_parameters,
                         set_parameter)
from ..variable import Variable
from . import hdf5
from .files import (FileFormatError, atomic_path, check_shape, extension_of, naming_errors,
                    write_bytes)
from .proto import nnabla_pb2

__all__ = ["ParameterEntry", "save", "load", "entries_of", "h5_bytes", "write_h5", "read_h5",
           "read_h5_bytes",
           "entries_from_proto", "add_entries_to_proto", "assign_to_scope",
           "scope_restored_on_error"]

#: One parameter as read from or written to a file.
ParameterEntry = namedtuple("ParameterEntry", ["name", "data", "need_grad"])


def entries_of(params):
    """``ParameterEntry`` list of a dict path -> Variable."""
    return [ParameterEntry(k, np.asarray(v.d), bool(v.need_grad)) for k, v in params.items()]


# ------------------------------------------------------------------------------------ .h5
def write_h5(target, entries):
    """Write the ``.h5`` parameter file of ``entries`` to ``target`` (a path, then flushed to the
    disk, or a seekable file object); each array goes from its buffer to the file, with no copy
    of the whole set. A path is written through a Python file object: HDF5 writing to a path of
    its own leaves the library broken after a failed write (a full disk: a later h5py call
    crashes the process), whereas through a file object the failure is a plain OSError naming
    the path."""
    if isinstance(target, (str, os.PathLike)):
        with naming_errors(target), open(target, "wb") as f:
            _write_h5(f, entries)
            f.flush()
            os.fsync(f.fileno())
    else:
        _write_h5(target, entries)


def _write_h5(target, entries):
    import h5py
    with h5py.File(target, "w") as f:
        for i, e in enumerate(entries):
            try:
                f[e.name] = e.data
            except (ValueError, TypeError) as err:
                raise ValueError("save_parameters: cannot store parameter '{}' ({})".format(
                    e.name, err)) from None
            f[e.name].attrs["need_grad"] = bool(e.need_grad)
            f[e.name].attrs["index"] = np.int64(i)


def h5_bytes(entries):
    """The ``.h5`` parameter file of ``entries`` as bytes."""
    buf = io.BytesIO()
    write_h5(buf, entries)
    return buf.getvalue()


def _size_of(source, data):
    if data is None:
        return os.path.getsize(source)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return len(data)
    position = data.tell()
    size = data.seek(0, io.SEEK_END)
    data.seek(position)
    return size


def read_h5(source, data=None):
    """``ParameterEntry`` list (saved order) of the ``.h5`` parameter file at path ``source``
    (read in place: only the values themselves are held in memory), or of ``data`` (its bytes,
    or a seekable file object) named ``source``. Datasets whose data lies in other files, or that
    would expand beyond the limits, are refused before anything is read (see ``hdf5.py``)."""
    size = _size_of(source, data)
    f = hdf5.open_file(source, data)
    found = []
    with f:
        try:
            for name in hdf5.checked_datasets(f, source, size):
                ds = f[name]
                if "need_grad" not in ds.attrs:
                    raise FileFormatError(source, "dataset '{}' has no 'need_grad' attribute; not "
                                          "an nnabla parameter file".format(name))
                if ds.dtype.kind not in "fiub":
                    raise FileFormatError(source, "dataset '{}' holds {} data, not numbers".format(
                        name, ds.dtype))
                index = ds.attrs.get("index", len(found))
                data = np.asarray(ds[()], native(ds.dtype))   # '>f4' from another machine: native
                found.append((int(index), name, ParameterEntry(name, data, bool(ds.attrs["need_grad"]))))
        except FileFormatError:
            raise
        except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise FileFormatError(source, "damaged HDF5 parameter file ({})".format(e)) from None
    return [e for _, _, e in sorted(found, key=lambda t: (t[0], t[1]))]


def read_h5_bytes(data, source):
    """``ParameterEntry`` list (saved order) from the bytes of an ``.h5`` parameter file."""
    return read_h5(source, data)


# ------------------------------------------------------------------------------------ protobuf
def entries_from_proto(proto, source):
    """``ParameterEntry`` list of ``proto.parameter`` (an NNablaProtoBuf).

    A name given twice is an error (nnabla keeps the last silently; which value the writer
    meant cannot be told)."""
    entries, seen = [], set()
    for p in proto.parameter:
        shape = check_shape(p.shape.dim, "parameter '{}'".format(p.variable_name), source)
        if any(d < 0 for d in shape) or math.prod(shape) != len(p.data):
            raise FileFormatError(source, "parameter '{}' has shape {} but {} values".format(
                p.variable_name, shape, len(p.data)))
        if p.variable_name in seen:
            raise FileFormatError(source, "parameter '{}' is given twice".format(p.variable_name))
        seen.add(p.variable_name)
        entries.append(ParameterEntry(p.variable_name,
                                      np.array(p.data, np.float32).reshape(shape), p.need_grad))
    return entries


def add_entries_to_proto(proto, entries):
    """Append ``entries`` to ``proto.parameter``."""
    for e in entries:
        p = proto.parameter.add(variable_name=e.name, need_grad=bool(e.need_grad))
        p.shape.dim.extend(int(d) for d in e.data.shape)
        p.data.extend(np.asarray(e.data, np.float32).ravel().tolist())


# ------------------------------------------------------------------------------------ scope
def _parameters_under(scope):
    out = []
    for k, v in scope.items():
        if isinstance(v, dict):
            out += [k + "/" + n for n in _parameters_under(v)]
        else:
            out.append(k)
    return out


def _check_fits(entries, source):
    """Raise before anything is assigned if an entry cannot go into the current scope."""
    existing = set(get_parameters(grad_only=False))
    incoming = {}
    for e in entries:
        if not isinstance(e.name, str) or not e.name or any(not part for part in e.name.split("/")):
            raise FileFormatError(source, "invalid parameter name {!r}".format(e.name))
        incoming[e.name] = e
    names = existing | set(incoming)
    scope = get_current_parameter_scope()
    for name, entry in incoming.items():
        parts = name.split("/")
        for k in range(1, len(parts)):
            prefix = "/".join(parts[:k])
            if prefix in names:
                raise FileFormatError(source, "parameter '{}' would sit inside parameter '{}'"
                                      .format(name, prefix))
        node = scope
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            inside = _parameters_under(node)
            if inside:
                raise FileFormatError(source, "parameter '{}' would replace the scope '{}' and "
                                      "its parameters {}".format(name, name, ", ".join(
                                          name + "/" + n for n in inside[:5])))
        current = get_parameter(name)
        if current is None:
            continue
        shape = entry.data.shape
        if current.shape != shape:
            raise FileFormatError(source, "parameter '{}' has shape {} in the file but {} in the "
                                  "current scope (nn.clear_parameters() starts afresh)".format(
                                      name, shape, current.shape))
        have, got = current.data.dtype, entry.data.dtype
        if have != got and not np.can_cast(got, have, "same_kind"):
            raise FileFormatError(source, "parameter '{}' holds {} values in the file but is {} in "
                                  "the current scope; loading would change its type".format(
                                      name, got, have))


def _holding(array, need_grad):
    """A Variable holding ``array`` itself (a buffer read from a file and used by nothing else:
    a model is not held twice while it loads)."""
    v = Variable(array.shape, need_grad=need_grad)
    v.data.hold_view(np.ascontiguousarray(array))
    return v


def assign_to_scope(entries, source, adopt=False):
    """Create or overwrite the parameters of ``entries`` in the current scope (all or none).

    An existing parameter keeps its type: the file's values are cast to it (float64 values
    into a float32 parameter), or refused when that cannot be done safely (floats into an
    integer parameter). With ``adopt``, a new parameter holds its entry's array itself rather
    than a copy (for entries just read from a file and then dropped)."""
    _check_fits(entries, source)
    for e in entries:
        param = get_parameter(e.name)
        if param is None:
            set_parameter(e.name, _holding(e.data, e.need_grad) if adopt
                          else Variable.from_numpy_array(e.data, need_grad=e.need_grad))
        else:
            param.need_grad = e.need_grad
            param.d = np.asarray(e.data).astype(param.data.dtype, copy=False)


@contextmanager
def scope_restored_on_error(overwritten=()):
    """Undo, if the block raises, every change to the current parameter scope: parameters
    added, removed or replaced and need_grad flags changed; the values of the parameters named
    in ``overwritten`` (paths under the current scope) are restored too."""
    scopes, flags = [], []

    def record(scope):
        items = list(scope.items())
        scopes.append((scope, items))
        for _, v in items:
            if isinstance(v, dict):
                record(v)
            else:
                flags.append((v, v.need_grad))
    record(get_current_parameter_scope())
    values = []
    for name in overwritten:
        v = get_parameter(name)
        if v is not None and not v.data.clear_called:
            values.append((v, v.data.dtype, v.d.copy()))
    try:
        yield
    except BaseException:
        for scope, items in scopes:
            scope.clear()
            scope.update(items)
        for v, need_grad in flags:
            v.need_grad = need_grad
        for v, dtype, saved in values:
            if v.data.dtype != dtype:
                v.data.cast(dtype)
            v.d = saved
        raise


# ------------------------------------------------------------------------------------ API
def save(path, params, extension=None):
    """``nn.save_parameters``: write ``params`` (path -> Variable) as ``.h5`` or ``.protobuf``."""
    ext = extension_of(path, extension, "save_parameters")
    entries = entries_of(params)
    if ext == ".h5" and isinstance(path, (str, os.PathLike)):
        with atomic_path(path) as tmp:   # written in place: no copy of the file in memory
            write_h5(tmp, entries)
        return
    if ext == ".h5":
        data = h5_bytes(entries)
    elif ext == ".protobuf":
        proto = nnabla_pb2.NNablaProtoBuf()
        add_entries_to_proto(proto, entries)
        data = proto.SerializeToString()
    else:
        raise ValueError("save_parameters: unsupported extension '{}' for {}; use .h5 or "
                         ".protobuf".format(ext, path))
    write_bytes(path, data)


def load(path, proto=None, needs_proto=False, extension=".nntxt"):
    """``nn.load_parameters``: read ``.h5``, ``.protobuf``, ``.nntxt`` or ``.nnp`` into the
    current scope. Returns the NNablaProtoBuf read (with the parameters of an ``.h5`` file added
    when ``needs_proto``), merged into ``proto`` if given."""
    from . import nnp       # nnp reads parameter files with this module: import it late
    ext = extension_of(path, extension, "load_parameters")
    if ext not in nnp.PARAMETER_EXTENSIONS:
        raise ValueError("load_parameters: unsupported extension '{}' for {}; use .h5, .protobuf, "
                         ".nntxt or .nnp".format(ext, path))
    contents = nnp.read([path], extension=ext)
    assign_to_scope(contents.parameters, path, adopt=True)
    result = nnabla_pb2.NNablaProtoBuf() if proto is None else proto
    result.MergeFrom(contents.proto)
    if ext == ".h5" and needs_proto:
        add_entries_to_proto(result, contents.parameters)
    return result
