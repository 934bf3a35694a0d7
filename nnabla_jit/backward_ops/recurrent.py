"""Backward of RNN, LSTM and GRU: BPTT kernels over the states forward saved, and grad rules.

Backward walks the layers from the top and, in each direction, the time steps in the reverse of
the order forward ran them. Per step a fused kernel turns the gradient of the step's state into
the gradients of the gate pre-activations, and one small GEMM carries it to the previous state;
the weight, bias and input gradients of a whole direction are then three big GEMMs over all
time steps.

The grad rules (``nn.grad``) rebuild the layer unrolled in time from ``F`` ops (affine, slices,
sigmoid, tanh, ...) and differentiate that graph, so the result is differentiable again.
"""
import numpy as np
from numba import njit

from ..ops.blas import gemm
from ..ops.registry import accumulate


@njit(cache=True)
def rnn_cell_backward(dh, h, relu, dg):
    """dg = dh * act'(pre), from the step's output h."""
    for b in range(dh.shape[0]):
        for k in range(dh.shape[1]):
            if relu:
                dg[b, k] = dh[b, k] if h[b, k] > 0 else 0.0
            else:
                dg[b, k] = dh[b, k] * (1.0 - h[b, k] * h[b, k])


@njit(cache=True)
def lstm_cell_backward(dh, dc, gates, c, c_prev, dg):
    """Gate pre-activation gradients (i, f, g, o) of one step. ``dc`` holds the gradient of
    c_t from later steps on entry and that of c_{t-1} on exit."""
    n_hidden = dh.shape[1]
    for b in range(dh.shape[0]):
        for k in range(n_hidden):
            i = gates[b, k]
            f = gates[b, n_hidden + k]
            g = gates[b, 2 * n_hidden + k]
            o = gates[b, 3 * n_hidden + k]
            tc = np.tanh(c[b, k])
            dct = dc[b, k] + dh[b, k] * o * (1.0 - tc * tc)
            dg[b, k] = dct * g * i * (1.0 - i)
            dg[b, n_hidden + k] = dct * c_prev[b, k] * f * (1.0 - f)
            dg[b, 2 * n_hidden + k] = dct * i * (1.0 - g * g)
            dg[b, 3 * n_hidden + k] = dh[b, k] * tc * o * (1.0 - o)
            dc[b, k] = dct * f


@njit(cache=True)
def gru_cell_backward(dh, gates, hidden_new, h_prev, dgx, dgh, dh_prev):
    """Gradients of one GRU step: of the input projections (dgx), of the recurrent projections
    (dgh: the new gate's is scaled by r) and the direct part z * dh of dh_prev."""
    n_hidden = dh.shape[1]
    for b in range(dh.shape[0]):
        for k in range(n_hidden):
            r = gates[b, k]
            z = gates[b, n_hidden + k]
            n = gates[b, 2 * n_hidden + k]
            dn = dh[b, k] * (1.0 - z) * (1.0 - n * n)
            dz = dh[b, k] * (h_prev[b, k] - n) * z * (1.0 - z)
            dr = dn * hidden_new[b, k] * r * (1.0 - r)
            dgx[b, k] = dr
            dgx[b, n_hidden + k] = dz
            dgx[b, 2 * n_hidden + k] = dn
            dgh[b, k] = dr
            dgh[b, n_hidden + k] = dz
            dgh[b, 2 * n_hidden + k] = dn * r
            dh_prev[b, k] = dh[b, k] * z


def _bptt_direction(op, state, dy, dh_last, dc_last, w_h, reverse):
    """Back through the time loop of one (layer, direction). ``dy`` (T, B, H): gradient of this
    direction's outputs; returns the gate gradients (input and recurrent side, by time) and
    the gradients of the initial h and c."""
    seq_len, batch, n_hidden = dy.shape
    gh = w_h.shape[0]
    dgx = np.empty((seq_len, batch, gh), dy.dtype)
    dgh = np.empty_like(dgx) if op.separate_recurrent_grad else dgx
    dh = np.array(dh_last, dtype=dy.dtype)
    dc = None if dc_last is None else np.array(dc_last, dtype=dy.dtype)
    dh_prev = np.empty_like(dh)
    for t in (range(seq_len) if reverse else range(seq_len - 1, -1, -1)):
        dh += dy[t]
        op.cell_backward(dh, dc, state, t, dgx[t], dgh[t], dh_prev)
        gemm(dgh[t], w_h, dh_prev, accumulate=op.separate_recurrent_grad)
        dh, dh_prev = dh_prev, dh
    return dgx, dgh, dh, dc


