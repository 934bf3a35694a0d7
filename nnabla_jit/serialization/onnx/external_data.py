"""ONNX external data: initializers kept in a file beside the model, as protobuf cannot
serialize a message of 2 GB. The export lays them out (:func:`external_layout`), refers to them
(:func:`initializer`) and writes them (:func:`write_external`); the import reads them straight
into numpy (:func:`read_external`), so such a model never passes through one message.
"""
import os
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


def read_external(tensor, directory, label, dtype, dims):
    """The values of a tensor stored in an external data file (read straight into numpy, so
    a model beyond protobuf's 2 GB never passes through a message)."""
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    path = os.path.normpath(os.path.join(directory, location))
    if not location or os.path.isabs(location) or os.path.relpath(path, directory).startswith(".."):
        raise FileFormatError(label, "initializer '{}' has external data at '{}', which is not a "
                              "path inside the model's directory".format(tensor.name, location))
    count = int(np.prod(dims, dtype=np.int64))
    offset = int(info.get("offset", 0))
    length = int(info.get("length", count * dtype.itemsize))
    if length != count * dtype.itemsize:
        raise FileFormatError(label, "initializer '{}' has dims {} ({} bytes) but its external data "
                              "is {} bytes long".format(tensor.name, dims, count * dtype.itemsize, length))
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            array = np.fromfile(f, dtype=dtype.newbyteorder("<"), count=count)
    except OSError as e:
        raise FileFormatError(label, "initializer '{}': cannot read its external data {}: {}".format(
            tensor.name, path, e.strerror or e)) from None
    if array.size != count:
        raise FileFormatError(label, "initializer '{}': external data {} ends before offset {} + {} "
                              "bytes".format(tensor.name, path, offset, length))
    return array.astype(dtype, copy=False).reshape(dims)
