"""The kernel cache: generated kernel modules and numba's machine code, in one private directory.

Where it lives: ``$NNABLA_JIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/nnabla_jit``, else
``~/.cache/nnabla_jit``. Inside it, ``kernels/`` holds the generated kernel modules (elementwise
ops, fused regions) and ``numba/`` the machine code numba caches for every ``cache=True`` kernel
of nnabla_jit. ``NUMBA_CACHE_DIR``, when set, moves numba's part there instead (numba's own rule).

Why it is built this way:

* **Safe.** Cached files are code (kernel source, and numba's pickled index and machine code),
  so they are used only from a directory this user owns and nobody else can write: the directory
  is created 0700 and checked on every process start; one owned by someone else, or writable by
  group or others, is refused. A generated module's file name is the hash of its source, and its
  content is compared with that source before use; there is no shared fallback directory.
  numba's files are unpickled only when, checked on the open file at every open (``O_NOFOLLOW``,
  ``fstat``), they belong to this user and nobody else can write them: a cache directory swapped
  by another user after the start-up check gets its planted pickles ignored, never read.
* **Harmless to what it does not own.** The cache works only inside a directory it created, or
  found empty (or holding an older nnabla_jit's ``kernels/`` and ``numba/``), and marked with the
  file ``.nnabla_jit_cache``; any other directory (a folder of the user's that
  ``NNABLA_JIT_CACHE_DIR`` names by mistake) is refused with one warning and left untouched. It
  never changes a directory's mode, and ``cache clear`` removes only the files it writes
  (generated modules, numba's ``.nbi``/``.nbc``), never a file a user put there.
* **Self-healing.** A generated module whose content does not match its name is rewritten; a
  numba index or data file that cannot be read is removed and the kernel recompiled. Either
  gives one :class:`KernelCacheWarning` naming the directory.
* **Works read-only.** With no usable directory, kernels are compiled in memory (numba's
  ``cache=True`` would otherwise fail at import with "no locator available"), with one warning.

:func:`install` (run first thing by ``import nnabla_jit``) routes the numba cache of nnabla_jit's
own kernels through these rules (:class:`_Policy`, applied by numba's cache classes in
``numba_internals.py``); other code's numba functions keep numba's behaviour.
``nnabla_jit cache info|clear|warm`` shows, empties or fills the cache.
"""
import contextlib
import hashlib
import os
import re
import stat
import sys
import tempfile
import threading
import types
import warnings

from . import numba_internals

__all__ = ["KernelCacheWarning", "cache_dir", "configured_cache_dir", "kernel_dir", "numba_dir",
           "module_name", "load_generated", "install", "info", "clear", "compile_count", "on_compile",
           "compile_status"]

ENV_VAR = "NNABLA_JIT_CACHE_DIR"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_IN_MEMORY_PREFIX = "<nnabla_jit generated "   # the file name of a module compiled in memory


class KernelCacheWarning(UserWarning):
    """The kernel cache was unusable or damaged; nnabla_jit carried on without it or rebuilt it."""


_warned = set()
_lock = threading.Lock()


def _warn_once(kind, message):
    """One warning per kind of trouble and process (a damaged cache may hold many bad files)."""
    with _lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn("nnabla_jit: " + message, KernelCacheWarning, stacklevel=3)


