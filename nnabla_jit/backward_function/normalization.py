"""Grad rules of the normalization ops (``ops/normalization.py``): graphs of F ops, differentiable again.

Every input gradient of the family has the form  dx = p[c] d + q[c] h(x - center[c]) + r[c]
in the (O, C, I) layout of ``ops/normalization.StatLayout`` (``channel_linear_grad``); the
per-channel coefficients come from the sums of ``ops/normalization.channel_sums``. The grad rules
rebuild the same formulas from F ops, so they can be differentiated again.
"""
import numpy as np

from .. import function_bases
from .. import functions as F
from ..context import context_scope
from ..function import PythonFunction, auto_forward
from ..grad import grad
from ..ops.normalization import normalization_input_names
from ..ops.registry import GRAD_RULES, REGISTRY, grad_rule
from ..variable import Variable


def _reduce_to(g, shape):
    """Sum ``g`` over the axes where ``shape`` (same rank) is 1."""
    axes = [a for a, (s, t) in enumerate(zip(g.shape, shape)) if t == 1 and s != 1]
    return F.sum(g, axis=axes, keepdims=True) if axes else g


def _reshape(v, shape):
    return v if tuple(v.shape) == tuple(shape) else F.reshape(v, shape, inplace=False)


def _standardization_rule(name):
    """The grad rule of standardization op ``name``, built from F ops."""
    def rule(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
        comm = args.get("comm")
        if name == "SyncBatchNormalization" and args.get("batch_stat", True) and comm is not None \
                and getattr(comm, "size", 1) > 1:
            return _synchronized_rule(grad_inputs, inputs, args)
        names = normalization_input_names(name, len(inputs), args)
        given = dict(zip(names, inputs))
        x, beta, gamma = given["x"], given.get("beta"), given.get("gamma")
        lay = REGISTRY[name](**args).layout_of(tuple(x.shape))
        eps = args.get("eps", 1e-5)
        red = [a for a, (s, t) in enumerate(zip(lay.work_shape, lay.stat_shape)) if t == 1 and s != 1]
        dy = grad_inputs[0]
        if name == "FusedBatchNormalization":
            dy = dy * F.greater_scalar(outputs[0], 0.0)
        xw = _reshape(x, lay.work_shape)
        batch = args.get("batch_stat", True)
        if batch:
            mu = F.mean(xw, axis=red, keepdims=True)
            xc = xw - mu
            var = F.mean(xc ** 2, axis=red, keepdims=True)
        else:
            xc = xw - _reshape(given["mean"], lay.stat_shape)
            var = _reshape(given["variance"], lay.stat_shape)
        inv_std = (var + eps) ** -0.5
        xhat = xc * inv_std
        dw = _reshape(dy * gamma if gamma is not None else dy, lay.work_shape)
        if batch:
            dxw = inv_std * (dw - F.mean(dw, axis=red, keepdims=True)
                             - xhat * F.mean(dw * xhat, axis=red, keepdims=True))
            if len(grad_inputs) == 3:
                M = float(max(lay.count, 1))
                dxw = dxw + _reshape(grad_inputs[1], lay.stat_shape) * (1.0 / M) \
                    + _reshape(grad_inputs[2], lay.stat_shape) * xc * (2.0 / M)
        else:
            dxw = dw * inv_std
        grads = {"x": _reshape(dxw, x.shape), "z": dy}
        if beta is not None:
            grads["beta"] = _reduce_to(dy, beta.shape)
        if gamma is not None:
            grads["gamma"] = _reduce_to(dy * _reshape(xhat, x.shape), gamma.shape)
        return [grads.get(n) for n in names]
    rule.__name__ = name + "_grad"
    return rule


class SumOverProcesses(PythonFunction):
    """y = the sum of x over the processes of ``comm``'s ``group`` (an all-reduce): the
    collective in the gradient graphs of SyncBatchNormalization across processes. Its gradient
    is the same sum of the output's gradient, so those graphs differentiate again. Every process
    must run the same graph (as data-parallel training does)."""

    def __init__(self, comm, group="world"):
        super().__init__()
        self.comm = comm
        self.group = group
        # Its rule is filed on first use, as a user's PythonFunction's would be: the registry
        # filed at import holds the table's ops only.
        GRAD_RULES.setdefault("SumOverProcesses", sum_over_processes_grad)

    @property
    def args(self):
        return {"comm": self.comm, "group": self.group}

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return False

    def setup_impl(self, inputs, outputs):
        outputs[0].reset_shape(inputs[0].shape, True)

    def _summed(self, array):
        buf = np.array(array, np.float64).reshape(-1)
        self.comm._sum_arrays(buf, self.group)
        return buf.reshape(array.shape)

    def forward_impl(self, inputs, outputs):
        outputs[0].d = self._summed(inputs[0].d)

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        if propagate_down[0]:
            g = self._summed(outputs[0].g)
            if accum[0]:
                inputs[0].g += g
            else:
                inputs[0].g = g


def sum_over_processes_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, comm=None,
                            group="world"):
    return [SumOverProcesses(comm, group)(grad_inputs[0])]


