"""Fill the kernel cache ahead of time (``nnabla_jit cache warm``).

Runs one float32 training step of small networks built from the common layers (convolution,
batch normalization, pooling, affine, the activations, softmax cross entropy, Adam, Momentum and
SGD), forward and backward, with and without fusion, so that the first step of a real training
script finds its kernels compiled in the cache. The networks are small: kernels are compiled per
argument type and layout, not per shape, so small shapes compile the same code.
"""
import time

import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S

__all__ = ["warm"]


def _cnn(x):
    h = PF.convolution(x, 4, (3, 3), pad=(1, 1), name="conv1")
    h = F.max_pooling(F.relu(PF.batch_normalization(h, name="bn1")), (2, 2))
    h = PF.convolution(h, 4, (3, 3), pad=(1, 1), name="conv2")
    h = F.average_pooling(F.relu(PF.batch_normalization(h, name="bn2")), (2, 2))
    h = F.max_pooling(F.relu(PF.convolution(h, 4, (1, 1), name="conv3")), (1, 1))
    h = F.tanh(PF.affine(h, 8, name="fc1"))
    h = F.sigmoid(PF.affine(F.relu(h), 8, name="fc2"))
    return PF.affine(h, 10, name="fc3")


def _steps():
    """(name, step) pairs, each a training step of a small network."""
    rng = np.random.RandomState(0)
    for name, solver, fused in (("cnn+adam", S.Adam(1e-3), True), ("cnn+momentum", S.Momentum(0.01, 0.9), False),
                                ("cnn+sgd", S.Sgd(0.01), True)):
        with nn.parameter_scope(name):
            x = nn.Variable.from_numpy_array(rng.rand(4, 1, 8, 8).astype(np.float32))
            t = nn.Variable.from_numpy_array(rng.randint(0, 10, (4, 1)).astype(np.int32))
            loss = F.mean(F.softmax_cross_entropy(_cnn(x), t))
            solver.set_parameters(nn.get_parameters())

        def step(loss=loss, solver=solver, fused=fused):
            loss.forward(clear_no_need_grad=fused)
            solver.zero_grad()
            loss.backward(clear_buffer=fused)
            solver.weight_decay(1e-5)
            solver.update()
        yield name, step


def warm(verbose=True):
    """Compile (or load from the cache) the kernels of the warm-up steps; returns the seconds."""
    start = time.perf_counter()
    saved = nn.get_parameters(grad_only=False)
    try:
        with nn.parameter_scope("__nnabla_jit_warmup__"):
            for name, step in _steps():
                t0 = time.perf_counter()
                step()
                if verbose:
                    print("  {:14} {:.1f} s".format(name, time.perf_counter() - t0), flush=True)
    finally:
        nn.clear_parameters()
        for key, value in saved.items():
            nn.parameter.set_parameter(key, value)
    return time.perf_counter() - start
