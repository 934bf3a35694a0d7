"""CUDA launchers of RNN, LSTM and GRU: the CPU's algorithm on device arrays, in the CPU's
parameter layout. Forward and the time loop of backward are the CPU's own loops
(``ops/recurrent.py``'s ``run_layers`` and ``bptt_direction``) given ``DeviceArrays``.

Forward, per layer and direction: one ``blas.matmul`` for the input projections of all time
steps, then per time step one ``blas.matmul`` (the recurrent projection) and one gate kernel
(one thread per (batch, unit) element running the CPU's per-element cell formula, compiled
here as a device function). Backward through time likewise: per step one gate kernel and one
``blas.matmul`` for dh_prev, then per (layer, direction) the products giving dx and dW, and
column sums giving db. The states backward needs stay on the device (``op.saved_device``), in
buffers kept on the op across steps. Dropout masks between layers are drawn on the host from
the global numpy stream, as the CPU draws them, and copied up.
"""
import numpy as np
from numba import float64

from ..ops import recurrent as cpu_cells
from . import blas, device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

rnn_cell_forward_at = device_function(cpu_cells.rnn_cell_forward_at.py_func)
lstm_cell_forward_at = device_function(cpu_cells.lstm_cell_forward_at.py_func)
gru_cell_forward_at = device_function(cpu_cells.gru_cell_forward_at.py_func)
rnn_cell_backward_at = device_function(cpu_cells.rnn_cell_backward_at.py_func)
lstm_cell_backward_at = device_function(cpu_cells.lstm_cell_backward_at.py_func)
gru_cell_backward_at = device_function(cpu_cells.gru_cell_backward_at.py_func)