# ------------------------------------------------------------------------------ the directory
def configured_cache_dir():
    """Where the cache should live (whether or not it is usable)."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(base, "nnabla_jit"))


class UnsafeCacheDir(OSError):
    """The cache directory exists but is not ours, or another user could write into it."""


#: The file that makes a directory nnabla_jit's kernel cache: the cache works only inside a
#: directory holding it (one it created, or took over while empty), so that pointing
#: NNABLA_JIT_CACHE_DIR at a folder of the user's never has it written into or cleared.
MARKER = ".nnabla_jit_cache"
_MARKER_TEXT = ("This directory is nnabla_jit's kernel cache (generated kernels and numba's machine "
                "code).\n`nnabla_jit cache clear` empties it; deleting the directory is safe too.\n")

#: Bumped when the way the package's kernels are compiled changes in a way numba's index does not
#: see (it keys machine code by source file and numba version, not by optimisation level): the
#: first process of a new generation removes the older generation's machine code once.
#: 2: numba's default -O3 again (generation 1 compiled at -O2, several times slower kernels).
GENERATION = "2"
_GENERATION_FILE = ".generation"


def _check_private(path):
    """Refuse ``path`` unless this user owns it and nobody else can write it. Its mode is never
    changed (a directory the cache did not create is not its to chmod)."""
    st = os.stat(path)   # follows a symlink: a link to someone else's directory is refused too
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheDir("{} is not a directory".format(path))
    if not hasattr(os, "getuid"):   # no POSIX owners (Windows): the user's profile is private
        return
    if st.st_uid != os.getuid():
        raise UnsafeCacheDir("{} is owned by uid {}, not by this user (uid {})".format(
            path, st.st_uid, os.getuid()))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCacheDir("{} is writable by group or others (mode {:o}); remove it or run "
                             "chmod 700 on it after checking its content".format(
                                 path, stat.S_IMODE(st.st_mode)))


def _is_marked(path):
    """Whether ``path`` holds the marker: a regular file (not a link) of this user."""
    try:
        st = os.lstat(os.path.join(path, MARKER))
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and not _foreign(st)


def _takeable(path):
    """Whether an unmarked directory may become the cache: empty, or holding only what an older
    nnabla_jit (before the marker) left: kernels/ of generated modules, numba/ (and the
    generation file)."""
    # (a temporary file: another process is writing the marker just now)
    entries = [e for e in os.listdir(path) if not _TEMPORARY.fullmatch(e)]
    if not set(entries) <= {"kernels", "numba", _GENERATION_FILE}:
        return False
    for entry in [e for e in entries if e != _GENERATION_FILE]:
        st = os.lstat(os.path.join(path, entry))
        if not stat.S_ISDIR(st.st_mode) or _foreign(st):
            return False
    kernels = os.path.join(path, "kernels")
    return not os.path.isdir(kernels) or all(_is_generated_file(n) for n in os.listdir(kernels))


def _claim(path, created):
    """Make sure ``path`` (just ``created`` by us, or found) is marked as the kernel cache."""
    if _is_marked(path):
        return
    if not created and not _takeable(path):
        raise UnsafeCacheDir("{} is not a kernel cache made by nnabla_jit (it has no {} file and "
                             "holds other files); it is left as it is. Point {} at a new or empty "
                             "directory".format(path, MARKER, ENV_VAR))
    _write_atomic(os.path.join(path, MARKER), _MARKER_TEXT)


def _make_private(path):
    """Create ``path`` (mode 0700) if missing, check it is private and ours (marked), check it
    is writable."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path, 0o700)
        created = True
    except FileExistsError:
        if not os.path.isdir(path):   # a file, or a dangling link, in the way
            raise UnsafeCacheDir("{} exists and is not a directory".format(path))
        created = False
    _check_private(path)
    _claim(path, created)
    tempfile.TemporaryFile(dir=path).close()


def _renew_generation(root):
    """Remove numba's files under ``root/numba`` once if they are of an older generation."""
    path = os.path.join(root, _GENERATION_FILE)
    try:
        with open(path) as f:
            if f.read().strip() == GENERATION:
                return
    except OSError:
        pass
    _remove_entries(os.path.join(root, "numba"), _is_numba_file)
    _write_atomic(path, GENERATION + "\n")


_resolved = {}   # configured path -> usable path or None


def cache_dir():
    """The usable private cache directory, or None (then kernels compile in memory). Resolved
    once per configured path and process, with one warning when unusable."""
    configured = configured_cache_dir()
    if configured not in _resolved:
        try:
            _make_private(configured)
            _renew_generation(configured)
            _resolved[configured] = configured
        except OSError as e:
            _resolved[configured] = None
            _warn_once("unusable:" + configured,
                       "the kernel cache directory {} cannot be used ({}); kernels are compiled "
                       "in memory in every process. Set {} to a private writable directory."
                       .format(configured, e.strerror or e, ENV_VAR))
    return _resolved[configured]


def kernel_dir():
    """Directory of the generated kernel modules, or None."""
    root = cache_dir()
    return None if root is None else os.path.join(root, "kernels")


