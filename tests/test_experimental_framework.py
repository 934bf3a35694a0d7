"""nnabla's experimental Data / Worker / Trainer framework."""
import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.experimental import framework
from nnabla_jit.experimental.framework.updater import Updater


class LineData(framework.data.Data):
    """y = 2x + 1 with noise, in batches of 16."""

    def __init__(self):
        rng = np.random.RandomState(0)
        self.x = rng.rand(64, 1).astype(np.float32)
        self.y = (2 * self.x + 1 + 0.01 * rng.randn(64, 1)).astype(np.float32)
        self.pos = 0

    def next(self):
        s = slice(self.pos, self.pos + 16)
        self.pos = (self.pos + 16) % 64
        return self.x[s], self.y[s]


class LineWorker(framework.worker.Worker):
    def __init__(self, data):
        super().__init__(data, max_epoch=20, iter_per_epoch=4)
        self.calls = []
        self.losses = []

    def _graph_init(self):
        self.calls.append("graph")
        self.x, self.t = nn.Variable((16, 1)), nn.Variable((16, 1))
        self.y = PF.affine(self.x, 1, name="line")

    def _loss_init(self):
        self._loss = F.mean(F.squared_error(self.y, self.t))

    def _solver_init(self):
        self._solver = S.Sgd(0.5)
        self._solver.set_parameters(nn.get_parameters())

    def _train_data_feeder(self, i, e, ag):
        self.x.d, self.t.d = self._data.next()

    def _eval_graph_forward(self, e, vi):
        self.x.d, self.t.d = self._data.x[:16], self._data.y[:16]
        self._loss.forward()
        self.losses.append(float(self._loss.d))

    def training_complete(self):
        self.calls.append("complete")


def test_trainer_runs_the_workers_hooks_and_trains():
    nn.clear_parameters()
    worker = LineWorker(LineData())
    framework.trainer.Trainer(worker).train()
    assert worker.calls == ["graph", "complete"]
    assert len(worker.losses) == 21            # before every epoch and at the end
    assert worker.losses[-1] < 0.01 * worker.losses[0]
    w = nn.get_parameters()["line/affine/W"].d
    np.testing.assert_allclose(w.ravel(), [2.0], atol=0.1)
    nn.clear_parameters()


def test_updater_order_with_accumulation():
    log = []

    def step(name):
        return lambda *args: log.append((name,) + args)
    up = Updater(train_data_feeder=step("feed"), solver_zero_grad=step("zero"),
                 solver_update=step("update"), loss_forward=step("fwd"),
                 loss_backward=step("bwd"), accum_grad=2,
                 solver_update_callback_on_start=[step("pre"), step("pre2")])
    up.update(3, 1)
    assert log == [("zero", 3, 1), ("feed", 3, 1, 0), ("fwd", 3, 1, 0), ("bwd", 3, 1, 0),
                   ("feed", 3, 1, 1), ("fwd", 3, 1, 1), ("bwd", 3, 1, 1),
                   ("pre", 3, 1), ("pre2", 3, 1), ("update", 3, 1)]


def test_updater_calls_each_steps_callbacks_around_it_and_all_reduces_only_with_comm_and_grads():
    log = []

    def step(name):
        return lambda *args: log.append((name,) + args)
    hooks = dict(train_data_feeder=step("feed"), solver_zero_grad=step("zero"),
                 solver_update=step("update"), loss_forward=step("fwd"), loss_backward=step("bwd"),
                 comm_all_reduce=step("reduce"),
                 loss_forward_callback_on_start=step("fwd<"), loss_forward_callback_on_finish=step("fwd>"),
                 loss_backward_callback_on_start=step("bwd<"), loss_backward_callback_on_finish=step("bwd>"),
                 comm_all_reduce_callback_on_start=step("reduce<"),
                 comm_all_reduce_callback_on_finish=step("reduce>"),
                 solver_update_callback_on_finish=[step("update>")])
    Updater(comm=object(), grads=["g"], **hooks).update(0, 2)
    assert log == [("zero", 0, 2), ("feed", 0, 2, 0),
                   ("fwd<", 0, 2, 0), ("fwd", 0, 2, 0), ("fwd>", 0, 2, 0),
                   ("bwd<", 0, 2, 0), ("bwd", 0, 2, 0), ("bwd>", 0, 2, 0),
                   ("reduce<", 0, 2), ("reduce", 0, 2), ("reduce>", 0, 2),
                   ("update", 0, 2), ("update>", 0, 2)]
    del log[:]
    Updater(comm=object(), grads=[], **hooks).update(0, 2)
    assert not any(entry[0].startswith("reduce") for entry in log)
