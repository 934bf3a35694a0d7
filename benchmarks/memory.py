"""Peak memory of a training step: nnabla_jit against nnabla 1.39 (issue 20, item 4c).

Each figure is from a fresh process: ``ru_maxrss`` after importing the library (``import``),
after building the graph, parameters and solver (``built``), after the first training step
(which compiles on nnabla_jit: ``step 1``) and after N steps (``peak``); ``step`` is peak minus
built, the memory the training steps themselves take. The networks are written once, for
either library (their APIs are the same)::

    python benchmarks/memory.py                              # nnabla_jit
    /work/shared/tools/nnabla-oracle python benchmarks/memory.py --lib nnabla
    python benchmarks/memory.py --both                       # both, one table

RSS hardly depends on the machine's load, so these figures hold on a busy machine.
"""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

WORKLOADS = ("mlp", "convbn", "resnet18")
ORACLE = "/work/shared/tools/nnabla-oracle"


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _train_step(loss, solver):
    def step():
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
    return step


def _mlp(nn, F, PF, S, rng):
    x = nn.Variable.from_numpy_array(rng.randn(128, 784).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (128, 1)))
    h = F.relu(PF.affine(x, 1024, name="fc1"))
    h = F.relu(PF.affine(h, 1024, name="fc2"))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc3"), t))
    solver = S.Momentum(0.01, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(loss, solver)


def _convbn(nn, F, PF, S, rng):
    x = nn.Variable.from_numpy_array(rng.randn(32, 3, 32, 32).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (32, 1)))
    h = x
    for i, maps in enumerate([32, 64, 128]):
        h = PF.convolution(h, maps, (3, 3), pad=(1, 1), with_bias=False, name="conv%d" % i)
        h = F.max_pooling(F.relu(PF.batch_normalization(h, name="bn%d" % i)), (2, 2))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc"), t))
    solver = S.Momentum(0.01, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(loss, solver)


def _basic_block(nn, F, PF, h, width, stride):
    y = PF.convolution(h, width, (3, 3), pad=(1, 1), stride=(stride, stride), with_bias=False,
                       name="conv1")
    y = F.relu(PF.batch_normalization(y, name="bn1"))
    y = PF.convolution(y, width, (3, 3), pad=(1, 1), with_bias=False, name="conv2")
    y = PF.batch_normalization(y, name="bn2")
    s = h
    if stride != 1 or h.shape[1] != width:
        s = PF.convolution(h, width, (1, 1), stride=(stride, stride), with_bias=False, name="short")
        s = PF.batch_normalization(s, name="short_bn")
    return F.relu(y + s)


def _resnet18(nn, F, PF, S, rng, batch=32):
    """ResNet-18 in its CIFAR form (3x3 stem, no max pooling), as benchmarks/gpu_workloads.py."""
    x = nn.Variable.from_numpy_array(rng.randn(batch, 3, 32, 32).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (batch, 1)))
    h = PF.convolution(x, 64, (3, 3), pad=(1, 1), with_bias=False, name="stem")
    h = F.relu(PF.batch_normalization(h, name="stem_bn"))
    for stage, width in enumerate((64, 128, 256, 512)):
        for i in range(2):
            with nn.parameter_scope("s%d_b%d" % (stage, i)):
                h = _basic_block(nn, F, PF, h, width, 2 if stage and not i else 1)
    loss = F.mean(F.softmax_cross_entropy(PF.affine(F.global_average_pooling(h), 10, name="fc"), t))
    solver = S.Momentum(0.1, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(loss, solver)


BUILDERS = {"mlp": _mlp, "convbn": _convbn, "resnet18": _resnet18}


def measure(lib, name, steps):
    """One process's figures (MB) for workload ``name`` on ``lib``."""
    if lib == "nnabla":
        import nnabla as nn
        import nnabla.functions as F
        import nnabla.parametric_functions as PF
        import nnabla.solvers as S
    else:
        import nnabla_jit as nn
        import nnabla_jit.functions as F
        import nnabla_jit.parametric_functions as PF
        import nnabla_jit.solvers as S
    imported = _rss_mb()
    step = BUILDERS[name](nn, F, PF, S, np.random.RandomState(0))
    built = _rss_mb()
    step()
    first = _rss_mb()
    for _ in range(steps - 1):
        step()
    peak = _rss_mb()
    return {"lib": lib, "workload": name, "import": imported, "built": built, "step 1": first,
            "peak": peak, "step": peak - built}


def _run_child(lib, name, steps):
    if lib == "nnabla":
        cmd = [ORACLE, "python", os.path.abspath(__file__)]
    else:
        cmd = [sys.executable, os.path.abspath(__file__)]
    cmd += ["--lib", lib, "--child", name, "--steps", str(steps)]
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", default="nnabla_jit", choices=("nnabla_jit", "nnabla"))
    p.add_argument("--both", action="store_true", help="nnabla_jit and nnabla (the oracle)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure(a.lib, a.child, a.steps)))
        return
    libs = ("nnabla_jit", "nnabla") if a.both else (a.lib,)
    cols = ("import", "built", "step 1", "peak", "step")
    print("| workload | library | " + " | ".join(c + " (MB)" for c in cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for name in a.workloads:
        for lib in libs:
            r = _run_child(lib, name, a.steps)
            print("| {} | {} | {} |".format(name, lib, " | ".join("%.0f" % r[c] for c in cols)),
                  flush=True)


if __name__ == "__main__":
    main()