def _synchronized_rule(grad_inputs, inputs, args):
    """SyncBatchNormalization's gradient across processes: the batch normalization rule with every
    per-channel sum taken over all processes (``SumOverProcesses``); beta's and gamma's gradients
    stay each process's own, as in backward."""
    comm, group = args["comm"], args.get("group") or "world"
    names = normalization_input_names("SyncBatchNormalization", len(inputs), args)
    given = dict(zip(names, inputs))
    x, beta, gamma = given["x"], given.get("beta"), given.get("gamma")
    lay = REGISTRY["SyncBatchNormalization"](**args).layout_of(tuple(x.shape))
    red = [a for a, (s, t) in enumerate(zip(lay.work_shape, lay.stat_shape)) if t == 1 and s != 1]
    total = np.array([float(lay.count)])
    comm._sum_arrays(total, group)        # the elements behind each statistic, all processes
    n = float(max(total[0], 1.0))

    def mean_over_processes(v):
        return SumOverProcesses(comm, group)(F.sum(v, axis=red, keepdims=True)) * (1.0 / n)

    xw = _reshape(x, lay.work_shape)
    xc = xw - mean_over_processes(xw)
    inv_std = (mean_over_processes(xc ** 2) + args.get("eps", 1e-5)) ** -0.5
    xhat = xc * inv_std
    dy = grad_inputs[0]
    dw = _reshape(dy * gamma if gamma is not None else dy, lay.work_shape)
    dxw = inv_std * (dw - mean_over_processes(dw) - xhat * mean_over_processes(dw * xhat))
    if len(grad_inputs) == 3:             # the batch mean and variance were outputs too
        dmean = SumOverProcesses(comm, group)(_reshape(grad_inputs[1], lay.stat_shape))
        dvar = SumOverProcesses(comm, group)(_reshape(grad_inputs[2], lay.stat_shape))
        dxw = dxw + dmean * (1.0 / n) + dvar * xc * (2.0 / n)
    grads = {"x": _reshape(dxw, x.shape)}
    if beta is not None:
        grads["beta"] = _reduce_to(dy, beta.shape)
    if gamma is not None:
        grads["gamma"] = _reduce_to(dy * _reshape(xhat, x.shape), gamma.shape)
    return [grads.get(k) for k in names]


for _name in ("BatchNormalization", "SyncBatchNormalization", "FusedBatchNormalization",
              "TensorNormalization", "LayerNormalization", "InstanceNormalization",
              "GroupNormalization", "WeightStandardization"):
    grad_rule(_name)(_standardization_rule(_name))
_FUSED_RULE = _standardization_rule("FusedBatchNormalization")


