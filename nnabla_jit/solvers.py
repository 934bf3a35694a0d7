"""Solvers (``nnabla_jit.solvers``, imported as ``S``): nnabla 1.39's 18 gradient-based
optimizers with its constructor arguments, defaults, update rules and state names.

    solver = S.Adam(alpha=1e-3)
    solver.set_parameters(nn.get_parameters())
    solver.zero_grad(); loss.backward(); solver.weight_decay(1e-4); solver.update()

What every solver shares lives in :class:`Solver`; a subclass declares its state names, which
hyper-parameter is the learning rate, and how one parameter is updated (one kernel call from
:mod:`nnabla_jit.solver_kernels`, or from ``cuda_ops.solver_steps`` on the device: a parameter
whose gradient a CUDA backward wrote is updated there, with its states, and nothing is copied
to the host; ``weight_decay``, ``scale_grad`` and ``clip_grad_by_norm`` run there too, the
inf/NaN checks copy the gradients down).

Semantics taken from nnabla (checked numerically against it):

* Hyper-parameters are held as float32 values, as nnabla's C++ solvers hold them
  (``S.Adam().info['beta1'] == 0.8999999761581421``). ``info`` keeps the constructor values;
  ``learning_rate()`` follows ``set_learning_rate``.
* ``zero_grad()`` releases each gradient buffer. A parameter whose gradient was released by
  ``zero_grad`` and not written since (no backward reached it) is skipped by ``update()`` --
  not updated, its ``t`` not advanced, its hooks not called -- as nnabla skips gradients still
  "zeroing"; likewise by ``weight_decay``, ``scale_grad``, ``clip_grad_by_norm`` and the
  inf/NaN checks. (A gradient never written at all, as on a new parameter, is a zero one.)
* Each parameter counts its own updates in ``t`` (capped below 2**32, a uint32 in files).
* ``weight_decay(rate)`` adds ``rate * w`` to the gradients at once, except in solvers whose
  ``weight_decay_is_fused()`` is True (SgdW, AdamW, Lars, Lamb, Lion, AdaBelief with
  ``weight_decouple``): there the rate is kept and applied by the next ``update()`` in the
  solver's own way, after which it reverts to the constructor's ``wd`` (0 if it has none).
* Parameters are updated in the numeric type they are stored in (float32 or float64, states
  alike). As in nnabla, a float16 parameter is converted to float32 by ``update()`` (its master
  copy from then on) and float16 gradients (``type_config='half'``) are converted to float32 by
  ``scale_grad``, ``weight_decay`` and ``clip_grad_by_norm`` before they are changed, so loss
  scaling is undone in float32 and small gradients do not underflow.
"""
import functools
import math
import os
from collections import OrderedDict

import numpy as np

from . import callback, deferred_compile, tracing
from . import solver_kernels as K
from .context import get_current_context
from .cuda_ops import device as cuda_device
from .cuda_ops import solver_steps as cuda_kernels
from .ndarray import NdArray
from .variable import Variable

__all__ = ["Solver", "SolverState", "Sgd", "SgdW", "Momentum", "Lars", "Nesterov", "Adadelta",
           "Adagrad", "AdaBelief", "RMSprop", "RMSpropGraves", "Adam", "AdamW", "AdaBound",
           "Adamax", "AMSGRAD", "AMSBound", "Lamb", "Lion", "solver_api"]

_T_MAX = 2 ** 32 - 2    # nnabla keeps t in a uint32 and stops counting one below its maximum


class SolverState:
    """The state of one parameter: ``t`` (updates so far) and ``pstate``, a dict from state
    name (``'m'``, ``'mean'``, ...) to a Variable of the parameter's shape."""

    def __init__(self, t=0, pstate=None):
        self.t = t
        self.pstate = {} if pstate is None else pstate

    def __repr__(self):
        return "SolverState(t={}, pstate={})".format(
            self.t, {k: getattr(v, "shape", None) for k, v in self.pstate.items()})


