"""nnabla's tutorials (seed 004) run on nnabla_jit with only the import changed.

The code follows "NNabla by Examples", "NNabla Python API Demonstration Tutorial" and "Static vs
Dynamic Neural Networks in NNabla"; plotting is dropped, loops are shortened for CI, and the
tutorial's `tiny_digits` helper is written here over scikit-learn's digits. Each test checks what
the tutorial shows: shapes, that the loss goes down, that predictions become right.
"""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.utils.data_iterator import data_iterator_simple


# --------------------------------------------------------------------------- tiny_digits
def load_digits(n_class=10):
    from sklearn.datasets import load_digits as sk_load
    return sk_load(n_class=n_class)


def data_iterator_tiny_digits(digits, batch_size=64, shuffle=False, rng=None):
    images = digits.images[:, None].astype(np.float32) / 16.0
    labels = digits.target[:, None].astype(np.int32)
    return data_iterator_simple(lambda i: (images[i], labels[i]), len(labels), batch_size,
                                shuffle=shuffle, rng=rng or np.random.RandomState(0))


# --------------------------------------------------------------------------- NNabla by Examples
def logreg_forward(x):
    with nn.parameter_scope("affine1"):
        y = PF.affine(x, 10)
    return y


def logreg_loss(y, t):
    return F.mean(F.softmax_cross_entropy(y, t))


def training(x, t, loss, data, steps, learning_rate):
    solver = S.Sgd(learning_rate)
    solver.set_parameters(nn.get_parameters())
    losses = []
    for i in range(steps):
        x.d, t.d = data.next()
        loss.forward()
        solver.zero_grad()
        loss.backward()
        solver.weight_decay(1e-5)
        solver.update()
        losses.append(float(loss.d))
    return losses


def test_by_examples_logistic_regression_static_and_dynamic():
    digits = load_digits(n_class=10)
    data = data_iterator_tiny_digits(digits, batch_size=64, shuffle=True)
    img, label = data.next()
    assert img.shape == (64, 1, 8, 8) and label.shape == (64, 1)
    x = nn.Variable(img.shape)
    with nn.parameter_scope("affine1"):
        y = PF.affine(x, 10)
    t = nn.Variable(label.shape)
    loss = F.mean(F.softmax_cross_entropy(y, t))
    assert (x.shape, y.shape, t.shape, loss.shape) == ((64, 1, 8, 8), (64, 10), (64, 1), ())
    x.d, t.d = img, label
    loss.forward()
    assert list(nn.get_parameters()) == ["affine1/affine/W", "affine1/affine/b"]
    for param in nn.get_parameters().values():
        param.grad.zero()
    loss.backward()
    assert np.any(nn.get_parameters()["affine1/affine/b"].g != 0)
    losses = training(x, t, loss, data, 300, 1e-1)
    assert np.mean(losses[-30:]) < np.mean(losses[:30]) * 0.5
    # dynamic graph version of the same model
    x.d, t.d = data.next()
    with nn.auto_forward():
        y2 = logreg_forward(x)
        loss2 = logreg_loss(y2, t)
    assert float(loss2.d) < losses[0]
    assert (y2.d.argmax(axis=1) == t.d[:, 0]).mean() > 0.7