class FusedBatchNormalizationBackward(PythonFunction):
    """nnabla's function whose forward is FusedBatchNormalization's first-order backward:
    inputs ``(dy, x, beta, gamma, mean, variance, y[, z])`` (``is_add``: with z), outputs
    ``(dx, dbeta, dgamma[, dz])``; its forward runs the op's own kernels, its backward (and its
    grad rule) is the second derivative, from the grad rule of the op differentiated again, as in
    nnabla, with the ReLU mask taken from the given ``y``. Running statistics are never updated."""

    def __init__(self, ctx, axes=[1], decay_rate=0.9, eps=1e-05, batch_stat=True, nonlinearity="relu"):
        super().__init__(ctx)
        self._args = dict(axes=list(axes), decay_rate=decay_rate, eps=eps, batch_stat=batch_stat,
                          nonlinearity=nonlinearity)
        self.is_add = False

    @property
    def args(self):
        return dict(self._args)

    def min_inputs(self):
        return 7

    def min_outputs(self):
        return 4 if self.is_add else 3

    def grad_depends_output_data(self, i, o):
        return False

    def _source(self, inputs):
        """FusedBatchNormalization on fresh Variables holding the data of ``inputs``' x, beta,
        gamma, running statistics (copies) and z: (the node's inputs, its output)."""
        x, beta, gamma, mean, variance = inputs[1:6]
        z = inputs[7] if self.is_add else None
        src = [Variable.from_numpy_array(v.d.copy(), need_grad=k not in (3, 4))
               for k, v in enumerate((x, beta, gamma, mean, variance, z)) if v is not None]
        with auto_forward(False), context_scope(self.ctx):
            y = function_bases.fused_batch_normalization(*src[:5], src[5] if self.is_add else None,
                                                         **self._args)
        return src, y

    def setup_impl(self, inputs, outputs):
        if len(inputs) != (8 if self.is_add else 7):
            raise ValueError("FusedBatchNormalizationBackward: takes (dy, x, beta, gamma, mean, variance, y"
                             "{}), got {} inputs (is_add={})".format(", z" if self.is_add else "", len(inputs),
                                                                     self.is_add))
        _, y = self._source(inputs)   # checks the shapes
        for v in (inputs[0], inputs[6]):
            if v.shape != y.shape:
                raise ValueError("FusedBatchNormalizationBackward: dy and y must have x's shape {}, got {} "
                                 "and {}".format(y.shape, inputs[0].shape, inputs[6].shape))
        for out, v in zip(outputs, inputs[1:4] + inputs[7:]):
            out.reset_shape(v.shape, True)

    def forward_impl(self, inputs, outputs):
        src, y = self._source(inputs)
        f = y.parent
        f.forward(src, [y])
        y.g = inputs[0].d
        f.backward(src, [y], [False] * len(src))
        for out, v in zip(outputs, [src[0], src[1], src[2]] + src[5:]):
            out.d = v.g

    def backward_impl(self, inputs, outputs, propagate_down, accum):
        with auto_forward(True), context_scope(self.ctx):
            leaves = [Variable.from_numpy_array(v.d, need_grad=propagate_down[k]) for k, v in enumerate(inputs)]
            grads = [Variable.from_numpy_array(o.g) for o in outputs]
            results = fused_batch_normalization_backward_grad(grads, leaves, None, None, None, **self._args)
        for k, r in enumerate(results):
            if r is not None and propagate_down[k]:
                if accum[k]:
                    inputs[k].g += r.d
                else:
                    inputs[k].g = r.d


@grad_rule("FusedBatchNormalizationBackward")
def fused_batch_normalization_backward_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                                            axes=(1,), decay_rate=0.9, eps=1e-05, batch_stat=True,
                                            nonlinearity="relu"):
    """FusedBatchNormalization's grad rule differentiated again, wrt dy, x and gamma."""
    dy, x, beta, gamma, mean, variance, y = inputs[:7]
    src = [x, beta, gamma, mean, variance] + list(inputs[7:])
    first = _FUSED_RULE([dy], src, [v.shape for v in src], [y], [y.shape], axes=axes, decay_rate=decay_rate,
                        eps=eps, batch_stat=batch_stat, nonlinearity=nonlinearity)
    firsts = first[:3] + first[5:]
    pairs = [(o, g) for o, g in zip(firsts, grad_inputs) if o is not None and g is not None]
    wrt = [k for k in (0, 1, 3) if inputs[k].need_grad]
    results = [None] * len(inputs)
    if pairs and wrt:
        for k, g in zip(wrt, grad([o for o, _ in pairs], [inputs[k] for k in wrt],
                                  grad_outputs=[g for _, g in pairs])):
            results[k] = g
    return results


