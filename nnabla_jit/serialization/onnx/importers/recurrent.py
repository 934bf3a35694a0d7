"""ONNX RNN / LSTM / GRU as nnabla's single-layer RNN / LSTM / GRU (the reverse of
``exporters/recurrent.py``). The weights must be constants: they are rearranged into nnabla's
layout (gates reordered, input and recurrent weights side by side, biases summed where nnabla
keeps one per gate) and registered under the names of ONNX's W and B."""
import numpy as np

from .... import functions as F
from ..builder import Unsupported
from .table import imports

# nnabla gate k is ONNX gate ORDER[k] (ONNX: LSTM iofc, GRU zrh).
ORDER = {"RNN": [0], "LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2]}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def _check(c, node, dirs):
    if node.attr("direction", "forward") not in ("forward", "bidirectional"):
        raise Unsupported("direction '{}' is not supported".format(node.attr("direction")))
    if node.attr("layout", 0) or node.attr("clip") is not None or node.attr("input_forget", 0):
        raise Unsupported("layout=1, clip and input_forget are not supported")
    if node.attr("activation_alpha") or node.attr("activation_beta"):
        raise Unsupported("activation_alpha / activation_beta are not supported")
    if node.input(4):
        raise Unsupported("sequence_lens is not supported (all sequences have the full length)")
    if node.op_type == "LSTM" and node.input(7) and np.any(c.const(node.input(7), "P")):
        raise Unsupported("peepholes are not supported")
    if node.op_type == "GRU" and node.attr("linear_before_reset", 0) != 1:
        raise Unsupported("linear_before_reset=0 is not supported (nnabla's GRU resets after "
                          "the recurrent product)")
    activations = node.attr("activations")
    if node.op_type == "RNN":
        kinds = set(activations or ["Tanh"])
        if len(kinds) != 1 or not kinds <= {"Tanh", "Relu"}:
            raise Unsupported("activations {} are not supported".format(activations))
        return "relu" if kinds == {"Relu"} else "tanh"
    if activations and list(activations) != DEFAULT_ACTIVATIONS[node.op_type] * dirs:
        raise Unsupported("activations {} are not supported".format(activations))
    return None


def _state(c, name, shape):
    """An initial state (D, B, H) as nnabla's (1, D, B, H); zeros when absent."""
    if name is None:
        return F.constant(0.0, (1,) + shape)
    return F.reshape(c.var(name), (1,) + shape)


@imports("RNN", "LSTM", "GRU")
def recurrent(c, node):
    x = c.var(node.inputs[0])
    w = c.const(node.inputs[1], "W")
    r = c.const(node.inputs[2], "R")
    dirs, gates_hidden, n_in = w.shape
    hidden = node.attr("hidden_size") or r.shape[-1]
    nonlinearity = _check(c, node, dirs)
    order = ORDER[node.op_type]
    gates = len(order)
    split = (dirs, gates, hidden)
    weight = np.concatenate([w.reshape(split + (n_in,))[:, order],
                             r.reshape(split + (hidden,))[:, order]], axis=-1)
    bias = None
    if node.input(3):
        b = c.const(node.inputs[3], "B").reshape((dirs, 2) + split[1:])[:, :, order]
        if node.op_type == "GRU":   # (r, z) sums, then the new gate's b_in and b_hn
            b = np.concatenate([b[:, 0, :2] + b[:, 1, :2], b[:, :, 2]], axis=1)
        else:
            b = b[:, 0] + b[:, 1]
        shape = (1, dirs) + b.shape[1:] if gates > 1 else (1, dirs, hidden)
        bias = c.parameter(node.inputs[3], b.reshape(shape))
    if gates == 1:
        weight = weight[:, 0]
    weight_l0 = c.parameter(node.inputs[1], weight)
    seq_len, batch = x.shape[:2]
    state = (dirs, batch, hidden)
    h = _state(c, node.input(5), state)
    args = dict(num_layers=1, bidirectional=dirs == 2, training=False)
    if node.op_type == "LSTM":
        y, h_n, c_n = F.lstm(x, h, _state(c, node.input(6), state), weight_l0, None, bias, **args)
    elif node.op_type == "GRU":
        y, h_n = F.gru(x, h, weight_l0, None, bias, **args)
    else:
        y, h_n = F.rnn(x, h, weight_l0, None, bias, nonlinearity=nonlinearity, **args)
    outputs = [F.transpose(F.reshape(y, (seq_len, batch, dirs, hidden)), (0, 2, 1, 3)),
               F.reshape(h_n, state)]
    if node.op_type == "LSTM":
        outputs.append(F.reshape(c_n, state))
    return outputs
