"""Data-parallel training of the digits CNN (examples/digits) over MPI: every process trains
the same model on its own slice of the data, and the gradients are averaged across processes
during backward (all_reduce_callback), so all processes hold the same parameters.

    mpirun -np 2 python examples/distributed/train.py [--epochs 15] [--out out/digits/digits_params.h5]
    (Open MPI run by root also needs: mpirun --allow-run-as-root --oversubscribe -np 2 ...)

MPI comes with the extra: pip install 'nnabla_jit[mpi]'. Started without mpirun, the script
trains in one process. Rank 0 shows the progress bar, prints the test accuracy (the run fails
below --target, 0.95 by default) and saves the parameters.
"""
import argparse
import importlib.util
import os
import sys

import numpy as np
from tqdm import tqdm

import nnabla_jit as nn
import nnabla_jit.communicators as C
import nnabla_jit.functions as F
import nnabla_jit.solvers as S
from nnabla_jit.ext_utils import get_extension_context
from nnabla_jit.kernel_cache import compile_status
from nnabla_jit.monitor import Monitor, MonitorSeries, MonitorTimeElapsed
from nnabla_jit.utils.data_iterator import data_iterator_simple


def _digits_example():
    """examples/digits/train.py as a module: its model, data split and accuracy."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "digits", "train.py")
    spec = importlib.util.spec_from_file_location("digits_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


digits = _digits_example()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="examples per process and step")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "out", "digits", "digits_params.h5")),
        help="where rank 0 saves the parameters (default: %(default)s, ignored by git)")
    parser.add_argument("--monitor-path", default=None,
                        help="folder for the loss series and timer files (rank 0)")
    parser.add_argument("--target", type=float, default=0.95, help="fail below this test accuracy")
    args = parser.parse_args(argv)

    ctx = get_extension_context("cpu")
    comm = C.MultiProcessDataParallelCommunicator(ctx)
    comm.init()
    nn.set_default_context(ctx)
    nn.random.seed(args.seed)
    np.random.seed(args.seed)

    # Every process draws the same shuffled order each epoch and reads its own slice of it.
    (train_x, train_y), (test_x, test_y) = digits.load_split(args.seed)
    data = data_iterator_simple(lambda i: (train_x[i], train_y[i]), len(train_x), args.batch_size,
                                shuffle=True, rng=np.random.RandomState(args.seed), use_thread=False)
    data = data.slice(rng=None, num_of_slices=comm.size, slice_pos=comm.rank)

    x = nn.Variable((args.batch_size, 1, 8, 8))
    t = nn.Variable((args.batch_size, 1))
    loss = F.mean(F.softmax_cross_entropy(digits.cnn(x), t))
    params = nn.get_parameters()
    comm.bcast([p.data for p in params.values()], src=0)   # one starting point for all
    solver = S.Adam(args.lr)
    solver.set_parameters(params)
    # Averages the gradients while backward runs, in packs of at least 64k values.
    all_reduce = comm.all_reduce_callback([p.grad for p in params.values()], 1 << 16, division=True)

    lead = comm.rank == 0
    if lead:
        print("data-parallel training on {} process(es), {} examples each".format(comm.size, data.size))
    monitors = None
    if lead and args.monitor_path:
        monitor = Monitor(args.monitor_path)
        monitors = (MonitorSeries("Training loss", monitor, interval=20, verbose=False),
                    MonitorTimeElapsed("Training time", monitor, interval=20, verbose=False))

    iterations = args.epochs * (data.size // args.batch_size)
    with tqdm(range(iterations), desc="training", unit="step", disable=not lead) as bar, compile_status(bar):
        for i in bar:
            x.d, t.d = data.next()
            loss.forward(clear_no_need_grad=True)
            solver.zero_grad()
            loss.backward(clear_buffer=True, communicator_callbacks=all_reduce)
            solver.weight_decay(1e-5)
            solver.update()
            if monitors:
                monitors[0].add(i, float(loss.d))
                monitors[1].add(i)
            if i % 20 == 0:
                bar.set_postfix(loss="{:.4f}".format(float(loss.d)))
    data.close()

    # Batch-norm statistics were gathered per process: evaluate with their average.
    comm.all_reduce([p.data for p in nn.get_parameters(grad_only=False).values()], division=True)
    acc = digits.accuracy(test_x, test_y)
    if lead:
        print("test accuracy: {:.4f} ({} images)".format(acc, len(test_x)))
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        nn.save_parameters(args.out)
        print("parameters saved to {}".format(args.out))
    if acc < args.target:
        if lead:
            print("accuracy below the target {:.2f}".format(args.target), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
