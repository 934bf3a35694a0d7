"""ONNX external data: initializers kept in a file beside the model, as protobuf cannot
serialize a message of 2 GB. The export lays them out (:func:`external_layout`), refers to them
(:func:`initializer`) and writes them (:func:`write_external`); the import reads them straight
into numpy (:func:`read_external`), so such a model never passes through one message.
"""
import math
import os
import stat
from collections import OrderedDict

import numpy as np

from ..files import FileFormatError
from .builder import elem_type_of

__all__ = ["PROTOBUF_LIMIT", "EXTERNAL_DATA_MIN_BYTES", "initializer", "external_layout", "write_file",
           "write_external", "read_external"]

# protobuf refuses to serialize a message of 2 GiB or more; the graph itself needs some room.
PROTOBUF_LIMIT = 2 ** 31 - 2 ** 24
# Initializers smaller than this stay in the model when the others go to external data.
EXTERNAL_DATA_MIN_BYTES = 1024
_ALIGNMENT = 4096


def initializer(onnx, name, array, external):
    """The TensorProto of an initializer: its data inline, or (``external`` = (location,
    offset)) a reference into the external data file, which :func:`write_external` fills."""
    if external is None:
        return onnx.numpy_helper.from_array(array, name)
    tensor = onnx.TensorProto(name=name, data_type=elem_type_of(array.dtype), dims=array.shape)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", external[0]), ("offset", external[1]), ("length", array.nbytes)):
        tensor.external_data.add(key=key, value=str(value))
    return tensor


def external_layout(arrays, threshold):
    """name -> offset in the external data file of the initializers that go there: none when
    all of them together are at most ``threshold`` bytes, else every one of at least
    ``EXTERNAL_DATA_MIN_BYTES`` (aligned as onnx's own writer aligns them)."""
    if sum(a.nbytes for a in arrays.values()) <= threshold:
        return OrderedDict()
    layout, offset = OrderedDict(), 0
    for name, array in arrays.items():
        if array.nbytes >= EXTERNAL_DATA_MIN_BYTES:
            offset = -(-offset // _ALIGNMENT) * _ALIGNMENT
            layout[name] = offset
            offset += array.nbytes
    return layout


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_external(arrays, layout, path, bar):
    """Write the arrays of ``layout`` at their offsets (zeros in the alignment gaps)."""
    with open(path, "wb") as f:
        for n, offset in layout.items():
            f.write(b"\0" * (offset - f.tell()))
            data = np.ascontiguousarray(arrays[n])
            f.write(memoryview(data.reshape(-1).view(np.uint8)))
            bar.update(data.nbytes)
        f.flush()
        os.fsync(f.fileno())


def _non_negative(info, key, default, tensor, label):
    text = info.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise FileFormatError(label, "initializer '{}': external data {} {!r} is not a non-negative "
                              "integer".format(tensor.name, key, text))
    return value


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(mode):
    """What a file of ``mode`` is when it is not a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def _external_file(tensor, directory, label, location):
    """The real path of ``location`` (relative to the model's folder), refused unless it is a
    regular file inside that folder once symlinks are resolved (as ``onnx.load`` refuses it);
    a FIFO, device or directory is refused without being opened."""
    path = os.path.normpath(os.path.join(directory, location))
    if not location or os.path.isabs(location) or os.path.relpath(path, directory).startswith(".."):
        raise FileFormatError(label, "initializer '{}' has external data at '{}', which is not a "
                              "path inside the model's directory".format(tensor.name, location))
    root = os.path.realpath(directory or ".")
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise FileFormatError(label, "initializer '{}' has external data at '{}', which leads outside "
                              "the model's folder (to {}); refused".format(tensor.name, location, real))
    try:
        kind = _not_regular(os.stat(real).st_mode)
    except OSError as e:
        raise FileFormatError(label, "initializer '{}': cannot read its external data {}: {}".format(
            tensor.name, path, e.strerror or e)) from None
    if kind is not None:
        raise FileFormatError(label, "initializer '{}': external data {} is {}, not a regular file"
                              .format(tensor.name, path, kind))
    return real


def _open_regular(real, tensor, label):
    """A binary file object of ``real``, checked again once open (O_NONBLOCK: a FIFO swapped in
    since the check cannot make the open wait; O_NOFOLLOW: nor can a symlink)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as e:
        raise FileFormatError(label, "initializer '{}': cannot read its external data {}: {}".format(
            tensor.name, real, e.strerror or e)) from None
    kind = _not_regular(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise FileFormatError(label, "initializer '{}': external data {} is {}, not a regular file"
                              .format(tensor.name, real, kind))
    return os.fdopen(fd, "rb")


def read_external(tensor, directory, label, dtype, dims):
    """The values of a tensor stored in an external data file (read straight into numpy, so
    a model beyond protobuf's 2 GB never passes through a message). The file must be a regular
    file inside the model's folder, and hold the bytes that offset and length say."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    real = _external_file(tensor, directory, label, location)
    count = math.prod(dims)
    nbytes = count * dtype.itemsize
    offset = _non_negative(info, "offset", 0, tensor, label)
    length = _non_negative(info, "length", nbytes, tensor, label)
    if length != nbytes:
        raise FileFormatError(label, "initializer '{}' has dims {} ({} bytes) but its external data "
                              "length is {}".format(tensor.name, dims, nbytes, length))
    with _open_regular(real, tensor, label) as f:
        size = os.fstat(f.fileno()).st_size
        if offset + length > size:
            raise FileFormatError(label, "initializer '{}': external data {} ({} bytes) ends before "
                                  "offset {} + {} bytes".format(tensor.name, real, size, offset, length))
        f.seek(offset)
        array = np.fromfile(f, dtype=dtype.newbyteorder("<"), count=count)
    if array.size != count:   # the file shrank meanwhile
        raise FileFormatError(label, "initializer '{}': external data {} ends before offset {} + {} "
                              "bytes".format(tensor.name, real, offset, length))
    return array.astype(dtype, copy=False).reshape(dims)
