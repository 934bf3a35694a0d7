"""Mixed precision: type_config='half' stores activations and gradients in float16 (computing in
float32) and keeps parameters in float32, as nnabla's CPU half context does; loss scaling,
scale_grad / check_inf_or_nan_grad, and DynamicLossScalingUpdater."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.communicators as C
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.experimental.mixed_precision_training import DynamicLossScalingUpdater

HALF = get_extension_context("cpu", type_config="half")


class Regression:
    """y = 2 x0 - x1 + 0.5 learnt by a tanh MLP, fed batch by batch."""

    def __init__(self, seed=0, batch=32):
        rng = np.random.RandomState(seed)
        self.rng = rng
        self.X = rng.randn(512, 8).astype(np.float32)
        self.Y = (2 * self.X[:, :1] - self.X[:, 1:2] + 0.5).astype(np.float32)
        self.x = nn.Variable((batch, 8))
        self.t = nn.Variable((batch, 1))
        h = F.tanh(PF.affine(self.x, 16, name="l1"))
        self.loss = F.mean(F.squared_error(PF.affine(h, 1, name="l2"), self.t))
        self.feeds = 0
        self.poisoned = set()   # feeds whose batch overflows float16

    def feed(self):
        i = self.rng.randint(0, len(self.X) - self.x.shape[0])
        self.x.d = self.X[i:i + self.x.shape[0]]
        self.t.d = self.Y[i:i + self.x.shape[0]]
        if self.feeds in self.poisoned:
            self.t.d[0, 0] = 1e6   # its squared error is beyond float16: inf
        self.feeds += 1

    def eval_loss(self):
        losses = []
        for i in range(0, 256, self.x.shape[0]):
            self.x.d, self.t.d = self.X[i:i + self.x.shape[0]], self.Y[i:i + self.x.shape[0]]
            self.loss.forward()
            losses.append(float(self.loss.d))
        return float(np.mean(losses))


def test_half_context_storage_types():
    nn.set_default_context(HALF)
    net = Regression()
    net.feed()
    net.loss.forward()
    params = nn.get_parameters()
    assert net.loss.d.dtype == np.float16
    assert all(p.d.dtype == np.float32 for p in params.values())
    for p in params.values():
        p.grad.zero()
    net.loss.backward()
    assert all(p.grad.dtype == np.float16 for p in params.values())


def test_loss_scale_multiplies_the_gradients():
    nn.set_default_context(HALF)
    net = Regression()
    net.feed()
    net.loss.forward()
    params = nn.get_parameters()
    grads = {}
    for scale in (1.0, 64.0):
        for p in params.values():
            p.grad.zero()
        net.loss.backward(scale)
        grads[scale] = {k: p.g.astype(np.float32) for k, p in params.items()}
    for k in params:
        np.testing.assert_allclose(grads[64.0][k], 64 * grads[1.0][k], rtol=2e-3, atol=1e-6)


def test_a_loss_scale_too_large_for_float16_is_detected():
    nn.set_default_context(HALF)
    net = Regression()
    solver = S.Sgd(0.1)
    solver.set_parameters(nn.get_parameters())
    net.feed()
    net.loss.forward()
    solver.zero_grad()
    net.loss.backward(8.0)
    assert not solver.check_inf_or_nan_grad()
    solver.zero_grad()
    net.loss.backward(1e6)
    assert solver.check_inf_or_nan_grad()


def test_scale_grad_undoes_the_loss_scale_in_float32():
    """Gradients this small underflow in float16 unless the loss is scaled; unscaled in
    float32 they match float32 training's."""
    nn.set_default_context(get_extension_context("cpu"))
    net = Regression()
    net.feed()
    x, t = net.x.d.copy(), net.t.d.copy()
    params = nn.get_parameters()
    tiny = 1e-6
    loss32 = net.loss * tiny
    loss32.forward()
    for p in params.values():
        p.grad.zero()
    loss32.backward()
    expected = {k: p.g.copy() for k, p in params.items()}

    nn.set_default_context(HALF)
    loss16 = net.loss * tiny                     # the same parameters, under half
    net.x.d, net.t.d = x, t
    solver = S.Sgd(0.1)
    solver.set_parameters(params)
    loss16.forward()

    def error():
        return max(np.abs(p.g - expected[k]).max() / np.abs(expected[k]).max() for k, p in params.items())

    solver.zero_grad()
    loss16.backward(2.0 ** 14)
    solver.scale_grad(2.0 ** -14)
    assert all(p.grad.dtype == np.float32 for p in params.values())
    scaled_error = error()
    solver.zero_grad()
    loss16.backward()     # unscaled: float16 rounds these small gradients coarsely
    assert scaled_error < 0.01 and error() > 10 * scaled_error