def numba_dir():
    """Directory of numba's files for nnabla_jit's kernels, or None (``NUMBA_CACHE_DIR`` or no
    usable cache)."""
    if numba_internals.numba_cache_dir():
        return os.path.abspath(numba_internals.numba_cache_dir())
    root = cache_dir()
    return None if root is None else os.path.join(root, "numba")


def _damaged(directory, what, error):
    _warn_once("damaged:" + directory,
               "damaged kernel cache entries in {} were removed and are being rebuilt ({}: {}: {}). "
               "`nnabla_jit cache clear` empties the cache.".format(
                   directory, what, type(error).__name__, error))


# ------------------------------------------------------------------------------ generated modules
def module_name(prefix, text):
    """The module (and file) name of generated source ``text``: ``prefix`` + its hash."""
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:32]


def _write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")   # created 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _module_file(name, text):
    """The verified file of module ``name`` in the kernel directory (written or rewritten as
    needed), or None when there is no usable directory."""
    directory = kernel_dir()
    if directory is None:
        return None
    path = os.path.join(directory, name + ".py")
    expected = text.encode()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            with open(path, "rb") as f:
                found = f.read()
        except FileNotFoundError:
            found = None
        if found is not None and found != expected:
            # the name is the hash of the source: other content is truncation, corruption or
            # something planted, and is never run
            _damaged(directory, os.path.basename(path), ValueError(
                "content hash {} does not match its name".format(hashlib.sha256(found).hexdigest()[:32])))
            found = None
        if found is None:
            _write_atomic(path, text)
        return path
    except OSError as e:
        _warn_once("unwritable:" + directory, "cannot write generated kernels to {} ({}); compiling "
                   "them in memory".format(directory, e.strerror or e))
        return None


