"""Recurrent layers: RNN (tanh/relu), LSTM and GRU, each one registry op over whole sequences.

Layouts are nnabla's (checked against nnabla 1.39 numerically):

- x (T, B, I), h and c (L, D, B, H), y (T, B, D*H), h_n and c_n (L, D, B, H), where D is 2 for
  bidirectional layers; the reverse direction reads the sequence from t = T-1 down to 0 and its
  outputs fill y[..., H:2H].
- weight_l0 (D, [G,] H, I + H) and weight (L-1, D, [G,] H, D*H + H): for every gate, the input
  weights then the recurrent weights along the last axis. G = 4 for LSTM in the order
  (input, forget, cell, output), G = 3 for GRU in the order (reset, update, new); RNN has no
  gate axis.
- bias (L, D, [4,] H): one bias per gate; GRU has four, (reset, update, new-input,
  new-hidden), because its new gate is tanh(W_n x + b_in + r * (U_n h + b_hn)).

Forward runs, per layer and direction, one GEMM for the input projections of all time steps,
then a time loop of one small GEMM (the recurrent projection) and one fused gate kernel per
step. What backward (BPTT, below) needs is saved on the op instance.
With ``training`` and ``dropout > 0``, the inputs of layers 1..L-1 are dropped out (as cuDNN
and nnabla's CUDA backend do; nnabla's CPU backend ignores ``dropout``).
"""
import math

import numpy as np
from numba import njit

from .. import random as nn_random
from .blas import gemm
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ cell formulas
# One (batch b, hidden unit k) element of a step, shared by the CPU kernels below (a loop over
# the step's elements) and the CUDA kernels of ``cuda_ops/recurrent.py`` (one thread each), so
# both sides compute one cell. They are leaves (no call to another numba function), so the
# CUDA side can compile their ``py_func`` as device functions.
@njit(inline="always")
def rnn_cell_forward_at(xw, hw, bias, relu, h_out, b, k):
    """h = act(x W^T + h_prev U^T + b); xw, hw (B, H)."""
    pre = xw[b, k] + hw[b, k] + bias[k]
    if relu:
        h_out[b, k] = pre if pre > 0 else 0.0
    else:
        h_out[b, k] = math.tanh(pre)


@njit(inline="always")
def lstm_cell_forward_at(xw, hw, bias, c_prev, h_out, c_out, gates, b, k):
    """xw, hw (B, 4H) in gate order (i, f, g, o); ``gates`` keeps the activated gates for
    backward. The same update built from F ops: ``composite_functions.lstm_cell_update``."""
    n_hidden = h_out.shape[1]
    i = 1.0 / (1.0 + math.exp(-(xw[b, k] + hw[b, k] + bias[k])))
    f = 1.0 / (1.0 + math.exp(-(xw[b, n_hidden + k] + hw[b, n_hidden + k] + bias[n_hidden + k])))
    g = math.tanh(xw[b, 2 * n_hidden + k] + hw[b, 2 * n_hidden + k] + bias[2 * n_hidden + k])
    o = 1.0 / (1.0 + math.exp(-(xw[b, 3 * n_hidden + k] + hw[b, 3 * n_hidden + k]
                                + bias[3 * n_hidden + k])))
    c = f * c_prev[b, k] + i * g
    c_out[b, k] = c
    h_out[b, k] = o * math.tanh(c)
    gates[b, k] = i
    gates[b, n_hidden + k] = f
    gates[b, 2 * n_hidden + k] = g
    gates[b, 3 * n_hidden + k] = o


@njit(inline="always")
def gru_cell_forward_at(xw, hw, bias, h_prev, h_out, gates, hidden_new, b, k):
    """xw, hw (B, 3H) in gate order (r, z, n), bias (4H) = (b_r, b_z, b_in, b_hn). Keeps the
    activated gates and U_n h + b_hn for backward."""
    n_hidden = h_out.shape[1]
    r = 1.0 / (1.0 + math.exp(-(xw[b, k] + hw[b, k] + bias[k])))
    z = 1.0 / (1.0 + math.exp(-(xw[b, n_hidden + k] + hw[b, n_hidden + k] + bias[n_hidden + k])))
    hn = hw[b, 2 * n_hidden + k] + bias[3 * n_hidden + k]
    n = math.tanh(xw[b, 2 * n_hidden + k] + bias[2 * n_hidden + k] + r * hn)
    h_out[b, k] = (1.0 - z) * n + z * h_prev[b, k]
    gates[b, k] = r
    gates[b, n_hidden + k] = z
    gates[b, 2 * n_hidden + k] = n
    hidden_new[b, k] = hn


