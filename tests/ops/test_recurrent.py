"""RNN, LSTM and GRU: forward against a NumPy reference of nnabla's layouts (and against numbers
nnabla 1.39 computed), BPTT against central differences, the unrolled grad rules against the
kernels, double backward, dropout, errors, and the PF layers."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.testing import check_backward, check_function, check_grad_rule

N_GATES = {"rnn": 1, "lstm": 4, "gru": 3}
N_BIAS_GATES = {"rnn": 1, "lstm": 4, "gru": 4}


# ------------------------------------------------------------------------------ reference
def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def ref_cell(kind, x, h, c, w, b, nonlinearity):
    """One step of one (layer, direction); w is (G*H, In+H), b (n_bias_gates, H) or None."""
    n_in, n_hidden = x.shape[1], h.shape[1]
    gx, gh = x @ w[:, :n_in].T, h @ w[:, n_in:].T
    b = np.zeros((N_BIAS_GATES[kind], n_hidden)) if b is None else b.reshape(-1, n_hidden)
    if kind == "rnn":
        pre = gx + gh + b[0]
        return (np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0)), None
    gate = [slice(k * n_hidden, (k + 1) * n_hidden) for k in range(4)]
    if kind == "lstm":
        i, f, g, o = [gx[:, s] + gh[:, s] + b[k] for k, s in enumerate(gate)]
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    r = sigmoid(gx[:, gate[0]] + gh[:, gate[0]] + b[0])
    z = sigmoid(gx[:, gate[1]] + gh[:, gate[1]] + b[1])
    n = np.tanh(gx[:, gate[2]] + b[2] + r * (gh[:, gate[2]] + b[3]))
    return (1 - z) * n + z * h, None


def reference(kind, x, h, c, w0, w, b, num_layers=1, bidirectional=False, nonlinearity="tanh",
              masks=None):
    """The whole layer in NumPy; ``masks[l]`` (scaled dropout masks) multiply layer l's input."""
    seq_len, batch = x.shape[:2]
    n_dir, n_hidden = (2 if bidirectional else 1), h.shape[3]
    h_n, c_n = np.zeros_like(h), np.zeros_like(h)
    inp = x
    for layer in range(num_layers):
        if masks is not None and masks[layer] is not None:
            inp = inp * masks[layer]
        wl = w0 if layer == 0 else w[layer - 1]
        out = np.zeros((seq_len, batch, n_dir * n_hidden))
        for d in range(n_dir):
            wd = wl[d].reshape(-1, wl[d].shape[-1])
            hh, cc = h[layer, d], (None if c is None else c[layer, d])
            for t in (range(seq_len) if d == 0 else reversed(range(seq_len))):
                hh, cc = ref_cell(kind, inp[t], hh, cc, wd, None if b is None else b[layer, d],
                                  nonlinearity)
                out[t, :, d * n_hidden:(d + 1) * n_hidden] = hh
            h_n[layer, d] = hh
            if cc is not None:
                c_n[layer, d] = cc
        inp = out
    return (inp, h_n, c_n) if kind == "lstm" else (inp, h_n)


# ------------------------------------------------------------------------------ cases
def make_case(kind, seq_len, batch, n_in, n_hidden, num_layers, bidirectional, with_bias, seed,
              scale=0.6):
    """Inputs in F's order (x, h, [c], weight_l0, [weight], [bias]) and the keyword args."""
    rng = np.random.RandomState(seed)
    n_dir = 2 if bidirectional else 1
    gate = () if kind == "rnn" else (N_GATES[kind],)
    state = (num_layers, n_dir, batch, n_hidden)
    arrays = [rng.uniform(-1, 1, (seq_len, batch, n_in)), rng.uniform(-1, 1, state)]
    if kind == "lstm":
        arrays.append(rng.uniform(-1, 1, state))
    arrays.append(rng.uniform(-scale, scale, (n_dir,) + gate + (n_hidden, n_in + n_hidden)))
    if num_layers > 1:
        arrays.append(rng.uniform(-scale, scale, (num_layers - 1, n_dir) + gate
                                  + (n_hidden, n_dir * n_hidden + n_hidden)))
    if with_bias:
        arrays.append(rng.uniform(-scale, scale, (num_layers, n_dir)
                                  + (() if kind == "rnn" else (N_BIAS_GATES[kind],)) + (n_hidden,)))
    return arrays, dict(num_layers=num_layers, bidirectional=bidirectional)


