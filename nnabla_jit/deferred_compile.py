"""Deferred parallel kernels: a fresh machine's first training step without the ``prange`` compiles.

numba takes 3-5 times longer to compile a ``prange`` kernel than its serial twin (the parallel
variant of pooling alone costs seconds), and a first training step meets a dozen of them. So on
an empty cache a parallel kernel is not compiled by the process that first calls it:

* :func:`defer` hooks the kernel's compile-on-call. A call with a signature the kernel has not
  compiled first looks in the on-disk kernel cache (a later run: loaded in milliseconds, used
  from then on). When it is not there, the call runs the *fallback* instead -- the serial twin,
  same loop and same result -- and a background **process** is asked to compile the parallel
  variant into the cache. When it reports the variant written, the next call loads it; later
  calls go straight to the machine code (no wrapper on the hot path).
* Why a process, not a thread: numba compiles under one global lock, mostly in Python holding
  the GIL, so a compiling thread would stall the foreground's own compilations and its steps. A
  process runs on another core and shares its work through the on-disk cache, which numba
  writes atomically: a killed worker leaves whole entries or none, and the
  process that asked keeps running the fallback.
* Nothing a run used is lost at exit, however short the run: when the process exits (or dies),
  its worker is not stopped but *detached* -- it drops the other networks' prefetches and
  finishes the parallel variants the process asked for, then exits (at most
  :data:`DETACHED_SECONDS` later). The next run loads them. It runs in its own session, so a
  Ctrl-C meant for the run does not throw away a half-done compilation. Workers of different
  processes on one cache (a run started while the last one's worker finishes, MPI ranks,
  parallel test processes) compile one kernel at a time between them under a lock file in the
  cache, each loading what another has written instead of compiling it again.
* Compiling in parallel: the foreground still compiles the serial kernels of its first step,
  one core's work. The same worker meanwhile compiles the serial kernels of the common networks
  (the manifest ``tables/kernel_manifest.json``, recorded by ``nnabla_jit.utils.kernel_warmup``)
  in the *reverse* order of their first use -- the solver's and the backward kernels while the
  foreground compiles the forward ones -- so the two meet in the middle and the foreground loads
  the rest from the cache. On an empty cache it starts at ``import nnabla_jit``
  (:func:`start_if_cold`: its own import overlaps the foreground's, and a notebook that imports
  and waits gets a warm cache); otherwise when the first kernel compiled in the process is one of
  the manifest's (a network it knows). Deferred requests queue behind the manifest until the
  first solver update (:func:`step_done`: a training step is over, what it needs is compiled);
  then they go first.
* Every core from the first step on: a kernel whose parallel variant is pending runs as its
  *block stand-in* (:mod:`nnabla_jit.parallel_blocks`: the serial loop cut into one block per
  thread, a serial compile that the worker does before any parallel variant), not the serial
  twin alone; and once the worker compiles the run's requests it runs at nice 19
  (:func:`_yield_cores`), so the run's threads never wait for a core it holds.
* Sharing the cores: while the worker compiles the manifest at normal priority (a first step
  waits for those kernels), the foreground's ``prange`` kernels run on one thread fewer
  (:func:`share_cores`, called by the executor at every forward and backward). Otherwise each
  parallel region waits at its end for a thread the OS has handed the worker's core to, and on
  a 2-core machine a step takes several times longer than on one thread. The count is given
  back when the first step is over (the worker then yields).
* Not deferred (compiled on first call as numba does): when the kernel has no on-disk cache
  (nothing could reach us from the worker), with ``NNABLA_JIT_DEFER_PARALLEL=0``, inside
  :func:`eager` (``nnabla_jit cache warm``), and in the worker itself.

:func:`_main` is the worker (``python -c``, with the package on its path): it reads one JSON
line per kernel on stdin (id, module, name, signature as numba's type names; id 0 a prefetch,
-1 "requests first") and answers ``<id> ok`` or ``<id> error <why>`` on stdout; when stdin ends it
finishes the requests (not the prefetches) and exits.
"""
import atexit
import contextlib
import importlib
import json
import os
import subprocess
import sys
import threading
import time

try:
    import fcntl
except ImportError:   # Windows: no advisory locks; workers of different processes may duplicate
    fcntl = None