def test_by_examples_mlp_cnn_rnn_and_siamese(tmp_path):
    digits = load_digits(n_class=10)
    data = data_iterator_tiny_digits(digits, batch_size=64, shuffle=True)
    img, label = data.next()
    x, t = nn.Variable(img.shape), nn.Variable(label.shape)

    def mlp(x, hidden=[16, 32, 16]):
        hs = []
        with nn.parameter_scope("mlp"):
            h = x
            for hid, hsize in enumerate(hidden):
                with nn.parameter_scope("affine{}".format(hid + 1)):
                    h = F.tanh(PF.affine(h, hsize))
                    hs.append(h)
            with nn.parameter_scope("classifier"):
                y = PF.affine(h, 10)
        return y, hs

    y, hs = mlp(x)
    assert [h.shape for h in hs] == [(64, 16), (64, 32), (64, 16)]
    losses = training(x, t, logreg_loss(y, t), data, 200, 1e-1)
    assert np.mean(losses[-20:]) < np.mean(losses[:20])

    nn.clear_parameters()

    def cnn(x):
        with nn.parameter_scope("cnn"):
            with nn.parameter_scope("conv1"):
                c1 = F.tanh(PF.batch_normalization(PF.convolution(x, 4, (3, 3), pad=(1, 1), stride=(2, 2))))
            with nn.parameter_scope("conv2"):
                c2 = F.tanh(PF.batch_normalization(PF.convolution(c1, 8, (3, 3), pad=(1, 1))))
                c2 = F.average_pooling(c2, (2, 2))
            with nn.parameter_scope("fc3"):
                fc3 = F.tanh(PF.affine(c2, 32))
            with nn.parameter_scope("classifier"):
                y = PF.affine(fc3, 10)
        return y, [c1, c2, fc3]

    y, hs = cnn(x)
    assert [h.shape for h in hs] == [(64, 4, 4, 4), (64, 8, 2, 2), (64, 32)]
    losses = training(x, t, logreg_loss(y, t), data, 150, 1e-1)
    assert np.mean(losses[-20:]) < np.mean(losses[:20])
    path_cnn_params = str(tmp_path / "tmp.params.cnn.h5")
    nn.save_parameters(path_cnn_params)

    nn.clear_parameters()

    def rnn(xs, h0, hidden=32):
        hs = []
        with nn.parameter_scope("rnn"):
            h = h0
            for x in xs:
                with nn.parameter_scope("x2h"):
                    x2h = PF.affine(x, hidden, with_bias=False)
                with nn.parameter_scope("h2h"):
                    h2h = PF.affine(h, hidden)
                h = F.tanh(x2h + h2h)
                hs.append(h)
            with nn.parameter_scope("classifier"):
                y = PF.affine(h, 10)
        return y, hs

    def split_grid4(x):
        return x[..., :4, :4], x[..., :4, 4:], x[..., 4:, :4], x[..., 4:, 4:]

    seq_x = [nn.Variable(sub.shape) for sub in split_grid4(img)]
    h0 = nn.Variable((img.shape[0], 32))
    y, hs = rnn(seq_x, h0)
    loss = logreg_loss(y, t)
    assert len(nn.get_parameters()) == 5      # shared over time steps
    solver = S.Sgd(1e-1)
    solver.set_parameters(nn.get_parameters())
    first = last = None
    for i in range(150):
        im, t.d = data.next()
        h0.d = 0
        for v, sub in zip(seq_x, split_grid4(im)):
            v.d = sub
        loss.forward()
        solver.zero_grad()
        loss.backward()
        solver.weight_decay(1e-5)
        solver.update()
        first = float(loss.d) if first is None else first
        last = float(loss.d)
    assert last < first

    nn.clear_parameters()
    nn.load_parameters(path_cnn_params)

    def cnn_embed(x, test=False):
        with nn.parameter_scope("cnn"):
            with nn.parameter_scope("conv1"):
                c1 = F.tanh(PF.batch_normalization(PF.convolution(x, 4, (3, 3), pad=(1, 1), stride=(2, 2)),
                                                   batch_stat=not test))
            with nn.parameter_scope("conv2"):
                c2 = F.tanh(PF.batch_normalization(PF.convolution(c1, 8, (3, 3), pad=(1, 1)),
                                                   batch_stat=not test))
                c2 = F.average_pooling(c2, (2, 2))
        with nn.parameter_scope("embed2d"):      # outside "cnn": only this part is trained
            embed = PF.affine(c2, 2)
        return embed

    def siamese_loss(e0, e1, t, margin=1.0, eps=1e-4):
        dist = F.sum(F.squared_error(e0, e1), axis=1)
        sim_cost = t * dist
        dissim_cost = (1 - t) * (F.maximum_scalar(margin - (dist + eps) ** (0.5), 0) ** 2)
        return F.mean(sim_cost + dissim_cost)

    x0, x1 = nn.Variable(img.shape), nn.Variable(img.shape)
    tt = nn.Variable((img.shape[0],))
    loss = siamese_loss(cnn_embed(x0), cnn_embed(x1), tt)
    solver = S.Sgd(1e-2)
    with nn.parameter_scope("embed2d"):
        solver.set_parameters(nn.get_parameters())
    assert list(solver.get_parameters()) == ["affine/W", "affine/b"]
    conv_w = nn.get_parameters()["cnn/conv1/conv/W"].d.copy()
    for i in range(40):
        (a, la), (b, lb) = data.next(), data.next()
        x0.d, x1.d = a.copy(), b.copy()
        tt.d = (la == lb).astype(np.int32).flat
        loss.forward()
        solver.zero_grad()
        loss.backward()
        solver.update()
    np.testing.assert_array_equal(nn.get_parameters()["cnn/conv1/conv/W"].d, conv_w)  # only embed2d learns
    solver.set_learning_rate(solver.learning_rate() * 0.1)
    assert solver.learning_rate() == pytest.approx(1e-3)
    with nn.auto_forward():
        embed = cnn_embed(nn.Variable.from_numpy_array(digits.images[:32, None] / 16.0), test=True)
    assert embed.shape == (32, 2)


