"""What every reader and writer of ``serialization/`` shares: the error they raise, atomic
writes, and opening a path or a file object by extension.

A file that cannot be read raises :class:`FileFormatError` (a ``ValueError``) or
``FileNotFoundError`` whose message names the file and what is wrong, never an exception from
deep inside h5py, protobuf or zipfile. Writes go to a temporary file in the target directory
which then replaces the target (``os.replace``), so a crash mid-save never leaves a truncated
file where a good one was.
"""
import io
import os
import tempfile
from contextlib import contextmanager

__all__ = ["FileFormatError", "file_label", "extension_of", "read_bytes", "write_bytes",
           "atomic_path"]


class FileFormatError(ValueError):
    """A file is truncated, corrupt, of the wrong format or inconsistent with its use."""

    def __init__(self, source, problem):
        self.source = source
        self.problem = problem
        super().__init__("{}: {}".format(file_label(source), problem))


def file_label(source):
    """How a path or a file object is named in messages."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "name", None)
    return "<{} {}>".format(type(source).__name__, name) if isinstance(name, str) else \
        "<{}>".format(type(source).__name__)


def extension_of(source, extension, what):
    """The lower-case extension of a path, or ``extension`` for a file object."""
    if isinstance(source, (str, os.PathLike)):
        ext = os.path.splitext(os.fspath(source))[1].lower()
        if ext:
            return ext
    if extension:
        return extension if extension.startswith(".") else "." + extension
    raise ValueError("{}: cannot tell the format of {}; give a file name with an extension or "
                     "extension='.h5' (or similar)".format(what, file_label(source)))


def read_bytes(source):
    """All bytes of a path or of a readable file object."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise FileNotFoundError("{}: no such file".format(path))
        if os.path.isdir(path):
            raise FileFormatError(path, "is a directory, not a file")
        with open(path, "rb") as f:
            return f.read()
    if hasattr(source, "read"):
        data = source.read()
        return data.encode("utf-8") if isinstance(data, str) else data
    raise TypeError("expected a file name or a file object, got {}".format(type(source).__name__))


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError("{}: directory {} does not exist".format(path, directory))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    os.close(fd)
    try:
        yield tmp
        # mkstemp makes the file private; give it the mode a plain open() would have.
        os.chmod(tmp, os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(target, data):
    """Write ``data`` to a path (atomically) or to a writable file object."""
    if isinstance(target, (str, os.PathLike)):
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        return
    if isinstance(target, io.TextIOBase):
        target.write(data.decode("utf-8"))
    elif hasattr(target, "write"):
        target.write(data)
    else:
        raise TypeError("expected a file name or a file object, got {}".format(type(target).__name__))
    if hasattr(target, "seek"):
        target.seek(0)
