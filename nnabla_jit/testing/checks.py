"""The gradient checkers (see the package docstring)."""
import numpy as np

from .. import functions as F
from ..context import Context, context_scope
from ..grad import grad
from ..graph import has_grad_path, unfused
from ..ops.kernels import parallel_threshold
from ..variable import Variable

__all__ = ["check_backward", "check_grad_rule", "check_double_backward", "check_forward",
           "check_function", "numerical_grad", "double_context", "VARIANTS"]

# What users run besides the float64 serial kernels the checks are made with: float32, with
# the serial kernels and with the parallel ones (forced on small inputs), each compared with
# the float64 serial result. (float64 parallel is left out: compiling every parallel kernel
# twice would double the suite's cold start for the rarely used type_config='double'.)
VARIANTS = ((np.float32, False), (np.float32, True))
F32_ATOL, F32_RTOL = 1e-4, 1e-3   # float32 against float64 on the same (float32-rounded) inputs
PARALLEL_TOL = 1e-9               # the parallel variant may only reorder float64 sums


def double_context():
    """A CPU context computing in float64, for finite differences."""
    return Context(["cpu:double"])


def _variant(dtype, parallel):
    """The context and kernel-variant scopes of one variant, and its name for messages."""
    ctx = double_context() if dtype == np.float64 else Context(["cpu:float"])
    name = "{}, {}".format(np.dtype(dtype).name, "parallel" if parallel else "serial")
    return ctx, parallel_threshold(0 if parallel else None), name


def _cast(inputs, dtype):
    """Float inputs as ``dtype`` (index and integer inputs unchanged)."""
    out = []
    for a in inputs:
        a = np.asarray(a)
        out.append(a.astype(dtype) if a.dtype.kind == "f" else a)
    return out




def _as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _leaves(inputs, wrt, dtype=np.float64):
    """Leaf Variables for the inputs (float ones as ``dtype``); ``wrt`` says which need a
    gradient."""
    xs = []
    for k, a in enumerate(inputs):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = a.astype(dtype)
        want = wrt is None and a.dtype.kind == "f" or (wrt is not None and k in wrt)
        v = Variable.from_numpy_array(a, need_grad=bool(want))
        if want:
            v.g = 0
        xs.append(v)
    return xs


def _differentiable_outputs(ys):
    """The float outputs (index outputs and the like carry no gradient)."""
    out = []
    for y in ys:
        if y is None:
            continue
        y.forward()
        if y.d.dtype.kind == "f":
            out.append(y)
    return out


def _weighted_loss(ys, weights):
    """sum_k sum(y_k * w_k), built from F so the checked function is the only unknown."""
    terms = []
    for y, w in zip(ys, weights):
        wv = Variable.from_numpy_array(w.astype(y.d.dtype) if y.d.dtype.kind == "f" else w)
        terms.append(F.sum(y * wv))
    return terms[0] if len(terms) == 1 else F.add_n(*terms)


def _loss_value(fn, xs, weights):
    ys = _differentiable_outputs(_as_list(fn(*xs)))
    loss = _weighted_loss(ys, weights)
    loss.forward()
    return float(loss.d)


def _loss_function(fn, xs, weights):
    """A function giving the loss for the current input values. The graph is built once and run
    again (building it anew each time cost most of the suite's time) unless two runs disagree:
    then it draws random numbers at forward, and ``fn`` (which may seed them) is called anew."""
    loss = _weighted_loss(_differentiable_outputs(_as_list(fn(*xs))), weights)

    def rerun():
        loss.forward()
        return float(loss.d)
    return rerun if rerun() == rerun() else (lambda: _loss_value(fn, xs, weights))


def numerical_grad(fn, xs, weights, k, eps):
    """Central differences of sum_k sum(y_k * w_k) with respect to input ``k``. The loss graph
    runs op by op: it runs twice per element, and a fused kernel compiled for it would cost
    more than it saves."""
    x = xs[k]
    base = x.d.copy()
    with unfused():
        loss_value = _loss_function(fn, xs, weights)
        g = np.zeros_like(base)
        flat = base.reshape(-1)
        for i in range(flat.size):
            values = []
            for step in (eps, -eps):
                moved = flat.copy()
                moved[i] += step
                x.d = moved.reshape(base.shape)
                values.append(loss_value())
            g.reshape(-1)[i] = (values[0] - values[1]) / (2 * eps)
    x.d = base
    return g