class _Entry:
    """A registered parameter with its states, its update count, and whether ``zero_grad``
    released its gradient (which stays true until the buffer is written again)."""

    __slots__ = ("param", "states", "t", "zeroed")

    def __init__(self, param, state_names):
        self.param = param
        # States share the parameter's type; float16 parameters keep float32 states.
        dtype = np.float64 if param.data.dtype == np.float64 else np.float32
        self.states = OrderedDict((name, Variable.from_numpy_array(np.zeros(param.shape, dtype)))
                                  for name in state_names)
        self.t = 0
        self.zeroed = False

    def without_gradient(self):
        """True while the gradient released by ``zero_grad`` has not been written again, or
        while it is still ``zeroing`` (``grad.zero()`` and no use since), as nnabla skips it."""
        if self.param.grad.zeroing:
            return True
        if self.zeroed:
            self.zeroed = self.param.grad.clear_called
        return self.zeroed

    def describe(self):
        """What a trace shows of this parameter's update."""
        return {"shape": list(self.param.shape), "dtype": str(self.param.data.dtype),
                "states": list(self.states)}


def _as_float32(value, solver, arg):
    """A hyper-parameter as the float32 value nnabla's C++ solver would hold."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        return float(np.float32(float(value)))
    except (TypeError, ValueError):
        raise TypeError("{}: argument '{}' must be a real number, got {!r}"
                        .format(solver, arg, value)) from None


def _float_array(ndarray):
    """The buffer as a float array: one holding integers (``v.d = [1, 2, 3]``) is converted to
    float32 in place, as nnabla's solvers cast it."""
    if ndarray.dtype.kind != "f":
        ndarray.cast(np.float32)
    return ndarray.data


def _wide_float_array(ndarray):
    """The buffer as float32 or float64: integers and float16 are converted to float32 in place
    (what nnabla's solvers do before they write to a gradient or a parameter)."""
    if ndarray.dtype.kind != "f" or ndarray.dtype == np.float16:
        ndarray.cast(np.float32)
    return ndarray.data


def _compute_array(a):
    """``a`` itself, or a float32 copy when numba cannot compute on its type (float16)."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _on_device(param):
    """Whether ``param`` is updated on the device: a CUDA backward wrote its gradient there
    (and the host has not written it since), in a type the device kernels compute in."""
    grad = param.grad
    return (cuda_device.fresh_on_device(grad) and grad.dtype in _DEVICE_TYPES
            and param.data.dtype in _DEVICE_TYPES)


_DEVICE_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


class _HostKernels:
    """``solver_kernels`` for arrays of ``n`` elements on the host: each update kernel in the
    variant for that size, and what the gradient tools need; the device's counterpart is the
    module ``cuda_ops.solver_steps``."""

    on_device = False

    def __init__(self, n):
        self._n = n

    def __getattr__(self, name):
        return getattr(K, name).for_size(self._n)

    @staticmethod
    def param_values(param, dtype):
        """The parameter's values as ``dtype``, flat (converted when a float16 parameter)."""
        w = _float_array(param.data).reshape(-1)
        return w if w.dtype == dtype else w.astype(dtype)

    def clip_by_norm(self, g, bound):
        """g *= bound / |g| where |g| > bound."""
        norm_sq = K.sum_of_squares.for_size(self._n)(g)
        if norm_sq > bound * bound:
            K.scale.for_size(self._n)(g, bound / math.sqrt(norm_sq))


def solver_api(func):
    """Decorator (nnabla's): call ``func`` with the current context as its first argument."""
    @functools.wraps(func)
    def with_context(*args, **kwargs):
        return func(get_current_context(), *args, **kwargs)
    return with_context


