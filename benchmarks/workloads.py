"""The benchmark workloads, each written twice: nnabla_jit and PyTorch, same shapes and math.

``WORKLOADS[name] = (build_nnabla_jit, build_torch, title)``; each builder returns a ``step()``
callable that runs one training step (or forward+backward, or an inference), with graphs and
data built beforehand, so the loop measures steady-state throughput. ``OTHERS[name]`` adds
further implementations of a workload (onnxruntime for ResNet-50).
"""
import numpy as np

rng = np.random.RandomState(0)


# ------------------------------------------------------------------------------- nnabla_jit
def _nn():
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    import nnabla_jit.solvers as S
    nn.clear_parameters()
    return nn, F, PF, S


def _train_step(nn, loss, solver):
    def step():
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
    return step


def mlp_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(128, 784).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (128, 1)))
    h = F.relu(PF.affine(x, 1024, name="fc1"))
    h = F.relu(PF.affine(h, 1024, name="fc2"))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc3"), t))
    solver = S.Momentum(0.01, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(nn, loss, solver)


def lenet_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(64, 1, 28, 28).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (64, 1)))
    h = F.max_pooling(F.relu(PF.convolution(x, 16, (5, 5), name="conv1")), (2, 2))
    h = F.max_pooling(F.relu(PF.convolution(h, 32, (5, 5), name="conv2")), (2, 2))
    h = F.relu(PF.affine(h, 128, name="fc1"))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc2"), t))
    solver = S.Adam(1e-3)
    solver.set_parameters(nn.get_parameters())
    return _train_step(nn, loss, solver)


def convbn_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(32, 3, 32, 32).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (32, 1)))
    h = x
    for i, maps in enumerate([32, 64, 128]):
        h = PF.convolution(h, maps, (3, 3), pad=(1, 1), with_bias=False, name="conv%d" % i)
        h = F.max_pooling(F.relu(PF.batch_normalization(h, name="bn%d" % i)), (2, 2))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc"), t))
    solver = S.Momentum(0.01, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(nn, loss, solver)


def elementwise_nnabla_jit(clearing=True):
    """The chain, with the clearing flags (they free intermediates as PyTorch does, and let
    fusion keep them in registers) or without (``elementwise_plain``: as most programs write it,
    every intermediate value and gradient stays in its variable, nnabla's behaviour)."""
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(4 * 1024 * 1024).astype(np.float32), need_grad=True)
    loss = F.sum((F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5) ** 2)

    def step():
        loss.forward(clear_no_need_grad=clearing)
        x.grad.zero()
        loss.backward(clear_buffer=clearing)
    return step


def tiny_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(4).astype(np.float32), need_grad=True)
    h = x
    for _ in range(200):
        h = F.tanh(0.5 * h + 0.1)
    loss = F.sum(h)

    def step():
        loss.forward(clear_no_need_grad=True)
        loss.backward(clear_buffer=True)
    return step


def gradient_penalty_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(4, 3, 32, 32).astype(np.float32))
    y = nn.Variable.from_numpy_array(rng.randint(0, 10, (4, 1)))
    h = F.max_pooling(F.relu(PF.convolution(x, 8, (3, 3), (1, 1), name="conv1")), (2, 2))
    h = F.max_pooling(F.relu(PF.convolution(h, 16, (3, 3), (1, 1), name="conv2")), (2, 2))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="pred"), y))
    grads = nn.grad([loss], nn.get_parameters().values())
    gp = sum([(F.sum(g ** 2) ** 0.5 - 1) ** 2 for g in grads])
    total = loss + gp
    solver = S.Adam(1e-3)
    solver.set_parameters(nn.get_parameters())
    return _train_step(nn, total, solver)


def _resnet_cifar(nn, F, PF, x, stages=(2, 2, 2, 2), widths=(64, 128, 256, 512)):
    """ResNet-18, CIFAR variant: a 3x3 stem without pooling, four stages of basic blocks (the
    first of each later stage strided, with a 1x1 projection), global average pooling, fc10."""
    h = F.relu(PF.batch_normalization(PF.convolution(x, 64, (3, 3), pad=(1, 1), with_bias=False,
                                                     name="stem"), name="stem_bn"))
    for s, (blocks, width) in enumerate(zip(stages, widths)):
        for b in range(blocks):
            stride = 2 if s > 0 and b == 0 else 1
            with nn.parameter_scope("s{}b{}".format(s, b)):
                r = PF.convolution(h, width, (3, 3), pad=(1, 1), stride=(stride, stride),
                                   with_bias=False, name="conv1")
                r = F.relu(PF.batch_normalization(r, name="bn1"))
                r = PF.convolution(r, width, (3, 3), pad=(1, 1), with_bias=False, name="conv2")
                r = PF.batch_normalization(r, name="bn2")
                if stride != 1 or h.shape[1] != width:
                    h = PF.batch_normalization(PF.convolution(h, width, (1, 1), stride=(stride, stride),
                                                              with_bias=False, name="proj"), name="proj_bn")
                h = F.relu(r + h)
    h = F.average_pooling(h, h.shape[2:])
    return PF.affine(h, 10, name="fc")


