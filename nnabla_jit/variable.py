"""Variable: a node of the computation graph holding ``data`` and ``grad``.

Two Python objects can stand for one variable: ``get_unlinked_variable`` returns a new graph node
that shares the buffers (the *body*) of the old one. As in nnabla, ``==`` and ``hash`` compare
bodies, so an unlinked twin equals its original.
"""
import weakref

import numpy as np

from . import graph
from . import recompute as _recompute
from .context import Context  # noqa: F401  (nnabla.variable exports it)
from .ndarray import NdArray, _as_shape, checked_shape
from .ops.registry import OpValueError
from .operators import Operators
from .ops.registry import OpValueError

__all__ = ["Variable"]



class VariableBody:
    """The buffers a Variable and its unlinked twins share: shape, data and grad."""

    __slots__ = ("shape", "data", "grad", "__weakref__")

    def __init__(self, shape, dtype=np.float32):
        self.shape = shape
        self.data = NdArray(shape, dtype)
        self.grad = NdArray(shape, dtype)


class Variable(Operators):
    """nnabla's ``Variable(shape=(), need_grad=False)``. Operators build graph nodes."""

    __slots__ = ("_body", "_parent", "_need_grad", "_persistent", "_recompute", "_rank",
                 "_refs", "_cache", "name", "info", "__weakref__")

    def __init__(self, shape=(), need_grad=False):
        self._body = VariableBody(checked_shape(shape, "Variable"))
        self._parent = None
        self._need_grad = bool(need_grad)
        self._persistent = False
        self._recompute = _recompute.current_recompute()   # nn.recompute scopes / global flag
        self._rank = 0
        self._refs = []       # weak references to the Function nodes that take this as input
        self._cache = None    # the executor's cached schedules rooted here
        self.name = ""
        self.info = None      # whatever the user attaches (nnabla's Variable.info)

    @staticmethod
    def from_numpy_array(data, grad=None, need_grad=None):
        """A leaf Variable holding copies of ``data`` (and ``grad``), dtype kept."""
        data = np.asarray(data)
        v = Variable(data.shape, need_grad=bool(need_grad))
        v._body.data = NdArray.from_numpy_array(data)
        if grad is not None:
            grad = np.asarray(grad)
            if grad.shape != data.shape:
                raise ValueError("Variable.from_numpy_array: grad shape {} does not match data shape {}"
                                 .format(grad.shape, data.shape))
            v._body.grad = NdArray.from_numpy_array(grad)
        return v

    @staticmethod
    def _from_ndarray(ndarray, need_grad=False):
        """A leaf Variable whose data *is* ``ndarray`` (used by imperative mode)."""
        v = Variable(ndarray.shape, need_grad=need_grad)
        v._body.data = ndarray
        return v

    # ------------------------------------------------------------------ buffers
    @property
    def data(self):
        return self._body.data

    @data.setter
    def data(self, ndarray):
        if not isinstance(ndarray, NdArray):
            raise TypeError("Variable.data: expected an NdArray, got {}".format(type(ndarray).__name__))
        if ndarray.shape != self.shape:
            raise ValueError("Variable.data: NdArray of shape {} for a variable of shape {}"
                             .format(ndarray.shape, self.shape))
        ndarray.keep_for_user()   # the user's: clearing leaves it (an LSTM state h0.data = h.data)
        self._body.data = ndarray
        graph.graph_changed()   # plans hold the old NdArray

    @property
    def grad(self):
        return self._body.grad

    @grad.setter
    def grad(self, ndarray):
        if not isinstance(ndarray, NdArray):
            raise TypeError("Variable.grad: expected an NdArray, got {}".format(type(ndarray).__name__))
        if ndarray.shape != self.shape:
            raise ValueError("Variable.grad: NdArray of shape {} for a variable of shape {}"
                             .format(ndarray.shape, self.shape))
        self._body.grad = ndarray
        graph.graph_changed()   # plans hold the old NdArray

    @property
    def d(self):
        """The data as a numpy array that references the buffer."""
        return self._body.data.data

    @d.setter
    def d(self, value):
        self._body.data._assign(value, "Variable.d")

    @property
    def g(self):
        """The gradient as a numpy array that references the buffer."""
        return self._body.grad.data

    @g.setter
    def g(self, value):
        self._body.grad._assign(value, "Variable.g")

    # ------------------------------------------------------------------ shape
    @property
    def shape(self):
        return self._body.shape

    @property
    def ndim(self):
        return len(self._body.shape)

    @property
    def size(self):
        return int(np.prod(self._body.shape, dtype=np.int64))

    def size_from_axis(self, axis=-1):
        """Product of the dimensions from ``axis`` on (``-1``: the whole size)."""
        if axis < 0:
            axis = 0
        return int(np.prod(self._body.shape[axis:], dtype=np.int64))

    def reset_shape(self, shape, force=False):
        """Change the shape in place; the values stay when the size does (as nnabla), else the
        buffers are dropped. ``force`` allows a new size."""
        shape = _as_shape(shape)
        if not force and int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError("Variable.reset_shape: {} has a different size than {}; pass force=True"
                             .format(shape, self.shape))
        body = self._body
        body.shape = shape
        body.data._reset_shape(shape)
        body.grad._reset_shape(shape)
        graph.graph_changed()

    def reshape(self, shape, unlink=False):
        """A new variable of ``shape`` (one entry may be -1, inferred) sharing this one's
        buffers (``unlink``) or F.reshape of it."""
        given = _as_shape(shape)
        shape = _infer_shape(given, self.size, self.shape)
        if unlink:
            v = Variable(shape, need_grad=self._need_grad)
            v._body.data = _reshaped_view(self._body.data, shape)
            v._body.grad = _reshaped_view(self._body.grad, shape)
            return v
        from . import functions as F
        out = F.reshape(self, given, inplace=True)
        source = self._body.data
        if source._array is not None and out._body.data._array is None:
            # nnabla's in-place Reshape shares the buffer when built: the values read at once
            out._body.data.hold_view(source.host_as(None))
        return out

    # ------------------------------------------------------------------ flags
    @property
    def need_grad(self):
        return self._need_grad

    @need_grad.setter
    def need_grad(self, b):
        b = bool(b)
        if b != self._need_grad:
            self._need_grad = b
            graph.graph_changed()

    @property
    def persistent(self):
        return self._persistent

    @persistent.setter
    def persistent(self, b):
        b = bool(b)
        if b != self._persistent:
            self._persistent = b
            graph.graph_changed()   # what clear_buffer may free has changed

    @property
    def recompute(self):
        return self._recompute

    @recompute.setter
    def recompute(self, b):
        b = bool(b)
        if b != self._recompute:
            self._recompute = b
            graph.graph_changed()   # plans free and recompute this variable's data now

    @property
    def rank(self):
        return self._rank

    def apply(self, **kwargs):
        """Set attributes by keyword (``need_grad``, ``persistent``, ``d``, ``g``, ...), return self."""
        for k, v in kwargs.items():
            setattr(self, k, v)
        return self

    # ------------------------------------------------------------------ graph links
    @property
    def parent(self):
        return self._parent

    @parent.setter
    def parent(self, func):
        if func is not None:
            from .function import Function
            if not isinstance(func, Function):
                raise TypeError("Variable.parent: expected a Function, got {}".format(type(func).__name__))
        self._parent = func
        self._rank = 0 if func is None else func.rank + 1
        graph.graph_changed()

    @property
    def function_references(self):
        """The Function nodes that take this variable as an input, the latest first (as nnabla)."""
        alive = []
        for r in reversed(self._refs):
            f = r()
            if f is not None:
                alive.append(f)
        return alive

    @property
    def get_number_of_references(self):
        """How many Function nodes take this variable as an input (a property, as nnabla's)."""
        return len(self.function_references)

    def bool_fill_(self, mask, value):
        """F.bool_fill of this variable: ``value`` where ``mask`` (a Variable) is non-zero."""
        return _F().bool_fill(self, mask, value)

    masked_fill_ = bool_fill_

    def _add_reference(self, func):
        n = len(self._refs)
        if n >= 32 and n & (n - 1) == 0:   # drop dead references at 32, 64, 128, ... entries:
            # amortised O(1) per call, also for a variable with thousands of live consumers
            self._refs = [r for r in self._refs if r() is not None]
        self._refs.append(weakref.ref(func))

    def get_unlinked_variable(self, need_grad=None):
        """A parentless variable sharing this one's buffers (equal to it under ``==``)."""
        v = Variable.__new__(Variable)
        v._body = self._body
        v._parent = None
        v._need_grad = self._need_grad if need_grad is None else bool(need_grad)
        v._persistent = self._persistent
        v._recompute = _recompute.current_recompute()   # a new variable: the current default, as nnabla
        v._rank = 0
        v._refs = []
        v._cache = None
        v.name = self.name
        v.info = None
        return v

    def unlinked(self, need_grad=None):
        """Deprecated name of ``get_unlinked_variable``."""
        return self.get_unlinked_variable(need_grad)

    def rewire_on(self, var):
        """Put the graph that follows this variable on top of ``var``: take its buffers,
        parent and need_grad, as nnabla does; ``var`` loses its parent."""
        if var.shape != self.shape:
            raise ValueError("Variable.rewire_on: shape {} does not match {}".format(var.shape, self.shape))
        parent = var._parent
        self._body.data = var._body.data
        self._body.grad = var._body.grad
        if parent is not None:
            parent._replace_output(var, self)
        self._parent = parent
        self._rank = var._rank
        self._need_grad = var._need_grad
        var._parent = None
        var._rank = 0
        graph.graph_changed()

    def clear_all_graph_links(self):
        """Cut every function link upstream of this variable (truncated BPTT)."""
        for func in graph.upstream_functions([self]):
            for o in func.outputs:
                if o is not None:
                    o._parent = None
                    o._rank = 0
            func._clear_links()
        self._parent = None
        self._rank = 0
        graph.graph_changed()

    def visit(self, f):
        """Call ``f(function)`` for every function upstream of this variable, in forward order."""
        for func in graph.upstream_functions([self]):
            f(func)

    def visit_check(self, f):
        """Like ``visit``, but stop and return True as soon as ``f`` returns True (else None,
        as nnabla's)."""
        for func in graph.upstream_functions([self]):
            if f(func):
                return True
        return None

    # ------------------------------------------------------------------ execution
    def forward(self, clear_buffer=False, clear_no_need_grad=False,
                function_pre_hook=None, function_post_hook=None):
        """Compute this variable from the graph's roots."""
        if self._parent is None:   # as nnabla: a leaf holds its data; nothing computes it
            raise RuntimeError("Variable.forward: the variable of shape {} has no parent (no function "
                               "computes it)".format(self.shape))
        graph.forward([self], clear_buffer, clear_no_need_grad, function_pre_hook, function_post_hook)

    def backward(self, grad=1, clear_buffer=False, communicator_callbacks=None,
                 function_pre_hook=None, function_post_hook=None):
        """Back-propagate ``grad`` (1, an array, or None to use the grad held) to the roots."""
        graph.backward(self, grad, clear_buffer, communicator_callbacks,
                       function_pre_hook, function_post_hook)

    def no_grad(self):
        """The copy of this variable in a copy of its graph, as nnabla 1.39 returns it: new leaves
        sharing the data, fresh functions; need_grad flags as they were (nnabla's answer)."""
        from .function import copy_network   # function.py imports this module
        return copy_network(self)

    def bool_fill_(self, mask, value):
        """Fill with ``value`` where ``mask`` is non-zero, in place; return the new variable."""
        from . import functions as F
        if isinstance(mask, Variable):
            m = mask
        else:
            m = Variable._from_ndarray(mask if isinstance(mask, NdArray) else NdArray.from_numpy_array(mask))
        return F.bool_fill(self, m, value)

    masked_fill_ = bool_fill_

    # ------------------------------------------------------------------ misc
    def __repr__(self):
        return "<Variable({}, need_grad={}) at {}>".format(self.shape, self._need_grad, hex(id(self)))

    def __eq__(self, other):
        return isinstance(other, Variable) and other._body is self._body

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self._body)

    def __bool__(self):
        return True   # as nnabla's (``if v:`` tests for None), whatever the shape: not len() != 0

    def __getitem__(self, key):
        return _F()._getitem(self, key)

    def __setitem__(self, key, value):
        """``x[key] = value`` as nnabla 1.39: x becomes the output of a ScatterNd node writing
        ``value`` (a Variable, NdArray, array or number) at the positions ``key`` selects into x's
        previous value; the next forward computes it (at once under auto_forward)."""
        _F()._setitem(self, key, value)

    def _hand_over(self):
        """A new Variable that takes this one's place in the graph (its buffers, parent and
        need_grad); this one is left a leaf holding a copy of the data, for a new function to
        make it its output (``x[key] = value``)."""
        old = Variable(self.shape, self._need_grad)
        old._body, old._parent, old._rank = self._body, self._parent, self._rank
        if self._parent is not None:
            node = self._parent
            node._outputs = [weakref.ref(old) if r() is self else r for r in node._outputs]
        data = self._body.data
        self._body = VariableBody(self.shape, data.dtype)
        if data.holds_values:
            self._body.data.copy_from(data)
        self._parent = None
        graph.graph_changed()
        return old


def _infer_shape(shape, size, old_shape):
    """``shape`` with its -1 (at most one) replaced so that it holds ``size`` elements. Errors
    are OpValueError (a ValueError and a RuntimeError: nnabla's Reshape raises the latter)."""
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise OpValueError("Variable.reshape: shape {} may hold at most one -1 and no other "
                         "negative size".format(shape))
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or size % known:
            raise OpValueError("Variable.reshape: cannot reshape {} (size {}) into {}".format(
                old_shape, size, shape))
        shape = tuple(size // known if s == -1 else s for s in shape)
    elif known != size:
        raise OpValueError("Variable.reshape: cannot reshape {} (size {}) into {} (size {})".format(
            old_shape, size, shape, known))
    return shape


def _reshaped_view(ndarray, shape):
    """An NdArray of ``shape`` that shares the buffer of ``ndarray``."""
    out = NdArray(shape, ndarray.dtype)
    out._array = ndarray.data.reshape(shape)
    return out


def _F():
    from . import functions
    return functions