class Solver:
    """What every solver shares: the registered parameters, their states and the gradient
    utilities. A subclass passes its hyper-parameters to ``__init__`` (each becomes
    ``self._<name>``) and defines ``_state_names``, ``_lr_name`` (the hyper-parameter that
    ``set_learning_rate`` sets) and ``_update_one(kernels, t, w, g, states, decay)``, which
    updates one parameter's arrays in place by calling ``kernels`` (the functions of
    ``solver_kernels`` on host arrays, or of ``cuda_ops.solver_steps`` on device arrays: one
    update rule for both); ``t`` already counts this update and ``decay`` is the fused
    weight-decay rate (0 in solvers that do not fuse it)."""

    _state_names = ()
    _lr_name = "lr"

    def __init__(self, **hyper):
        if type(self) is Solver:
            raise TypeError("Solver is the base class; create a solver such as S.Sgd(lr) or S.Adam()")
        for name, value in hyper.items():
            setattr(self, "_" + name,
                    bool(value) if isinstance(value, bool) else _as_float32(value, self.name, name))
        self.info = {name: getattr(self, "_" + name) for name in hyper}
        self._init_lr = getattr(self, "_" + self._lr_name)
        self._entries = OrderedDict()
        self._decay_rate = None      # weight_decay() rate awaiting a fused update()

    # ------------------------------------------------------------------ description
    @property
    def name(self):
        """The solver's name, e.g. ``'Adam'``."""
        return type(self).__name__

    def weight_decay_is_fused(self):
        """True when ``weight_decay`` is applied lazily by ``update`` (see the module notes)."""
        return False

    def _default_decay(self):
        """The decay a fused update applies when ``weight_decay`` was not called."""
        return 0.0

    def learning_rate(self):
        """The current learning rate (``lr``, ``alpha`` or ``eta`` by solver)."""
        return getattr(self, "_" + self._lr_name)

    def set_learning_rate(self, learning_rate):
        """Set the learning rate (held as float32)."""
        setattr(self, "_" + self._lr_name,
                _as_float32(learning_rate, self.name + ".set_learning_rate", "learning_rate"))

    def _lr_ratio(self):
        """Current over initial learning rate: the schedule applied to decoupled decay terms
        (SgdW, AdamW) and to AdaBound's final rate. 1 when the initial rate was 0."""
        lr = self.learning_rate()
        return lr / self._init_lr if self._init_lr != 0 else 1.0

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, param_dict, reset=True, retain_state=False):
        """Register ``param_dict`` (key -> Variable).

        ``reset``: forget every parameter registered before. Otherwise keys are added or
        replaced; with ``retain_state`` a replaced key keeps its states and ``t`` (the new
        parameter must have the old one's shape).
        """
        if not hasattr(param_dict, "items"):
            raise TypeError("{}.set_parameters: param_dict must be a dict of key -> Variable, got {}"
                            .format(self.name, type(param_dict).__name__))
        retain = retain_state and not reset
        for key, param in param_dict.items():
            if not isinstance(param, Variable):
                raise TypeError("{}.set_parameters: parameter '{}' is a {}, not a Variable"
                                .format(self.name, key, type(param).__name__))
            old = self._entries.get(key)
            if retain and old is not None and old.param.shape != param.shape:
                raise ValueError("{}.set_parameters: cannot retain the state of '{}': its shape "
                                 "{} differs from the registered {}"
                                 .format(self.name, key, param.shape, old.param.shape))
        if reset:
            self._entries = OrderedDict()
        for key, param in param_dict.items():
            old = self._entries.get(key)
            if retain and old is not None:
                old.param = param
            else:
                self._entries[key] = _Entry(param, self._state_names)

    def setup(self, params):
        """Deprecated in nnabla, which raises here: call ``set_parameters(param_dict)``."""
        raise RuntimeError("{}.setup is deprecated. Call set_parameters(param_dict)."
                           .format(self.name))

    def remove_parameters(self, keys):
        """Forget the parameters ``keys`` (keys not registered are ignored, as in nnabla)."""
        for key in keys:
            self._entries.pop(key, None)

    def clear_parameters(self):
        """Forget every parameter and its states."""
        self._entries = OrderedDict()

    def get_parameters(self):
        """OrderedDict key -> registered Variable."""
        return OrderedDict((key, e.param) for key, e in self._entries.items())

    # ------------------------------------------------------------------ gradients
    def zero_grad(self):
        """Zero every parameter's gradient. The buffers are released (the next backward
        allocates zeroed ones), which also marks the parameters as not reached by a backward
        until one writes their gradient."""
        if tracing.recorder is not None:
            return tracing.recorder.call(self.name + ".zero_grad", "solver", None, self._zero_grad)
        self._zero_grad()

    def _zero_grad(self):
        for e in self._entries.values():
            e.param.grad.clear()
            e.zeroed = True

    def _with_grads(self, pre_hook, post_hook, action, widen=False):
        """Call ``action(entry, grad array, kernels)`` for each parameter holding a gradient,
        between the hooks: on the device when the gradient is there (``kernels`` is then
        ``cuda_ops.solver_steps``), else on the host. ``widen`` converts float16 gradients to
        float32 first (for actions that write to them)."""
        if tracing.recorder is not None:
            return tracing.recorder.call(self.name + "." + action.__name__, "solver", None,
                                         self._with_grads_now, pre_hook, post_hook, action, widen)
        return self._with_grads_now(pre_hook, post_hook, action, widen)

    def _with_grads_now(self, pre_hook, post_hook, action, widen):
        as_array = _wide_float_array if widen else _float_array
        pre_hook, post_hook = callback.solver_hooks(pre_hook, post_hook)
        for e in self._entries.values():
            if e.without_gradient():
                continue
            if pre_hook is not None:
                pre_hook()
            if _on_device(e.param):
                action(e, cuda_device.accumulator(e.param.grad, e.param.grad.dtype), cuda_kernels)
            else:
                g = as_array(e.param.grad).reshape(-1)   # flat: one compilation per kernel
                action(e, g, _HostKernels(g.size))
            if post_hook is not None:
                post_hook()

    def weight_decay(self, decay_rate, pre_hook=None, post_hook=None):
        """Weight decay at ``decay_rate``: ``g += decay_rate * w`` now, or, for a fused solver,
        kept for the next ``update()`` (hooks are then not called)."""
        rate = _as_float32(decay_rate, self.name + ".weight_decay", "decay_rate")
        if self.weight_decay_is_fused():
            self._decay_rate = rate
            return

        def weight_decay(e, g, kernels):
            kernels.add_scaled(g, kernels.param_values(e.param, g.dtype), rate)
        self._with_grads(pre_hook, post_hook, weight_decay, widen=True)

    def scale_grad(self, scale, pre_hook=None, post_hook=None):
        """Multiply every gradient by ``scale``."""
        factor = _as_float32(scale, self.name + ".scale_grad", "scale")

        def scale_grad(e, g, kernels):
            kernels.scale(g, factor)
        self._with_grads(pre_hook, post_hook, scale_grad, widen=True)

    def clip_grad_by_norm(self, clip_norm, pre_hook=None, post_hook=None):
        """Scale each parameter's gradient down to L2 norm ``clip_norm`` where it exceeds it."""
        bound = _as_float32(clip_norm, self.name + ".clip_grad_by_norm", "clip_norm")

        def clip_grad_by_norm(e, g, kernels):
            kernels.clip_by_norm(g, bound)
        self._with_grads(pre_hook, post_hook, clip_grad_by_norm, widen=True)

    def _count_nonfinite(self, pre_hook, post_hook):
        found = [0, 0]

        def check_nonfinite(e, g, kernels):
            if kernels.on_device:   # the answer is read on the host: copy the gradient down
                g = _float_array(e.param.grad)
            g = _compute_array(g)
            infs, nans = K.nonfinite_flags.for_size(g.size)(g)
            found[0] += infs
            found[1] += nans
        self._with_grads(pre_hook, post_hook, check_nonfinite)
        return found

    def check_inf_or_nan_grad(self, pre_hook=None, post_hook=None):
        """True if any gradient holds an infinity or a NaN."""
        infs, nans = self._count_nonfinite(pre_hook, post_hook)
        return infs + nans > 0

    def check_inf_grad(self, pre_hook=None, post_hook=None):
        """True if any gradient holds an infinity."""
        return self._count_nonfinite(pre_hook, post_hook)[0] > 0

    def check_nan_grad(self, pre_hook=None, post_hook=None):
        """True if any gradient holds a NaN."""
        return self._count_nonfinite(pre_hook, post_hook)[1] > 0

    # ------------------------------------------------------------------ update
    def update(self, update_pre_hook=None, update_post_hook=None):
        """Update every parameter reached by a backward from its gradient (hooks are called
        around each parameter's update)."""
        if tracing.recorder is not None:
            return tracing.recorder.call(self.name + ".update", "solver", None, self._update,
                                         update_pre_hook, update_post_hook, tracing.recorder)
        self._update(update_pre_hook, update_post_hook)

    def _update(self, update_pre_hook, update_post_hook, trace=None):
        if self.weight_decay_is_fused():
            decay = self._default_decay() if self._decay_rate is None else self._decay_rate
        else:
            decay = 0.0
        update_pre_hook, update_post_hook = callback.solver_hooks(update_pre_hook, update_post_hook)
        for key, e in self._entries.items():
            if e.without_gradient():
                continue
            if update_pre_hook is not None:
                update_pre_hook()
            if e.t < _T_MAX:
                e.t += 1
            if trace is None:
                self._update_entry(e, decay)
            else:
                trace.call(key, "solver", e.describe, self._update_entry, e, decay)
            if update_post_hook is not None:
                update_post_hook()
        self._decay_rate = None
        deferred_compile.step_done()

    def _update_entry(self, e, decay):
        """One parameter's update (its ``t`` already advanced), on the device when its
        gradient is there."""
        if _on_device(e.param):
            w = cuda_device.accumulator(e.param.data, e.param.data.dtype)
            self._update_one(cuda_kernels, e.t, w, cuda_device.read(e.param.grad, w.dtype),
                             [cuda_device.accumulator(s.data, w.dtype)
                              for s in e.states.values()], decay)
        else:
            # flat views (the kernels loop over elements): a kernel compiles once, not once
            # per parameter rank
            w = _wide_float_array(e.param.data).reshape(-1)
            self._update_one(_HostKernels(w.size), e.t, w,
                             _compute_array(_float_array(e.param.grad)).reshape(-1),
                             [s.data.data.reshape(-1) for s in e.states.values()], decay)

    # ------------------------------------------------------------------ states
    def get_states(self):
        """OrderedDict key -> :class:`SolverState`; the ``pstate`` Variables share the solver's
        buffers (editing them edits the solver), ``t`` is a copy."""
        return OrderedDict((key, SolverState(e.t, dict(e.states)))
                           for key, e in self._entries.items())

    def set_states(self, states):
        """Take ``states`` (key -> SolverState, or any object with ``t`` and ``pstate`` whose
        values are Variables, NdArrays or arrays) into the solver: state Variables of the
        solver's dtype are held as given (shared, as nnabla's), other values are copied. Every key must be registered
        with ``set_parameters`` first and carry exactly this solver's state names and shapes."""
        checked = []
        for key, state in states.items():
            e = self._entries.get(key)
            if e is None:
                raise ValueError("{}.set_states: no parameter '{}'; set_parameters must register it "
                                 "first".format(self.name, key))
            pstate = state.pstate
            if set(pstate) != set(e.states):
                raise ValueError("{}.set_states: parameter '{}' has states {}, expected {}"
                                 .format(self.name, key, sorted(pstate), sorted(e.states)))
            arrays = {}
            for name, value in pstate.items():
                array = value.d if isinstance(value, Variable) else (
                    value.data if isinstance(value, NdArray) else np.asarray(value))
                if array.shape != e.param.shape:
                    raise ValueError("{}.set_states: state '{}' of '{}' has shape {}, the parameter {}"
                                     .format(self.name, name, key, array.shape, e.param.shape))
                arrays[name] = array
            checked.append((e, int(state.t), arrays, pstate))
        for e, t, arrays, pstate in checked:
            e.t = t
            for name, array in arrays.items():
                given = pstate[name]
                if isinstance(given, Variable) and given.d.dtype == e.states[name].d.dtype:
                    # nnabla's solver holds the given state Variables themselves (shared, as
                    # get_states' are): a later update of either solver is seen by the other
                    e.states[name] = given
                else:
                    np.copyto(e.states[name].d, array, casting="unsafe")

    def save_states(self, path):
        """Write the states to ``path``: ``.h5`` or ``.protobuf``, in nnabla's layouts."""
        from .serialization import solver_states
        solver_states.save_states(_checked_path(path, self.name + ".save_states"), self.get_states())

    def load_states(self, path):
        """Read states written by ``save_states`` (ours or nnabla's) into the solver."""
        from .serialization import solver_states
        self.set_states(solver_states.load_states(_checked_path(path, self.name + ".load_states")))

    def set_states_to_protobuf(self, optimizer):
        """Store the states into an ``Optimizer`` protobuf message (``optimizer.solver.states``)."""
        from .serialization import solver_states
        solver_states.states_to_proto(optimizer.solver, self.get_states())

    def set_states_from_protobuf(self, optimizer_proto):
        """Load the states held by an ``Optimizer`` protobuf message."""
        from .serialization import solver_states
        self.set_states(solver_states.states_from_proto(optimizer_proto.solver))