@grad_rule('WeightNormalization')
def weight_normalization_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dim=0, eps=1e-12):
    dy, w, g = grad_inputs[0], inputs[0], inputs[1]
    dim %= len(w.shape)
    axes = [a for a in range(len(w.shape)) if a != dim]
    inv_norm = (F.sum(w ** 2, axis=axes, keepdims=True) + eps) ** -0.5
    dyw = F.sum(dy * w, axis=axes, keepdims=True)
    gb = _reshape(g, [s if a == dim else 1 for a, s in enumerate(w.shape)])
    dw = (dy - dyw * inv_norm ** 2 * w) * gb * inv_norm
    return [dw, _reshape(dyw * inv_norm, g.shape)]


@grad_rule('NormNormalization')
def norm_normalization_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, p=2.0, axes=None, eps=1e-12):
    """y = x / max(||x||_p, eps) (nnabla's): where the norm is eps, dx = dy / eps."""
    dy, x = grad_inputs[0], inputs[0]
    axes = list(axes) if axes is not None else list(range(len(x.shape)))
    ax = F.abs(x)

    def total(v):   # no axes: each element its own norm
        return F.sum(v, axis=axes, keepdims=True) if axes else v
    norm = total(ax ** p) ** (1.0 / p)
    kept = F.greater_scalar(norm, eps)            # 1 where the norm is above eps
    n = F.maximum_scalar(norm, eps)
    s_dyx = total(dy * x)
    # sign(x) |x|^(p-1) written as x |x|^(p-2): F.sign would pass gradients straight through
    return [dy / n - kept * s_dyx * n ** (-1.0 - p) * x * ax ** (p - 2.0)]


@grad_rule('SpectralNorm')
def spectral_norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, dim=0, itr=1, eps=1e-12,
                       test=False, output_u=False):
    """Power iteration rebuilt from the u the forward started from: the ``output_u`` output, or
    the input u itself when ``test`` left it unchanged."""
    if not (output_u or test):
        raise ValueError("SpectralNorm: nn.grad needs output_u=True (or test=True) to know the u "
                         "the forward pass started from")
    dy, w = grad_inputs[0], inputs[0]
    u0 = outputs[1] if output_u else inputs[1]
    shape = tuple(w.shape)
    dim %= len(shape)
    perm = [dim] + [a for a in range(len(shape)) if a != dim]
    rows = shape[dim]
    cols = int(np.prod(shape)) // max(rows, 1)

    def as_matrix(a):
        return F.reshape(F.transpose(a, perm) if dim else a, (rows, cols), inplace=False)

    W = as_matrix(w)
    Wt = F.transpose(W, (1, 0))
    u = F.reshape(u0, (1, rows), inplace=False)
    for _ in range(itr):
        v = F.affine(u, W)                                  # (1, cols)
        v = v / (F.sum(v ** 2, keepdims=True) + eps) ** 0.5
        u = F.affine(v, Wt)                                 # (1, rows)
        u = u / (F.sum(u ** 2, keepdims=True) + eps) ** 0.5
    u.need_grad = False   # the singular vectors are constants of the gradient (as in nnabla)
    v.need_grad = False
    sigma = F.sum(F.affine(u, W) * v)
    D = as_matrix(dy)
    outer = F.affine(F.reshape(u, (rows, 1), inplace=False), v)
    dW = (D - F.sum(D * W) / sigma * outer) / sigma
    dW = F.reshape(dW, [shape[a] for a in perm], inplace=False)
    if dim:
        dW = F.transpose(dW, list(np.argsort(perm)))
    return [dW, None]


@grad_rule('MeanSubtraction')
def mean_subtraction_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, base_axis=1,
                          update_running_mean=True):
    dy, t = grad_inputs[0], inputs[2]
    if not update_running_mean:
        return [dy, None, None]
    x_shape = tuple(input_shapes[0])
    batch = float(np.prod(x_shape[:base_axis % len(x_shape)]))
    scale = 1.0 - 1.0 / (_reshape(t, (1,) * len(x_shape)) * batch)
    return [dy * scale, None, None]


@grad_rule('ClipGradByNorm')
def clip_grad_by_norm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, clip_norm=1.0, axes=None):
    dy = grad_inputs[0]
    axes = list(axes) if axes is not None else list(range(len(dy.shape)))
    squares = F.sum(dy ** 2, axis=axes, keepdims=True) if axes else dy ** 2
    return [dy * clip_norm * squares ** -0.5]
