"""The GPU benchmark workloads of ``gpu_check.py``, each as an nnabla_jit and a PyTorch CUDA
step, same shapes and math.

``nnabla_jit_step(name, size)`` builds under the current default context (``gpu_check`` sets a
``cudnn`` one) and ``torch_step(name, size)`` on ``cuda`` (or the CPU where PyTorch has no GPU);
each returns a ``step()`` running one training step (or one inference) with graphs and data
built beforehand. ``size`` is "full" (the shapes below) or "tiny" (the same code on shapes
numba's simulator runs in seconds, for ``gpu_check.py --simulate``).

The MLP, LeNet, BN-CNN and elementwise chain at full size are ``workloads.py``'s nnabla_jit
builders (its PyTorch ones build on the CPU, so their CUDA twins are here); the ResNets are
defined here only: ResNet-18 in its CIFAR form (3x3 stem, no max pooling, basic blocks
[2, 2, 2], widths 64-512, 32x32 inputs, 10 classes) trained with Momentum, and ResNet-50
(torchvision's v1.5: the stride on the 3x3 convolution of a bottleneck) run for inference.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

TITLES = {
    "elementwise": "fused elementwise chain sum((tanh(2x+1)*sigmoid(x)-0.5)**2), 4M floats, fwd+bwd",
    "mlp": "MLP 784-1024-1024-10, b128, Momentum: training step",
    "lenet": "LeNet (conv5-16, pool, conv5-32, pool, fc128, fc10), b64, Adam: training step",
    "convbn": "BN-CNN 3 x (conv3-BN-ReLU-pool) on 3x32x32, b32, Momentum: training step",
    "resnet18": "ResNet-18 (CIFAR form) on 3x32x32, b128, Momentum: training step",
    "resnet50_b1": "ResNet-50 inference on 3x224x224, b1",
    "resnet50_b32": "ResNet-50 inference on 3x224x224, b32",
}
HAS_GEMM = {"mlp", "lenet", "convbn", "resnet18", "resnet50_b1", "resnet50_b32"}

# (batch, image side, widths, blocks per stage) of the ResNets
RESNET18 = {"full": (128, 32, (64, 128, 256, 512), (2, 2, 2, 2)),
            "tiny": (2, 4, (2, 2, 2, 2), (1, 1, 1, 1))}
RESNET50 = {"full": (None, 224, (64, 128, 256, 512), (3, 4, 6, 3)),
            "tiny": (None, 8, (1, 1, 1, 1), (1, 1, 1, 1))}
ELEMENTWISE = {"full": 4 * 1024 * 1024, "tiny": 64}

rng = np.random.RandomState(0)


# ----------------------------------------------------------------------------- nnabla_jit
def _nn():
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    import nnabla_jit.solvers as S
    nn.clear_parameters()
    return nn, F, PF, S


def _bn_relu(F, PF, h, name, test, relu=True):
    h = PF.batch_normalization(h, batch_stat=not test, name=name)
    return F.relu(h) if relu else h


def _basic_block(nn, F, PF, h, width, stride, name):
    with nn.parameter_scope(name):
        y = PF.convolution(h, width, (3, 3), pad=(1, 1), stride=(stride, stride), with_bias=False,
                           name="conv1")
        y = _bn_relu(F, PF, y, "bn1", False)
        y = PF.convolution(y, width, (3, 3), pad=(1, 1), with_bias=False, name="conv2")
        y = _bn_relu(F, PF, y, "bn2", False, relu=False)
        s = h
        if stride != 1 or h.shape[1] != width:
            s = PF.convolution(h, width, (1, 1), stride=(stride, stride), with_bias=False,
                               name="short")
            s = _bn_relu(F, PF, s, "short_bn", False, relu=False)
        return F.relu(y + s)


def _bottleneck(nn, F, PF, h, width, stride, name):
    with nn.parameter_scope(name):
        y = _bn_relu(F, PF, PF.convolution(h, width, (1, 1), with_bias=False, name="conv1"),
                     "bn1", True)
        y = _bn_relu(F, PF, PF.convolution(y, width, (3, 3), pad=(1, 1), stride=(stride, stride),
                                           with_bias=False, name="conv2"), "bn2", True)
        y = _bn_relu(F, PF, PF.convolution(y, 4 * width, (1, 1), with_bias=False, name="conv3"),
                     "bn3", True, relu=False)
        s = h
        if stride != 1 or h.shape[1] != 4 * width:
            s = PF.convolution(h, 4 * width, (1, 1), stride=(stride, stride), with_bias=False,
                               name="short")
            s = _bn_relu(F, PF, s, "short_bn", True, relu=False)
        return F.relu(y + s)


def _resnet18_nn(size):
    nn, F, PF, S = _nn()
    batch, side, widths, blocks = RESNET18[size]
    x = nn.Variable.from_numpy_array(rng.randn(batch, 3, side, side).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (batch, 1)))
    h = _bn_relu(F, PF, PF.convolution(x, widths[0], (3, 3), pad=(1, 1), with_bias=False,
                                       name="stem"), "stem_bn", False)
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            h = _basic_block(nn, F, PF, h, width, 2 if stage and not i else 1,
                             "s%d_b%d" % (stage, i))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(F.global_average_pooling(h), 10, name="fc"), t))
    solver = S.Momentum(0.1, 0.9)
    solver.set_parameters(nn.get_parameters())
    return workloads._train_step(nn, loss, solver)


def _resnet50_nn(size, batch):
    nn, F, PF, S = _nn()
    _, side, widths, blocks = RESNET50[size]
    x = nn.Variable.from_numpy_array(rng.randn(batch, 3, side, side).astype(np.float32))
    h = _bn_relu(F, PF, PF.convolution(x, widths[0], (7, 7), pad=(3, 3), stride=(2, 2),
                                       with_bias=False, name="stem"), "stem_bn", True)
    h = F.max_pooling(h, (3, 3), (2, 2), pad=(1, 1))
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            h = _bottleneck(nn, F, PF, h, width, 2 if stage and not i else 1,
                            "s%d_b%d" % (stage, i))
    y = PF.affine(F.global_average_pooling(h), 1000, name="fc")

    def step():
        y.forward(clear_buffer=True)
    return step


def _elementwise_nn(size):
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(ELEMENTWISE[size]).astype(np.float32),
                                     need_grad=True)
    loss = F.sum((F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5) ** 2)

    def step():
        loss.forward(clear_no_need_grad=True)
        x.grad.zero()
        loss.backward(clear_buffer=True)
    return step


def nnabla_jit_step(name, size="full"):
    """One step of workload ``name`` in nnabla_jit, built under the current default context."""
    if name == "resnet18":
        return _resnet18_nn(size)
    if name.startswith("resnet50_b"):
        return _resnet50_nn(size, int(name[len("resnet50_b"):]))
    if name == "elementwise":
        return _elementwise_nn(size)
    if size != "full":
        raise ValueError("gpu_workloads: {} has only its full size (workloads.py's)".format(name))
    return {"mlp": workloads.mlp_nnabla_jit, "lenet": workloads.lenet_nnabla_jit,
            "convbn": workloads.convbn_nnabla_jit}[name]()


# ----------------------------------------------------------------------------- PyTorch
def _torch():
    import torch
    torch.manual_seed(0)
    return torch, ("cuda" if torch.cuda.is_available() else "cpu")


def _torch_train(torch, model, x, t, opt):
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss_fn(model(x), t).backward()
        opt.step()
    return step


def _on(torch, dev, *arrays):
    return [torch.from_numpy(a).to(dev) for a in arrays]


def _torch_mlp(torch, dev):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(dev)
    x, t = _on(torch, dev, rng.randn(128, 784).astype(np.float32), rng.randint(0, 10, 128))
    return _torch_train(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.01, momentum=0.9))


def _torch_lenet(torch, dev):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(dev)
    x, t = _on(torch, dev, rng.randn(64, 1, 28, 28).astype(np.float32), rng.randint(0, 10, 64))
    return _torch_train(torch, model, x, t, torch.optim.Adam(model.parameters(), 1e-3))


def _torch_convbn(torch, dev):
    nn = torch.nn
    layers, c = [], 3
    for maps in [32, 64, 128]:
        layers += [nn.Conv2d(c, maps, 3, padding=1, bias=False), nn.BatchNorm2d(maps), nn.ReLU(),
                   nn.MaxPool2d(2)]
        c = maps
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 4 * 4, 10)).to(dev)
    x, t = _on(torch, dev, rng.randn(32, 3, 32, 32).astype(np.float32), rng.randint(0, 10, 32))
    return _torch_train(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.01, momentum=0.9))


def _torch_resnet(torch, widths, blocks, bottleneck, stem, classes):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c_in, width, stride):
            super().__init__()
            c_out = 4 * width if bottleneck else width
            if bottleneck:
                self.body = nn.Sequential(
                    nn.Conv2d(c_in, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                    nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                    nn.ReLU(), nn.Conv2d(width, c_out, 1, bias=False), nn.BatchNorm2d(c_out))
            else:
                self.body = nn.Sequential(
                    nn.Conv2d(c_in, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width),
                    nn.ReLU(), nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width))
            self.short = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            self.c_out = c_out

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    layers, c = list(stem), widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for i in range(count):
            block = Block(c, width, 2 if stage and not i else 1)
            layers.append(block)
            c = block.c_out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def _torch_resnet18(torch, dev, size):
    nn = torch.nn
    batch, side, widths, blocks = RESNET18[size]
    stem = [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()]
    model = _torch_resnet(torch, widths, blocks, False, stem, 10).to(dev)
    x, t = _on(torch, dev, rng.randn(batch, 3, side, side).astype(np.float32),
               rng.randint(0, 10, batch))
    return _torch_train(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.1, momentum=0.9))


def _torch_resnet50(torch, dev, size, batch):
    nn = torch.nn
    _, side, widths, blocks = RESNET50[size]
    stem = [nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1)]
    model = _torch_resnet(torch, widths, blocks, True, stem, 1000).to(dev).eval()
    (x,) = _on(torch, dev, rng.randn(batch, 3, side, side).astype(np.float32))

    def step():
        with torch.inference_mode():
            model(x)
    return step


def _torch_elementwise(torch, dev, size):
    (x,) = _on(torch, dev, rng.randn(ELEMENTWISE[size]).astype(np.float32))
    x.requires_grad_()

    def step():
        x.grad = None
        ((torch.tanh(2 * x + 1) * torch.sigmoid(x) - 0.5) ** 2).sum().backward()
    return step


def torch_step(name, size="full"):
    """One step of workload ``name`` in PyTorch, on its GPU (CPU where it has none)."""
    torch, dev = _torch()
    if name == "resnet18":
        return _torch_resnet18(torch, dev, size)
    if name.startswith("resnet50_b"):
        return _torch_resnet50(torch, dev, size, int(name[len("resnet50_b"):]))
    if name == "elementwise":
        return _torch_elementwise(torch, dev, size)
    if size != "full":
        raise ValueError("gpu_workloads: {} has only its full size".format(name))
    return {"mlp": _torch_mlp, "lenet": _torch_lenet, "convbn": _torch_convbn}[name](torch, dev)