import numba

from . import kernel_cache, numba_internals, parallel_blocks, tracing

__all__ = ["ENV_VAR", "DETACHED_SECONDS", "defer", "load_generated", "register_generated", "eager",
           "deferring", "pending", "wait", "step_done", "stop_worker", "start_if_cold", "share_cores",
           "workers_running", "wait_for_workers"]

ENV_VAR = "NNABLA_JIT_DEFER_PARALLEL"
PARALLEL_SUFFIX = "_parallel"   # a generated module's parallel kernel X_parallel has the serial X
_MAX_WORKERS = 3                # workers started per process (a killed one is replaced twice)
MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables", "kernel_manifest.json")
ELEMENTWISE = "<elementwise>"   # the manifest's name of the generated elementwise modules
_PREFETCH_ID = 0                # the worker's answers to prefetches are not waited for
_REQUESTS_FIRST = -1            # tells the worker that requests now go before prefetches
_PIPE_BYTES = 48 * 1024         # prefetch lines sent at once (Linux pipes buffer 64 KiB)
DETACHED_SECONDS = 600          # the longest a worker goes on after its process has exited
_COMPILE_LOCK = ".compile.lock"   # in numba's cache directory: held by a worker while it compiles
_ALIVE_LOCK = ".workers.lock"     # held shared by every worker for its life (inherited)

_lock = threading.RLock()
_registry = {}                  # (module, qualname) -> deferred dispatcher, for the worker
_eager = [0]


def _key(disp):
    return disp.py_func.__module__, disp.py_func.__qualname__


def deferring():
    """Whether parallel kernels missing from the cache are deferred in this process now."""
    return _eager[0] == 0 and os.environ.get(ENV_VAR, "1") != "0"


@contextlib.contextmanager
def eager():
    """Inside the block, parallel kernels compile on first call (to fill the cache)."""
    with _lock:
        _eager[0] += 1
    try:
        yield
    finally:
        with _lock:
            _eager[0] -= 1


def defer(parallel, fallback):
    """Defer the compilation of dispatcher ``parallel``: calls it cannot serve from memory or
    the disk cache run ``fallback`` (same arguments, same results) until a background worker has
    compiled it. Returns ``parallel``."""
    if not isinstance(numba_internals.compile_on_call_hook(parallel), _Deferred):
        numba_internals.hook_compile_on_call(parallel, _Deferred(parallel, fallback))
        _registry[_key(parallel)] = parallel
    return parallel


def load_generated(prefix, text):
    """:func:`kernel_cache.load_generated`, deferring every kernel ``X_parallel`` of the module
    that has a serial twin ``X``."""
    module = kernel_cache.load_generated(prefix, text)
    for name, value in list(vars(module).items()):
        if name.endswith(PARALLEL_SUFFIX) and numba_internals.is_dispatcher(value):
            serial = getattr(module, name[:-len(PARALLEL_SUFFIX)], None)
            if serial is not None:
                defer(value, serial)
    return module


_load_cached = numba_internals.load_cached   # (disp, sig): its entry point from the disk, or None


