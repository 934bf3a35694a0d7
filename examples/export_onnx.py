"""Train the digits CNN briefly, save it as .nnp, convert it to ONNX with the command line
(``python -m nnabla_jit convert``), and check that onnxruntime predicts what nnabla_jit
predicts on the test images (same classes, logits within 1e-4).

    python examples/export_onnx.py [--epochs 4] [--opset 17] [--out-dir out/digits_onnx]

Needs the ONNX extras (``pip install 'nnabla_jit[onnx]'``) and scikit-learn. Exits with 1 if
the accuracy is below --target or the two runtimes disagree.
"""
import argparse
import importlib.util
import os
import subprocess
import sys

import numpy as np

import nnabla_jit as nn
from nnabla_jit.utils.save import save

HERE = os.path.dirname(os.path.abspath(__file__))


def digits_module():
    """examples/digits/train.py: the CNN, the data split and the training loop."""
    spec = importlib.util.spec_from_file_location("digits_train", os.path.join(HERE, "digits", "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_network(path, digits, images):
    """The inference network (batch normalization on its running statistics) as .nnp, with
    one batch of all test images; returns its input and output Variables."""
    x = nn.Variable(images.shape)
    logits = digits.cnn(x, test=True)
    save(path, {"networks": [{"name": "digits", "batch_size": len(images), "outputs": {"logits": logits},
                              "names": {"image": x}}],
                "executors": [{"name": "runtime", "network": "digits", "data": ["image"],
                               "output": ["logits"]}]})
    return x, logits


def convert_with_cli(nnp_path, onnx_path, opset):
    command = [sys.executable, "-m", "nnabla_jit", "convert", "-f", "--opset", str(opset), nnp_path,
               onnx_path]
    print("$", " ".join(command))
    subprocess.run(command, check=True)


def onnxruntime_logits(onnx_path, images):
    import onnxruntime as ort
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: images.astype(np.float32)})[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--out-dir", default=os.path.normpath(os.path.join(HERE, os.pardir, "out", "digits_onnx")),
                        help="where the .h5, .nnp and .onnx files go (default: %(default)s, ignored by git)")
    parser.add_argument("--target", type=float, default=0.9, help="fail below this test accuracy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    paths = {ext: os.path.join(args.out_dir, "digits" + ext) for ext in (".h5", ".nnp", ".onnx")}

    digits = digits_module()
    status = digits.main(["--epochs", str(args.epochs), "--seed", str(args.seed), "--out", paths[".h5"],
                          "--target", str(args.target)])
    if status:
        return status
    _, (test_x, test_y) = digits.load_split(args.seed)
    x, logits = save_network(paths[".nnp"], digits, test_x)
    print("saved {}".format(paths[".nnp"]))
    convert_with_cli(paths[".nnp"], paths[".onnx"], args.opset)

    x.d = test_x
    logits.forward(clear_buffer=True)
    ours = np.array(logits.d)
    theirs = onnxruntime_logits(paths[".onnx"], test_x)
    same_class = ours.argmax(axis=1) == theirs.argmax(axis=1)
    gap = float(np.abs(ours - theirs).max())
    print("nnabla_jit accuracy {:.4f}, onnxruntime accuracy {:.4f} ({} test images)".format(
        float((ours.argmax(axis=1) == test_y[:, 0]).mean()),
        float((theirs.argmax(axis=1) == test_y[:, 0]).mean()), len(test_x)))
    print("same predicted class for {} of {} images; largest logit difference {:.2e}".format(
        int(same_class.sum()), len(test_x), gap))
    if not same_class.all() or not np.allclose(ours, theirs, rtol=1e-4, atol=1e-4):
        print("onnxruntime and nnabla_jit disagree", file=sys.stderr)
        return 1
    print("onnxruntime agrees with nnabla_jit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