def _checked_path(path, what):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("{}: path must be a file name ending in .h5 or .protobuf, got {}"
                        .format(what, type(path).__name__))
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in (".h5", ".protobuf"):
        raise ValueError("{}: {} is neither .h5 nor .protobuf".format(what, os.fspath(path)))
    return path


class _FusedDecay:
    """Mixin of the solvers that apply ``weight_decay`` inside ``update``; ``_wd`` is the
    constructor's default rate where the solver has one."""

    def weight_decay_is_fused(self):
        return True

    def _default_decay(self):
        return getattr(self, "_wd", 0.0)


# ============================================================================ SGD family
class Sgd(Solver):
    """Stochastic gradient descent: w -= lr g."""

    def __init__(self, lr=1e-3):
        super().__init__(lr=lr)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.sgd_update(w, g, self._lr)


class Momentum(Solver):
    """SGD with momentum: m = momentum m + lr g;  w -= m."""

    _state_names = ("m",)

    def __init__(self, lr=1e-3, momentum=0.9):
        super().__init__(lr=lr, momentum=momentum)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.momentum_update(w, g, states[0], self._lr, self._momentum, 0.0, 0.0, False)


class Nesterov(Solver):
    """Nesterov accelerated gradient: v = momentum v - lr g;
    w += -momentum v_prev + (1 + momentum) v."""

    _state_names = ("m",)

    def __init__(self, lr=1e-3, momentum=0.9):
        super().__init__(lr=lr, momentum=momentum)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.momentum_update(w, g, states[0], self._lr, self._momentum, 0.0, 0.0, True)