def test_solver_update_keeps_float32_parameters_under_half():
    nn.set_default_context(HALF)
    net = Regression()
    params = nn.get_parameters()
    solver = S.Adam(1e-3)
    solver.set_parameters(params)
    before = {k: p.d.copy() for k, p in params.items()}
    net.feed()
    net.loss.forward()
    solver.zero_grad()
    net.loss.backward()
    solver.update()
    for k, p in params.items():
        assert p.d.dtype == np.float32
        # Adam's first steps move every weight by about alpha, far below float16's resolution
        # at these magnitudes: a float16 master copy would have kept many unchanged.
        assert np.count_nonzero(p.d != before[k]) == p.size


def test_dynamic_loss_scaling_trains_and_recovers_from_overflow():
    nn.set_default_context(HALF)
    net = Regression()
    solver = S.Momentum(0.05)
    solver.set_parameters(nn.get_parameters())
    used = []   # feeds made when each update happened: the last one is the batch it used
    original_update = solver.update
    solver.update = lambda *a: (used.append(net.feeds), original_update(*a))

    start = net.eval_loss()
    net.poisoned = {30}
    updater = DynamicLossScalingUpdater(solver, net.loss, net.feed, scale=2.0 ** 20, N=25)
    history = []   # (scale before, scale after) of each update
    for _ in range(80):
        before = updater.scale
        updater.update()
        history.append((before, updater.scale))
    # 2**20 overflows float16: halved until the gradients fit, those steps redone.
    assert history[0][1] < 2.0 ** 20
    # The poisoned batch (feed 30) was never used; the update meant for it took feed 31.
    assert 31 not in used and 32 in used
    assert len(used) == 80 and net.feeds > 80
    k = used.index(32)
    assert history[k][1] <= history[k][0] / 2
    # Later the scale grew again, after N updates without overflow.
    assert any(after > before for before, after in history[k + 1:])
    assert net.eval_loss() < 0.2 * start
    assert all(p.d.dtype == np.float32 and np.isfinite(p.d).all() for p in nn.get_parameters().values())


def test_dynamic_loss_scaling_schedule():
    """The scale rules on their own: an overflow divides the scale and redoes the step, the
    update after N + 1 clean ones multiplies it, and after 101 overflowing tries in a row the
    step is given up."""
    nn.set_default_context(get_extension_context("cpu"))
    net = Regression()
    solver = S.Sgd(0.0)
    solver.set_parameters(nn.get_parameters())
    overflowing = set()   # feeds whose gradients count as not finite
    solver.check_inf_or_nan_grad = lambda: net.feeds - 1 in overflowing
    updater = DynamicLossScalingUpdater(solver, net.loss, net.feed, scale=16.0, scaling_factor=4.0, N=3)
    for _ in range(4):
        updater.update()
    assert updater.scale == 16.0
    updater.update()
    assert updater.scale == 64.0
    overflowing.update({net.feeds, net.feeds + 1})
    updater.update()
    assert updater.scale == 64.0 / 16.0 and net.feeds == 8
    solver.check_inf_or_nan_grad = lambda: True
    updater.update()
    assert net.feeds == 8 + 101 and updater.scale == 4.0 / 4.0 ** 101


def test_accumulation_weight_decay_and_all_reduce(monkeypatch):
    for name in C._LAUNCHER_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    nn.set_default_context(HALF)
    net = Regression()
    params = nn.get_parameters()
    solver = S.Sgd(0.1)
    solver.set_parameters(params)
    comm = C.MultiProcessCommunicator(HALF)
    comm.init()
    reduced = []
    original = comm.all_reduce
    comm.all_reduce = lambda *a, **k: (reduced.append(k), original(*a, **k))
    decays = []
    original_decay = solver.weight_decay
    solver.weight_decay = lambda rate: (decays.append(rate), original_decay(rate))
    updater = DynamicLossScalingUpdater(solver, net.loss, net.feed, scale=4.0, accum_grad=3,
                                        weight_decay=1e-4, comm=comm,
                                        grads=[p.grad for p in params.values()])
    updater.update()
    assert net.feeds == 3
    assert reduced == [{"division": False, "inplace": False}]
    assert decays == [pytest.approx(1e-4)]


def test_updater_arguments_are_checked():
    nn.set_default_context(HALF)
    net = Regression()
    solver = S.Sgd()
    with pytest.raises(TypeError, match="data_feeder must be callable"):
        DynamicLossScalingUpdater(solver, net.loss, data_feeder=3)
    with pytest.raises(ValueError, match="accum_grad"):
        DynamicLossScalingUpdater(solver, net.loss, accum_grad=0)
    with pytest.raises(ValueError, match="scale"):
        DynamicLossScalingUpdater(solver, net.loss, scale=0)