class _Deferred:
    """The compile-on-call hook of one deferred dispatcher."""

    def __init__(self, disp, fallback):
        self.dispatcher = disp
        self.fallback = fallback
        self.requests = {}   # signature -> _Request
        self.block_requests = {}   # signature -> _Request of the block kernel (parallel_blocks)
        self.stand_ins = {}  # signature -> what runs while the parallel variant is pending

    def __call__(self, *args, **kws):
        disp = self.dispatcher
        if kws or not deferring() or numba_internals.caches_nothing(disp):
            return self._compile_now(args, kws)
        sig = numba_internals.argument_types(disp, args)
        with _lock:
            request = self.requests.get(sig)
            if request is not None and request.state == "pending":
                return self.stand_in(sig)
        entry = _load_cached(disp, sig)   # a later run, or the worker has written it
        if entry is not None:
            return entry
        if request is not None and request.state in ("ok", "error"):
            # the worker failed (compiling here raises the error where it belongs) or its
            # result could not be loaded (an unwritable cache): numba's way, here and now
            return self._compile_now(args, kws)
        with _lock:   # first call, or the worker was lost: (re)start the background compile
            stand_in = self.stand_in(sig)   # asks for its block kernel first, if it has one
            request = self.requests[sig] = _Request(disp, sig)
            if not _worker.request(request):
                return self._compile_now(args, kws)   # no worker can be started
        return stand_in

    def stand_in(self, sig):
        """What runs while the parallel variant of ``sig`` is compiled: the serial twin in
        blocks on every thread (parallel_blocks) once its block kernel is in the cache -- the
        worker compiles those first, at a serial kernel's cost -- else the serial twin."""
        found = self.stand_ins.get(sig)
        if found is not None:
            return found
        with _lock:
            request = self.block_requests.get(sig)
            if request is not None and request.state == "pending":
                return self.fallback
        block = parallel_blocks.blocks_of(self.dispatcher)
        if block is None:   # a kernel whose blocks are not independent
            self.stand_ins[sig] = self.fallback
            return self.fallback
        block_sig = parallel_blocks.block_signature(sig)
        entry = _load_cached(block, block_sig)
        if entry is not None:
            found = self.stand_ins[sig] = parallel_blocks.runner(entry)
            return found
        with _lock:
            if request is None:
                request = self.block_requests[sig] = _Request(block, block_sig)
                if _worker.request(request):
                    return self.fallback
            # failed or not loadable (an unwritable cache): the serial twin for good
            self.stand_ins[sig] = self.fallback
        return self.fallback

    def _compile_now(self, args, kws):
        return numba_internals.compile_on_call(self.dispatcher, args, kws)


class _Request:
    def __init__(self, disp, sig):
        self.module, self.qualname = _key(disp)
        self.sig = sig
        self.state = "pending"   # -> "ok", "error" (compile failed), "lost" (worker gone)
        self.message = ""


_WORKER = "from nnabla_jit.deferred_compile import _main; _main()"