class SgdW(_FusedDecay, Solver):
    """Momentum SGD with decoupled weight decay: m = momentum m + lr g;
    w = w - m - (lr / lr_0) decay w, decay defaulting to ``wd``."""

    _state_names = ("m",)

    def __init__(self, lr=1e-3, momentum=0.9, wd=1e-4):
        super().__init__(lr=lr, momentum=momentum, wd=wd)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.momentum_update(w, g, states[0], self._lr, self._momentum, 0.0,
                                self._lr_ratio() * decay, False)


class Lars(_FusedDecay, Solver):
    """LARS: momentum whose rate is scaled per parameter by
    coefficient |w| / (|g| + decay |w|), on the gradient g + decay w."""

    _state_names = ("v",)

    def __init__(self, lr=1e-3, momentum=0.9, coefficient=1e-3, eps=1e-6):
        super().__init__(lr=lr, momentum=momentum, coefficient=coefficient, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.lars_update(w, g, states[0], self._lr, self._momentum, self._coefficient,
                            self._eps, decay)


# ============================================================================ adaptive rates
class Adagrad(Solver):
    """AdaGrad: G += g^2;  w -= lr g / (sqrt(G) + eps)."""

    _state_names = ("v",)

    def __init__(self, lr=1e-2, eps=1e-8):
        super().__init__(lr=lr, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.rms_update(w, g, states[0], self._lr, 1.0, 1.0, self._eps)


class RMSprop(Solver):
    """RMSprop: v = decay v + (1 - decay) g^2;  w -= lr g / (sqrt(v) + eps)."""

    _state_names = ("v",)

    def __init__(self, lr=1e-3, decay=0.9, eps=1e-8):
        super().__init__(lr=lr, decay=decay, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.rms_update(w, g, states[0], self._lr, self._decay, 1.0 - self._decay,
                           self._eps)


class RMSpropGraves(Solver):
    """Graves' RMSprop with momentum on the centred second moment."""

    _state_names = ("n", "g", "d")

    def __init__(self, lr=1e-4, decay=0.95, momentum=0.9, eps=1e-4):
        super().__init__(lr=lr, decay=decay, momentum=momentum, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        n, g_mean, d = states
        kernels.rmsprop_graves_update(w, g, n, g_mean, d, self._lr, self._decay,
                                      self._momentum, self._eps)


class Adadelta(Solver):
    """AdaDelta: steps of lr g RMS[delta]_{t-1} / RMS[g]_t."""

    _state_names = ("e_sqr_grad", "e_sqr_delta")

    def __init__(self, lr=1.0, decay=0.95, eps=1e-6):
        super().__init__(lr=lr, decay=decay, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        e_sqr_grad, e_sqr_delta = states
        kernels.adadelta_update(w, g, e_sqr_grad, e_sqr_delta, self._lr, self._decay,
                                self._eps)


# ============================================================================ Adam family
def _adam_correction(beta1, beta2, t):
    """Adam's bias correction of the step: sqrt(1 - beta2^t) / (1 - beta1^t)."""
    return math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)


def _bounds(final_lr, gamma, t, upper_as_nnabla_amsbound):
    """AdaBound's bounds on the per-element rate at step t. nnabla's AMSBound computes the
    upper one as final_lr (1 + 1 / gamma * t), i.e. final_lr (1 + t / gamma), where its
    AdaBound has the paper's final_lr (1 + 1 / (gamma t)); both are kept as nnabla has them."""
    lower = final_lr * (1.0 - 1.0 / (gamma * t + 1.0))
    if gamma == 0:
        return lower, math.inf
    if upper_as_nnabla_amsbound:
        return lower, final_lr * (1.0 + t / gamma)
    return lower, final_lr * (1.0 + 1.0 / (gamma * t))


class _AdamFamily(Solver):
    """Adam, AdamW, AdaBound, AMSGRAD and AMSBound: one kernel, in which the members differ by
    the step (bias-corrected unless ``bias_correction`` is False), the bounds on the rate, a
    decoupled decay term, and whether the running maximum ``v_hat`` is kept."""

    _state_names = ("mean", "var")
    _lr_name = "alpha"
    _bias_correction = True
    _keeps_max = False

    def _rate_bounds(self, t):
        return 0.0, math.inf

    def _decoupled_decay(self, decay):
        return 0.0

    def _update_one(self, kernels, t, w, g, states, decay):
        m, v = states[0], states[1]
        v_hat = states[2] if self._keeps_max else v
        step = self._alpha
        if self._bias_correction:
            step *= _adam_correction(self._beta1, self._beta2, t)
        lower, upper = self._rate_bounds(t)
        kernels.adam_update(w, g, m, v, v_hat, step, self._beta1, self._beta2, self._eps,
                            lower, upper, self._decoupled_decay(decay), self._keeps_max)


class Adam(_AdamFamily):
    """Adam: w -= alpha sqrt(1 - beta2^t) / (1 - beta1^t) m / (sqrt(v) + eps)."""

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps)


class AdamW(_FusedDecay, _AdamFamily):
    """Adam with decoupled weight decay: w -= (Adam's step) + (alpha / alpha_0) decay w, decay
    defaulting to ``wd``."""

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=1e-4):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps, wd=wd)

    def _decoupled_decay(self, decay):
        return self._lr_ratio() * decay


class AdaBound(_AdamFamily):
    """Adam whose per-element rate is clipped into bounds that close in on ``final_lr``
    (scaled by alpha / alpha_0, so schedules apply to it too)."""

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, final_lr=0.1, gamma=1e-3):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps, final_lr=final_lr,
                         gamma=gamma)

    def _rate_bounds(self, t):
        return _bounds(self._final_lr * self._lr_ratio(), self._gamma, t, False)


