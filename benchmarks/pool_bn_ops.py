"""Per-op timing of MaxPooling (2x2, stride 2) and BatchNormalization (training and inference),
forward and backward, against torch.nn.functional.max_pool2d / batch_norm (forward, and autograd
backward of the same graph), float32, same thread count, rounds interleaved.

    NNABLA_JIT_DEFER_PARALLEL=0 python benchmarks/pool_bn_ops.py [pool] [bn] [bninf]
    BENCH_SERIAL=1 ...   # one thread each: nnabla_jit's serial kernels, torch.set_num_threads(1)

The ops are called directly (op.forward / op.backward on preallocated arrays: no executor).
Each figure is the best of 7 rounds of 20 calls (medians in brackets); a 50 ms sleep before each
round lets the other library's OpenMP workers stop spinning. Nothing is asserted."""
import os
import sys
import time

os.environ.setdefault("NNABLA_JIT_DEFER_PARALLEL", "0")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402

from nnabla_jit.ops.kernels import parallel_threshold  # noqa: E402
from nnabla_jit.ops.registry import REGISTRY  # noqa: E402

SERIAL = os.environ.get("BENCH_SERIAL") == "1"
torch.set_num_threads(1 if SERIAL else 2)
if SERIAL:   # kept referenced: a collected context manager would restore the threshold
    _serial = parallel_threshold(None)
    _serial.__enter__()

POOL_SHAPES = [(32, 32, 32, 32), (64, 16, 24, 24), (32, 64, 16, 16), (32, 128, 8, 8)]
BN_SHAPES = [(32, 32, 32, 32), (32, 64, 16, 16), (32, 128, 8, 8)]


def timeit(fn, reps):
    time.sleep(0.05)   # let the other library's OpenMP workers stop spinning
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def compare(label, ours, theirs, rounds=7):
    reps = 20
    a, b = [], []
    for _ in range(rounds):
        a.append(timeit(ours, reps))
        b.append(timeit(theirs, reps))
    # the best round of each: the machine is shared, and a round slowed by others says nothing
    print("{:<40s} ours {:8.0f} us  torch {:8.0f} us  ratio {:5.2f}   (medians {:.0f} / {:.0f})".format(
        label, min(a), min(b), min(a) / min(b), np.median(a), np.median(b)), flush=True)


def pool_case(shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    op = REGISTRY["MaxPooling"](input_names=("x",), kernel=(2, 2), stride=(2, 2), ignore_border=True,
                                pad=(0, 0), channel_last=False)
    out = op.setup(x.shape)[0]
    y = np.empty(out, dtype)
    dy = rng.standard_normal(out).astype(dtype)
    dx = np.empty_like(x)
    tx = torch.from_numpy(x.copy())
    tdy = torch.from_numpy(dy)
    compare("maxpool fwd {}".format(shape), lambda: op.forward([x], [y]),
            lambda: TF.max_pool2d(tx, 2, 2))
    op.forward([x], [y])
    txg = tx.clone().requires_grad_(True)
    ty = TF.max_pool2d(txg, 2, 2)
    def tb():
        txg.grad = None
        ty.backward(tdy, retain_graph=True)
    compare("maxpool bwd {}".format(shape),
            lambda: op.backward([x], [y], [dy], [dx], [True], [False]), tb)


def bn_case(shape, batch_stat, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    C = shape[1]
    ps = (1, C, 1, 1)
    beta = rng.standard_normal(ps).astype(dtype)
    gamma = rng.standard_normal(ps).astype(dtype)
    mean = np.zeros(ps, dtype)
    var = np.ones(ps, dtype)
    op = REGISTRY["BatchNormalization"](input_names=("x", "beta", "gamma", "mean", "variance"), axes=(1,),
                                        decay_rate=0.9, eps=1e-5, batch_stat=batch_stat,
                                        no_scale=False, no_bias=False)
    op.setup(x.shape, ps, ps, ps, ps)
    y = np.empty_like(x)
    dy = rng.standard_normal(shape).astype(dtype)
    dx = np.empty_like(x)
    dbeta = np.empty(ps, dtype)
    dgamma = np.empty(ps, dtype)
    ins = [x, beta, gamma, mean, var]
    tx, tb_, tg = torch.from_numpy(x.copy()), torch.from_numpy(beta.reshape(-1).copy()), torch.from_numpy(gamma.reshape(-1).copy())
    tm, tv = torch.zeros(C), torch.ones(C)
    tag = "train" if batch_stat else "infer"
    compare("BN {} fwd {}".format(tag, shape), lambda: op.forward(ins, [y]),
            lambda: TF.batch_norm(tx, tm, tv, tg, tb_, training=batch_stat, momentum=0.1, eps=1e-5))
    op.forward(ins, [y])
    txg = tx.clone().requires_grad_(True)
    tgg = tg.clone().requires_grad_(True)
    tbg = tb_.clone().requires_grad_(True)
    ty = TF.batch_norm(txg, tm, tv, tgg, tbg, training=batch_stat, momentum=0.1, eps=1e-5)
    tdy = torch.from_numpy(dy)
    def tback():
        txg.grad = tgg.grad = tbg.grad = None
        ty.backward(tdy, retain_graph=True)
    compare("BN {} bwd {}".format(tag, shape),
            lambda: op.backward(ins, [y], [dy], [dx, dbeta, dgamma, None, None],
                                [True, True, True, False, False], [False] * 5), tback)


if __name__ == "__main__":
    which = sys.argv[1:] or ["pool", "bn", "bninf"]
    os.system("uptime")
    import nnabla_jit
    print(nnabla_jit.__file__, "serial" if SERIAL else "2 threads")
    if "pool" in which:
        for s in POOL_SHAPES:
            pool_case(s)
    if "bn" in which:
        for s in BN_SHAPES:
            bn_case(s, True)
    if "bninf" in which:
        for s in BN_SHAPES:
            bn_case(s, False)
    os.system("uptime")