@njit(inline="always")
def rnn_cell_backward_at(dh, h, relu, dg, b, k):
    """dg = dh * act'(pre), from the step's output h."""
    if relu:
        dg[b, k] = dh[b, k] if h[b, k] > 0 else 0.0
    else:
        dg[b, k] = dh[b, k] * (1.0 - h[b, k] * h[b, k])


@njit(inline="always")
def lstm_cell_backward_at(dh, dc, gates, c, c_prev, dg, b, k):
    """Gate pre-activation gradients (i, f, g, o) of one step. ``dc`` holds the gradient of
    c_t from later steps on entry and that of c_{t-1} on exit."""
    n_hidden = dh.shape[1]
    i = gates[b, k]
    f = gates[b, n_hidden + k]
    g = gates[b, 2 * n_hidden + k]
    o = gates[b, 3 * n_hidden + k]
    tc = math.tanh(c[b, k])
    dct = dc[b, k] + dh[b, k] * o * (1.0 - tc * tc)
    dg[b, k] = dct * g * i * (1.0 - i)
    dg[b, n_hidden + k] = dct * c_prev[b, k] * f * (1.0 - f)
    dg[b, 2 * n_hidden + k] = dct * i * (1.0 - g * g)
    dg[b, 3 * n_hidden + k] = dh[b, k] * tc * o * (1.0 - o)
    dc[b, k] = dct * f


@njit(inline="always")
def gru_cell_backward_at(dh, gates, hidden_new, h_prev, dgx, dgh, dh_prev, b, k):
    """Gradients of one GRU step: of the input projections (dgx), of the recurrent projections
    (dgh: the new gate's is scaled by r) and the direct part z * dh of dh_prev."""
    n_hidden = dh.shape[1]
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


# ------------------------------------------------------------------ CPU kernels: one step
@njit(cache=True)
def rnn_cell_forward(xw, hw, bias, relu, h_out):
    for b in range(h_out.shape[0]):
        for k in range(h_out.shape[1]):
            rnn_cell_forward_at(xw, hw, bias, relu, h_out, b, k)


@njit(cache=True)
def lstm_cell_forward(xw, hw, bias, c_prev, h_out, c_out, gates):
    for b in range(h_out.shape[0]):
        for k in range(h_out.shape[1]):
            lstm_cell_forward_at(xw, hw, bias, c_prev, h_out, c_out, gates, b, k)


@njit(cache=True)
def gru_cell_forward(xw, hw, bias, h_prev, h_out, gates, hidden_new):
    for b in range(h_out.shape[0]):
        for k in range(h_out.shape[1]):
            gru_cell_forward_at(xw, hw, bias, h_prev, h_out, gates, hidden_new, b, k)


@njit(cache=True)
def rnn_cell_backward(dh, h, relu, dg):
    for b in range(dh.shape[0]):
        for k in range(dh.shape[1]):
            rnn_cell_backward_at(dh, h, relu, dg, b, k)


@njit(cache=True)
def lstm_cell_backward(dh, dc, gates, c, c_prev, dg):
    for b in range(dh.shape[0]):
        for k in range(dh.shape[1]):
            lstm_cell_backward_at(dh, dc, gates, c, c_prev, dg, b, k)


@njit(cache=True)
def gru_cell_backward(dh, gates, hidden_new, h_prev, dgx, dgh, dh_prev):
    for b in range(dh.shape[0]):
        for k in range(dh.shape[1]):
            gru_cell_backward_at(dh, gates, hidden_new, h_prev, dgx, dgh, dh_prev, b, k)