# --------------------------------------------------------------------------- API demonstration
def test_api_demonstration_toy_regression(tmp_path):
    def vector2length(x):
        return np.sqrt(np.sum(x ** 2, axis=1, keepdims=True))

    def length_mlp(x):
        h = x
        for i, hnum in enumerate([4, 8, 4, 2]):
            h = F.tanh(PF.affine(h, hnum, name="fc{}".format(i)))
        return PF.affine(h, 1, name="fc")

    # Seed 2. Where training ends is sensitive to round-off (with one set of libraries nnabla
    # 1.39 and nnabla_jit both reached 0.00095 over the last 50 steps, with this machine's both
    # stop at 0.0461), so the check is the early steps against nnabla 1.39's own losses,
    # recorded with the oracle (steps 0, 1 and 10), and a tenfold decrease.
    np.random.seed(2)
    nn.seed(313)           # the initializers' generator as a fresh process has it (nnabla's)
    nn.clear_parameters()
    batchsize = 100
    x = nn.Variable([batchsize, 2])
    y = length_mlp(x)
    label = nn.Variable([batchsize, 1])
    loss = F.reduce_mean(F.squared_error(y, label))
    solver = S.Adam(alpha=0.01)
    solver.set_parameters(nn.get_parameters())
    losses = []
    for i in range(500):
        xx = np.random.uniform(-1, 1, size=(batchsize, 2))
        x.d, label.d = xx, vector2length(xx)
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.weight_decay(1e-6)
        solver.update()
        losses.append(float(loss.d))
    np.testing.assert_allclose([losses[0], losses[1], losses[10]],
                               [0.9714407324790955, 0.7163705229759216, 0.10893937200307846],
                               rtol=1e-5)
    assert np.mean(losses[-50:]) < 0.1 * losses[0]

    loss.forward(clear_buffer=True)
    assert y.data.clear_called              # an intermediate: cleared
    y.persistent = True
    loss.forward(clear_buffer=True)
    assert not y.data.clear_called and np.all(np.isfinite(y.d))

    # imperative prediction with the learned parameters
    xi = nn.NdArray.from_numpy_array(np.array([[0.6, 0.8]] * batchsize, np.float32))
    yi = length_mlp(xi)
    assert isinstance(yi, nn.NdArray)
    assert abs(yi.data[0, 0] - 1.0) < 0.2

    path = str(tmp_path / "param-vector2length.h5")
    nn.save_parameters(path)
    names = list(nn.get_parameters())
    nn.clear_parameters()
    assert len(nn.get_parameters()) == 0
    nn.load_parameters(path)
    assert list(nn.get_parameters()) == names
    with nn.parameter_scope("foo"):
        nn.load_parameters(path)
    assert list(nn.get_parameters()) == names + ["foo/" + n for n in names]