class _Worker:
    """The background compile process of this process (started on the first request)."""

    def __init__(self):
        self.proc = None
        self.pid = None          # the process that started it (a forked child starts its own)
        self.started = 0
        self.next_id = 0
        self.waiting = {}        # id -> _Request
        self.prefetching = 0     # prefetches sent and not yet answered
        self.reader = None
        self.told_requests_first = False

    def _start(self):
        if self.started >= _MAX_WORKERS:
            return False
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH")) if p), **{ENV_VAR: "0"})
        root = kernel_cache.cache_dir()
        if root is not None:
            env[kernel_cache.ENV_VAR] = root
        # the worker holds the alive lock (workers_running) from before it starts to its end:
        # taken here and inherited, the lock stays with the worker's copy of the descriptor
        # (not blocking: at worst a probe's exclusive lock is in the way, and workers_running
        # misses this worker)
        alive = _lock_file(_ALIVE_LOCK)
        try:
            if alive is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(alive, fcntl.LOCK_SH | fcntl.LOCK_NB)
            # its own session: outlives a Ctrl-C or a hang-up of the run (see detach)
            self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         env=env, text=True, bufsize=1, start_new_session=True,
                                         pass_fds=() if alive is None else (alive,))
        except OSError:
            self.started = _MAX_WORKERS
            return False
        finally:
            if alive is not None:
                os.close(alive)
        self.started += 1
        self.prefetching = 0
        self.told_requests_first = False
        self.pid = os.getpid()
        self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True,
                                       name="nnabla_jit compile worker")
        self.reader.start()
        return True

    def send(self, ident, module, qualname, sig_text):
        self.proc.stdin.write(json.dumps([ident, module, qualname, sig_text]) + "\n")
        self.proc.stdin.flush()

    def prefetch(self, entries):
        """Start the worker (if needed) and queue ``entries`` (module, qualname, signature
        text) ahead of any request."""
        with _lock:
            alive = self.proc is not None and self.pid == os.getpid() and self.proc.poll() is None
            if not alive and not self._start():
                return False
            sent = 0
            try:
                for module, qualname, sig_text in entries:
                    sent += len(module) + len(qualname) + len(sig_text) + 16
                    if sent > _PIPE_BYTES:   # a full pipe would block us until the worker reads
                        break
                    self.send(_PREFETCH_ID, module, qualname, sig_text)
                    self.prefetching += 1
            except (OSError, ValueError):
                return False
            return True

    def requests_first(self):
        if self.told_requests_first or self.proc is None:
            return
        with _lock:
            self.told_requests_first = True
            with contextlib.suppress(OSError, ValueError):
                self.send(_REQUESTS_FIRST, "", "", "")

    def request(self, request):
        """Send ``request`` (starting a worker if needed); False when no worker can take it."""
        try:
            sig_text = numba_internals.signature_text(request.sig)
        except ValueError:   # a type with no name to send (a record, ...): compiled here
            return False
        with _lock:
            alive = self.proc is not None and self.pid == os.getpid() and self.proc.poll() is None
            if not alive and not self._start():
                return False
            self.next_id += 1
            try:
                self.send(self.next_id, request.module, request.qualname, sig_text)
            except (OSError, ValueError):
                return False
            request.state = "pending"
            self.waiting[self.next_id] = request
            if tracing.recorder is not None:
                tracing.recorder.deferred(request, "requested")
            return True

    def _read(self, proc):
        for line in proc.stdout:
            ident, _, rest = line.rstrip("\n").partition(" ")
            with _lock:
                if int(ident) == _PREFETCH_ID:
                    self.prefetching = max(0, self.prefetching - 1)
                request = self.waiting.pop(int(ident), None)
            if request is not None:
                status, _, message = rest.partition(" ")
                request.message = message
                request.state = "ok" if status == "ok" else "error"
                if tracing.recorder is not None:
                    tracing.recorder.deferred(request, request.state)
        with _lock:   # the worker ended: what it had not done is lost (the callers fall back)
            if self.proc is proc:
                for request in self.waiting.values():
                    request.state = "lost"
                self.waiting.clear()
                self.prefetching = 0

    def busy(self):
        """Whether this process's worker is compiling (or has work queued)."""
        return (self.proc is not None and self.pid == os.getpid()
                and (self.prefetching > 0 or bool(self.waiting)))

    def competes(self):
        """Whether this process's worker compiles at normal priority: the manifest's kernels,
        before the first step is over and before any request (:func:`_yield_cores`)."""
        return (self.proc is not None and self.pid == os.getpid() and self.prefetching > 0
                and not self.told_requests_first)

    def detach(self):
        """At exit: close the worker's input and leave it running; it finishes what this
        process asked for (the kernels it ran) and exits by itself (:func:`_serve`)."""
        proc, self.proc = self.proc, None
        if proc is None or self.pid != os.getpid():
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
        proc.returncode = 0   # not ours to wait for any more (no "still running" warning)

    def stop(self):
        """Stop the worker now (``nnabla_jit cache`` commands, tests)."""
        with _lock:
            proc, self.proc = self.proc, None
        if proc is None or self.pid != os.getpid():
            return
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_worker = _Worker()
atexit.register(_worker.detach)


def _manifest():
    """The manifest's entries in the order the worker compiles them: [module, qualname,
    signature text], a generated kernel under its provider's name (ELEMENTWISE: its op's module
    is named by a hash of its text, which the manifest cannot know; see register_generated)."""
    try:
        with open(MANIFEST) as f:
            return json.load(f)["kernels"]
    except (OSError, ValueError, KeyError):
        return []


# Generated-source modules whose kernels the manifest names: module-name prefix -> (the
# manifest's module name, the function finding a kernel by name). Filled by the modules that
# generate them (ops/elementwise.py), above this one.
_generated = {}


def register_generated(prefix, name, find):
    """Kernels of generated modules named ``prefix`` + hash appear in the manifest under the
    module name ``name``; the worker finds one with ``find(qualname)``."""
    _generated[prefix] = (name, find)


def _manifest_name(disp):
    module, qualname = _key(disp)
    for prefix, (name, _) in _generated.items():
        if module.startswith(prefix):
            return name, qualname
    return module, qualname