def load_generated(prefix, text):
    """Import generated kernel source ``text`` as the module ``prefix`` + hash of ``text``.

    The source is compiled from ``text`` itself; the verified file in the kernel directory is
    there for numba's on-disk cache, which keys machine code by the file. A changed text is a new
    file, so stale machine code is never used. Without a usable directory the module lives in
    memory only (numba then compiles without caching).
    """
    name = module_name(prefix, text)
    module = sys.modules.get(name)
    if module is not None:
        return module
    path = _module_file(name, text)
    filename = path if path is not None else _IN_MEMORY_PREFIX + name + ">"
    module = types.ModuleType(name, "Generated kernels (nnabla_jit.kernel_cache).")
    module.__file__ = filename
    code = compile(text, filename, "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)   # our own generated source, verified above
    except BaseException:
        del sys.modules[name]
        raise
    return module


# ------------------------------------------------------------------------------ numba's cache
def _is_ours(py_file):
    if py_file.startswith(_IN_MEMORY_PREFIX):
        return True
    path = os.path.abspath(py_file)
    if path.startswith(_PACKAGE_DIR + os.sep):
        return True
    directory = kernel_dir()
    return directory is not None and path.startswith(directory + os.sep)


_writable_paths = set()   # cache directories this process has found writable


def _foreign(st):
    """Why a file of stat ``st`` may not be trusted as the cache's (None if it may): not
    this user's, or writable by others."""
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "owned by uid {}".format(st.st_uid)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by group or others (mode {:o})".format(stat.S_IMODE(st.st_mode))
    return None


class ForeignCacheFile(OSError):
    """A cache file not written by this user (or that others could have changed): never read."""


def _open_own(path):
    """``path`` opened for reading, checked on the open file (``fstat``; ``O_NOFOLLOW``: not a
    symlink) to be a regular file of this user that nobody else can write; else
    :class:`ForeignCacheFile`. Checked at every open, so a file planted after the directory
    check (a swapped directory) is refused too."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ForeignCacheFile(e.errno, "{}: {}".format(path, e.strerror)) from None
    st = os.fstat(fd)
    problem = "not a regular file" if not stat.S_ISREG(st.st_mode) else _foreign(st)
    if problem:
        os.close(fd)
        raise ForeignCacheFile("{} is {}".format(path, problem))
    return os.fdopen(fd, "rb")


def _refused(path, error):
    _warn_once("foreign:" + os.path.dirname(path),
               "numba cache files not written by this user were ignored, never read ({}); the "
               "kernels were compiled anew".format(error))


class _Policy:
    """Where numba's files of nnabla_jit's kernels go and which may be read: the rules above,
    as numba_internals.route_caching asks for them."""

    @staticmethod
    def is_ours(py_file):
        return _is_ours(py_file)

    @staticmethod
    def cache_path(py_file):
        """``<cache>/numba/<numba's sub-directory>``; None under ``NUMBA_CACHE_DIR`` (numba's
        own locator, next in the list, then honours it) or with no usable cache."""
        if numba_internals.numba_cache_dir() or numba_dir() is None or not os.path.exists(py_file):
            return None
        return os.path.join(numba_dir(), numba_internals.cache_subpath(py_file))

    @staticmethod
    def ensure_directory(path):
        # once per directory and process: hundreds of kernels share one (a directory that turns
        # unwritable later fails the save, which unwritable() below survives)
        if path in _writable_paths:
            return
        os.makedirs(path, mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        _writable_paths.add(path)

    @staticmethod
    def open_own(path):
        try:
            return _open_own(path)
        except ForeignCacheFile as e:
            _refused(path, e)
            return None

    @staticmethod
    def damaged(path, name, error):
        _damaged(path, name, error)

    @staticmethod
    def unwritable(path, error):
        _warn_once("unwritable:" + path, "cannot write numba's cache in {} ({}); kernels compiled "
                   "now are not kept".format(path, error.strerror or error))

    @staticmethod
    def no_locator():
        if cache_dir() is not None:   # else cache_dir() has said why, once
            _warn_once("nolocator", "no writable numba cache directory for nnabla_jit's kernels "
                       "(NUMBA_CACHE_DIR={}); compiling them in memory".format(
                           numba_internals.numba_cache_dir()))


def install():
    """Route the numba cache of nnabla_jit's kernels through this module. Must run before the
    first ``@njit(cache=True)`` of the package is decorated (``nnabla_jit/__init__`` does)."""
    numba_internals.route_caching(_Policy)


# ------------------------------------------------------------------------------ compile progress
_compiles = [0]


def _kernel_name(ev):
    py_func = getattr(numba_internals.event_dispatcher(ev), "py_func", None)
    return getattr(py_func, "__name__", "?")


class _CompileListener(numba_internals.Listener):
    """Counts numba's compilations (one listener for the process), or reports them."""

    def __init__(self, started=None, ended=None):
        self.started, self.ended = started, ended

    def on_start(self, ev):
        if self.started is None:
            _compiles[0] += 1
        else:
            self.started(_compiles[0], _kernel_name(ev))

    def on_end(self, ev):
        if self.ended is not None:
            self.ended()


numba_internals.register_listener(numba_internals.COMPILE_EVENT, _CompileListener())


def compile_count():
    """How many numba compilations this process has started (cache loads are not counted)."""
    return _compiles[0]


@contextlib.contextmanager
def on_compile(started, ended=None):
    """Inside the block, call ``started(count, kernel_name)`` whenever numba starts compiling
    (``count``: compilations in this process so far) and ``ended()`` when it finishes."""
    with numba_internals.install_listener(numba_internals.COMPILE_EVENT,
                                          _CompileListener(started, ended or (lambda: None))):
        yield


@contextlib.contextmanager
def compile_status(bar):
    """While numba compiles inside the block, a tqdm ``bar`` reads "DESC [compiling kernels: N]",
    so a first step that compiles does not look frozen. The description goes back to DESC
    without a redraw after each compilation, so the next ``update`` of the bar shows it."""
    if getattr(bar, "disable", False):   # a disabled tqdm has no description to change
        yield
        return
    first = _compiles[0]
    desc = bar.desc
    if desc.endswith(": "):   # tqdm adds ": " to a description it was given
        desc = desc[:-2]
    depth = [0]

    def started(count, name):
        depth[0] += 1
        bar.set_description_str("{} [compiling kernels: {}, {}]".format(desc, count - first, name))

    def ended():
        depth[0] -= 1
        if depth[0] == 0:
            bar.set_description_str(desc, refresh=False)

    with on_compile(started, ended):
        yield
    bar.set_description_str(desc, refresh=False)


