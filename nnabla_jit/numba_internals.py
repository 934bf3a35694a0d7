"""numba's internals, in one place: every name nnabla_jit uses that numba does not document
(``numba.core``, a dispatcher's underscore attributes, numba's on-disk cache classes) is used
here and nowhere else in the package, behind a function that means the same on every numba of
:data:`TESTED_RANGE`.

Why: a numba release may rename or change any of these without notice. What the kernel cache
(``kernel_cache.py``) and the deferred parallel kernels (``deferred_compile.py``) need from
numba is then one file to read and adapt, and ``import nnabla_jit`` on a numba outside the range
stops with one line saying so (:class:`UntestedNumba`) instead of a cache that misbehaves
quietly. ``NNABLA_JIT_UNTESTED_NUMBA=1`` goes on with a warning, to try a new numba.
``tests/test_numba_internals.py`` checks each function on the installed numba.

Not here: the CUDA launch path (``cuda_ops/device.py``: ``ResolvedLaunch`` and the packed
launches) reads numba-cuda's internals itself (``typeof_pyval``, ``overloads``,
``numba.core.types``, a kernel's ``_prepare_args`` and ``_codelibrary``, the driver's launch
functions), each with a fallback to numba's own launch.
"""
import os
import pickle
import re
import warnings

import numba
from numba import types
from numba.core import caching, config, dispatcher, event
from numba.core.compiler_lock import global_compiler_lock

__all__ = ["TESTED_RANGE", "ENV_VAR", "UntestedNumba", "check_version", "Listener", "COMPILE_EVENT",
           "COMPILER_LOCK_EVENT", "register_listener", "unregister_listener", "install_listener",
           "event_dispatcher", "event_argument_types", "numba_cache_dir", "cache_subpath",
           "is_dispatcher", "is_parallel", "target_options", "caches_nothing",
           "dispatcher_cache",
           "argument_types", "load_cached", "hook_compile_on_call", "compile_on_call_hook",
           "compile_on_call", "signature_text", "signature_from_text", "route_caching"]

#: The numba versions nnabla_jit is tested on: from the first (major, minor) up to, not
#: including, the second. pyproject.toml's numba bound says the same (a test checks).
TESTED_RANGE = ((0, 68), (0, 69))
ENV_VAR = "NNABLA_JIT_UNTESTED_NUMBA"


class UntestedNumba(ImportError):
    """The installed numba is outside :data:`TESTED_RANGE`."""


def _major_minor(version):
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise UntestedNumba("nnabla_jit: cannot read numba's version {!r}".format(version))
    return int(found.group(1)), int(found.group(2))


def check_version(version=None, environ=None):
    """Raise :class:`UntestedNumba` when numba ``version`` (default: the installed one) is
    outside :data:`TESTED_RANGE`; with ``NNABLA_JIT_UNTESTED_NUMBA=1`` in ``environ``, warn
    instead. Returns the (major, minor) checked."""
    version = numba.__version__ if version is None else version
    environ = os.environ if environ is None else environ
    found = _major_minor(version)
    low, high = TESTED_RANGE
    if low <= found < high:
        return found
    message = ("nnabla_jit: numba {} is not a version nnabla_jit is tested on (numba >={}.{},<{}.{}); "
               "its kernel cache uses numba internals that change between releases. Install a "
               "tested one (pip install 'numba>={}.{},<{}.{}'), or set {}=1 to try this one".format(
                   version, *low, *high, *low, *high, ENV_VAR))
    if environ.get(ENV_VAR) == "1":
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return found
    raise UntestedNumba(message)


check_version()


# ------------------------------------------------------------------------------ events
Listener = event.Listener
COMPILE_EVENT = "numba:compile"              # a dispatcher compiles a signature (not a cache load)
COMPILER_LOCK_EVENT = "numba:compiler_lock"  # numba holds its compiler lock (loads included)
register_listener = event.register
unregister_listener = event.unregister
install_listener = event.install_listener   # a context manager: registered inside the block


def event_dispatcher(ev):
    """The dispatcher a ``numba:compile`` event is about (None if it names none)."""
    return ev.data.get("dispatcher")


def event_argument_types(ev):
    """The argument types a ``numba:compile`` event compiles, as a tuple."""
    return tuple(ev.data.get("args", ()))


# ------------------------------------------------------------------------------ settings
def numba_cache_dir():
    """``NUMBA_CACHE_DIR`` as numba read it, or None when unset."""
    return config.CACHE_DIR or None


def cache_subpath(py_file):
    """The sub-directory numba gives the cache files of the functions of ``py_file``
    ("<its directory's name>_<sha1 of the directory's path>")."""
    return caching.UserProvidedCacheLocator.get_suitable_cache_subpath(py_file)


