"""Threads build and train their own graphs under their own scopes (issue 9, item 3).

The parameter scope, the context scope and default context, ``auto_forward`` and ``no_grad``
are per thread; the parameter registry itself is shared (see the README's "Threads").
"""
import threading

import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.initializer as I
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.context import Context, get_default_context
from nnabla_jit.function import get_auto_forward

DOUBLE = Context(["cpu:double"])


def run_in_thread(fn):
    """Run ``fn`` in a new thread; re-raise what it raised."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:      # handed to the caller
            box["error"] = e
    t = threading.Thread(target=target)
    t.start()
    t.join(120)
    assert not t.is_alive(), "thread did not finish"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_scopes_and_flags_of_one_thread_do_not_leak_into_another():
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with nn.parameter_scope("A"), nn.context_scope(DOUBLE), nn.auto_forward(), nn.no_grad():
            nn.set_default_context(DOUBLE)      # a worker's default stays the worker's
            inside.set()
            done.wait(60)

    def other():
        inside.wait(60)
        x = nn.Variable((2, 3), need_grad=True)
        y = PF.affine(x, 4, name="fc")
        seen["params"] = sorted(nn.get_parameters(grad_only=False))
        seen["auto_forward"] = get_auto_forward()
        seen["need_grad"] = y.need_grad
        seen["context"] = nn.get_current_context()
        seen["default"] = get_default_context()
        done.set()

    a = threading.Thread(target=holder)
    a.start()
    try:
        run_in_thread(other)
    finally:
        done.set()
        a.join(60)
    assert seen == {"params": ["fc/affine/W", "fc/affine/b"], "auto_forward": False,
                    "need_grad": True, "context": Context(), "default": Context()}
    # the main thread is left at the root scope, in the default context
    assert sorted(nn.get_parameters(grad_only=False)) == ["fc/affine/W", "fc/affine/b"]
    assert nn.get_current_context() == Context()
    assert not get_auto_forward()


def test_what_the_main_thread_sets_is_every_threads_default():
    nn.set_default_context(DOUBLE)
    nn.set_auto_forward(True)
    try:
        assert run_in_thread(lambda: (nn.get_current_context(), get_auto_forward())) == (DOUBLE, True)
    finally:
        nn.set_auto_forward(False)
        nn.set_default_context(Context())


def train(scope, seed, steps, between_layers=lambda: None):
    """Build an MLP under ``scope`` and train it with momentum SGD; returns the losses and
    parameters. ``between_layers`` runs while the scope is entered (threads meet there)."""
    rng = np.random.RandomState(seed)
    x = nn.Variable.from_numpy_array(rng.randn(16, 4).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randn(16, 1).astype(np.float32))
    with nn.parameter_scope(scope):
        h = F.tanh(PF.affine(x, 8, name="fc1", w_init=I.UniformInitializer((-0.5, 0.5), rng=rng)))
        between_layers()
        y = PF.affine(h, 1, name="fc2", w_init=I.UniformInitializer((-0.5, 0.5), rng=rng))
        loss = F.mean(F.squared_error(y, t))
        params = nn.get_parameters()
    solver = S.Momentum(0.05, 0.9)
    solver.set_parameters(params)
    losses = []
    for _ in range(steps):
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
        losses.append(float(loss.d))
    return np.array(losses), {k: v.d.copy() for k, v in params.items()}


def test_two_threads_training_200_steps_match_the_single_thread_runs():
    expected = {name: train(name, seed, 200) for name, seed in (("A", 1), ("B", 2))}
    nn.clear_parameters()
    results = {}
    both_inside_their_scopes = threading.Barrier(2)

    def worker(name, seed):
        results[name] = train(name, seed, 200, lambda: both_inside_their_scopes.wait(60))

    threads = [threading.Thread(target=worker, args=a) for a in (("A", 1), ("B", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(results) == {"A", "B"}
    for name in ("A", "B"):
        losses, params = results[name]
        exp_losses, exp_params = expected[name]
        np.testing.assert_array_equal(losses, exp_losses)
        assert sorted(params) == sorted(exp_params)
        for k in params:
            np.testing.assert_array_equal(params[k], exp_params[k])
        assert losses[-1] < losses[0]
    assert sorted(nn.get_parameters(grad_only=False)) == [
        "{}/{}/affine/{}".format(s, fc, p) for s in "AB" for fc in ("fc1", "fc2") for p in "Wb"]
