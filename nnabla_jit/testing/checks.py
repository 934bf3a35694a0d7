"""The gradient checkers (see the package docstring)."""
import numpy as np

from .. import functions as F
from ..context import Context, context_scope
from ..grad import grad
from ..graph import has_grad_path
from ..variable import Variable

__all__ = ["check_backward", "check_grad_rule", "check_double_backward", "check_forward",
           "check_function", "numerical_grad", "double_context"]


def double_context():
    """A CPU context computing in float64, for finite differences."""
    return Context(["cpu:double"])


def _as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _leaves(inputs, wrt):
    """float64 leaf Variables for the inputs; ``wrt`` says which need a gradient."""
    xs = []
    for k, a in enumerate(inputs):
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = a.astype(np.float64)
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
        wv = Variable.from_numpy_array(w)
        terms.append(F.sum(y * wv))
    return terms[0] if len(terms) == 1 else F.add_n(*terms)


def _loss_value(fn, xs, weights):
    ys = _differentiable_outputs(_as_list(fn(*xs)))
    loss = _weighted_loss(ys, weights)
    loss.forward()
    return float(loss.d)


def numerical_grad(fn, xs, weights, k, eps):
    """Central differences of sum_k sum(y_k * w_k) with respect to input ``k``."""
    x = xs[k]
    base = x.d.copy()
    g = np.zeros_like(base)
    flat = base.reshape(-1)
    for i in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[i] += eps
        minus[i] -= eps
        x.d = plus.reshape(base.shape)
        fp = _loss_value(fn, xs, weights)
        x.d = minus.reshape(base.shape)
        fm = _loss_value(fn, xs, weights)
        g.reshape(-1)[i] = (fp - fm) / (2 * eps)
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


def _setup(fn, inputs, wrt, seed):
    xs = _leaves(inputs, wrt)
    ys = _differentiable_outputs(_as_list(fn(*xs)))
    for y in ys:
        y.forward()
    rng = np.random.RandomState(seed)
    weights = [rng.uniform(-1, 1, y.shape) for y in ys]
    return xs, weights


def check_forward(fn, inputs, reference, atol=1e-5, rtol=1e-5, ctx=None):
    """fn(*Variables) against reference(*numpy arrays), output by output."""
    with context_scope(ctx or double_context()):
        xs = [Variable.from_numpy_array(np.asarray(a)) for a in inputs]
        ys = _as_list(fn(*xs))
        want = _as_list(reference(*[np.asarray(a) for a in inputs]))
        if len(ys) != len(want):
            raise AssertionError("forward: {} outputs, reference gives {}".format(len(ys), len(want)))
        for k, (y, w) in enumerate(zip(ys, want)):
            y.forward()
            _compare("forward", "output {}".format(k), y.d, w, atol, rtol)


def check_backward(fn, inputs, wrt=None, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0):
    """Backward kernels against central differences, in float64.

    ``wrt``: indices of the inputs to differentiate (default: every float input).
    Also checks that a second backward accumulates (leaf gradients double).
    """
    with context_scope(double_context()):
        xs, weights = _setup(fn, inputs, wrt, seed)
        loss = _weighted_loss(_differentiable_outputs(_as_list(fn(*xs))), weights)
        loss.forward()
        loss.backward()
        analytic = [x.g.copy() if x.need_grad else None for x in xs]
        loss.backward()
        for k, x in enumerate(xs):
            if x.need_grad:
                _compare("backward (accumulated twice)", "input {}".format(k), x.g, 2 * analytic[k],
                         atol, rtol)
        for k, x in enumerate(xs):
            if x.need_grad:
                num = numerical_grad(fn, xs, weights, k, eps)
                _compare("backward", "input {}".format(k), analytic[k], num, atol, rtol)
    return analytic


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


def check_double_backward(fn, inputs, wrt=None, eps=1e-6, atol=1e-4, rtol=1e-3, seed=0):
    """Second order: L2 = sum_i sum(grad_i * v_i) with grad_i from nn.grad; its backward
    (through the gradient graph) against central differences of L2."""
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
                   double_backward=True, atol=1e-5, rtol=1e-4):
    """Forward (when a reference is given), backward, grad rule and double backward."""
    if reference is not None:
        check_forward(fn, inputs, reference, atol=atol, rtol=rtol)
    if backward:
        check_backward(fn, inputs, wrt, atol=atol, rtol=rtol)
    if grad_rule:
        check_grad_rule(fn, inputs, wrt, atol=atol, rtol=rtol)
    if double_backward:
        check_double_backward(fn, inputs, wrt, atol=max(atol, 1e-4), rtol=max(rtol, 1e-3))
