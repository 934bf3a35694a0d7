"""A few clearing training steps, for tests comparing two ways of running the same network."""
import nnabla_jit as nn
import nnabla_jit.solvers as S


def momentum_steps(loss, lr, steps):
    """``steps`` Momentum(lr, 0.9) steps on every parameter, with the clearing flags: the losses
    and a copy of the final parameters."""
    solver = S.Momentum(lr, 0.9)
    solver.set_parameters(nn.get_parameters())
    losses = []
    for _ in range(steps):
        loss.forward(clear_no_need_grad=True)
        losses.append(float(loss.d))
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
    return losses, {k: p.d.copy() for k, p in nn.get_parameters().items()}