def _compare(what, name, got, want, atol, rtol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError("{}: {} has shape {}, expected {}".format(what, name, got.shape, want.shape))
    if not np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
        err = np.abs(got - want) - atol - rtol * np.abs(want)
        i = np.unravel_index(np.nanargmax(err), err.shape) if err.size else ()
        raise AssertionError("{}: {} differs at {}: got {!r}, expected {!r} (atol={}, rtol={})\n"
                             "got:\n{}\nexpected:\n{}".format(what, name, i, got[i], want[i],
                                                             atol, rtol, got, want))


def _setup(fn, inputs, wrt, seed, dtype=np.float64):
    xs = _leaves(inputs, wrt, dtype)
    ys = _differentiable_outputs(_as_list(fn(*xs)))
    for y in ys:
        y.forward()
    rng = np.random.RandomState(seed)
    weights = [rng.uniform(-1, 1, y.shape) for y in ys]
    return xs, weights


def _forward_values(fn, inputs):
    xs = [Variable.from_numpy_array(np.asarray(a)) for a in inputs]
    ys = _as_list(fn(*xs))
    for y in ys:
        y.forward()
    return ys


def check_forward(fn, inputs, reference, atol=1e-5, rtol=1e-5, ctx=None, variants=True,
                  atol32=F32_ATOL, rtol32=F32_RTOL):
    """fn(*Variables) against reference(*numpy arrays), output by output.

    In float64 with the serial kernels, then (``variants``, unless a ``ctx`` is given) with the
    parallel kernels and in float32 (against the reference on the float32-rounded inputs, within
    ``atol32``/``rtol32``)."""
    with context_scope(ctx or double_context()), parallel_threshold(None):
        ys = _forward_values(fn, inputs)
        want = _as_list(reference(*[np.asarray(a) for a in inputs]))
        if len(ys) != len(want):
            raise AssertionError("forward: {} outputs, reference gives {}".format(len(ys), len(want)))
        for k, (y, w) in enumerate(zip(ys, want)):
            _compare("forward", "output {}".format(k), y.d, w, atol, rtol)
        serial = [y.d.copy() for y in ys]
    if not variants or ctx is not None:
        return
    # float64 parallel against float64 serial; float32 against the reference on the
    # float32-rounded inputs
    want32 = _as_list(reference(*_cast(_cast(inputs, np.float32), np.float64)))
    for dtype, parallel in VARIANTS:
        ctx, variant, name = _variant(dtype, parallel)
        with context_scope(ctx), variant:
            ys = _forward_values(fn, _cast(inputs, dtype))
            for k, y in enumerate(ys):
                if dtype == np.float64:
                    _compare("forward ({})".format(name), "output {}".format(k), y.d, serial[k],
                             PARALLEL_TOL, PARALLEL_TOL)
                else:
                    _compare("forward ({})".format(name), "output {}".format(k), y.d, want32[k],
                             max(atol, atol32), max(rtol, rtol32))


def _gradients(fn, inputs, wrt, seed, dtype=np.float64):
    """The backward kernels' gradients of the weighted loss, in the current context."""
    xs, weights = _setup(fn, inputs, wrt, seed, dtype)
    loss = _weighted_loss(_differentiable_outputs(_as_list(fn(*xs))), weights)
    loss.forward()
    loss.backward()
    return xs, weights, loss, [x.g.copy() if x.need_grad else None for x in xs]


def check_backward(fn, inputs, wrt=None, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0, variants=True,
                   atol32=F32_ATOL, rtol32=F32_RTOL):
    """Backward kernels against central differences, in float64 with the serial kernels.

    ``wrt``: indices of the inputs to differentiate (default: every float input).
    Also checks that a second backward accumulates (leaf gradients double), and
    (``variants``) that the parallel kernels and float32 give the same gradients.
    """
    with context_scope(double_context()), parallel_threshold(None):
        xs, weights, loss, analytic = _gradients(fn, inputs, wrt, seed)
        loss.backward()
        for k, x in enumerate(xs):
            if x.need_grad:
                _compare("backward (accumulated twice)", "input {}".format(k), x.g, 2 * analytic[k],
                         atol, rtol)
        for k, x in enumerate(xs):
            if x.need_grad:
                num = numerical_grad(fn, xs, weights, k, eps)
                _compare("backward", "input {}".format(k), analytic[k], num, atol, rtol)
    if variants:
        _check_gradient_variants(fn, inputs, wrt, seed, analytic, atol32, rtol32)
    return analytic


def _check_gradient_variants(fn, inputs, wrt, seed, analytic, atol32, rtol32):
    """float64 parallel against float64 serial; float32 against float64 serial on the
    float32-rounded inputs."""
    rounded = _cast(_cast(inputs, np.float32), np.float64)
    with context_scope(double_context()), parallel_threshold(None):
        analytic32 = _gradients(fn, rounded, wrt, seed)[3]
    for dtype, parallel in VARIANTS:
        ctx, variant, name = _variant(dtype, parallel)
        with context_scope(ctx), variant:
            got = _gradients(fn, _cast(inputs, dtype), wrt, seed, dtype)[3]
        a, r = (PARALLEL_TOL, PARALLEL_TOL) if dtype == np.float64 else (atol32, rtol32)
        for k, (g, w) in enumerate(zip(got, analytic if dtype == np.float64 else analytic32)):
            if w is not None:
                _compare("backward ({})".format(name), "input {}".format(k), g, w, a, r)


def check_grad_rule(fn, inputs, wrt=None, atol=1e-6, rtol=1e-5, seed=0):
    """Gradients from ``nn.grad`` (the F-built rules) against the backward kernels."""
    with context_scope(double_context()):
        xs, weights = _setup(fn, inputs, wrt, seed)
        loss = _weighted_loss(_differentiable_outputs(_as_list(fn(*xs))), weights)
        loss.forward()
        loss.backward()
        wrt = [x for x in xs if x.need_grad]
        gs = grad([loss], wrt)
        for k, (x, g) in enumerate(zip(wrt, gs)):
            g.forward()
            _compare("grad rule", "input {}".format(xs.index(x)), g.d, x.g, atol, rtol)


def _check_first_order(fn, xs, weights, wrt, gs, atol, rtol):
    """The grad rule's values (``gs``, forwarded) against the backward kernels' gradients of the
    same loss: a wrong rule consistent with its own derivative passes the second-order check.
    (Against the kernels, not differences: straight-through rules are not derivatives.)"""
    values = [g.d.copy() for g in gs]
    for x in wrt:
        x.g = 0
    loss = _weighted_loss(_differentiable_outputs(_as_list(fn(*xs))), weights)
    loss.forward()
    if not has_grad_path(loss):
        return
    loss.backward()
    for x, value in zip(wrt, values):
        _compare("grad rule (first order)", "input {}".format(xs.index(x)), value, x.g, atol, rtol)


def check_double_backward(fn, inputs, wrt=None, eps=1e-6, atol=1e-4, rtol=1e-3, seed=0):
    """Second order: L2 = sum_i sum(grad_i * v_i) with grad_i from nn.grad; its backward
    (through the gradient graph) against central differences of L2. The first-order values
    grad_i are checked against the backward kernels first."""
    with context_scope(double_context()):
        xs, weights = _setup(fn, inputs, wrt, seed)
        rng = np.random.RandomState(seed + 1)
        wrt = [x for x in xs if x.need_grad]

        def second(*vs):
            ys = _differentiable_outputs(_as_list(fn(*vs)))
            loss = _weighted_loss(ys, weights)
            gs = grad([loss], [v for v in vs if v.need_grad])
            return gs

        gs = second(*xs)
        probes = [rng.uniform(-1, 1, g.shape) for g in gs]
        total = _weighted_loss(gs, probes)
        total.forward()
        _check_first_order(fn, xs, weights, wrt, gs, atol, rtol)
        for x in xs:
            if x.need_grad:
                x.g = 0
        if has_grad_path(total):
            total.backward()
        analytic = [x.g.copy() for x in wrt]   # zero where the gradient does not depend on x
        for k, x in enumerate(wrt):
            idx = xs.index(x)
            num = numerical_grad(second, xs, probes, idx, eps)
            _compare("double backward", "input {}".format(idx), analytic[k], num, atol, rtol)


def check_function(fn, inputs, reference=None, wrt=None, backward=True, grad_rule=True,
                   double_backward=True, atol=1e-5, rtol=1e-4, variants=True, atol32=F32_ATOL,
                   rtol32=F32_RTOL):
    """Forward (when a reference is given), backward, grad rule and double backward; forward
    and backward also with the parallel kernels and in float32 (``variants``)."""
    if reference is not None:
        check_forward(fn, inputs, reference, atol=atol, rtol=rtol, variants=variants,
                      atol32=atol32, rtol32=rtol32)
    if backward:
        check_backward(fn, inputs, wrt, atol=atol, rtol=rtol, variants=variants, atol32=atol32,
                       rtol32=rtol32)
    if grad_rule:
        check_grad_rule(fn, inputs, wrt, atol=atol, rtol=rtol)
    if double_backward:
        check_double_backward(fn, inputs, wrt, atol=max(atol, 1e-4), rtol=max(rtol, 1e-3))
