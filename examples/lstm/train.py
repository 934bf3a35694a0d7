"""Train an LSTM on the adding problem, a classic test of long-range memory (no download).

    python examples/lstm/train.py [--steps 500] [--length 20] [--target 0.01]

Each input step carries two channels: a random value in [0, 1) and a marker that is 1 at
exactly two positions, one in each half of the sequence. The target is the sum of the two marked
values, so the network has to remember the first one across many steps. Predicting the mean
(always 1.0) scores a mean squared error of about 0.167; the LSTM (``PF.lstm``: one registry op
running the whole sequence, BPTT in its backward) gets below ``--target`` (0.01 by default) on
held-out sequences. The script shows a progress bar, prints the final losses, and exits with 1
if the target is missed.
"""
import argparse
import sys

import numpy as np
from tqdm import tqdm

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.kernel_cache import compile_status


def adding_batch(rng, batch_size, length):
    """Inputs (T, B, 2) and targets (B, 1) of the adding problem."""
    values = rng.uniform(0, 1, (length, batch_size))
    markers = np.zeros((length, batch_size))
    half = length // 2
    cols = np.arange(batch_size)
    first, second = rng.randint(0, half, batch_size), rng.randint(half, length, batch_size)
    markers[first, cols] = 1
    markers[second, cols] = 1
    x = np.stack([values, markers], axis=2).astype(np.float32)
    t = (values[first, cols] + values[second, cols])[:, None].astype(np.float32)
    return x, t


def model(x, hidden):
    """LSTM over the sequence, then a linear read-out of the last hidden state."""
    batch_size = x.shape[1]
    h0 = F.constant(0, (1, 1, batch_size, hidden))
    c0 = F.constant(0, (1, 1, batch_size, hidden))
    y, _, _ = PF.lstm(x, h0, c0, name="lstm")
    return PF.affine(y[x.shape[0] - 1], 1, name="readout")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--length", type=int, default=20, help="sequence length")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.01, help="fail above this test MSE")
    args = parser.parse_args(argv)

    nn.random.seed(args.seed)
    rng = np.random.RandomState(args.seed)
    x = nn.Variable((args.length, args.batch_size, 2))
    t = nn.Variable((args.batch_size, 1))
    loss = F.mean(F.squared_error(model(x, args.hidden), t))
    solver = S.Adam(args.lr)
    solver.set_parameters(nn.get_parameters())

    with tqdm(range(args.steps), desc="training", unit="step") as bar, compile_status(bar):
        for i in bar:
            x.d, t.d = adding_batch(rng, args.batch_size, args.length)
            loss.forward(clear_no_need_grad=True)
            solver.zero_grad()
            loss.backward(clear_buffer=True)
            solver.update()
            if i % 10 == 0:
                bar.set_postfix(mse="{:.4f}".format(float(loss.d)))

    test_x = nn.Variable((args.length, 512, 2))
    test_t = nn.Variable((512, 1))
    test_loss = F.mean(F.squared_error(model(test_x, args.hidden), test_t))
    test_x.d, test_t.d = adding_batch(np.random.RandomState(args.seed + 1), 512, args.length)
    test_loss.forward()
    mse = float(test_loss.d)
    print("final training MSE: {:.4f}".format(float(loss.d)))
    print("test MSE: {:.4f} (predicting the mean scores about 0.167; target {})".format(mse, args.target))
    if not mse <= args.target:
        print("test MSE above the target {}".format(args.target), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
