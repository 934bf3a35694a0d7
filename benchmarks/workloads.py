"""The benchmark workloads, each written twice: nnabla_jit and PyTorch, same shapes and math.

``WORKLOADS[name] = (build_nnabla_jit, build_torch)``; each builder returns a ``step()``
callable that runs one training step (or forward+backward), with graphs and data built
beforehand, so the loop measures steady-state throughput.
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


def elementwise_nnabla_jit():
    nn, F, PF, S = _nn()
    x = nn.Variable.from_numpy_array(rng.randn(4 * 1024 * 1024).astype(np.float32), need_grad=True)
    loss = F.sum((F.tanh(2 * x + 1) * F.sigmoid(x) - 0.5) ** 2)

    def step():   # the clearing flags free intermediates as PyTorch does (and enable fusion)
        loss.forward(clear_no_need_grad=True)
        x.grad.zero()
        loss.backward(clear_buffer=True)
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


WORKLOADS = {
    "mlp": (mlp_nnabla_jit, mlp_torch, "MLP 784-1024-1024-10, batch 128, Momentum: training steps/s"),
    "lenet": (lenet_nnabla_jit, lenet_torch, "LeNet (conv5-16, pool, conv5-32, pool, fc128, fc10), batch 64, Adam"),
    "convbn": (convbn_nnabla_jit, convbn_torch, "3 x (conv3-BN-ReLU-pool) on 32x32x3, batch 32, Momentum"),
    "elementwise": (elementwise_nnabla_jit, elementwise_torch,
                    "sum((tanh(2x+1)*sigmoid(x)-0.5)**2), 4M floats, forward+backward"),
    "tiny": (tiny_nnabla_jit, tiny_torch, "600-op graph: 200 x tanh(0.5h+0.1) on 4 floats, forward+backward"),
    "gradient_penalty": (gradient_penalty_nnabla_jit, gradient_penalty_torch,
                         "seed 000 gradient-penalty step (conv net, nn.grad, penalty, backward, Adam)"),
}
