"""Grad rules of the recurrent ops (``ops/recurrent.py``): graphs of F ops, differentiable again.

RNN, LSTM and GRU's rules differentiate the unrolled cell graphs (their BPTT kernels are in
``ops/recurrent.py``).

Backward walks the layers from the top and, in each direction, the time steps in the reverse of
the order forward ran them. Per step a fused kernel turns the gradient of the step's state into
the gradients of the gate pre-activations, and one small GEMM carries it to the previous state;
the weight, bias and input gradients of a whole direction are then three big GEMMs over all
time steps.

The grad rules (``nn.grad``) rebuild the layer unrolled in time from ``F`` ops (affine, slices,
sigmoid, tanh, ...) and differentiate that graph, so the result is differentiable again.
"""
from .. import functions as F
from ..composite_functions import lstm_cell_update
from ..grad import grad
from ..ops.registry import grad_rule
from ..variable import Variable


# ------------------------------------------------------------------------------ grad rules
def _cell_graph(kind, x, h, c, w_x, w_h, bias, n_hidden, nonlinearity):
    """One time step built from F ops; w_x (In, G*H) and w_h (H, G*H) are transposed."""
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
    return lstm_cell_update(part(pre, 0), part(pre, 1), part(pre, 2), part(pre, 3), c)


def unrolled_recurrent(kind, x, h, c, weight_l0, weight, bias, num_layers, bidirectional,
                       nonlinearity="tanh", masks=None):
    """The recurrent layer as a graph of F ops, one cell per time step (nnabla's layouts)."""
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


@grad_rule('RNN')
def rnn_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
             nonlinearity="tanh", dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("RNN", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training, nonlinearity)


@grad_rule('LSTM')
def lstm_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
              dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("LSTM", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training)


@grad_rule('GRU')
def gru_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, num_layers=1,
             dropout=0.0, bidirectional=False, training=True):
    return _recurrent_grad("GRU", grad_inputs, inputs, outputs, num_layers, dropout,
                           bidirectional, training)