# ------------------------------------------------------------------------------ dispatchers
def is_dispatcher(value):
    """Whether ``value`` is a CPU ``@njit`` function (numba's dispatcher)."""
    return isinstance(value, dispatcher.Dispatcher)


def is_parallel(disp):
    """Whether dispatcher ``disp`` compiles with ``parallel=True``."""
    return bool(disp.targetoptions.get("parallel"))


def target_options(disp):
    """The options dispatcher ``disp`` was made with (``@njit(...)``'s keywords), a dict."""
    return dict(disp.targetoptions)


def dispatcher_cache(disp):
    """The on-disk cache object of dispatcher ``disp`` (CPU or CUDA), or None."""
    return getattr(disp, "_cache", None)


def caches_nothing(disp):
    """Whether dispatcher ``disp`` has numba's null cache (nothing reaches or leaves the disk)."""
    return isinstance(dispatcher_cache(disp), caching.NullCache)


def argument_types(disp, args):
    """numba's types of the call arguments ``args`` of ``disp``: the signature it would compile."""
    return tuple(disp.typeof_pyval(a) for a in args)


def load_cached(disp, sig):
    """Load signature ``sig`` of ``disp`` from the on-disk cache (no compilation); its entry
    point or None. The lines of numba's ``Dispatcher.compile`` before it compiles."""
    with global_compiler_lock, disp._compiling_counter:
        existing = disp.overloads.get(sig)
        if existing is not None:
            return existing.entry_point
        cres = disp._cache.load_overload(sig, disp.targetctx)
        if cres is None:
            return None
        disp._cache_hits[sig] += 1
        if not cres.objectmode:
            disp.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        disp.add_overload(cres)
        return cres.entry_point


def hook_compile_on_call(disp, hook):
    """Have ``hook(*args, **kws)`` run where ``disp`` meets a signature it has not compiled; it
    returns the callable to call (numba's C dispatcher calls ``self._compile_for_args`` there,
    and calls what that returns; the instance attribute takes precedence)."""
    disp._compile_for_args = hook


def compile_on_call_hook(disp):
    """The hook :func:`hook_compile_on_call` gave ``disp``, or None."""
    return disp.__dict__.get("_compile_for_args")


def compile_on_call(disp, args, kws):
    """numba's own compile-on-call of ``disp`` for ``args``: compiles (or loads) and returns
    the callable."""
    return dispatcher.Dispatcher._compile_for_args(disp, *args, **kws)