# ------------------------------------------------------------------ the layer and time loops
# One algorithm on host and device arrays: the loops below take ``arrays``, the array steps
# they need (HostArrays here, DeviceArrays in ``cuda_ops/recurrent.py``).
class HostArrays:
    """The array steps of the recurrent loops on NumPy arrays."""

    @staticmethod
    def buffer(op, key, shape, dtype):
        """A new array for what a step saves (``key`` names it: the device keeps one per key)."""
        return np.empty(shape, dtype)

    @staticmethod
    def work(name, shape, dtype):
        """A scratch array used only within one time step."""
        return np.empty(shape, dtype)

    @staticmethod
    def weights(op, inputs, layer, direction):
        return op.layer_weights(inputs, layer, direction)

    @staticmethod
    def matmul(a, b, out, trans_b=False, accum=False):
        """out (+)= a @ op(b) for 2-d a and out."""
        gemm(a, b, out, trans_b=trans_b, accumulate=accum)

    @staticmethod
    def copy(src, dst):
        dst[...] = src

    @staticmethod
    def dropped(op, layer, x):
        """(the dropout mask of layer ``layer``'s input x, x times it)."""
        mask = op.dropout_mask(x.shape, x.dtype)
        return mask, x * mask

    @staticmethod
    def cell_forward(op, xw, hw, bias, state, t):
        op.cell_forward(xw, hw, bias, state, t)

    @staticmethod
    def cell_backward(op, dh, dy, dc, state, t, dgx, dgh, dh_prev):
        """One step back, after adding the step's output gradient ``dy`` into dh."""
        dh += dy
        op.cell_backward(dh, dc, state, t, dgx, dgh, dh_prev)


def time_order(seq_len, reverse):
    return range(seq_len - 1, -1, -1) if reverse else range(seq_len)


def run_layers(op, inputs, outputs, arrays):
    """Forward through the layers and directions; returns what backward reads, per layer: its
    input (after dropout), the dropout mask and each direction's states."""
    seq_len, _, _, n_hidden, n_dir = op.dims
    y = outputs[0]
    layer_input = inputs[0]
    saved = []
    for layer in range(op.num_layers):
        mask = None
        if layer > 0 and op.training and op.dropout > 0:
            mask, layer_input = arrays.dropped(op, layer, layer_input)
        last = layer == op.num_layers - 1
        out = y if last else arrays.buffer(op, ("out", layer), y.shape, y.dtype)
        directions = []
        for d in range(n_dir):
            state = run_direction(op, inputs, layer, d, layer_input, arrays)
            arrays.copy(state["h"], out[:, :, d * n_hidden:(d + 1) * n_hidden])
            final = 0 if d == 1 else seq_len - 1
            arrays.copy(state["h"][final], outputs[1][layer, d])
            if op.has_cell:
                arrays.copy(state["c"][final], outputs[2][layer, d])
            directions.append(state)
        saved.append({"input": layer_input if layer > 0 else None, "mask": mask,
                      "directions": directions})
        layer_input = out
    return saved


def run_direction(op, inputs, layer, direction, layer_input, arrays):
    """The time loop of one (layer, direction). Arrays are indexed by time t, whatever the
    direction: ``h_prev[t]`` is the state fed to step t, ``h[t]`` the state it produced."""
    seq_len, batch, n_in = layer_input.shape
    n_hidden = op.dims[3]
    gh = op.n_gates * n_hidden
    dtype = layer_input.dtype
    w_x, w_h, bias = arrays.weights(op, inputs, layer, direction)
    key = (layer, direction)
    xw = arrays.buffer(op, ("xw",) + key, (seq_len, batch, gh), dtype)
    arrays.matmul(layer_input.reshape(seq_len * batch, n_in), w_x,
                  xw.reshape(seq_len * batch, gh), trans_b=True)
    hw = arrays.work("recurrent hw", (batch, gh), dtype)
    widths = (("h_prev", 1), ("h", 1)) + tuple(op.state_widths)
    state = {name: arrays.buffer(op, (name,) + key, (seq_len, batch, width * n_hidden), dtype)
             for name, width in widths}
    h0 = inputs[1][layer, direction]
    c0 = inputs[2][layer, direction] if op.has_cell else None
    prev_t = None
    for t in time_order(seq_len, direction == 1):
        arrays.copy(h0 if prev_t is None else state["h"][prev_t], state["h_prev"][t])
        if op.has_cell:
            arrays.copy(c0 if prev_t is None else state["c"][prev_t], state["c_prev"][t])
        arrays.matmul(state["h_prev"][t], w_h, hw, trans_b=True)
        arrays.cell_forward(op, xw[t], hw, bias, state, t)
        prev_t = t
    return state


