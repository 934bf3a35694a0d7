"""Train a small CNN on scikit-learn's bundled 8x8 handwritten digits (no download needed).

    python examples/digits/train.py [--epochs 15] [--out out/digits/digits_params.h5]

Shows a progress bar, prints the test accuracy (the script fails below --target, 0.95 by
default) and saves the trained parameters in nnabla's .h5 layout, which nnabla 1.39 loads too,
by default under the repository's ``out/`` folder (ignored by git).
"""
import argparse
import importlib.util
import os
import sys

import numpy as np
from tqdm import tqdm

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.kernel_cache import compile_status
from nnabla_jit.utils.data_iterator import data_iterator_simple

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "out", "digits")


def cnn(x, test=False):
    """conv-BN-ReLU-maxpool, conv-BN-ReLU-avgpool, fc64, fc10 on 1x8x8 images."""
    h = PF.convolution(x, 16, (3, 3), pad=(1, 1), name="conv1")
    h = F.max_pooling(F.relu(PF.batch_normalization(h, batch_stat=not test, name="bn1")), (2, 2))
    h = PF.convolution(h, 32, (3, 3), pad=(1, 1), name="conv2")
    h = F.average_pooling(F.relu(PF.batch_normalization(h, batch_stat=not test, name="bn2")), (2, 2))
    h = F.relu(PF.affine(h, 64, name="fc1"))
    return PF.affine(h, 10, name="fc2")


def load_digits():
    """scikit-learn's bundled digits: images (N, 8, 8) with values 0..16, labels (N,). Read from
    the file scikit-learn ships (what its ``load_digits`` reads) without importing scikit-learn,
    which costs a second of start-up; through ``load_digits`` if that file has moved."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None:
        raise SystemExit("the digits example needs scikit-learn: pip install 'nnabla_jit[examples]'")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")
    if not os.path.exists(path):
        from sklearn.datasets import load_digits as sklearn_digits   # only where the file moved
        digits = sklearn_digits()
        return digits.images, digits.target
    table = np.loadtxt(path, delimiter=",")   # a row: 64 pixels, then the label
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def load_split(seed=0, test_fraction=0.2):
    images, labels = load_digits()
    images = (images / 16.0).astype(np.float32)[:, None]   # (N, 1, 8, 8) in [0, 1]
    labels = labels.astype(np.int32)[:, None]
    order = np.random.RandomState(seed).permutation(len(images))
    n_test = int(len(images) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (images[train], labels[train]), (images[test], labels[test])


def accuracy(images, labels, batch_size=128):
    x = nn.Variable((batch_size, 1, 8, 8))
    pred = cnn(x, test=True)
    correct = 0
    for i in range(0, len(images), batch_size):
        chunk = images[i:i + batch_size]
        x.d[:len(chunk)] = chunk
        pred.forward(clear_buffer=True)
        correct += int((pred.d[:len(chunk)].argmax(axis=1) == labels[i:i + batch_size, 0]).sum())
    return correct / len(images)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.normpath(os.path.join(OUT_DIR, "digits_params.h5")),
                        help="where to save the parameters (default: %(default)s)")
    parser.add_argument("--target", type=float, default=0.95, help="fail below this test accuracy")
    args = parser.parse_args(argv)

    nn.random.seed(args.seed)
    np.random.seed(args.seed)
    (train_x, train_y), (test_x, test_y) = load_split(args.seed)
    data = data_iterator_simple(lambda i: (train_x[i], train_y[i]), len(train_x), args.batch_size,
                                shuffle=True, rng=np.random.RandomState(args.seed))

    x = nn.Variable((args.batch_size, 1, 8, 8))
    t = nn.Variable((args.batch_size, 1))
    loss = F.mean(F.softmax_cross_entropy(cnn(x), t))
    solver = S.Adam(args.lr)
    solver.set_parameters(nn.get_parameters())

    iterations = args.epochs * (data.size // args.batch_size)
    with tqdm(range(iterations), desc="training", unit="step") as bar, compile_status(bar):
        for i in bar:
            x.d, t.d = data.next()
            loss.forward(clear_no_need_grad=True)
            solver.zero_grad()
            loss.backward(clear_buffer=True)
            solver.weight_decay(1e-5)
            solver.update()
            if i % 20 == 0:
                bar.set_postfix(loss="{:.4f}".format(float(loss.d)))

    acc = accuracy(test_x, test_y)
    print("test accuracy: {:.4f} ({} images)".format(acc, len(test_x)))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    nn.save_parameters(args.out)
    print("parameters saved to {}".format(args.out))
    if acc < args.target:
        print("accuracy below the target {:.2f}".format(args.target), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