def split_inputs(kind, values, num_layers, with_bias):
    """(x, h, c, weight_l0, weight, bias) from the list make_case returns (None where absent)."""
    values = list(values)
    x, h = values[0], values[1]
    c = values[2] if kind == "lstm" else None
    rest = values[3 if kind == "lstm" else 2:]
    w0 = rest.pop(0)
    w = rest.pop(0) if num_layers > 1 else None
    b = rest.pop(0) if with_bias else None
    return x, h, c, w0, w, b


def layer_fn(kind, num_layers, bidirectional, with_bias, **extra):
    def fn(*vs):
        x, h, c, w0, w, b = split_inputs(kind, vs, num_layers, with_bias)
        args = (x, h, c) if kind == "lstm" else (x, h)
        return getattr(F, kind)(*args, w0, w, b, num_layers=num_layers,
                                bidirectional=bidirectional, **extra)
    return fn


def reference_fn(kind, num_layers, bidirectional, with_bias, nonlinearity="tanh"):
    def ref(*arrays):
        return reference(kind, *split_inputs(kind, arrays, num_layers, with_bias), num_layers,
                         bidirectional, nonlinearity)
    return ref


configs = st.fixed_dictionaries(dict(
    seq_len=st.integers(1, 3), batch=st.integers(1, 2), n_in=st.integers(1, 2),
    n_hidden=st.integers(1, 2), num_layers=st.integers(1, 2), bidirectional=st.booleans(),
    with_bias=st.booleans(), seed=st.integers(0, 2 ** 16)))


# ------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
@given(cfg=configs)
def test_forward_backward_and_grad_rule(kind, cfg):
    arrays, kw = make_case(kind, **cfg)
    fn = layer_fn(kind, kw["num_layers"], kw["bidirectional"], cfg["with_bias"])
    ref = reference_fn(kind, kw["num_layers"], kw["bidirectional"], cfg["with_bias"])
    check_function(fn, arrays, ref, double_backward=False)


@given(cfg=configs)
def test_rnn_relu(cfg):
    """relu's kink rules out central differences on random inputs; the BPTT kernel is checked
    against the grad rule (F.relu's derivative through the unrolled graph) instead."""
    arrays, kw = make_case("rnn", **cfg)
    fn = layer_fn("rnn", kw["num_layers"], kw["bidirectional"], cfg["with_bias"], nonlinearity="relu")
    ref = reference_fn("rnn", kw["num_layers"], kw["bidirectional"], cfg["with_bias"], "relu")
    check_function(fn, arrays, ref, backward=False, double_backward=False)


@pytest.mark.parametrize("kind,num_layers,bidirectional,wrt", [
    ("rnn", 2, True, [0, 3, 4]), ("lstm", 1, False, None), ("gru", 1, True, [0, 1, 2])])
def test_double_backward(kind, num_layers, bidirectional, wrt):
    arrays, kw = make_case(kind, 2, 1, 1, 1, num_layers, bidirectional, True, seed=3)
    check_function(layer_fn(kind, num_layers, bidirectional, True), arrays, wrt=wrt,
                   backward=False, grad_rule=False)


