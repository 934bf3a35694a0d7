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
* **Self-healing.** A generated module whose content does not match its name is rewritten; a
  numba index or data file that cannot be read is removed and the kernel recompiled. Either
  gives one :class:`KernelCacheWarning` naming the directory.
* **Works read-only.** With no usable directory, kernels are compiled in memory (numba's
  ``cache=True`` would otherwise fail at import with "no locator available"), with one warning.

:func:`install` (run first thing by ``import nnabla_jit``) routes the numba cache of nnabla_jit's
own kernels through :class:`_KernelCache`; other code's numba functions keep numba's behaviour.
``nnabla_jit cache info|clear|warm`` shows, empties or fills the cache.
"""
import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import types
import warnings

from numba.core import caching, config, dispatcher, event
from numba.core.compiler_lock import global_compiler_lock

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
    """The cache directory exists but another user could write into it."""


def _check_private(path):
    """Refuse ``path`` unless this user owns it and nobody else can write it; a directory that
    others can only read (made by an older nnabla_jit, 0755) is narrowed to 0700."""
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
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def _make_private(path):
    """Create ``path`` (mode 0700) if missing, check it is private, check it is writable."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:   # a file, or a dangling link, in the way
        raise UnsafeCacheDir("{} exists and is not a directory".format(path))
    _check_private(path)
    tempfile.TemporaryFile(dir=path).close()


_resolved = {}   # configured path -> usable path or None


def cache_dir():
    """The usable private cache directory, or None (then kernels compile in memory). Resolved
    once per configured path and process, with one warning when unusable."""
    configured = configured_cache_dir()
    if configured not in _resolved:
        try:
            _make_private(configured)
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
    if config.CACHE_DIR:
        return os.path.abspath(config.CACHE_DIR)
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


class _KernelLocator(caching.UserProvidedCacheLocator):
    """numba's files of an nnabla_jit kernel go under ``<cache>/numba`` (unless the user set
    ``NUMBA_CACHE_DIR``, which numba's own locator, next in the list, then honours)."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(numba_dir(), self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if config.CACHE_DIR or numba_dir() is None or not os.path.exists(py_file):
            return None
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self

    def ensure_cache_path(self):
        # once per directory and process: hundreds of kernels share one (a directory that turns
        # unwritable later fails the save, which _KernelCache.save_overload survives)
        if self._cache_path in _writable_paths:
            return
        os.makedirs(self._cache_path, mode=0o700, exist_ok=True)
        tempfile.TemporaryFile(dir=self._cache_path).close()
        _writable_paths.add(self._cache_path)


_writable_paths = set()   # cache directories this process has found writable


class _KernelCacheImpl(caching.CompileResultCacheImpl):
    # No fallback to numba's __pycache__ or ~/.cache/numba: one place, or memory.
    _locator_classes = [_KernelLocator, caching.UserProvidedCacheLocator]


class _KernelCache(caching.FunctionCache):
    """numba's per-function cache, healing unreadable entries and surviving unwritable ones."""

    _impl_class = _KernelCacheImpl

    def _entry_files(self):
        base = self._impl.filename_base
        try:
            names = os.listdir(self._cache_path)
        except OSError:
            return []
        return [os.path.join(self._cache_path, n) for n in names
                if n == base + ".nbi" or (n.startswith(base + ".") and n.endswith(".nbc"))]

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as e:   # unpickling garbage raises anything (EOFError, KeyError, ...)
            for path in self._entry_files():
                with contextlib.suppress(OSError):
                    os.unlink(path)
            _damaged(self._cache_path, self._impl.filename_base, e)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError as e:
            self.disable()
            _warn_once("unwritable:" + self._cache_path, "cannot write numba's cache in {} ({}); "
                       "kernels compiled now are not kept".format(self._cache_path, e.strerror or e))


_numba_enable_caching = dispatcher.Dispatcher.enable_caching

# LLVM optimisation level of nnabla_jit's kernels (numba's default, for everything else, is 3):
# -O3's extra passes (loop unswitching of the kernels' mode branches, more inlining) cost 10-50%
# more compile time on a first step (pool_forward twice as long) for no measured speed.
OPT_LEVEL = 2