class AMSGRAD(_AdamFamily):
    """AMSGrad: Adam on the running maximum v_hat of v; the step is bias-corrected only with
    ``bias_correction``."""

    _state_names = ("m", "v", "v_hat")
    _keeps_max = True

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, bias_correction=False):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps,
                         bias_correction=bias_correction)


class AMSBound(_AdamFamily):
    """AMSGrad with AdaBound's rate bounds (nnabla's upper bound, see ``_bounds``)."""

    _state_names = ("m", "v", "v_hat")
    _keeps_max = True

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, final_lr=0.1, gamma=1e-3,
                 bias_correction=False):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps, final_lr=final_lr,
                         gamma=gamma, bias_correction=bias_correction)

    def _rate_bounds(self, t):
        return _bounds(self._final_lr * self._lr_ratio(), self._gamma, t, True)


class Adamax(Solver):
    """Adamax: w -= alpha / (1 - beta1^t) m / (u + eps), u = max(beta2 u, |g|)."""

    _state_names = ("m", "u")
    _lr_name = "alpha"

    def __init__(self, alpha=2e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps)

    def _update_one(self, kernels, t, w, g, states, decay):
        m, u = states
        step = self._alpha / (1.0 - self._beta1 ** t)
        kernels.adamax_update(w, g, m, u, step, self._beta1, self._beta2, self._eps)