def recurrent_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not op.training:
        op.fail("backward is called with training=False; build the layer with training=True "
                "to differentiate it")
    if op.saved is None:
        op.fail("backward is called before forward")
    seq_len, batch, _, n_hidden, n_dir = op.dims
    names = op.input_names
    pd = dict(zip(names, propagate_down))
    dtype = grad_outputs[0].dtype
    param_grads = {name: np.zeros(grad_inputs[k].shape, dtype) for k, name in enumerate(names)
                   if name in ("weight_l0", "weight", "bias") and propagate_down[k]}
    state_shape = (op.num_layers, n_dir, batch, n_hidden)
    dh0 = np.empty(state_shape, dtype)
    dc0 = np.empty(state_shape, dtype) if op.has_cell else None
    d_out = grad_outputs[0]
    for layer in reversed(range(op.num_layers)):
        saved = op.saved[layer]
        layer_input = inputs[0] if layer == 0 else saved["input"]
        n_in = layer_input.shape[2]
        rows = seq_len * batch
        d_in = np.zeros(layer_input.shape, dtype) if (layer > 0 or pd["x"]) else None
        w_name = "weight_l0" if layer == 0 else "weight"
        for d in range(n_dir):
            state = saved["directions"][d]
            w_x, w_h, _ = op.layer_weights(inputs, layer, d)
            dgx, dgh, dh0[layer, d], dc_first = _bptt_direction(
                op, state, d_out[:, :, d * n_hidden:(d + 1) * n_hidden], grad_outputs[1][layer, d],
                grad_outputs[2][layer, d] if op.has_cell else None, w_h, d == 1)
            if op.has_cell:
                dc0[layer, d] = dc_first
            gx, gh = dgx.reshape(rows, -1), dgh.reshape(rows, -1)
            if d_in is not None:
                gemm(gx, w_x, d_in.reshape(rows, n_in), accumulate=True)
            if w_name in param_grads:
                dw = param_grads[w_name][d] if layer == 0 else param_grads[w_name][layer - 1, d]
                dw = dw.reshape(gx.shape[1], n_in + n_hidden)
                dw_x = np.empty((gx.shape[1], n_in), dtype)
                gemm(gx, layer_input.reshape(rows, n_in), dw_x, trans_a=True)
                dw[:, :n_in] += dw_x
                dw_h = np.empty((gx.shape[1], n_hidden), dtype)
                gemm(gh, state["h_prev"].reshape(rows, n_hidden), dw_h, trans_a=True)
                dw[:, n_in:] += dw_h
            if "bias" in param_grads:
                db = param_grads["bias"][layer, d].reshape(-1)
                db[:gx.shape[1]] += gx.sum(axis=0)
                if op.separate_recurrent_grad:   # GRU's b_hn sees the recurrent-side gradient
                    db[gx.shape[1]:] += gh[:, 2 * n_hidden:].sum(axis=0)
        if layer > 0:
            d_out = d_in if saved["mask"] is None else d_in * saved["mask"]
        elif pd["x"]:
            accumulate(grad_inputs[0], d_in, accum[0])
    for k, name in enumerate(names):
        if not propagate_down[k]:
            continue
        if name == "h":
            accumulate(grad_inputs[k], dh0, accum[k])
        elif name == "c":
            accumulate(grad_inputs[k], dc0, accum[k])
        elif name in param_grads:
            accumulate(grad_inputs[k], param_grads[name], accum[k])


# ------------------------------------------------------------------------------ grad rules
def _cell_graph(kind, x, h, c, w_x, w_h, bias, n_hidden, nonlinearity):
    """One time step built from F ops; w_x (In, G*H) and w_h (H, G*H) are transposed."""
    from .. import functions as F

    def part(v, k):
        return v[:, k * n_hidden:(k + 1) * n_hidden]

    if kind == "GRU":
        gx = F.affine(x, w_x, None if bias is None else bias[:3 * n_hidden])
        gh = F.affine(h, w_h)
        r = F.sigmoid(part(gx, 0) + part(gh, 0))
        z = F.sigmoid(part(gx, 1) + part(gh, 1))
        hidden_new = part(gh, 2)
        if bias is not None:
            hidden_new = hidden_new + F.broadcast(F.reshape(part(F.reshape(bias, (1, -1)), 3),
                                                            (1, n_hidden)), hidden_new.shape)
        n = F.tanh(part(gx, 2) + r * hidden_new)
        return (1 - z) * n + z * h, None
    pre = F.affine(x, w_x, bias) + F.affine(h, w_h)
    if kind == "RNN":
        return (F.relu(pre) if nonlinearity == "relu" else F.tanh(pre)), None
    c = F.sigmoid(part(pre, 1)) * c + F.sigmoid(part(pre, 0)) * F.tanh(part(pre, 2))
    return F.sigmoid(part(pre, 3)) * F.tanh(c), c