# ------------------------------------------------------------------------------ info, clear
# What the cache writes: generated modules (and the temporary files of their atomic writes) in
# kernels/, numba's index and data files (and its temporary files) under numba/. Only these are
# counted and removed; anything else a user put into the cache directory stays.
_TEMPORARY = re.compile(r"tmp\w+\.tmp")   # _write_atomic's
_GENERATED = re.compile(r"nnabla_jit_\w*[0-9a-f]{32}\.py|tmp\w+\.tmp")
_NUMBA_FILE = re.compile(r".+\.(nbi|nbc)(\.tmp\.[0-9a-f]+)?")
_NUMBA_SUBDIR = re.compile(r".*_[0-9a-f]{40}")   # numba's "<source dir name>_<sha1 of its path>"


def _is_generated_file(name):
    return _GENERATED.fullmatch(name) is not None


def _is_numba_file(name):
    return _NUMBA_FILE.fullmatch(name) is not None


def _entries(directory, wanted):
    """The files under ``directory`` whose names ``wanted`` accepts (regular files, no links
    followed), and the sub-directories they lie in."""
    files, dirs = [], []
    for root, subdirs, names in os.walk(directory):
        dirs += [os.path.join(root, d) for d in subdirs]
        for n in names:
            path = os.path.join(root, n)
            with contextlib.suppress(OSError):
                if wanted(n) and stat.S_ISREG(os.lstat(path).st_mode):
                    files.append(path)
    return files, dirs


def _tree_size(directory, wanted):
    files = _entries(directory, wanted)[0] if directory and os.path.isdir(directory) else []
    size = 0
    for path in files:
        with contextlib.suppress(OSError):
            size += os.lstat(path).st_size
    return len(files), size


def _remove_entries(directory, wanted):
    """Remove the files of :func:`_entries`, then numba's sub-directories left empty; returns
    the number of files removed."""
    if not directory or not os.path.isdir(directory):
        return 0
    files, dirs = _entries(directory, wanted)
    removed = 0
    for path in files:
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed += 1
    for path in sorted(dirs, reverse=True):   # deepest first
        if _NUMBA_SUBDIR.fullmatch(os.path.basename(path)):
            with contextlib.suppress(OSError):
                os.rmdir(path)   # only when empty: a user's file keeps its directory
    return removed


def info():
    """What and where the cache is: a dict of directories, file counts and bytes (of the
    entries the cache wrote)."""
    configured = configured_cache_dir()
    usable = cache_dir()
    result = {"directory": configured, "usable": usable is not None,
              "variables": {ENV_VAR: os.environ.get(ENV_VAR),
                            "NUMBA_CACHE_DIR": numba_internals.numba_cache_dir()}}
    for part, path, wanted in (("kernels", kernel_dir(), _is_generated_file),
                               ("numba", numba_dir(), _is_numba_file)):
        files, size = _tree_size(path, wanted)
        result[part] = {"directory": path, "files": files, "bytes": size}
    return result


def clear():
    """Empty the cache: remove the generated modules and numba's files of nnabla_jit's kernels,
    and nothing else (a file a user put into the cache directory stays); returns the number of
    files removed. A ``NUMBA_CACHE_DIR`` set by the user loses only nnabla_jit's entries. An
    unusable cache directory (not marked as the cache's, say) is left alone."""
    removed = 0
    root = cache_dir()
    if root is not None:
        removed += _remove_entries(os.path.join(root, "kernels"), _is_generated_file)
        removed += _remove_entries(os.path.join(root, "numba"), _is_numba_file)
    numba_cache = numba_internals.numba_cache_dir()
    if numba_cache and os.path.isdir(numba_cache):
        for entry in os.listdir(numba_cache):
            path = os.path.join(numba_cache, entry)
            # numba names a source directory's cache "<dir name>_<sha1 of its path>"
            if os.path.isdir(path) and _caches_ours(entry):
                removed += _remove_entries(path, _is_numba_file)
                with contextlib.suppress(OSError):
                    os.rmdir(path)
    return removed


def _caches_ours(entry):
    directories = [root for root, _, _ in os.walk(_PACKAGE_DIR)]
    kernels = kernel_dir()
    if kernels:
        directories.append(kernels)
    return entry in {numba_internals.cache_subpath(os.path.join(d, "x.py")) for d in directories}