class AdaBelief(Solver):
    """AdaBelief, with nnabla's options.

    ``weight_decouple``: decay w by (lr wd) -- or by wd with ``fixed_decay`` -- before each
    update; the decay is then fused (``weight_decay(rate)`` replaces wd for one update). Without
    it ``wd`` is not used and ``weight_decay`` adds to the gradient as in other solvers, as in
    nnabla. ``amsgrad`` keeps the running maximum ``s_max``; ``rectify`` applies RAdam's
    variance rectification, with momentum-SGD steps while rho_t <= 4.
    """

    _state_names = ("mean", "var")
    _lr_name = "alpha"

    def __init__(self, alpha=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.0, amsgrad=False,
                 weight_decouple=False, fixed_decay=False, rectify=False):
        super().__init__(alpha=alpha, beta1=beta1, beta2=beta2, eps=eps, wd=wd, amsgrad=amsgrad,
                         weight_decouple=weight_decouple, fixed_decay=fixed_decay, rectify=rectify)
        if self._amsgrad:
            self._state_names = ("mean", "var", "s_max")

    def weight_decay_is_fused(self):
        return self._weight_decouple

    def _default_decay(self):
        return self._wd

    def _update_one(self, kernels, t, w, g, states, decay):
        m, s = states[0], states[1]
        s_max = states[2] if self._amsgrad else s
        alpha, beta1, beta2 = self._alpha, self._beta1, self._beta2
        keep_weight = 1.0 - (decay if self._fixed_decay else alpha * decay)
        bias_correction1 = 1.0 - beta1 ** t
        bias_correction2 = 1.0 - beta2 ** t
        step, adaptive = alpha / bias_correction1, True
        if self._rectify:
            rho_inf = 2.0 / (1.0 - beta2) - 1.0
            rho_t = rho_inf - 2.0 * t * beta2 ** t / bias_correction2
            if rho_t > 4.0:
                step *= math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                                  / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
            else:
                step, adaptive = alpha, False
        kernels.adabelief_update(w, g, m, s, s_max, step, beta1, beta2, self._eps,
                                 bias_correction2, keep_weight, adaptive, self._amsgrad)