# nnabla 1.39's outputs (y then h_n) for x, h, c, weights and biases filled by `pinned`, two
# bidirectional layers: these pin the weight layouts and gate orders to nnabla's.
NNABLA_Y = {
    "rnn": [0, 0, 0, 0.397418, 0, 0, 0.144798, 0.447676, 0, 0, 0, 0.199054],
    "lstm": [0.018225, 0.145984, -0.07121, -0.215979, -0.042611, 0.144643, -0.052768, -0.211607,
             -0.075532, 0.145866, -0.040113, -0.255865],
    "gru": [-0.150741, 0.301178, -0.040983, -0.269352, -0.151979, 0.295704, -0.011043, -0.292321,
            -0.168324, 0.283257, 0.107347, -0.284976]}
NNABLA_HN = {
    "rnn": [0, 0, 0.565537, 0.461741, 0, 0, 0, 0.397418],
    "lstm": [-0.036462, -0.217095, 0.125171, 0.021762, -0.075532, 0.145866, -0.07121, -0.215979],
    "gru": [-0.069031, -0.034115, 0.141561, -0.252606, -0.168324, 0.283257, -0.040983, -0.269352]}


def pinned(shape, offset):
    n = int(np.prod(shape))
    return (0.5 * np.sin(np.arange(n) * 1.3 + offset)).reshape(shape).astype(np.float32)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_matches_nnabla_numbers(kind):
    seq_len, batch, n_in, n_hidden, n_layers, n_dir = 3, 1, 2, 2, 2, 2
    gate = () if kind == "rnn" else (N_GATES[kind],)
    bias_gate = () if kind == "rnn" else (N_BIAS_GATES[kind],)
    v = nn.Variable.from_numpy_array
    x = v(pinned((seq_len, batch, n_in), 0))
    h = v(pinned((n_layers, n_dir, batch, n_hidden), 1))
    c = v(pinned((n_layers, n_dir, batch, n_hidden), 2))
    w0 = v(pinned((n_dir,) + gate + (n_hidden, n_in + n_hidden), 3))
    w = v(pinned((n_layers - 1, n_dir) + gate + (n_hidden, n_dir * n_hidden + n_hidden), 4))
    b = v(pinned((n_layers, n_dir) + bias_gate + (n_hidden,), 5))
    kw = dict(num_layers=n_layers, bidirectional=True)
    if kind == "rnn":
        y, h_n = F.rnn(x, h, w0, w, b, nonlinearity="relu", **kw)
    elif kind == "lstm":
        y, h_n, _ = F.lstm(x, h, c, w0, w, b, **kw)
    else:
        y, h_n = F.gru(x, h, w0, w, b, **kw)
    nn.forward_all([y, h_n])
    np.testing.assert_allclose(y.d.reshape(-1), NNABLA_Y[kind], atol=2e-6)
    np.testing.assert_allclose(h_n.d.reshape(-1), NNABLA_HN[kind], atol=2e-6)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_dropout_between_layers(kind):
    """With training and dropout, layer 2's input is dropped out (scaled by 1/(1-p)) with a mask
    drawn from nn.random; backward and the grad rule use that same mask."""
    arrays, kw = make_case(kind, 3, 2, 2, 3, 2, True, True, seed=5)
    fn = layer_fn(kind, 2, True, True, dropout=0.5)

    def seeded(*vs):   # the mask is drawn at forward, right after this build: fix it by seeding
        nn.random.seed(11)
        return fn(*vs)

    xs = [nn.Variable.from_numpy_array(a) for a in arrays]
    ys = seeded(*xs)
    nn.forward_all(list(ys))
    masks = [s["mask"] for s in ys[0].parent.op.saved]
    assert masks[0] is None and masks[1].shape == (3, 2, 6)
    assert set(np.unique(masks[1])) <= {0.0, 2.0} and 0 < masks[1].mean() < 2
    want = reference(kind, *split_inputs(kind, arrays, 2, True), 2, True, masks=masks)
    for y, w in zip(ys, want):
        np.testing.assert_allclose(y.d, w, rtol=1e-5, atol=1e-6)
    check_backward(seeded, arrays)
    check_grad_rule(seeded, arrays)
    # without training (or with one layer) dropout changes nothing
    plain = reference(kind, *split_inputs(kind, arrays, 2, True), 2, True)
    ys = layer_fn(kind, 2, True, True, dropout=0.5, training=False)(*xs)
    nn.forward_all(list(ys))
    np.testing.assert_allclose(ys[0].d, plain[0], rtol=1e-5, atol=1e-6)