def bptt_direction(op, layer, direction, state, dy, dh_last, dc_last, w_h, arrays):
    """Back through the time loop of one (layer, direction). ``dy`` (T, B, H): gradient of this
    direction's outputs; returns the gate gradients (input and recurrent side, by time) and
    the gradients of the initial h and c."""
    seq_len, batch, n_hidden = dy.shape
    gh = op.n_gates * n_hidden
    dtype = dy.dtype
    key = (layer, direction)
    dgx = arrays.buffer(op, ("dgx",) + key, (seq_len, batch, gh), dtype)
    dgh = arrays.buffer(op, ("dgh",) + key, (seq_len, batch, gh), dtype) \
        if op.separate_recurrent_grad else dgx
    dh = arrays.buffer(op, ("dh", 0), (batch, n_hidden), dtype)
    dh_prev = arrays.buffer(op, ("dh", 1), (batch, n_hidden), dtype)
    arrays.copy(dh_last, dh)
    dc = None
    if op.has_cell:
        dc = arrays.buffer(op, ("dc",), (batch, n_hidden), dtype)
        arrays.copy(dc_last, dc)
    for t in time_order(seq_len, direction != 1):
        arrays.cell_backward(op, dh, dy[t], dc, state, t, dgx[t], dgh[t], dh_prev)
        arrays.matmul(dgh[t], w_h, dh_prev, accum=op.separate_recurrent_grad)
        dh, dh_prev = dh_prev, dh
    return dgx, dgh, dh, dc


def recurrent_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not op.training:
        op.fail("backward is called with training=False; build the layer with training=True "
                "to differentiate it")
    if op.saved is None:
        op.fail("backward is called before forward: backward reads the states forward saves; "
                "call forward() on this graph first")
    seq_len, batch, _, n_hidden, n_dir = op.dims
    names = op.input_names
    pd = dict(zip(names, propagate_down))
    dtype = output_grads[0].dtype
    param_grads = {name: np.zeros(input_grads[k].shape, dtype) for k, name in enumerate(names)
                   if name in ("weight_l0", "weight", "bias") and propagate_down[k]}
    state_shape = (op.num_layers, n_dir, batch, n_hidden)
    dh0 = np.empty(state_shape, dtype)
    dc0 = np.empty(state_shape, dtype) if op.has_cell else None
    d_out = output_grads[0]
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
            dgx, dgh, dh0[layer, d], dc_first = bptt_direction(
                op, layer, d, state, d_out[:, :, d * n_hidden:(d + 1) * n_hidden],
                output_grads[1][layer, d], output_grads[2][layer, d] if op.has_cell else None, w_h,
                HostArrays)
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
            accumulate(input_grads[0], d_in, accum[0])
    for k, name in enumerate(names):
        if not propagate_down[k]:
            continue
        if name == "h":
            accumulate(input_grads[k], dh0, accum[k])
        elif name == "c":
            accumulate(input_grads[k], dc0, accum[k])
        elif name in param_grads:
            accumulate(input_grads[k], param_grads[name], accum[k])