class _PrefetchTrigger(numba_internals.Listener):
    """On the process's first compilation: when it is a kernel of the manifest and kernels
    are deferred to a disk cache, the worker starts on the manifest."""

    WITHIN = 20   # compilations (nested ones too): later, the first step is long past

    def __init__(self):
        self.seen = 0
        self.names = None

    def on_start(self, ev):
        if self.seen >= self.WITHIN:
            return
        self.seen += 1
        disp = numba_internals.event_dispatcher(ev)
        if not deferring() or not hasattr(disp, "py_func") or numba_internals.caches_nothing(disp):
            return
        if self.names is None:
            entries = _manifest()
            self.names = {tuple(entry[:2]) for entry in entries}
        if _manifest_name(disp) in self.names:
            self.seen = self.WITHIN
            _worker.prefetch(_manifest())

    def on_end(self, ev):
        pass


_trigger = _PrefetchTrigger()
numba_internals.register_listener(numba_internals.COMPILE_EVENT, _trigger)


def _cache_is_empty(directory):
    for _, _, names in os.walk(directory):
        if any(n.endswith(".nbi") for n in names):
            return False
    return True


def start_if_cold():
    """On an empty kernel cache (a fresh machine, or a cleared cache), start the worker on
    the manifest now; True if started. ``import nnabla_jit`` calls it."""
    directory = kernel_cache.numba_dir()
    if not deferring() or directory is None or not _cache_is_empty(directory):
        return False
    entries = _manifest()
    if not entries or not _worker.prefetch(entries):
        return False
    _trigger.seen = _trigger.WITHIN
    return True


def step_done():
    """A training step is over (``Solver.update`` calls it): from now on the worker compiles
    the parallel variants asked for before the rest of the manifest."""
    if not _worker.told_requests_first:
        _worker.requests_first()


_shared = threading.local()   # .lowered: (the thread count replaced, the count set), while lowered


def share_cores():
    """While the background worker compiles, run this thread's ``prange`` kernels on one thread
    fewer; give the count back once it is idle (unless the user has set another meanwhile)."""
    lowered = getattr(_shared, "lowered", None)
    if _worker.competes():
        if lowered is None:
            count = numba.get_num_threads()
            if count > 1:
                numba.set_num_threads(count - 1)
                _shared.lowered = (count, count - 1)
    elif lowered is not None:
        _shared.lowered = None
        if numba.get_num_threads() == lowered[1]:
            numba.set_num_threads(lowered[0])


def stop_worker():
    """Stop the background worker now (what it finished stays in the cache)."""
    _worker.stop()