def test_api_demonstration_graph_basics():
    nn.clear_parameters()
    batchsize = 16
    x = nn.Variable([batchsize, 2])
    with nn.parameter_scope("fc1"):
        h = F.tanh(PF.affine(x, 512))
    with nn.parameter_scope("fc2"):
        y = PF.affine(h, 1)
    assert (h.shape, y.shape) == ((16, 512), (16, 1))
    label = nn.Variable([batchsize, 1])
    loss = F.reduce_mean(F.squared_error(y, label))
    x.d = np.random.randn(*x.shape)
    label.d = np.random.randn(*label.shape)
    loss.forward()
    for param in nn.get_parameters().values():
        param.grad.zero()
    loss.backward()
    # manual SGD exactly as the tutorial's "imperative" update, then the solver does the same
    before = {k: v.d.copy() for k, v in nn.get_parameters().items()}
    for param in nn.get_parameters().values():
        param.data -= param.grad * 0.001
    for k, v in nn.get_parameters().items():
        np.testing.assert_allclose(v.d, before[k] - 0.001 * v.g, rtol=1e-6)


# --------------------------------------------------------------------------- static vs dynamic
def test_static_vs_dynamic():
    digits = load_digits()
    data = data_iterator_tiny_digits(digits, batch_size=16, shuffle=True)
    img, label = data.next()

    def cnn(x):
        with nn.parameter_scope("cnn"):
            with nn.parameter_scope("conv1"):
                h = F.tanh(PF.batch_normalization(PF.convolution(x, 8, (3, 3), pad=(1, 1))))
            for i in range(2):    # the tutorial's "unnecessarily deep" stack, made shallow for CI
                with nn.parameter_scope("conv{}".format(i + 2)):
                    h = F.tanh(PF.batch_normalization(PF.convolution(h, 8, (3, 3), pad=(1, 1))))
            h = F.average_pooling(h, (2, 2))
            with nn.parameter_scope("fc"):
                h = F.tanh(PF.affine(h, 32))
            with nn.parameter_scope("classifier"):
                y = PF.affine(h, 10)
        return y

    from nnabla_jit.ext_utils import get_extension_context
    nn.set_default_context(get_extension_context("cpu"))
    x, t = nn.Variable(img.shape), nn.Variable(label.shape)
    static_y = cnn(x)
    static_y.persistent = True
    static_l = F.mean(F.softmax_cross_entropy(static_y, t))
    solver = S.Adam(alpha=1e-3)
    solver.set_parameters(nn.get_parameters())
    epochs_seen = []
    data.register_epoch_end_callback(lambda epoch: epochs_seen.append(epoch))
    static_losses = []
    for _ in range(120):
        x.d, t.d = data.next()
        static_l.forward(clear_no_need_grad=True)
        solver.zero_grad()
        static_l.backward(clear_buffer=True)
        solver.update()
        static_losses.append(float(static_l.d))
    assert epochs_seen == [0]     # 1797 images / 16 per batch: one epoch ended
    assert np.mean(static_losses[-20:]) < np.mean(static_losses[:20])

    nn.clear_parameters()
    solver = S.Adam(alpha=1e-3)
    solver.set_parameters(nn.get_parameters())
    dynamic_losses = []
    for _ in range(120):
        x.d, t.d = data.next()
        with nn.auto_forward():
            dynamic_y = cnn(x)
            dynamic_l = F.mean(F.softmax_cross_entropy(dynamic_y, t))
        solver.set_parameters(nn.get_parameters(), reset=False, retain_state=True)
        solver.zero_grad()
        dynamic_l.backward(clear_buffer=True)
        solver.update()
        dynamic_losses.append(float(dynamic_l.d))
    assert np.mean(dynamic_losses[-20:]) < np.mean(dynamic_losses[:20])