class _Recurrent(Op):
    """What RNN, LSTM and GRU share: shape checks, the layer/direction/time loops, saving."""
    n_gates = 1        # G: gate blocks in the weights
    n_bias_gates = 1   # bias blocks (GRU has a fourth, the recurrent bias of its new gate)
    has_cell = False   # LSTM carries c
    separate_recurrent_grad = False   # GRU: the recurrent projections get their own gradient
    state_widths = ()  # (name, width in units of H) of what a cell saves per step besides h
    saved = None       # per layer: its input, dropout mask and each direction's states

    def setup(self, *shapes):
        names = self.input_names
        x, h = shapes[0], shapes[1]
        if len(x) != 3:
            self.fail("x must be (T, B, I), got shape {}", x)
        if x[0] == 0:
            self.fail("x of shape {} has no time steps (nnabla refuses an empty sequence)", x)
        if self.num_layers < 1:
            self.fail("num_layers must be at least 1, got {}", self.num_layers)
        if not 0.0 <= self.dropout < 1.0:
            self.fail("dropout must be in [0, 1), got {}", self.dropout)
        n_dir = 2 if self.bidirectional else 1
        if len(h) != 4 or h[0] != self.num_layers or h[1] != n_dir or h[2] != x[1]:
            self.fail("h of shape {} must be (num_layers, num_directions, batch_size, hidden_size) "
                      "= ({}, {}, {}, H) for x of shape {}", h, self.num_layers, n_dir, x[1], x)
        seq_len, batch, n_in = x
        n_hidden = h[3]
        self.dims = (seq_len, batch, n_in, n_hidden, n_dir)
        if self.has_cell and tuple(shapes[2]) != tuple(h):
            self.fail("c of shape {} must have the shape of h, {}", shapes[2], h)
        gate = (self.n_gates,) if self.n_gates > 1 else ()   # RNN's weights have no gate axis
        bias_gate = (self.n_bias_gates,) if gate else ()
        want = {"weight_l0": (n_dir,) + gate + (n_hidden, n_in + n_hidden),
                "bias": (self.num_layers, n_dir) + bias_gate + (n_hidden,)}
        if self.num_layers > 1:
            want["weight"] = ((self.num_layers - 1, n_dir) + gate
                              + (n_hidden, n_dir * n_hidden + n_hidden))
        elif "weight" in names:
            self.fail("weight cannot be given when num_layers == 1 (got shape {})",
                      shapes[names.index("weight")])
        if self.num_layers > 1 and "weight" not in names:
            self.fail("weight of shape {} is required when num_layers = {}", want["weight"],
                      self.num_layers)
        for name, shape in want.items():
            if name in names and tuple(shapes[names.index(name)]) != shape:
                self.fail("{} of shape {} must have shape {} for x {}, h {}", name,
                          tuple(shapes[names.index(name)]), shape, x, h)
        out = [(seq_len, batch, n_dir * n_hidden), tuple(h)]
        return out + [tuple(h)] if self.has_cell else out

    # -- weights of one (layer, direction), as 2-d matrices --------------------------------
    def layer_weights(self, inputs, layer, direction):
        """(W_x (G*H, In), W_h (G*H, H), bias (n_bias_gates*H)) as contiguous arrays."""
        n_hidden = self.dims[3]
        if layer == 0:
            w = inputs[self.input_index("weight_l0")][direction]
        else:
            w = inputs[self.input_index("weight")][layer - 1, direction]
        w = w.reshape(self.n_gates * n_hidden, -1)
        n_in = w.shape[1] - n_hidden
        if self.has_input("bias"):
            bias = inputs[self.input_index("bias")][layer, direction].reshape(-1)
        else:
            bias = np.zeros(self.n_bias_gates * n_hidden, w.dtype)
        return np.ascontiguousarray(w[:, :n_in]), np.ascontiguousarray(w[:, n_in:]), bias

    def forward(self, inputs, outputs):
        self.saved = run_layers(self, inputs, outputs, HostArrays)

    def dropout_mask(self, shape, dtype):
        """The inverted-dropout mask of a layer's input, drawn from the global numpy stream
        (the CUDA launchers draw it here too, so both paths drop the same units)."""
        keep = 1.0 - self.dropout
        return ((nn_random.prng.rand(*shape) < keep) / keep).astype(dtype)

    backward = recurrent_backward

    def grad_depends_input_data(self, i, j):
        # BPTT reads the states forward saved, the weights, and x for weight_l0's gradient.
        return self.input_names[j] in ("weight_l0", "weight") or (
            j == 0 and self.input_names[i] == "weight_l0")


@register
class RNN(_Recurrent):
    def cell_forward(self, xw, hw, bias, state, t):
        rnn_cell_forward(xw, hw, bias, self.nonlinearity == "relu", state["h"][t])

    def cell_backward(self, dh, dc, state, t, dgx, dgh, dh_prev):
        rnn_cell_backward(dh, state["h"][t], self.nonlinearity == "relu", dgx)


@register
class LSTM(_Recurrent):
    n_gates = 4
    n_bias_gates = 4
    has_cell = True

    state_widths = (("c_prev", 1), ("c", 1), ("gates", 4))

    def cell_forward(self, xw, hw, bias, state, t):
        lstm_cell_forward(xw, hw, bias, state["c_prev"][t], state["h"][t], state["c"][t],
                          state["gates"][t])

    def cell_backward(self, dh, dc, state, t, dgx, dgh, dh_prev):
        lstm_cell_backward(dh, dc, state["gates"][t], state["c"][t], state["c_prev"][t], dgx)


@register
class GRU(_Recurrent):
    n_gates = 3
    n_bias_gates = 4
    separate_recurrent_grad = True

    state_widths = (("gates", 3), ("hidden_new", 1))

    def cell_forward(self, xw, hw, bias, state, t):
        gru_cell_forward(xw, hw, bias, state["h_prev"][t], state["h"][t], state["gates"][t],
                         state["hidden_new"][t])

    def cell_backward(self, dh, dc, state, t, dgx, dgh, dh_prev):
        gru_cell_backward(dh, state["gates"][t], state["hidden_new"][t], state["h_prev"][t],
                             dgx, dgh, dh_prev)