def _lock_file(name):
    """An open descriptor of lock file ``name`` in numba's part of the cache, or None."""
    directory = kernel_cache.numba_dir()
    if fcntl is None or directory is None:
        return None
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        return os.open(os.path.join(directory, name), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


@contextlib.contextmanager
def _compile_lock():
    """Inside the block, no other worker on this cache compiles (a blocking flock, which the
    kernel drops if the holder dies; nothing without a cache or without fcntl)."""
    fd = _lock_file(_COMPILE_LOCK)
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def workers_running():
    """Whether a compile worker of any process (one detached from a process that has exited
    included) is alive on this kernel cache."""
    fd = _lock_file(_ALIVE_LOCK)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def wait_for_workers(timeout):
    """Wait until no compile worker is alive on this kernel cache (benchmarks and tests: a
    run's work is never made to wait for one); True if none is left."""
    end = time.monotonic() + timeout
    while workers_running():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def pending():
    """How many deferred compilations this process is waiting for."""
    with _lock:
        return len(_worker.waiting)


def wait(timeout=None):
    """Wait until the worker has answered every request (or ``timeout`` seconds); True if so."""
    end = None if timeout is None else time.monotonic() + timeout
    while pending():
        if end is not None and time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------------------------------------------------ the worker
def _find(module, qualname):
    if qualname.endswith(parallel_blocks.SUFFIX):   # X_block: made from X_parallel
        parallel = _find(module, qualname[:-len(parallel_blocks.SUFFIX)] + PARALLEL_SUFFIX)
        block = parallel_blocks.blocks_of(parallel)
        if block is None:
            raise ValueError("{}.{} has no independent blocks".format(module, qualname))
        return block
    disp = _registry.get((module, qualname))
    if disp is not None:
        return disp
    for name, find in _generated.values():
        if module == name:
            return find(qualname)
    try:
        found = getattr(importlib.import_module(module), qualname, None)
        if found is not None:   # a serial kernel: an njit function, or a ParallelKernel's twin
            return getattr(found, "serial", found)
    except ImportError:   # a generated module: read it from the kernel directory, verified
        directory = kernel_cache.kernel_dir()
        if directory is None:
            raise
        with open(os.path.join(directory, module + ".py")) as f:
            text = f.read()
        prefix = module[:-32]
        if kernel_cache.module_name(prefix, text) != module:
            raise ValueError("{}.py does not match its hash".format(module))
        load_generated(prefix, text)
    return _registry[(module, qualname)]


def _compile(line):
    ident, module, qualname, sig = line
    try:
        disp, sig = _find(module, qualname), numba_internals.signature_from_text(sig)
        if _load_cached(disp, sig) is None:   # another process's worker may have written it
            with _compile_lock():
                disp.compile(sig)   # loads it instead if written while we waited
        return "{} ok".format(ident)
    except Exception as e:   # any compile error is the caller's to see
        return "{} error {}: {}".format(ident, type(e).__name__, str(e).replace("\n", " ")[:500])


def _serve(lines, replies, detached_seconds=DETACHED_SECONDS):
    """Compile what ``lines`` ask, answering on ``replies``: the manifest's prefetches first
    (what a first step needs) until told that requests come first (the first step is over).
    When ``lines`` end (the process exited, or died), finish its requests -- kernels it ran,
    which its next run then loads -- within ``detached_seconds``, drop the prefetches and
    return."""
    prefetches, requests, state = [], [], {"requests first": False, "ended": False}
    ready = threading.Condition()

    def read():
        for text in lines:
            line = json.loads(text)
            with ready:
                if line[0] == _REQUESTS_FIRST:
                    state["requests first"] = True
                else:
                    (prefetches if line[0] == _PREFETCH_ID else requests).append(line)
                ready.notify()
        with ready:
            state["ended"] = True
            ready.notify()

    threading.Thread(target=read, daemon=True).start()
    deadline = None
    while True:
        with ready:
            while not (prefetches or requests or state["ended"]):
                ready.wait()
            if state["ended"]:   # detached: the process that asked has exited, or is gone
                if deadline is None:
                    deadline = time.monotonic() + detached_seconds
                    prefetches.clear()   # other networks' kernels: not this run's to finish
                if not requests or time.monotonic() > deadline:
                    return
                line = _next_request(requests)
            elif requests and (state["requests first"] or not prefetches):
                line = _next_request(requests)
            else:
                line = prefetches.pop(0)
            if line[0] != _PREFETCH_ID or state["requests first"] or state["ended"]:
                _yield_cores()
        reply = _compile(line)
        with contextlib.suppress(OSError, ValueError):   # nobody reads them once detached
            replies.write(reply + "\n")
            replies.flush()


def _next_request(requests):
    """The next request to compile: block kernels (a serial compile each, and every core for
    the run once done) before parallel variants (several times longer, for the last bit)."""
    for i, line in enumerate(requests):
        if line[2].endswith(parallel_blocks.SUFFIX):
            return requests.pop(i)
    return requests.pop(0)


_yielded = [True]   # the worker process sets it False (_main): never renice a process that asks


def _yield_cores():
    """From the first compilation of the run's requests on, the worker runs at the lowest
    priority (nice 19): the run's threads get the cores whenever they want them, and the
    compilation goes on in what they leave. Before that -- the manifest's serial kernels during
    a first step, which the run is waiting for -- it competes at normal priority."""
    if _yielded[0]:
        return
    _yielded[0] = True
    with contextlib.suppress(AttributeError, OSError):
        os.nice(19 - os.nice(0))
    # With Linux's autogroup scheduling the CPU is shared between sessions first and by nice
    # only within one: the worker's own session (start_new_session) would keep half the cores
    # at any nice, stalling the run's two-thread parallel regions. The group's nice is lowered
    # too (any user may lower it; absent without autogroup).
    with contextlib.suppress(OSError):
        with open("/proc/self/autogroup", "w") as group:
            group.write("19")


def _main():
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)   # nothing else the worker prints can garble the replies
    _eager[0] = 1
    _yielded[0] = False
    # the package is imported (it is this module's parent): the kernel cache routing is
    # installed; the modules of the requested kernels are imported by _find
    _serve(sys.stdin, replies)