def unrolled_recurrent(kind, x, h, c, weight_l0, weight, bias, num_layers, bidirectional,
                       nonlinearity="tanh", masks=None):
    """The recurrent layer as a graph of F ops, one cell per time step (nnabla's layouts)."""
    from .. import functions as F
    from ..variable import Variable
    seq_len, batch, _ = x.shape
    n_dir, n_hidden = h.shape[1], h.shape[3]
    h_n, c_n = [], []
    layer_input = x
    for layer in range(num_layers):
        if masks is not None and masks[layer] is not None:
            layer_input = layer_input * Variable.from_numpy_array(masks[layer])
        n_in = layer_input.shape[2]
        steps = [layer_input[t] for t in range(seq_len)]
        outs = [[] for _ in range(seq_len)]
        for d in range(n_dir):
            w = weight_l0[d] if layer == 0 else weight[layer - 1, d]
            w = F.reshape(w, (-1, n_in + n_hidden))
            w_x = F.transpose(w[:, :n_in], (1, 0))
            w_h = F.transpose(w[:, n_in:], (1, 0))
            b = None if bias is None else F.reshape(bias[layer, d], (-1,))
            hh, cc = h[layer, d], (None if c is None else c[layer, d])
            for t in (reversed(range(seq_len)) if d == 1 else range(seq_len)):
                hh, cc = _cell_graph(kind, steps[t], hh, cc, w_x, w_h, b, n_hidden, nonlinearity)
                outs[t].append(hh)
            h_n.append(hh)
            c_n.append(cc)
        layer_input = F.stack(*[o[0] if n_dir == 1 else F.concatenate(*o, axis=1) for o in outs],
                              axis=0)
    shape = (num_layers, n_dir, batch, n_hidden)
    result = [layer_input, F.reshape(F.stack(*h_n, axis=0), shape)]
    if c is not None:
        result.append(F.reshape(F.stack(*c_n, axis=0), shape))
    return result


def _recurrent_grad(kind, grad_inputs, inputs, outputs, num_layers, dropout, bidirectional,
                    training, nonlinearity="tanh"):
    """Differentiate the unrolled layer at (proxies of) the inputs, weighted by grad_inputs."""
    from .. import functions as F
    from ..grad import grad
    if not training:
        raise ValueError("{}: grad is called with training=False; build the layer with "
                         "training=True to differentiate it".format(kind))
    node = next(o for o in outputs if o is not None).parent
    masks = None
    if training and dropout > 0 and num_layers > 1:
        if node.op.saved is None:
            raise ValueError("{}: with dropout, run forward before nn.grad (the gradient uses "
                             "the dropout masks that forward drew)".format(kind))
        masks = [s["mask"] for s in node.op.saved]
    # Proxies keep the inner differentiation local to this node (no path around it).
    proxies = [F.identity(v) for v in inputs]
    n_state = 3 if kind == "LSTM" else 2
    x, h = proxies[0], proxies[1]
    c = proxies[2] if kind == "LSTM" else None
    rest = proxies[n_state:]
    weight_l0 = rest[0]
    weight = rest[1] if num_layers > 1 else None
    bias = rest[-1] if len(rest) == (2 if num_layers > 1 else 1) + 1 else None
    ys = unrolled_recurrent(kind, x, h, c, weight_l0, weight, bias, num_layers, bidirectional,
                            nonlinearity, masks)
    # An output nobody holds gets a placeholder gradient (not of its shape): it adds nothing.
    used = [(y, g) for y, g in zip(ys, grad_inputs) if tuple(g.shape) == tuple(y.shape)]
    return grad([y for y, _ in used], proxies, grad_outputs=[g for _, g in used])


def rnn_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
             nonlinearity="tanh", dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("RNN", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training, nonlinearity)


def lstm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
              dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("LSTM", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training)


def gru_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
             dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("GRU", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training)