def compile_at(disp, level):
    """Make dispatcher ``disp`` compile at LLVM optimisation level ``level``: numba reads
    ``config.OPT`` when it optimises a module, set here around this dispatcher's compilations
    (the compiler lock keeps other compilations out meanwhile). Returns ``disp``."""
    compile_default = disp.compile

    def compile_at_level(sig):
        with global_compiler_lock:
            default, config.OPT = config.OPT, type(config.OPT)(level)
            try:
                return compile_default(sig)
            finally:
                config.OPT = default

    disp.compile = compile_at_level
    return disp


def _enable_caching(self):
    """``Dispatcher.enable_caching`` for nnabla_jit's kernels (numba's own for the rest); they
    also compile at :data:`OPT_LEVEL`."""
    if not _is_ours(self.py_func.__code__.co_filename):
        return _numba_enable_caching(self)
    compile_at(self, OPT_LEVEL)
    try:
        self._cache = _KernelCache(self.py_func)
    except RuntimeError:   # numba's "cannot cache function ...: no locator available"
        if cache_dir() is not None:   # else cache_dir() has said why, once
            _warn_once("nolocator", "no writable numba cache directory for nnabla_jit's kernels "
                       "(NUMBA_CACHE_DIR={}); compiling them in memory".format(config.CACHE_DIR))
        self._cache = caching.NullCache()


def install():
    """Route the numba cache of nnabla_jit's kernels through this module. Must run before the
    first ``@njit(cache=True)`` of the package is decorated (``nnabla_jit/__init__`` does)."""
    dispatcher.Dispatcher.enable_caching = _enable_caching


# ------------------------------------------------------------------------------ compile progress
_compiles = [0]


def _kernel_name(ev):
    py_func = getattr(ev.data.get("dispatcher"), "py_func", None)
    return getattr(py_func, "__name__", "?")


class _CompileListener(event.Listener):
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


event.register("numba:compile", _CompileListener())


def compile_count():
    """How many numba compilations this process has started (cache loads are not counted)."""
    return _compiles[0]


@contextlib.contextmanager
def on_compile(started, ended=None):
    """Inside the block, call ``started(count, kernel_name)`` whenever numba starts compiling
    (``count``: compilations in this process so far) and ``ended()`` when it finishes."""
    with event.install_listener("numba:compile", _CompileListener(started, ended or (lambda: None))):
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
def _tree_size(path):
    files = size = 0
    for root, _, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(root, n)).st_size
                files += 1
    return files, size


def info():
    """What and where the cache is: a dict of directories, file counts and bytes."""
    configured = configured_cache_dir()
    usable = cache_dir()
    result = {"directory": configured, "usable": usable is not None,
              "variables": {ENV_VAR: os.environ.get(ENV_VAR), "NUMBA_CACHE_DIR": config.CACHE_DIR or None}}
    for part, path in (("kernels", kernel_dir()), ("numba", numba_dir())):
        files, size = _tree_size(path) if path and os.path.isdir(path) else (0, 0)
        result[part] = {"directory": path, "files": files, "bytes": size}
    return result


def clear():
    """Empty the cache (generated modules and numba's files of nnabla_jit's kernels); returns the
    number of files removed. A ``NUMBA_CACHE_DIR`` set by the user is left alone except for
    nnabla_jit's entries."""
    removed = 0
    root = cache_dir()
    if root is not None:
        for part in ("kernels", "numba"):
            path = os.path.join(root, part)
            removed += _tree_size(path)[0] if os.path.isdir(path) else 0
            shutil.rmtree(path, ignore_errors=True)
    if config.CACHE_DIR and os.path.isdir(config.CACHE_DIR):
        for entry in os.listdir(config.CACHE_DIR):
            path = os.path.join(config.CACHE_DIR, entry)
            # numba names a source directory's cache "<dir name>_<sha1 of its path>"
            if os.path.isdir(path) and _caches_ours(entry):
                removed += _tree_size(path)[0]
                shutil.rmtree(path, ignore_errors=True)
    return removed


def _caches_ours(entry):
    directories = [root for root, _, _ in os.walk(_PACKAGE_DIR)]
    kernels = kernel_dir()
    if kernels:
        directories.append(kernels)
    return entry in {caching.UserProvidedCacheLocator.get_suitable_cache_subpath(os.path.join(d, "x.py"))
                     for d in directories}