def resnet18_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(32, 3, 32, 32).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (32, 1)))
    loss = F.mean(F.softmax_cross_entropy(_resnet_cifar(nn, F, PF, x), t))
    solver = S.Momentum(0.01, 0.9)
    solver.set_parameters(nn.get_parameters())
    return _train_step(nn, loss, solver)


def _resnet50(nn, F, PF, x):
    """ResNet-50 for inference (batch statistics off): 7x7/2 stem, 3x3/2 max pooling, bottleneck
    stages (3, 4, 6, 3) strided on their 3x3 convolution, global average pooling, fc1000."""
    def conv_bn(h, maps, k, stride=1, relu=True, name=""):
        h = PF.convolution(h, maps, (k, k), pad=(k // 2, k // 2), stride=(stride, stride),
                           with_bias=False, name=name)
        h = PF.batch_normalization(h, batch_stat=False, name=name + "_bn")
        return F.relu(h) if relu else h

    h = F.max_pooling(conv_bn(x, 64, 7, 2, name="stem"), (3, 3), (2, 2), pad=(1, 1))
    for s, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(blocks):
            stride = 2 if s > 0 and b == 0 else 1
            with nn.parameter_scope("s{}b{}".format(s, b)):
                r = conv_bn(h, width, 1, name="conv1")
                r = conv_bn(r, width, 3, stride, name="conv2")
                r = conv_bn(r, 4 * width, 1, relu=False, name="conv3")
                if b == 0:
                    h = conv_bn(h, 4 * width, 1, stride, relu=False, name="proj")
                h = F.relu(r + h)
    h = F.average_pooling(h, h.shape[2:])
    return PF.affine(h, 1000, name="fc")


def _resnet50_graph(batch):
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(batch, 3, 224, 224).astype(np.float32))
    y = _resnet50(nn, F, PF, x)
    for name, p in nn.get_parameters(grad_only=False).items():   # BN statistics of a trained net
        if name.endswith("/var"):
            p.d = rng.uniform(0.5, 1.5, p.shape)
        elif name.endswith("/mean"):
            p.d = rng.randn(*p.shape) * 0.1
    return nn, x, y


def _resnet50_nnabla_jit(batch):
    nn, x, y = _resnet50_graph(batch)

    def step():
        y.forward(clear_buffer=True)
    return step


def _resnet50_onnxruntime(batch):
    """onnxruntime (default threads) on nnabla_jit's own ONNX export of the same graph."""
    import onnxruntime as ort
    from nnabla_jit.serialization.onnx import to_model
    nn, x, y = _resnet50_graph(batch)
    model = to_model({"y": y}, {"x": x}, 17)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {"x": x.d.copy()}

    def step():
        session.run(None, feed)
    return step


# ------------------------------------------------------------------------------- PyTorch
def _torch():
    import torch
    torch.manual_seed(0)
    return torch


def _torch_train_step(torch, model, x, t, opt):
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), t)
        loss.backward()
        opt.step()
    return step


def mlp_torch():
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    x = torch.from_numpy(rng.randn(128, 784).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, 10, 128))
    return _torch_train_step(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.01, momentum=0.9))


def lenet_torch():
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.from_numpy(rng.randn(64, 1, 28, 28).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, 10, 64))
    return _torch_train_step(torch, model, x, t, torch.optim.Adam(model.parameters(), 1e-3))


def convbn_torch():
    torch = _torch()
    nn = torch.nn
    layers, c = [], 3
    for maps in [32, 64, 128]:
        layers += [nn.Conv2d(c, maps, 3, padding=1, bias=False), nn.BatchNorm2d(maps), nn.ReLU(), nn.MaxPool2d(2)]
        c = maps
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 4 * 4, 10))
    x = torch.from_numpy(rng.randn(32, 3, 32, 32).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, 10, 32))
    return _torch_train_step(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.01, momentum=0.9))


def elementwise_torch():
    torch = _torch()
    x = torch.from_numpy(rng.randn(4 * 1024 * 1024).astype(np.float32)).requires_grad_()

    def step():
        x.grad = None
        loss = ((torch.tanh(2 * x + 1) * torch.sigmoid(x) - 0.5) ** 2).sum()
        loss.backward()
    return step


