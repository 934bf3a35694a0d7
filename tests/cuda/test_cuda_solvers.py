"""Solver updates on the device against the same updates on the host, and the copies a training
step makes (none after the first but the loss read)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.cuda_ops import device
from nnabla_jit.ext_utils import get_extension_context

from .compare import written_on_device

SOLVERS = {
    "Sgd": lambda: S.Sgd(0.1),
    "SgdW": lambda: S.SgdW(0.1, wd=0.01),
    "Momentum": lambda: S.Momentum(0.1),
    "Lars": lambda: S.Lars(0.1, coefficient=0.01),
    "Nesterov": lambda: S.Nesterov(0.1),
    "Adadelta": lambda: S.Adadelta(),
    "Adagrad": lambda: S.Adagrad(0.1),
    "AdaBelief": lambda: S.AdaBelief(0.01, amsgrad=True, weight_decouple=True, wd=0.01),
    "AdaBelief rectify": lambda: S.AdaBelief(0.01, rectify=True),
    "RMSprop": lambda: S.RMSprop(0.01),
    "RMSpropGraves": lambda: S.RMSpropGraves(0.01),
    "Adam": lambda: S.Adam(0.01),
    "AdamW": lambda: S.AdamW(0.01, wd=0.01),
    "AdaBound": lambda: S.AdaBound(0.01),
    "Adamax": lambda: S.Adamax(0.01),
    "AMSGRAD": lambda: S.AMSGRAD(0.01),
    "AMSBound": lambda: S.AMSBound(0.01),
    "Lamb": lambda: S.Lamb(0.01, bias_correction=True),
    "Lion": lambda: S.Lion(0.01),
}


def _params(values, on_device):
    """Parameters holding ``values`` (and gradients set later), on the device or not."""
    device.load()
    params = {}
    for k, v in enumerate(values):
        p = nn.Variable.from_numpy_array(v, need_grad=True)
        if on_device:
            device.read(p.data)
        params["p{}".format(k)] = p
    return params


def _set_grads(params, grads, on_device):
    for p, g in zip(params.values(), grads):
        p.g = g
        if on_device:   # as a CUDA backward leaves it: the newest gradient on the device
            device.read(p.grad)


def _steps(make, values, grads, on_device):
    params = _params(values, on_device)
    solver = make()
    solver.set_parameters(params)
    for step, step_grads in enumerate(grads):
        _set_grads(params, step_grads, on_device)
        if step == 0:
            solver.weight_decay(0.05)
        else:
            solver.scale_grad(0.5)
            solver.clip_grad_by_norm(0.3)
        solver.update()
    if on_device:
        for p in params.values():
            assert written_on_device(p.data)
    return params, solver.get_states()


@pytest.mark.parametrize("name", sorted(SOLVERS))
@settings(max_examples=1, deadline=None, database=None)   # the simulator is slow
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), seed=st.integers(0, 2 ** 16))
def test_updates_on_the_device_match_the_host(name, shape, seed):
    rng = np.random.RandomState(seed)
    values = [rng.randn(*shape).astype(np.float32)]
    grads = [[rng.randn(*shape).astype(np.float32)] for _ in range(2)]
    host_params, host_states = _steps(SOLVERS[name], values, grads, on_device=False)
    dev_params, dev_states = _steps(SOLVERS[name], values, grads, on_device=True)
    for key in host_params:
        np.testing.assert_allclose(dev_params[key].d, host_params[key].d, rtol=1e-5, atol=1e-6)
        assert dev_states[key].t == host_states[key].t == 2
        for state in host_states[key].pstate:
            np.testing.assert_allclose(dev_states[key].pstate[state].d,
                                       host_states[key].pstate[state].d, rtol=1e-5, atol=1e-6)


def test_nonfinite_checks_read_device_gradients():
    params = _params([np.ones(3, np.float32)], on_device=True)
    _set_grads(params, [np.array([1, np.inf, 2], np.float32)], on_device=True)
    solver = S.Sgd()
    solver.set_parameters(params)
    assert solver.check_inf_grad() and not solver.check_nan_grad()


def _mlp(ctx):
    nn.clear_parameters()
    rng = np.random.RandomState(0)
    with nn.context_scope(ctx):
        x = nn.Variable.from_numpy_array(rng.randn(4, 5).astype(np.float32))
        t = nn.Variable.from_numpy_array(rng.randint(0, 3, (4, 1)).astype(np.int32))
        h = F.relu(PF.affine(x, 6, name="fc1", rng=np.random.RandomState(1)))
        loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 3, name="fc2",
                                                        rng=np.random.RandomState(2)), t))
    return loss


def test_a_training_step_after_the_first_copies_only_the_loss():
    loss = _mlp(get_extension_context("cudnn"))
    solver = S.Adam(0.01)
    solver.set_parameters(nn.get_parameters())
    losses = []
    for step in range(3):
        if step == 1:
            device.reset_stats()
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.weight_decay(1e-4)
        solver.update()
        losses.append(float(loss.d))
    copies = device.stats()
    assert copies["host_to_device"] == 0 and copies["host_to_device_bytes"] == 0
    assert copies["device_to_host"] == 2 and copies["device_to_host_bytes"] == 2 * 4
    assert losses[2] < losses[0]
    for p in nn.get_parameters().values():
        assert written_on_device(p.data)
