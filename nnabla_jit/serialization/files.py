"""What every reader and writer of ``serialization/`` shares: the error they raise, atomic
writes, and opening a path or a file object by extension.

A file that cannot be read raises :class:`FileFormatError` (a ``ValueError``) or
``FileNotFoundError`` whose message names the file and what is wrong, never an exception from
deep inside h5py, protobuf or zipfile. Writes go to a temporary file in the target directory
which then replaces the target (``os.replace``), so a crash mid-save never leaves a truncated
file where a good one was.
"""
import errno
import io
import math
import os
import socket
import tempfile
import threading
from contextlib import contextmanager

__all__ = ["FileFormatError", "file_label", "extension_of", "check_readable", "read_bytes",
           "write_bytes", "atomic_path", "scratch_path", "remove_stale_temps", "naming_errors",
           "name_as_file_name", "MAX_SHAPE_ELEMENTS", "check_shape"]

#: A shape read from a file (a network variable, a parameter, an ONNX input or initializer) may
#: hold at most this many elements (4 TiB of float32): dims of 2**50, or dims whose product
#: overflows int64, are refused when the file is read rather than failing deep inside numpy.
MAX_SHAPE_ELEMENTS = 1 << 40


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


def check_readable(path):
    """Raise, naming ``path``, unless it is an existing regular file; returns its size."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError("{}: no such file".format(path))
    if os.path.isdir(path):
        raise FileFormatError(path, "is a directory, not a file")
    return os.path.getsize(path)


def read_bytes(source):
    """All bytes of a path or of a readable file object."""
    if isinstance(source, (str, os.PathLike)):
        check_readable(source)
        with open(os.fspath(source), "rb") as f:
            return f.read()
    if hasattr(source, "read"):
        data = source.read()
        return data.encode("utf-8") if isinstance(data, str) else data
    raise TypeError("expected a file name or a file object, got {}".format(type(source).__name__))


# Temporary files of atomic writes are named ``.<target>.<host>.<pid>.<random>.tmp``: a later
# save to the same target removes those of this host whose process is gone (a save killed with
# kill -9 cannot clean up after itself), and never touches one a live process is writing.
_HOST = socket.gethostname().replace(".", "_") or "host"
_active_temps = set()
_active_lock = threading.Lock()


def _temp_prefix(path):
    return ".{}.{}.".format(os.path.basename(path), _HOST)


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # alive, but another user's
        return True
    except OSError:
        return True
    return True


def remove_stale_temps(path):
    """Remove temporary files left beside ``path`` by killed saves of this host."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix = _temp_prefix(path)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid_text = name[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit():
            continue
        tmp = os.path.join(directory, name)
        pid = int(pid_text)
        with _active_lock:
            in_use = tmp in _active_temps
        if in_use or (pid != os.getpid() and _process_alive(pid)):
            continue
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _naming_target(err, path):
    """``err`` (an OSError about the temporary file) re-raised as one about ``path``."""
    return type(err)(err.errno, "cannot write {}: {}".format(path, err.strerror or err))


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError("{}: directory {} does not exist".format(path, directory))
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "cannot write {}: it is a directory".format(path))
    remove_stale_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path) + str(os.getpid()) + ".",
                                   suffix=".tmp", dir=directory)
    except OSError as e:
        raise _naming_target(e, path) from None
    os.close(fd)
    with _active_lock:
        _active_temps.add(tmp)
    try:
        try:
            yield tmp
            # mkstemp makes the file private; give it the mode a plain open() would have.
            os.chmod(tmp, os.stat(path).st_mode & 0o7777 if os.path.exists(path)
                     else 0o666 & ~_umask())
            os.replace(tmp, path)
        except OSError as e:
            # a write that fails with no file named (ENOSPC, EFBIG from f.write) is the target's
            if e.filename in (None, tmp, path) or e.filename2 == tmp:
                raise _naming_target(e, path) from None
            raise
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        with _active_lock:
            _active_temps.discard(tmp)


@contextmanager
def scratch_path(beside=None):
    """Yield the path of a new empty temporary file (beside the path ``beside``, named as
    :func:`atomic_path`'s temporary files so that a killed save's leftover is cleaned up; in the
    system's temporary folder without it), removed when the block ends."""
    if beside is not None:
        beside = os.fspath(beside)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(beside) + str(os.getpid()) + ".",
                                   suffix=".tmp", dir=os.path.dirname(os.path.abspath(beside)))
    else:
        fd, tmp = tempfile.mkstemp(suffix=".tmp")
    os.close(fd)
    with _active_lock:
        _active_temps.add(tmp)
    try:
        yield tmp
    finally:
        with _active_lock:
            _active_temps.discard(tmp)
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask():
    # os.umask can only be read by setting it, which races with other threads creating files;
    # Linux reports it in /proc.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def naming_errors(path):
    """Give an OSError raised in the block without a file name (a write through a file object:
    a full disk, EFBIG) the name ``path``, so that :func:`atomic_path` reports it for its target."""
    try:
        yield
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise type(e)(e.errno, e.strerror or str(e), os.fspath(path)) from None
        raise


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


def name_as_file_name(name, what, source):
    """``name`` (the ``what`` read from ``source``) where it becomes a file name in an output
    folder: refused when it would be a path there (a separator, '.', '..', a NUL), so that a
    name in a file never writes outside the folder the user named."""
    separators = {"/", "\\", "\0", os.sep} | ({os.altsep} if os.altsep else set())
    if not name or name in (".", "..") or any(c in name for c in separators):
        raise ValueError("{} '{}' in {} cannot be a file name (it is a path, '.' or '..'); "
                         "rename it".format(what, name, file_label(source)))
    return name


def check_shape(dims, what, source):
    """``dims`` (a shape read from ``source``; -1, a batch, counts as 1) as a tuple of ints;
    refused, naming ``what``, when it holds more than MAX_SHAPE_ELEMENTS elements (counted with
    Python ints: no int64 overflow)."""
    dims = tuple(int(d) for d in dims)
    elements = math.prod(1 if d == -1 else d for d in dims)
    if elements > MAX_SHAPE_ELEMENTS:
        limit = MAX_SHAPE_ELEMENTS
        text = "2**{}".format(limit.bit_length() - 1) if limit & (limit - 1) == 0 else str(limit)
        raise FileFormatError(source, "{} has shape {} ({} elements); at most {} elements are "
                              "read (nnabla_jit.serialization.files.MAX_SHAPE_ELEMENTS)".format(
                                  what, dims, elements, text))
    return dims
