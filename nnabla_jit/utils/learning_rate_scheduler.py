"""Learning-rate schedules (``nnabla_jit.utils.learning_rate_scheduler``), as in nnabla.

A scheduler maps the iteration (counted from 0) to a learning rate; the training loop passes it
to the solver::

    scheduler = CosineScheduler(init_lr=0.1, max_iter=10000)
    for i in range(10000):
        solver.set_learning_rate(scheduler.get_learning_rate(i))

The formulas and the order of their floating-point operations are nnabla's, so the rates are
bit-for-bit the same, including past ``max_iter`` (the polynomial then follows its formula:
a non-integer ``power`` of a negative base gives Python's complex result, as in nnabla).
"""
import math

__all__ = ["BaseLearningRateScheduler", "PolynomialScheduler", "CosineScheduler",
           "ExponentialScheduler", "StepScheduler", "LinearWarmupScheduler"]


class BaseLearningRateScheduler:
    """Base class: a subclass defines ``get_learning_rate(iter)``."""

    def get_learning_rate(self, iter):
        """The learning rate at iteration ``iter`` (starting with 0)."""
        raise NotImplementedError("{} does not define get_learning_rate".format(type(self).__name__))


def _positive(value, scheduler, arg):
    if value <= 0:
        raise ValueError("{}: {} must be positive, got {}".format(scheduler, arg, value))
    return value


class PolynomialScheduler(BaseLearningRateScheduler):
    """Polynomial decay: init_lr (1 - iter / max_iter) ** power."""

    def __init__(self, init_lr, max_iter, power):
        self.init_lr = init_lr
        self.max_iter = _positive(max_iter, "PolynomialScheduler", "max_iter")
        self.power = power

    def get_learning_rate(self, iter):
        return self.init_lr * ((1.0 - iter * 1.0 / self.max_iter) ** self.power)


class CosineScheduler(BaseLearningRateScheduler):
    """Cosine decay: init_lr (cos(pi iter / max_iter) + 1) / 2."""

    def __init__(self, init_lr, max_iter):
        self.init_lr = init_lr
        self.max_iter = _positive(max_iter, "CosineScheduler", "max_iter")

    def get_learning_rate(self, iter):
        return self.init_lr * ((math.cos(iter * 1.0 / self.max_iter * math.pi) + 1.0) * 0.5)


class ExponentialScheduler(BaseLearningRateScheduler):
    """Exponential decay: init_lr gamma ** (iter // iter_interval)."""

    def __init__(self, init_lr, gamma, iter_interval=1):
        self.init_lr = init_lr
        self.gamma = gamma
        self.iter_interval = _positive(iter_interval, "ExponentialScheduler", "iter_interval")

    def get_learning_rate(self, iter):
        return self.init_lr * (self.gamma ** (iter // self.iter_interval))


class StepScheduler(BaseLearningRateScheduler):
    """Step decay: init_lr times gamma for each entry of ``iter_steps`` that ``iter`` has
    reached (the list need not be sorted; a repeated step counts twice)."""

    def __init__(self, init_lr, gamma, iter_steps):
        self.init_lr = init_lr
        self.gamma = gamma
        self.iter_steps = iter_steps

    def get_learning_rate(self, iter):
        reached = sum(1 for step in self.iter_steps if iter >= step)
        return self.init_lr * (self.gamma ** reached)


class LinearWarmupScheduler(BaseLearningRateScheduler):
    """Another scheduler's rate, ramped up linearly over the first ``warmup_iter`` iterations:
    times (iter + 1) / warmup_iter while iter < warmup_iter."""

    def __init__(self, scheduler, warmup_iter):
        if not callable(getattr(scheduler, "get_learning_rate", None)):
            raise TypeError("LinearWarmupScheduler: scheduler must have a get_learning_rate(iter) "
                            "method, got {}".format(type(scheduler).__name__))
        self.scheduler = scheduler
        self.warmup_iter = warmup_iter

    def get_learning_rate(self, iter):
        lr = self.scheduler.get_learning_rate(iter)
        if iter < self.warmup_iter:
            lr *= (iter + 1) * 1.0 / self.warmup_iter
        return lr
