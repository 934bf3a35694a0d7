"""Block stand-ins: a parallel kernel run as its serial twin on blocks of the ``prange`` loop, one per thread.

A ``prange`` kernel compiled by numba's parfor passes costs 3-5 times its serial twin's compile
time (seconds per kernel; LeNet's ten take 9 s of one core). On an empty cache a background
worker compiles them (:mod:`nnabla_jit.deferred_compile`) while the serial twin stands in on
one core, so a short run -- and the next, started while the worker is still at it -- ran at
half speed. The stand-in here runs on every core after one *serial* compile:

* :func:`blocks_of` derives, from a kernel's source, ``X_block(args..., block_, blocks_)``: the
  same function with its ``prange`` loop over ``prange(n)`` cut to block ``block_`` of
  ``blocks_`` equal parts (``range(block_ * n // blocks_, (block_ + 1) * n // blocks_)``), compiled
  without ``parallel`` and with ``nogil``, cached like every kernel. Its compile costs what the
  serial twin's does: the worker compiles it before any parfor.
* :func:`runner` calls it from ``numba.get_num_threads()`` threads at once, block b in thread b
  (the calling thread does block 0): the same iterations, split as numba's static schedule
  splits them, with the GIL released in each. One thread at a time uses the pool; another
  thread's call meanwhile runs its kernel whole on one core.

Only kernels whose blocks are independent get one (:func:`blockable` says why not otherwise):
exactly one outermost ``prange(n)`` loop on any path, as the function's last statement (or in
the branches of a last ``if``), not inside another loop; no reduction into a variable of the
enclosing scope; before it only assignments of names (no array writes, no calls as
statements), and no value returned. Kernels with a reduction, several parallel loops in a row
(numba puts a barrier between them) or writes before the loop keep the serial stand-in.
"""
import ast
import inspect
import os
import textwrap
import threading
import types

import numba
from numba import njit

from . import numba_internals

__all__ = ["SUFFIX", "blockable", "blocks_of", "runner", "block_signature"]

SUFFIX = "_block"
_PARALLEL = "_parallel"   # a parallel variant X_parallel gets the block kernel X_block
_BLOCK, _BLOCKS = "block_", "blocks_"   # the two parameters a block kernel takes last
_OPTIONS = ("error_model", "fastmath", "boundscheck")   # the serial twin's, passed on

_made = {}   # parallel dispatcher -> its block dispatcher, or None when it has none
_lock = threading.Lock()


def _is_prange(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "prange"


def _prange_loop(node):
    return isinstance(node, ast.For) and _is_prange(node.iter)


def _has_prange(node):
    return any(_is_prange(n) for n in ast.walk(node))


def _stored_names(nodes):
    names = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names


def _writes(statement):
    """Why ``statement`` (outside the parallel loop) may write memory another block reads, or
    None: only name assignments are allowed there."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return None   # a docstring
    if isinstance(statement, (ast.Pass, ast.Break, ast.Continue)):
        return None
    if isinstance(statement, (ast.For, ast.While, ast.If)):   # a loop or branch computing names
        for s in statement.body + statement.orelse:
            why = _writes(s)
            if why:
                return why
        return None
    if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return "a {} statement before the parallel loop".format(type(statement).__name__)
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    for target in targets:
        for n in ast.walk(target):
            if isinstance(n, (ast.Subscript, ast.Attribute)):
                return "a write to {} before the parallel loop".format(ast.unparse(target))
    return None


def _check(statements, outer):
    """Why the statement list cannot be cut into blocks (None if it can). ``outer``: names
    assigned before it."""
    with_prange = [i for i, s in enumerate(statements) if _has_prange(s)]
    if len(with_prange) > 1:
        return "{} parallel loops in a row".format(len(with_prange))
    if not with_prange:   # a branch without the loop: every block runs it
        for s in statements:
            why = None if isinstance(s, ast.Return) and s.value is None else _writes(s)
            if why:
                return why
        return None
    last = with_prange[0]
    for s in statements[last + 1:]:
        if not (isinstance(s, ast.Pass) or (isinstance(s, ast.Return) and s.value is None)):
            return "a statement after the parallel loop (line {})".format(s.lineno)
    for s in statements[:last]:
        why = _writes(s)
        if why:
            return why
    outer = outer | _stored_names(statements[:last])
    loop = statements[last]
    if isinstance(loop, ast.If):
        if _has_prange(loop.test):
            return "prange in a condition"
        return _check(loop.body, outer) or _check(loop.orelse, outer)
    if not _prange_loop(loop) or _has_prange(loop.iter.func) or any(map(_has_prange, loop.iter.args)):
        return "prange inside a {} statement".format(type(loop).__name__)
    if len(loop.iter.args) != 1 or loop.iter.keywords:
        return "prange with a start or a step"
    if loop.orelse:
        return "a for-else"
    if not isinstance(loop.target, ast.Name):
        return "a prange loop over {}".format(ast.unparse(loop.target))
    shared = _stored_names(loop.body) & outer
    if shared:
        return "the loop assigns {} of the enclosing scope (a reduction)".format(", ".join(sorted(shared)))
    return None


def _function_node(func):
    """The parsed ``def`` of ``func`` (its lines kept), or a reason why there is none."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as e:
        return None, "no source ({})".format(e)
    tree = ast.parse(source)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None, "not one function definition"
    ast.increment_lineno(tree, func.__code__.co_firstlineno - 1)
    return tree, None


def blockable(func):
    """None when ``func`` (a kernel's Python function) can run in independent blocks, else why
    not (one line)."""
    if func.__code__.co_freevars:
        return "a closure"
    tree, why = _function_node(func)
    if tree is None:
        return why
    node = tree.body[0]
    a = node.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        return "variable, keyword or default arguments"
    if any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(node)):
        return "it returns a value"
    if not _has_prange(node):
        return "no prange loop"
    return _check(node.body, {arg.arg for arg in a.args})