class Lamb(_FusedDecay, Solver):
    """LAMB: the Adam direction r plus decay w, scaled to eta clip(|w|, gamma_l, gamma_u) / |r|
    per parameter; the Adam moments are bias-corrected with ``bias_correction``."""

    _state_names = ("mean", "var")
    _lr_name = "eta"

    def __init__(self, eta=1e-3, beta1=0.9, beta2=0.999, gamma_l=0.0, gamma_u=10.0, eps=1e-6,
                 bias_correction=False):
        super().__init__(eta=eta, beta1=beta1, beta2=beta2, gamma_l=gamma_l, gamma_u=gamma_u,
                         eps=eps, bias_correction=bias_correction)
        self._direction = np.empty(0, np.float32)   # the kernel's scratch, as large as needed

    def _update_one(self, kernels, t, w, g, states, decay):
        m, v = states
        if self._bias_correction:
            correction1, correction2 = 1.0 - self._beta1 ** t, 1.0 - self._beta2 ** t
        else:
            correction1 = correction2 = 1.0
        r = None   # the device kernels keep their own scratch
        if not kernels.on_device:
            if self._direction.size < w.size or self._direction.dtype != w.dtype:
                self._direction = np.empty(max(w.size, self._direction.size), w.dtype)
            r = self._direction[:w.size]
        kernels.lamb_update(w, g, m, v, r, self._eta, self._beta1, self._beta2, correction1,
                            correction2, self._eps, decay, self._gamma_l, self._gamma_u)


class Lion(_FusedDecay, Solver):
    """Lion: w -= lr (sign(beta1 m + (1 - beta1) g) + decay w);  m = beta2 m + (1 - beta2) g."""

    _state_names = ("m",)

    def __init__(self, lr=1e-4, beta1=0.9, beta2=0.99):
        super().__init__(lr=lr, beta1=beta1, beta2=beta2)

    def _update_one(self, kernels, t, w, g, states, decay):
        kernels.lion_update(w, g, states[0], self._lr, self._beta1, self._beta2, decay)
