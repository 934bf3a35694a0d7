"""File handles for nnabla's file formats (nnabla's ``nnabla.utils.get_file_handle``):
``get_file_handle_load(nnp, path, ext)`` / ``get_file_handle_save(path, ext)`` open a path or
pass through a file object, as the format wants (zip for ``.nnp``, h5py for ``.h5``, text for
``.nntxt``/``.prototxt``, binary for ``.protobuf``). Loading and saving whole models is
``nnabla_jit.utils.load`` / ``save`` and ``nn.load_parameters`` / ``nn.save_parameters``."""
import contextlib
import io
import zipfile

import h5py

from .nnp_format import nnp_version

__all__ = ["FileHandlerContext", "get_file_handle_load", "get_file_handle_save", "get_buf_type",
           "nnp_version"]


class FileHandlerContext:
    """An attribute bag passed along while files are read or written."""


def _open(path, ext, mode):
    """(file, whether we opened it)."""
    if ext == ".nnp":
        return zipfile.ZipFile(path, mode), True
    if ext == ".h5":
        if mode == "r" and not isinstance(path, str):
            return h5py.File(io.BytesIO(path.read()), "r"), True
        return h5py.File(path, mode), True
    if ext in (".nntxt", ".prototxt", ".protobuf"):
        if hasattr(path, "read") or hasattr(path, "write"):
            return path, False
        return open(path, mode + ("b" if ext == ".protobuf" else "")), True
    raise ValueError("Currently, ext == {} is not support".format(ext))


@contextlib.contextmanager
def get_file_handle_load(nnp, path, ext):
    """A handle to read ``path`` as ``ext``; with ``nnp`` (an open ZipFile), the member ``path``
    of it (``.h5`` members as h5py files)."""
    if nnp is not None:
        with nnp.open(path, "r") as member:
            if ext == ".h5":
                with h5py.File(io.BytesIO(member.read()), "r") as f:
                    yield f
            else:
                yield member
        return
    f, opened = _open(path, ext, "r")
    try:
        yield f
    finally:
        if opened:
            f.close()


@contextlib.contextmanager
def get_file_handle_save(path, ext):
    """A handle to write ``path`` as ``ext`` (a file object is rewound afterwards)."""
    f, opened = _open(path, ext, "w")
    try:
        yield f
    finally:
        if opened:
            f.close()
        if hasattr(path, "seek"):
            path.seek(0)


def get_buf_type(filename):
    """The format of a solver-state member name such as ``optimizer_x_state_y.h5`` ('h5')."""
    return filename.split("_")[-1].split(".")[1].lower()
