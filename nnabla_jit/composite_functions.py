"""Ops that run as a small graph of F ops: FusedConvolution, and the LSTM cell update.

nnabla's FusedConvolution is one kernel; here it is the graph of what it fuses (pad,
convolution, batch normalization, add, nonlinearity), built from ``function_bases`` on the
node's inputs at the first forward. It sits above the executor and the generated functions it
is made of; ``F.fused_convolution`` (generated in ``function_bases``) looks the op up by name.
"""
from . import function_bases as _fb
from .context import context_scope, get_current_context
from .function import auto_forward, no_grad
from .normalization_functions import batch_normalization
from .ops.convolution_variants import named_args
from .ops.registry import Op, register
from .variable import Variable


NONLINEARITY_ARGS = {"leaky_relu": 1, "elu": 1}


def _nonlinearity(h, name, args):
    if name == "identity":
        return h
    if name in ("leaky_relu", "elu"):
        return getattr(_fb, name)(h, *args)
    return getattr(_fb, name)(h)


def _fused_input_names(input_shapes):
    """Which optional inputs a FusedConvolution has, from their number and ranks: the bias is
    1-d, the batch normalization parameters come four together, z is last."""
    rest = input_shapes[2:]
    has_bias = len(rest) > 0 and len(rest[0]) == 1
    has_bn = len(rest) - has_bias >= 4
    names = ["x", "weight"] + ["bias"] * has_bias + ["beta", "gamma", "mean", "variance"] * has_bn
    return names + ["z"] * (len(input_shapes) - len(names))


def fused_convolution_graph(v, base_axis=1, pad=None, stride=None, dilation=None, group=1, channel_last=False,
                            decay_rate=0.9, eps=1e-5, batch_stat=True, nonlinearity="relu", nonlinearity_args=(),
                            pad_mode="constant", constant_value=0.0, keep_running_stats=False):
    """What FusedConvolution computes, built from F on the Variables ``v`` (by input name).
    ``keep_running_stats``: give the batch normalization scratch running statistics, so that a
    gradient graph does not update the real ones again."""
    x = v["x"]
    if pad_mode != "constant" or constant_value != 0:
        widths = tuple(p for q in pad for p in (q, q)) + ((0, 0) if channel_last else ())
        x = _fb.pad(x, widths, pad_mode, constant_value)
        pad = (0,) * len(pad)
    h = _fb.convolution(x, v["weight"], v.get("bias"), base_axis, pad, stride, dilation, group, channel_last)
    if "beta" in v:
        mean, variance = v["mean"], v["variance"]
        if keep_running_stats and batch_stat:   # batch statistics: the running ones are only written
            mean, variance = Variable(mean.shape), Variable(variance.shape)
        axis = len(h.shape) - 1 if channel_last else base_axis % len(h.shape)
        h = batch_normalization(h, v["beta"], v["gamma"], mean, variance, [axis], decay_rate, eps, batch_stat)
    if "z" in v:
        h = _fb.add2(h, v["z"])
    return _nonlinearity(h, nonlinearity, nonlinearity_args)


@register
class FusedConvolution(Op):
    """Convolution (+ bias) -> batch normalization -> + z -> nonlinearity, as nnabla's (with
    pad_mode 'reflect' / 'repeat' or a constant_value, x is padded first). It runs as a small
    graph of exactly those ops on this node's inputs, built at the first forward."""
    python_level = True

    def setup(self, *shapes):
        s = named_args(self, shapes)
        bn = [n for n in ("beta", "gamma", "mean", "variance") if n in s]
        if 0 < len(bn) < 4:
            self.fail("batch normalization needs all of beta, gamma, mean and variance, got only {}", bn)
        need = NONLINEARITY_ARGS.get(self.nonlinearity, 0)
        if len(self.nonlinearity_args) != need:
            self.fail("nonlinearity '{}' takes {} nonlinearity_args, got {}", self.nonlinearity, need,
                      list(self.nonlinearity_args))
        self.ctx = get_current_context()
        try:
            probe = self._graph({n: Variable(shape) for n, shape in s.items()})
        except ValueError as e:
            self.fail("{}", e)
        self.sub = None   # (proxies of the inputs, output) of the graph that runs
        return [probe.shape]

    def _graph(self, variables, keep_running_stats=False):
        with context_scope(self.ctx), no_grad(False), auto_forward(False):
            return fused_convolution_graph(variables, **self.args)

    def _subgraph(self, inputs):
        """The graph on unlinked twins of the inputs (same buffers, grads included)."""
        if self.sub is None or any(p._body is not v._body for p, v in zip(self.sub[0], inputs)):
            proxies = [v.get_unlinked_variable(need_grad=True) for v in inputs]
            self.sub = (proxies, self._graph(dict(zip(self.input_names, proxies))))
        return self.sub

    def forward(self, inputs, outputs):
        _, out = self._subgraph(inputs)
        out.forward()
        outputs[0].d = out.d

    def backward(self, inputs, outputs, propagate_down, accum):
        proxies, out = self._subgraph(inputs)
        for p, v, down, acc in zip(proxies, inputs, propagate_down, accum):
            p.need_grad = down
            if down and not acc:
                v.grad.zero()
        out.backward(outputs[0].grad)   # leaf twins accumulate into the inputs' grads


def lstm_cell_update(i, f, g, o, c):
    """One LSTM step from its pre-activation gates (input, forget, candidate, output) and the
    cell state c: returns (h, c). The graph form of ``ops/recurrent.py``'s cell kernel, used by
    LSTM's grad rule and ``PF.lstm_cell`` (nnabla orders their gate blocks differently)."""
    c = _fb.sigmoid(f) * c + _fb.sigmoid(i) * _fb.tanh(g)
    return _fb.sigmoid(o) * _fb.tanh(c), c