# ------------------------------------------------------------------------------ signatures
# A signature as text is numba's names of its types, "(array(float32, 1d, C), float64, bool)":
# what the manifest (tables/kernel_manifest.json) and the compile worker's requests hold, read
# back by the parser below (never unpickled, never evaluated).
_SCALARS = {str(t): t for t in (getattr(types, name) for name in (
    "boolean", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", "none") if hasattr(types, name))}
_TOKEN = re.compile(r"\s*(\d+d|\d+|\w+|[(),])")


def signature_text(sig):
    """Signature ``sig`` (a tuple of numba types) as text; ValueError when a type has no name
    :func:`signature_from_text` reads back as the same type (records, literals, ...)."""
    text = "({})".format(", ".join(str(t) for t in sig))
    try:
        same = signature_from_text(text) == tuple(sig)
    except ValueError:
        same = False
    if not same:
        raise ValueError("signature {} cannot be written as text".format(text))
    return text


def signature_from_text(text):
    """The tuple of numba types :func:`signature_text` wrote; ValueError on other text."""
    tokens, end = [], 0
    for found in _TOKEN.finditer(text):
        if found.start() != end:
            break
        tokens.append(found.group(1))
        end = found.end()
    if text[end:].strip():
        raise ValueError("signature text {!r}: cannot read {!r}".format(text, text[end:]))
    reader = _Reader(tokens, text)
    sig = reader.sequence()
    if reader.position != len(tokens):
        raise ValueError("signature text {!r}: text after the signature".format(text))
    return sig


class _Reader:
    def __init__(self, tokens, text):
        self.tokens, self.text, self.position = tokens, text, 0

    def take(self, expected=None):
        if self.position >= len(self.tokens):
            raise ValueError("signature text {!r} ends early".format(self.text))
        token = self.tokens[self.position]
        if expected is not None and token != expected:
            raise ValueError("signature text {!r}: {!r} where {!r} was expected".format(
                self.text, token, expected))
        self.position += 1
        return token

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def sequence(self):
        """``( type, type, ... )`` as a tuple."""
        self.take("(")
        items = []
        while self.peek() != ")":
            if items:
                self.take(",")
            items.append(self.type())
        self.take(")")
        return tuple(items)

    def type(self):
        name = self.take()
        readonly = unaligned = False
        while name in ("readonly", "unaligned"):
            readonly, unaligned = readonly or name == "readonly", unaligned or name == "unaligned"
            name = self.take()
        if name == "array":
            self.take("(")
            dtype = self.scalar(self.take())
            self.take(",")
            ndim = self.take()
            self.take(",")
            layout = self.take()
            self.take(")")
            if not ndim.endswith("d") or layout not in ("C", "F", "A"):
                raise ValueError("signature text {!r}: bad array type".format(self.text))
            return types.Array(dtype, int(ndim[:-1]), layout, readonly=readonly, aligned=not unaligned)
        if readonly or unaligned:
            raise ValueError("signature text {!r}: readonly/unaligned before {!r}".format(self.text, name))
        if name == "UniTuple":
            self.take("(")
            item = self.type()
            self.take("x")
            count = self.take()
            self.take(")")
            return types.UniTuple(item, int(count))
        if name == "Tuple":
            return types.Tuple(self.sequence())
        return self.scalar(name)

    def scalar(self, name):
        if name not in _SCALARS:
            raise ValueError("signature text {!r}: unknown type {!r}".format(self.text, name))
        return _SCALARS[name]


# ------------------------------------------------------------------------------ the on-disk cache
# route_caching puts the package's kernels on numba caches built from these classes, which
# subclass numba's own and ask a *policy* (kernel_cache.py's) where files go and whether a file
# may be read. The policy's methods:
#   is_ours(py_file)           whether the functions of this source file are the package's
#   cache_path(py_file)        directory for their numba files, or None (then NUMBA_CACHE_DIR's)
#   ensure_directory(path)     create it / check it is writable (OSError when not)
#   open_own(path)             the file opened for reading, None when refused (it has said why),
#                              FileNotFoundError when missing
#   damaged(path, name, error) unreadable entries of ``name`` in ``path`` were removed
#   unwritable(path, error)    saving failed: this kernel's cache is disabled
#   no_locator()               no directory at all: the kernel compiles in memory
_policy = [None]


class _PolicyLocator(caching.UserProvidedCacheLocator):
    def __init__(self, py_func, py_file, path):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = path

    @classmethod
    def from_function(cls, py_func, py_file):
        path = _policy[0].cache_path(py_file)
        if path is None:
            return None
        self = cls(py_func, py_file, path)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self

    def ensure_cache_path(self):   # numba calls it before every save
        _policy[0].ensure_directory(self._cache_path)


class _PolicyCacheImpl(caching.CompileResultCacheImpl):
    # No fallback to numba's __pycache__ or ~/.cache/numba: the policy's place, or memory.
    _locator_classes = [_PolicyLocator, caching.UserProvidedCacheLocator]


class _PolicyCacheFile(caching.IndexDataCacheFile):
    """numba's index/data files, unpickled only from a file the policy opened (numba's own
    ``_load_index`` / ``_load_data``, opening through it)."""

    @classmethod
    def adopt(cls, cache_file):
        verified = cls.__new__(cls)
        verified.__dict__.update(cache_file.__dict__)
        return verified

    def _load_index(self):
        try:
            f = _policy[0].open_own(self._index_path)
        except FileNotFoundError:
            return {}
        if f is None:
            return {}
        with f:
            version = pickle.load(f)
            data = f.read()
        if version != self._version:
            return {}
        stamp, overloads = pickle.loads(data)
        return overloads if stamp == self._source_stamp else {}

    def _load_data(self, name):
        path = self._data_path(name)
        f = _policy[0].open_own(path)
        if f is None:   # numba's load() takes an OSError for a missing entry
            raise OSError("{} refused".format(path))
        with f:
            data = f.read()
        return pickle.loads(data)


class _PolicyCache(caching.FunctionCache):
    """numba's per-function cache, healing unreadable entries and surviving unwritable ones."""

    _impl_class = _PolicyCacheImpl

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = _PolicyCacheFile.adopt(self._cache_file)

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
                try:
                    os.unlink(path)
                except OSError:
                    pass
            _policy[0].damaged(self._cache_path, self._impl.filename_base, e)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError as e:
            self.disable()
            _policy[0].unwritable(self._cache_path, e)


_numba_enable_caching = dispatcher.Dispatcher.enable_caching


def _enable_caching(self):
    """``Dispatcher.enable_caching`` for the policy's kernels (numba's own for the rest)."""
    policy = _policy[0]
    if policy is None or not policy.is_ours(self.py_func.__code__.co_filename):
        return _numba_enable_caching(self)
    try:
        self._cache = _PolicyCache(self.py_func)
    except RuntimeError:   # numba's "cannot cache function ...: no locator available"
        policy.no_locator()
        self._cache = caching.NullCache()


def route_caching(policy):
    """From now on, ``@njit(cache=True)`` functions that ``policy.is_ours`` caches on the
    policy's terms (see above). Run before the package's first kernel is decorated."""
    _policy[0] = policy
    dispatcher.Dispatcher.enable_caching = _enable_caching