def test_training_false_has_no_backward():
    arrays, _ = make_case("lstm", 2, 1, 1, 2, 1, False, True, seed=0)
    xs = [nn.Variable.from_numpy_array(a, need_grad=True) for a in arrays]
    y, _, _ = F.lstm(*xs[:3], xs[3], None, xs[4], training=False)
    loss = F.sum(y)
    loss.forward()
    with pytest.raises(ValueError, match="LSTM: backward is called with training=False"):
        loss.backward()
    with pytest.raises(ValueError, match="training=False"):
        nn.grad([loss], [xs[0]])


def test_backward_with_unused_outputs_and_cleared_buffers():
    """Only y is used (h_n and c_n are dropped, so the executor may set the node up again), the
    initial states come from F.constant and buffers are cleared: the states forward saved must
    survive, giving the gradients of a plain forward/backward."""
    arrays, _ = make_case("lstm", 3, 2, 2, 3, 2, True, True, seed=1)
    leaves = [nn.Variable.from_numpy_array(a, need_grad=True)
              for a in (arrays[0], arrays[3], arrays[4], arrays[5])]

    def gradients(clear):
        x, w0, w, b = leaves
        zeros = F.constant(0, (2, 2, 2, 3))
        if clear:
            y, _, _ = F.lstm(x, zeros, zeros, w0, w, b, num_layers=2, bidirectional=True)
        else:
            y, h_n, c_n = F.lstm(x, zeros, zeros, w0, w, b, num_layers=2, bidirectional=True)
        loss = F.sum(y * y)
        for v in leaves:
            v.grad.zero()
        loss.forward(clear_no_need_grad=clear)
        loss.backward(clear_buffer=clear)
        return [v.g.copy() for v in leaves]

    for got, want in zip(gradients(True), gradients(False)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert np.abs(want).max() > 1e-3


def test_grad_rule_with_an_output_nobody_holds():
    """nn.grad through a GRU whose h_n was dropped gives the gradients backward gives."""
    arrays, _ = make_case("gru", 3, 2, 2, 2, 1, True, True, seed=2)
    x, h, _, w0, _, b = [None if a is None else nn.Variable.from_numpy_array(a, need_grad=True)
                         for a in split_inputs("gru", arrays, 1, True)]
    y = F.gru(x, h, w0, None, b, bidirectional=True)[0]
    loss = F.sum(y * y)
    gx, gw = nn.grad([loss], [x, w0])
    nn.forward_all([gx, gw])
    for v in (x, w0):
        v.grad.zero()
    loss.forward()
    loss.backward()
    np.testing.assert_allclose(gx.d, x.g, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.d, w0.g, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad, message", [
    (dict(h=(1, 1, 3, 2)), "h of shape"),
    (dict(h=(2, 1, 2, 2)), "h of shape"),
    (dict(weight=(1, 1, 4, 2, 4)), "weight cannot be given when num_layers == 1"),
    (dict(bias=(1, 1, 3, 2)), "bias of shape"),
    (dict(weight_l0=(1, 4, 2, 5)), "weight_l0 of shape"),
    (dict(x=(3, 2)), "x must be"),
])
def test_bad_shapes_raise(bad, message):
    shapes = dict(x=(3, 2, 3), h=(1, 1, 2, 2), c=(1, 1, 2, 2), weight_l0=(1, 4, 2, 5), weight=None,
                  bias=(1, 1, 4, 2))
    if "weight_l0" in bad:
        shapes["x"] = (3, 2, 2)
    shapes.update(bad)
    v = {k: None if s is None else nn.Variable(s) for k, s in shapes.items()}
    with pytest.raises(ValueError, match="^LSTM: " + message):
        F.lstm(v["x"], v["h"], v["c"], v["weight_l0"], v["weight"], v["bias"])