# ---------------------------------------------------------------------------- kernels
# One thread per (batch b, unit k) of a step; n_hidden = h.shape[1].
@kernel
def rnn_forward_kernel(xw, hw, bias, relu, h_out):
    i = cuda.grid(1)
    if i < h_out.size:
        rnn_cell_forward_at(xw, hw, bias, relu, h_out, i // h_out.shape[1], i % h_out.shape[1])


@kernel
def lstm_forward_kernel(xw, hw, bias, c_prev, h_out, c_out, gates):
    i = cuda.grid(1)
    if i < h_out.size:
        lstm_cell_forward_at(xw, hw, bias, c_prev, h_out, c_out, gates, i // h_out.shape[1],
                             i % h_out.shape[1])


@kernel
def gru_forward_kernel(xw, hw, bias, h_prev, h_out, gates, hidden_new):
    i = cuda.grid(1)
    if i < h_out.size:
        gru_cell_forward_at(xw, hw, bias, h_prev, h_out, gates, hidden_new, i // h_out.shape[1],
                            i % h_out.shape[1])


# The backward kernels first add this step's output gradient dy into dh (the CPU's
# ``dh += dy[t]``): each thread reads and writes only its own element of dh.
@kernel
def rnn_backward_kernel(dh, dy, h, relu, dg):
    i = cuda.grid(1)
    if i < dh.size:
        b = i // dh.shape[1]
        k = i % dh.shape[1]
        dh[b, k] += dy[b, k]
        rnn_cell_backward_at(dh, h, relu, dg, b, k)


@kernel
def lstm_backward_kernel(dh, dy, dc, gates, c, c_prev, dg):
    i = cuda.grid(1)
    if i < dh.size:
        b = i // dh.shape[1]
        k = i % dh.shape[1]
        dh[b, k] += dy[b, k]
        lstm_cell_backward_at(dh, dc, gates, c, c_prev, dg, b, k)


@kernel
def gru_backward_kernel(dh, dy, gates, hidden_new, h_prev, dgx, dgh, dh_prev):
    i = cuda.grid(1)
    if i < dh.size:
        b = i // dh.shape[1]
        k = i % dh.shape[1]
        dh[b, k] += dy[b, k]
        gru_cell_backward_at(dh, gates, hidden_new, h_prev, dgx, dgh, dh_prev, b, k)


@kernel
def copy3_kernel(src, dst):
    """dst[t, b, k] = src[t, b, k] for 3-d arrays of one shape, either strided (a direction's
    columns of y)."""
    i = cuda.grid(1)
    rows, cols = dst.shape[1], dst.shape[2]
    if i < dst.shape[0] * rows * cols:
        t, b, k = unravel3(i, rows, cols)
        dst[t, b, k] = src[t, b, k]


@kernel
def multiply_kernel(x, mask, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = x[i] * mask[i]


@kernel
def column_sums_kernel(g, out, accum):
    """out[j] (+)= sum over rows of g[:, j] (g may be strided), in float64."""
    j = cuda.grid(1)
    if j < out.size:
        acc = float64(0.0)
        for r in range(g.shape[0]):
            acc += g[r, j]
        store(out, j, acc, accum)


# ---------------------------------------------------------------------------- helpers
def _buffer(op, key, shape, dtype):
    """A device array kept on ``op`` under ``key`` across steps (reallocated when the shape or
    type changes): the saved states and work arrays of one node."""
    buffers = op.__dict__.setdefault("device_buffers", {})
    array = buffers.get(key)
    if array is None or array.shape != tuple(shape) or array.dtype != np.dtype(dtype):
        array = buffers[key] = device.empty(shape, dtype)
    return array


def _weights(op, inputs, layer, direction):
    """(W_x, W_h) of one (layer, direction) as (1, G*H, In) and (1, G*H, H) views of the
    weight input (the CPU's ``layer_weights`` without the copies)."""
    n_hidden = op.dims[3]
    if layer == 0:
        w = inputs[op.input_index("weight_l0")][direction]
    else:
        w = inputs[op.input_index("weight")][layer - 1, direction]
    gh = op.n_gates * n_hidden
    w3 = w.reshape(1, gh, w.size // gh)
    n_in = w3.shape[2] - n_hidden
    return w3[:, :, :n_in], w3[:, :, n_in:]


def _bias(op, inputs, layer, direction, dtype):
    n = op.n_bias_gates * op.dims[3]
    if op.has_input("bias"):
        return inputs[op.input_index("bias")][layer, direction].reshape(n)
    zeros = _buffer(op, "no bias", (n,), dtype)
    device.fill(zeros, 0)
    return zeros


def _cell_forward(op, xw, hw, bias, state, t):
    h = state["h"][t]
    if op.name == "RNN":
        device.launch(rnn_forward_kernel, h.size, xw, hw, bias, op.nonlinearity == "relu", h)
    elif op.name == "LSTM":
        device.launch(lstm_forward_kernel, h.size, xw, hw, bias, state["c_prev"][t], h,
                      state["c"][t], state["gates"][t])
    else:
        device.launch(gru_forward_kernel, h.size, xw, hw, bias, state["h_prev"][t], h,
                      state["gates"][t], state["hidden_new"][t])


def _cell_backward(op, dh, dy, dc, state, t, dgx, dgh, dh_prev):
    if op.name == "RNN":
        device.launch(rnn_backward_kernel, dh.size, dh, dy, state["h"][t],
                      op.nonlinearity == "relu", dgx)
    elif op.name == "LSTM":
        device.launch(lstm_backward_kernel, dh.size, dh, dy, dc, state["gates"][t],
                      state["c"][t], state["c_prev"][t], dgx)
    else:
        device.launch(gru_backward_kernel, dh.size, dh, dy, state["gates"][t],
                      state["hidden_new"][t], state["h_prev"][t], dgx, dgh, dh_prev)


def _batch_of_one(a):
    return a if a.ndim == 3 else a.reshape(1, *a.shape)


def _dropped(op, layer, x):
    mask = _buffer(op, ("mask", layer), x.shape, x.dtype)
    device.copy_up(op.dropout_mask(x.shape, x.dtype), mask)
    out = _buffer(op, ("dropped", layer), x.shape, x.dtype)
    device.launch(multiply_kernel, out.size, x.reshape(x.size), mask.reshape(mask.size),
                  out.reshape(out.size))
    return mask, out


def _copy(src, dst):
    if src.ndim == 3:   # into a direction's columns of y: strided
        device.launch(copy3_kernel, src.size, src, dst)
    else:
        device.copy(src, dst)


class DeviceArrays:
    """The array steps of the CPU's recurrent loops (``ops/recurrent.py``'s HostArrays) on
    device arrays: saved states in buffers kept on the op, weights as views, products by
    ``blas.matmul``, the cells as the gate kernels above."""
    buffer = staticmethod(_buffer)
    copy = staticmethod(_copy)
    dropped = staticmethod(_dropped)
    cell_forward = staticmethod(_cell_forward)
    cell_backward = staticmethod(_cell_backward)

    @staticmethod
    def work(name, shape, dtype):
        return device.workspace(name, shape[0] * shape[1], dtype).reshape(shape)

    @staticmethod
    def weights(op, inputs, layer, direction):
        w_x, w_h = _weights(op, inputs, layer, direction)
        return w_x, w_h, _bias(op, inputs, layer, direction, w_x.dtype)

    @staticmethod
    def matmul(a, b, out, trans_b=False, accum=False):
        blas.matmul(_batch_of_one(a), _batch_of_one(b), _batch_of_one(out), trans_b=trans_b,
                    accum=accum)


@forward("RNN", "LSTM", "GRU")
def recurrent_forward(op, inputs, outputs):
    op.saved_device = cpu_cells.run_layers(op, inputs, outputs, DeviceArrays)


# ---------------------------------------------------------------------------- backward
def _put(src, dst, accum):
    """dst (+)= src for contiguous device arrays of one size."""
    if accum:
        device.add_into(dst, src)
    else:
        device.copy(src, dst)


@backward("RNN", "LSTM", "GRU")
def recurrent_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not op.training:
        op.fail("backward is called with training=False; build the layer with training=True "
                "to differentiate it")
    if getattr(op, "saved_device", None) is None:
        op.fail("backward is called before forward")
    seq_len, batch, _, n_hidden, n_dir = op.dims
    index = {name: k for k, name in enumerate(op.input_names)}
    wanted = {name for name, k in index.items() if propagate_down[k]}
    rows = seq_len * batch
    d_out = output_grads[0]
    for layer in reversed(range(op.num_layers)):
        saved = op.saved_device[layer]
        layer_input = inputs[0] if layer == 0 else saved["input"]
        n_in = layer_input.shape[2]
        if layer > 0:
            d_in = _buffer(op, ("d_in", layer), layer_input.shape, layer_input.dtype)
            device.fill(d_in, 0)
        else:
            d_in = input_grads[0] if "x" in wanted else None
        w_name = "weight_l0" if layer == 0 else "weight"
        for d in range(n_dir):
            state = saved["directions"][d]
            w_x, w_h = _weights(op, inputs, layer, d)
            gh = w_x.shape[1]
            dgx, dgh, dh, dc = cpu_cells.bptt_direction(
                op, layer, d, state, d_out[:, :, d * n_hidden:(d + 1) * n_hidden],
                output_grads[1][layer, d], output_grads[2][layer, d] if op.has_cell else None,
                w_h, DeviceArrays)
            if "h" in wanted:
                _put(dh, input_grads[index["h"]][layer, d], accum[index["h"]])
            if op.has_cell and "c" in wanted:
                _put(dc, input_grads[index["c"]][layer, d], accum[index["c"]])
            gx, gr = dgx.reshape(1, rows, gh), dgh.reshape(1, rows, gh)
            if d_in is not None:   # both directions add into one dx
                first = layer == 0 and d == 0
                blas.matmul(gx, w_x, d_in.reshape(1, rows, n_in),
                            accum=accum[0] if first else True)
            if w_name in wanted:
                k = index[w_name]
                dw = input_grads[k][d] if layer == 0 else input_grads[k][layer - 1, d]
                dw = dw.reshape(1, gh, n_in + n_hidden)
                blas.matmul(gx, layer_input.reshape(1, rows, n_in), dw[:, :, :n_in],
                            trans_a=True, accum=accum[k])
                blas.matmul(gr, state["h_prev"].reshape(1, rows, n_hidden), dw[:, :, n_in:],
                            trans_a=True, accum=accum[k])
            if "bias" in wanted:
                k = index["bias"]
                db = input_grads[k][layer, d].reshape(op.n_bias_gates * n_hidden)
                device.launch(column_sums_kernel, gh, gx.reshape(rows, gh), db[:gh], accum[k])
                if op.separate_recurrent_grad:   # GRU's b_hn sees the recurrent-side gradient
                    device.launch(column_sums_kernel, n_hidden,
                                  gr.reshape(rows, gh)[:, 2 * n_hidden:], db[gh:], accum[k])
        if layer > 0:
            if saved["mask"] is None:
                d_out = d_in
            else:
                dropped = _buffer(op, ("d_dropped", layer), d_in.shape, d_in.dtype)
                device.launch(multiply_kernel, d_in.size, d_in.reshape(d_in.size),
                              saved["mask"].reshape(d_in.size), dropped.reshape(d_in.size))
                d_out = dropped
