"""HDF5 files read with their data kept inside them and their size bounded.

An HDF5 dataset may keep its bytes in other files (*external storage*, ``create_dataset(...,
external=[("/etc/shadow", 0, n)])``, or a *virtual dataset* mapping other files), and a
compressed (gzip-chunked) or never-written dataset may expand to far more than the file holds.
:func:`checked_datasets` refuses such datasets before any of their data is read, so a parameter
or solver-state file (also inside an ``.nnp``) can neither read files the user did not name nor
make the reader allocate gigabytes. The expansion limits are those of ``.nnp`` members
(``nnabla_jit.serialization.nnp.MAX_EXPANSION`` and ``MIN_MEMBER_LIMIT``).

:func:`open_file` opens a path (read in place, not copied into memory) or bytes.
"""
import io
import math
import os

from .files import FileFormatError

__all__ = ["open_file", "checked_datasets", "check_dataset", "logical_bytes"]


def open_file(source, data=None):
    """An h5py File (read-only) of the path ``source``, or of ``data`` (bytes, or a seekable
    binary file object) named ``source``."""
    import h5py
    if data is None:
        opened = os.fspath(source)
    else:
        opened = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        return h5py.File(opened, "r")
    except (OSError, ValueError, RuntimeError) as e:
        raise FileFormatError(source, "not a readable HDF5 file ({})".format(e)) from None


def _limits():
    from . import nnp   # nnp reads HDF5 members through this module; its limits are read late
    return nnp.MAX_EXPANSION, nnp.MIN_MEMBER_LIMIT


def logical_bytes(ds):
    """The bytes a dataset's values take once read (Python ints: no int64 overflow)."""
    return math.prod(int(d) for d in (ds.shape or ())) * ds.dtype.itemsize


def check_dataset(ds, name, source):
    """Refuse dataset ``ds`` (named ``name``) when its data lies in other files or expands
    beyond the limits; returns its logical size in bytes."""
    plist = ds.id.get_create_plist()
    external = [plist.get_external(k)[0] for k in range(plist.get_external_count())]
    if external:
        raise FileFormatError(source, "dataset '{}' keeps its data in another file (HDF5 external "
                              "storage: {}); refused".format(name, ", ".join(
                                  os.fsdecode(e) for e in external)))
    if ds.is_virtual:
        raise FileFormatError(source, "dataset '{}' is a virtual dataset (its data lies in other "
                              "files); refused".format(name))
    max_expansion, min_limit = _limits()
    stored = ds.id.get_storage_size()
    size = logical_bytes(ds)
    limit = max(min_limit, max_expansion * stored)
    if size > limit:
        raise FileFormatError(source, "dataset '{}' (shape {}, {}) expands to {} bytes from {} stored "
                              "bytes: refused as a possible decompression bomb (raise nnabla_jit."
                              "serialization.nnp.MAX_EXPANSION to read it)".format(
                                  name, tuple(ds.shape), ds.dtype, size, stored))
    return size


def checked_datasets(f, source, file_size):
    """The names of the datasets of the open file ``f`` (of ``file_size`` bytes), each checked
    by :func:`check_dataset`; together they may expand to at most the limit of the whole file.
    (``visititems`` follows hard links only: a link to another file is never entered.)"""
    import h5py
    names = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    max_expansion, min_limit = _limits()
    total = sum(check_dataset(f[name], name, source) for name in names)
    limit = max(min_limit, max_expansion * file_size)
    if total > limit:
        raise FileFormatError(source, "the datasets expand to {} bytes from a file of {} bytes: "
                              "refused as a possible decompression bomb (raise nnabla_jit."
                              "serialization.nnp.MAX_EXPANSION to read it)".format(total, file_size))
    return names