def test_missing_weight_for_two_layers_raises():
    with pytest.raises(ValueError, match="GRU: weight of shape .* is required when num_layers = 2"):
        F.gru(nn.Variable((3, 2, 3)), nn.Variable((2, 1, 2, 2)), nn.Variable((1, 3, 2, 5)),
              None, None, num_layers=2)


# ------------------------------------------------------------------------------ PF
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_parametric_layers(kind):
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(4, 3, 5).astype(np.float32))
    h = nn.Variable.from_numpy_array(np.zeros((2, 2, 3, 6), np.float32))
    states = (h, h) if kind == "lstm" else (h,)
    outs = getattr(PF, kind)(x, *states, bidirectional=True, name="seq")
    gate, bias_gate = ((), ()) if kind == "rnn" else ((N_GATES[kind],), (N_BIAS_GATES[kind],))
    params = nn.get_parameters()
    assert {k: v.shape for k, v in params.items()} == {
        "seq/{}/weight_l0".format(kind): (2,) + gate + (6, 11),
        "seq/{}/weight".format(kind): (1, 2) + gate + (6, 18),
        "seq/{}/bias".format(kind): (2, 2) + bias_gate + (6,)}
    assert not params["seq/{}/bias".format(kind)].d.any()
    nn.forward_all(list(outs))
    arrays = [x.d, h.d] + ([h.d] if kind == "lstm" else []) + [
        params["seq/{}/{}".format(kind, n)].d for n in ("weight_l0", "weight", "bias")]
    want = reference(kind, *split_inputs(kind, arrays, 2, True), 2, True)
    for y, w in zip(outs, want):
        np.testing.assert_allclose(y.d, w, rtol=1e-4, atol=1e-5)


def test_lstm_cell_gate_order():
    """PF.lstm_cell's affine has nnabla's (input, output, forget, candidate) block order."""
    rng = np.random.RandomState(0)
    x, h, c = (nn.Variable.from_numpy_array(rng.randn(2, n).astype(np.float32)) for n in (3, 4, 4))
    h_t, c_t = PF.lstm_cell(x, h, c, 4)
    nn.forward_all([h_t, c_t])
    params = nn.get_parameters()
    assert params["lstm/affine/W"].shape == (7, 4, 4) and params["lstm/affine/b"].shape == (4, 4)
    pre = np.concatenate([x.d, h.d], 1) @ params["lstm/affine/W"].d.reshape(7, 16)
    i, o, f, g = np.split(pre + params["lstm/affine/b"].d.reshape(16), 4, axis=1)
    want_c = sigmoid(f) * c.d + sigmoid(i) * np.tanh(g)
    np.testing.assert_allclose(c_t.d, want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h_t.d, sigmoid(o) * np.tanh(want_c), rtol=1e-5, atol=1e-6)


def test_lstm_cell_object_keeps_state():
    """Each call feeds the previous call's states; reset_state zeroes them."""
    cell = PF.LSTMCell(2, 3, name="cell")
    x = nn.Variable.from_numpy_array(np.linspace(-1, 1, 8).reshape(2, 4).astype(np.float32))
    cell(x)
    h2 = cell(x)
    h2.forward()
    params = nn.get_parameters()
    assert set(params) == {"cell/lstm/affine/W", "cell/lstm/affine/b"}
    w, b = params["cell/lstm/affine/W"].d.reshape(7, 12), params["cell/lstm/affine/b"].d.reshape(12)
    h, c = np.zeros((2, 3)), np.zeros((2, 3))
    for _ in range(2):
        i, o, f, g = np.split(np.concatenate([x.d, h], 1) @ w + b, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
    assert cell.h is h2
    np.testing.assert_allclose(h2.d, h, rtol=1e-5, atol=1e-6)
    cell.reset_state()
    assert not cell.h.d.any() and not cell.c.d.any()
