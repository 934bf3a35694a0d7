"""RNN / LSTM / GRU as one ONNX RNN / LSTM / GRU node per layer.

nnabla keeps, per layer and direction, one weight (G, H, In + H) holding the input then the
recurrent weights of each gate, and one bias per gate; ONNX wants W (D, G*H, In), R (D, G*H, H)
and B (D, 2*G*H) = [input biases, recurrent biases], with its own gate order. nnabla's GRU new
gate is tanh(W_n x + b_in + r * (U_n h + b_hn)), ONNX's with ``linear_before_reset=1``. The
layers are chained, y (T, B, D*H) from ONNX's Y (T, D, B, H); dropout between layers is a
training-time effect and is left out.
"""
import numpy as np

from ..dependencies import INT64
from .table import exports

# nnabla gate index for each ONNX gate position (None: no gate axis), and the gate count.
GATE_ORDER = {"RNN": None, "LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2]}   # iofc; zrh
N_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _pick(g, x, index, axis=0):
    """x[index] along ``axis`` (that axis removed)."""
    return g.op("Gather", [x, g.const(np.asarray(index, np.int64), INT64)], axis=axis)


def _zeros(g, dirs, size):
    return g.const(np.zeros((dirs, size), np.float32))


def _weights(g, n, layer, n_in, hidden, dirs):
    """W and R of one layer: its weight's gates reordered, split into input and recurrent."""
    w = n.input("weight_l0") if layer == 0 else _pick(g, n.input("weight"), layer - 1)
    order = GATE_ORDER[n.type]
    if order is not None:
        w = g.op("Gather", [w, g.ints(order)], axis=1)
    w = g.reshape(w, [dirs, N_GATES[n.type] * hidden, n_in + hidden])
    return (g.slice(w, [0], [n_in], [2]), g.slice(w, [n_in], [n_in + hidden], [2]))


def _bias(g, n, layer, hidden, dirs):
    """B of one layer: nnabla's biases on the input side, GRU's b_hn on the recurrent side."""
    bias = n.input("bias")
    if bias is None:
        return None
    b = _pick(g, bias, layer)
    gates = N_GATES[n.type]
    order = GATE_ORDER[n.type]
    w_side = g.reshape(b if order is None else g.op("Gather", [b, g.ints(order)], axis=1),
                       [dirs, gates * hidden])
    if n.type == "GRU":
        r_side = g.op("Concat", [_zeros(g, dirs, 2 * hidden),
                                 g.reshape(_pick(g, b, 3, axis=1), [dirs, hidden])], axis=1)
    else:
        r_side = _zeros(g, dirs, gates * hidden)
    return g.op("Concat", [w_side, r_side], axis=1)


@exports("RNN", "LSTM", "GRU")
def recurrent(g, n):
    args = n.args
    seq_len, batch, n_in = n.in_shapes[0]
    layers, dirs, _, hidden = n.shape("h")
    lstm = n.type == "LSTM"
    attrs = dict(hidden_size=int(hidden), direction="bidirectional" if args["bidirectional"] else "forward")
    if n.type == "RNN":
        attrs["activations"] = ["Relu" if args["nonlinearity"] == "relu" else "Tanh"] * dirs
    if n.type == "GRU":
        attrs["linear_before_reset"] = 1
    x = n.x
    h_last, c_last = [], []
    for layer in range(layers):
        w, r = _weights(g, n, layer, n_in if layer == 0 else dirs * hidden, hidden, dirs)
        inputs = [x, w, r, _bias(g, n, layer, hidden, dirs), None, _pick(g, n.input("h"), layer)]
        if lstm:
            inputs.append(_pick(g, n.input("c"), layer))
        outs = g.op(n.type, inputs, n_outputs=3 if lstm else 2, **attrs)
        x = g.reshape(g.transpose(outs[0], [0, 2, 1, 3]), [seq_len, batch, dirs * hidden])
        h_last.append(g.unsqueeze(outs[1], [0]))
        if lstm:
            c_last.append(g.unsqueeze(outs[2], [0]))
    result = [x, g.op("Concat", h_last, axis=0)]
    if lstm:
        result.append(g.op("Concat", c_last, axis=0))
    return result