_UINT64 = "uint64_block_"   # numba.uint64, under a name no kernel uses

# The loop runs over an unsigned counter, as numba's parfor loops do, and the body's index is
# its int64 copy: LLVM then knows the index is not negative and drops the wraparound of every
# a[i] (a signed loop from a non-zero start ran an elementwise kernel at half the serial speed).
_BLOCK_LOOP = """for {u} in range({U}(max(0, {b} * {n} // {bs})), {U}(max(0, ({b} + 1) * {n} // {bs}))):
    {i} = int({u})"""


class _CutLoop(ast.NodeTransformer):
    """The outermost prange(n) loops run block ``block_`` of ``blocks_`` of their iterations."""

    def visit_For(self, node):
        if not _prange_loop(node):
            return self.generic_visit(node)
        n = "int({})".format(ast.unparse(node.iter.args[0]))
        loop = ast.parse(_BLOCK_LOOP.format(u=node.target.id + "_u_", U=_UINT64, b=_BLOCK, bs=_BLOCKS, n=n,
                                            i=node.target.id)).body[0]
        loop.body += node.body   # prange loops inside stay prange: serial in a serial compile
        return ast.copy_location(loop, node)


def _block_name(name):
    return (name[:-len(_PARALLEL)] if name.endswith(_PARALLEL) else name) + SUFFIX


def _make(parallel):
    func = getattr(parallel, "py_func", None)
    if func is None or blockable(func) is not None:
        return None
    tree, _ = _function_node(func)
    node = tree.body[0]
    node.decorator_list = []
    node.name = _block_name(func.__name__)
    node.args.args += [ast.arg(_BLOCK), ast.arg(_BLOCKS)]
    _CutLoop().visit(node)
    ast.fix_missing_locations(tree)
    scratch = {}
    # the serial twin's file and lines: numba's cache keys the kernel by them (and by its
    # bytecode), and a changed source file invalidates it with the twin's
    exec(compile(tree, func.__code__.co_filename, "exec"), scratch)
    code = scratch[node.name].__code__
    # the kernel's globals as they are now (the module is imported), and the counter's type
    names = dict(func.__globals__, **{_UINT64: numba.uint64})
    block = types.FunctionType(code, names, node.name)
    block.__qualname__ = _block_name(func.__qualname__)
    block.__module__ = func.__module__
    block.__doc__ = func.__doc__
    options = {k: v for k, v in numba_internals.target_options(parallel).items()
               if k in _OPTIONS and v is not None}
    cached = (numba_internals.dispatcher_cache(parallel) is not None
              and not numba_internals.caches_nothing(parallel))
    return njit(cache=cached, nogil=True, **options)(block)


def blocks_of(parallel):
    """The block kernel of dispatcher ``parallel`` (a parallel variant ``X_parallel``, or any
    kernel with a prange loop): ``X_block``, made once; None when it has none."""
    with _lock:
        if parallel in _made:
            return _made[parallel]
    block = _make(parallel)
    with _lock:
        return _made.setdefault(parallel, block)


def block_signature(sig):
    """The block kernel's signature for the serial signature ``sig``."""
    return tuple(sig) + (numba.int64, numba.int64)


class _Helper:
    """One pool thread: runs block ``b`` of a call when told."""

    def __init__(self):
        self.go, self.done = threading.Lock(), threading.Lock()
        self.go.acquire()
        self.done.acquire()
        self.task = self.error = None
        threading.Thread(target=self._loop, daemon=True, name="nnabla_jit kernel block").start()

    def _loop(self):
        while True:
            self.go.acquire()
            entry, args, b, blocks = self.task
            self.task = None
            try:
                entry(*args, b, blocks)
            except BaseException as e:   # re-raised by the calling thread
                self.error = e
            self.done.release()


class _Pool:
    def __init__(self):
        self.lock = threading.Lock()
        self.helpers = []
        self.pid = os.getpid()

    def run(self, entry, args):
        blocks = numba.get_num_threads()
        if blocks <= 1 or not self.lock.acquire(blocking=False):
            return entry(*args, 0, 1)
        try:
            if self.pid != os.getpid():   # a forked child: its parent's threads are not here
                self.helpers, self.pid = [], os.getpid()
            while len(self.helpers) < blocks - 1:
                self.helpers.append(_Helper())
            helpers = self.helpers[:blocks - 1]
            for b, helper in enumerate(helpers, 1):
                helper.task = (entry, args, b, blocks)
                helper.go.release()
            try:
                entry(*args, 0, blocks)
            finally:
                for helper in helpers:   # every block is done before the arrays are handed back
                    helper.done.acquire()
            errors = [h.error for h in helpers if h.error is not None]
            for helper in helpers:
                helper.error = None
            if errors:
                raise errors[0]
        finally:
            self.lock.release()


_pool = _Pool()


def runner(entry):
    """A callable running the compiled block kernel ``entry`` (its entry point, for one
    signature) on all of this thread's numba threads: ``runner(entry)(*args)``."""
    def run_blocks(*args):
        return _pool.run(entry, args)
    return run_blocks