def tiny_torch():
    torch = _torch()
    x = torch.from_numpy(rng.randn(4).astype(np.float32)).requires_grad_()

    def step():
        x.grad = None
        h = x
        for _ in range(200):
            h = torch.tanh(0.5 * h + 0.1)
        h.sum().backward()
    return step


def gradient_penalty_torch():
    torch = _torch()
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 8 * 8, 10))
    x = torch.from_numpy(rng.randn(4, 3, 32, 32).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, 10, 4))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), t)
        grads = torch.autograd.grad(loss, list(model.parameters()), create_graph=True)
        gp = sum((g.pow(2).sum().sqrt() - 1) ** 2 for g in grads)
        (loss + gp).backward()
        opt.step()
    return step


class _BasicBlock:
    @staticmethod
    def make(torch, cin, width, stride):
        nn = torch.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.branch = nn.Sequential(
                    nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                    nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width))
                self.proj = (nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))
                             if stride != 1 or cin != width else nn.Identity())

            def forward(self, h):
                return torch.relu(self.branch(h) + self.proj(h))
        return Block()


def resnet18_torch():
    torch = _torch()
    nn = torch.nn
    layers, cin = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
    for s, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            layers.append(_BasicBlock.make(torch, cin, width, 2 if s > 0 and b == 0 else 1))
            cin = width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))
    x = torch.from_numpy(rng.randn(32, 3, 32, 32).astype(np.float32))
    t = torch.from_numpy(rng.randint(0, 10, 32))
    return _torch_train_step(torch, model, x, t, torch.optim.SGD(model.parameters(), 0.01, momentum=0.9))


def _resnet50_torch(batch):
    torch = _torch()
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, relu=True):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride, first):
            super().__init__()
            self.branch = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                        conv_bn(width, 4 * width, 1, relu=False))
            self.proj = conv_bn(cin, 4 * width, 1, stride, relu=False) if first else nn.Identity()

        def forward(self, h):
            return torch.relu(self.branch(h) + self.proj(h))

    layers, cin = [conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)], 64
    for s, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if s > 0 and b == 0 else 1, b == 0))
            cin = 4 * width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)).eval()
    x = torch.from_numpy(rng.randn(batch, 3, 224, 224).astype(np.float32))

    def step():
        with torch.no_grad():
            model(x)
    return step


WORKLOADS = {
    "mlp": (mlp_nnabla_jit, mlp_torch, "MLP 784-1024-1024-10, batch 128, Momentum: training steps/s"),
    "lenet": (lenet_nnabla_jit, lenet_torch, "LeNet (conv5-16, pool, conv5-32, pool, fc128, fc10), batch 64, Adam"),
    "convbn": (convbn_nnabla_jit, convbn_torch, "3 x (conv3-BN-ReLU-pool) on 32x32x3, batch 32, Momentum"),
    "elementwise": (elementwise_nnabla_jit, elementwise_torch,
                    "sum((tanh(2x+1)*sigmoid(x)-0.5)**2), 4M floats, forward+backward"),
    "elementwise_plain": (lambda: elementwise_nnabla_jit(clearing=False), elementwise_torch,
                          "the elementwise chain without clearing flags (every value and gradient kept)"),
    "tiny": (tiny_nnabla_jit, tiny_torch, "600-op graph: 200 x tanh(0.5h+0.1) on 4 floats, forward+backward"),
    "gradient_penalty": (gradient_penalty_nnabla_jit, gradient_penalty_torch,
                         "seed 000 gradient-penalty step (conv net, nn.grad, penalty, backward, Adam)"),
    "resnet18": (resnet18_nnabla_jit, resnet18_torch,
                 "ResNet-18 (CIFAR variant: 3x3 stem, no pooling), 32x32x3, batch 32, Momentum: training step"),
    "resnet50_b1": (lambda: _resnet50_nnabla_jit(1), lambda: _resnet50_torch(1),
                    "ResNet-50 inference, 224x224x3, batch 1"),
    "resnet50_b8": (lambda: _resnet50_nnabla_jit(8), lambda: _resnet50_torch(8),
                    "ResNet-50 inference, 224x224x3, batch 8"),
}

# Further implementations of a workload, compared with nnabla_jit besides PyTorch:
# name -> {implementation: builder}. ResNet-50's is onnxruntime on nnabla_jit's own ONNX export.
OTHERS = {
    "resnet50_b1": {"onnxruntime": lambda: _resnet50_onnxruntime(1)},
    "resnet50_b8": {"onnxruntime": lambda: _resnet50_onnxruntime(8)},
}
