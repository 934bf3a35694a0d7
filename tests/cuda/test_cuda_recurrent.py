"""RNN, LSTM and GRU on the device against the CPU kernels (tiny shapes: the simulator is slow)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.solvers as S
from nnabla_jit import random as nn_random
from nnabla_jit.cuda_ops import device

from .compare import assert_same_on_cuda, cuda_context, run

rng = np.random.RandomState(0)
N_GATES = {"rnn": 1, "lstm": 4, "gru": 3}
N_BIAS_GATES = {"rnn": 1, "lstm": 4, "gru": 4}
SEQ, BATCH, N_IN, HIDDEN = 2, 2, 3, 2


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def arrays(kind, layers, n_dir, bias=True):
    """x, h, [c,] weight_l0, [weight,] [bias] in nnabla's layouts."""
    gate = (N_GATES[kind],) if kind != "rnn" else ()
    bias_gate = (N_BIAS_GATES[kind],) if kind != "rnn" else ()
    out = [signed(SEQ, BATCH, N_IN), signed(layers, n_dir, BATCH, HIDDEN)]
    if kind == "lstm":
        out.append(signed(layers, n_dir, BATCH, HIDDEN))
    out.append(signed(n_dir, *gate, HIDDEN, N_IN + HIDDEN))
    if layers > 1:
        out.append(signed(layers - 1, n_dir, *gate, HIDDEN, n_dir * HIDDEN + HIDDEN))
    if bias:
        out.append(signed(layers, n_dir, *bias_gate, HIDDEN))
    return out


def layer(kind, layers, n_dir, bias=True, **kw):
    """The op over its inputs, every output flattened into one vector (so the seeded gradient
    reaches y, h_n and c_n with different values)."""
    n_state = 3 if kind == "lstm" else 2

    def build(*xs):
        states, weights = xs[:n_state], list(xs[n_state:])
        weight_l0 = weights.pop(0)
        args = dict(weight=weights.pop(0) if layers > 1 else None,
                    bias=weights.pop(0) if bias else None)
        outs = getattr(F, kind)(*states, weight_l0, num_layers=layers,
                                bidirectional=n_dir == 2, **args, **kw)
        return F.concatenate(*[F.reshape(o, (o.size,)) for o in outs], axis=0)
    return build


CASES = [
    ("rnn tanh", "rnn", 1, 1, {}),
    ("rnn relu, 2 layers bidirectional", "rnn", 2, 2, dict(nonlinearity="relu")),
    ("lstm bidirectional", "lstm", 1, 2, {}),
    ("gru 2 layers", "gru", 2, 1, {}),
]


@pytest.mark.parametrize("name, kind, layers, n_dir, kw", CASES, ids=[c[0] for c in CASES])
def test_recurrent(name, kind, layers, n_dir, kw):
    assert_same_on_cuda(layer(kind, layers, n_dir, **kw), *arrays(kind, layers, n_dir),
                        rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind, no_grad", [("lstm", (1, 2)), ("gru", (0, 1))],
                         ids=["lstm without h, c gradients", "gru, weight gradient only"])
def test_without_bias_and_some_gradients(kind, no_grad):
    """propagate_down: only some inputs want gradients."""
    xs = arrays(kind, 1, 1, bias=False)
    assert_same_on_cuda(layer(kind, 1, 1, bias=False), *xs, no_grad=no_grad,
                        rtol=1e-4, atol=1e-5)


def test_gradients_accumulate():
    """x and the weights feed two layers: the second backward adds into their gradients."""
    x, h, w = arrays("rnn", 1, 1, bias=False)

    def build(x, h, w):
        y1, _ = F.rnn(x, h, w)
        y2, _ = F.rnn(x * 2.0, h, w)
        return F.reshape(y1 + y2 * 0.5 + x[:, :, :HIDDEN], (y1.size,))
    assert_same_on_cuda(build, x, h, w, rtol=1e-4, atol=1e-5)


def test_dropout_draws_the_cpu_mask():
    """Between layers the device drops the units the CPU drops (one numpy stream)."""
    xs = arrays("rnn", 2, 1)
    build = layer("rnn", 2, 1, dropout=0.5)
    results = []
    for ctx in (nn.Context(), cuda_context()):
        nn_random.seed(7)
        y, inputs = run(ctx, build, xs)
        results.append((y.d.copy(), [v.g.copy() for v in inputs]))
    (y_cpu, g_cpu), (y_gpu, g_gpu) = results
    np.testing.assert_allclose(y_gpu, y_cpu, rtol=1e-4, atol=1e-5)
    for a, b in zip(g_gpu, g_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_backward_without_training_names_the_op():
    xs = arrays("rnn", 1, 1)
    with nn.context_scope(cuda_context()):
        vs = [nn.Variable.from_numpy_array(a, need_grad=True) for a in xs]
        y, _ = F.rnn(*vs[:3], bias=vs[3], training=False)
    y.forward()
    with pytest.raises(Exception, match="RNN.*training=False"):
        y.backward()


def test_a_training_step_stays_on_the_device():
    """After the first steps, a two-layer step (forward, backward, update) copies only the loss
    down and allocates nothing: saved states and work arrays are kept on the op."""
    xs = arrays("rnn", 2, 1)
    with nn.context_scope(cuda_context()):
        vs = [nn.Variable.from_numpy_array(a, need_grad=k >= 2) for k, a in enumerate(xs)]
        y, h_n = F.rnn(*vs[:3], weight=vs[3], bias=vs[4], num_layers=2)
        loss = F.mean(F.tanh(y)) + F.mean(F.tanh(h_n))
    solver = S.Sgd(0.1)
    solver.set_parameters({str(k): v for k, v in enumerate(vs[2:])})

    def step():
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
        return float(loss.d)
    step()
    step()   # the second step may still allocate what the first one's clearing order kept
    device.reset_stats()
    step()
    copies = device.stats()
    assert copies["allocations"] == 0 and copies["host_to_device"] == 0, copies
    assert copies["device_to_host"] == 1, copies
