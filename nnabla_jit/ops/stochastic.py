"""Stochastic ops: Dropout, the random generators and RandomChoice.

Random numbers come from ``nnabla_jit.random``: an op with ``seed`` -1 draws from the global
state (``nn.random.prng``, looked up at every forward so ``nn.seed`` takes effect); an op with a
seed of its own creates its RandomState once and keeps drawing from it.
"""
import numpy as np
from numba import njit, prange

from .. import random as _random
from .kernels import parallel_kernel
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
def dropout_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        accumulate(input_grads[0], output_grads[0] * op.mask, accum[0])


def dropout_mask_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        accumulate(input_grads[0], output_grads[0] * op.dropout.mask, accum[0])


@njit(cache=True)
def scatter_draws(index, dy, dx):
    """dx[b, index[b, k]] += dy[b, k]."""
    for b in range(index.shape[0]):
        for k in range(index.shape[1]):
            dx[b, index[b, k]] += dy[b, k]


def random_choice_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    index = op.saved_index
    dy = output_grads[0].reshape(index.shape)
    for i in range(2):
        if propagate_down[i]:
            g = input_grads[i].reshape(index.shape[0], -1)
            if not accum[i]:
                g[...] = 0
            scatter_draws(index, dy, g)


def op_rng(op):
    """The RandomState ``op`` draws from (see the module docstring)."""
    if op.seed < 0:
        return _random.get_rng(-1)
    if op.__dict__.get("rng") is None:
        op.rng = _random.get_rng(op.seed)
    return op.rng


@njit(inline="always")
def dropout_factor(u, p, scale):
    """The factor applied to an element whose draw is u: 0 where u < p, else 1 / (1 - p)."""
    return scale if u >= p else 0.0


@parallel_kernel
def dropout_kernel(x, u, p, scale, mask, y):
    """Keep x where u >= p, scaled by 1 / (1 - p); mask holds the factor applied (0 or scale)."""
    for k in prange(x.size):
        m = dropout_factor(u[k], p, scale)
        mask[k] = m
        y[k] = x[k] * m


@parallel_kernel
def dropout_mask_kernel(u, p, scale, mask):
    for k in prange(u.size):
        mask[k] = dropout_factor(u[k], p, scale)


@register
class Dropout(Op):
    """Zero each element with probability p and scale the others by 1 / (1 - p). The mask of the
    last forward is kept on the op for backward."""
    mask = None   # float32, shaped like x: 0 or 1 / (1 - p) per element

    def setup(self, x):
        if not 0.0 <= self.p < 1.0:
            self.fail("p must be in [0, 1), got {}", self.p)
        if self.mask is None or self.mask.shape != tuple(x):
            self.mask = np.zeros(x, np.float32)
        return [x]

    def forward(self, inputs, outputs):
        u = op_rng(self).random_sample(self.mask.size)
        dropout_kernel.for_size(u.size)(inputs[0].reshape(-1), u, self.p, 1.0 / (1.0 - self.p),
                                        self.mask.reshape(-1), outputs[0].reshape(-1))

    def draw_mask(self):
        """Draw this forward's mask into ``self.mask`` from the op's stream, as ``forward``
        does (the CUDA forward applies it on the device)."""
        u = op_rng(self).random_sample(self.mask.size)
        dropout_mask_kernel.for_size(u.size)(u, self.p, 1.0 / (1.0 - self.p),
                                             self.mask.reshape(-1))

    backward = dropout_backward

    def grad_depends_input_data(self, i, j):
        return False


@register(name="DropoutMask")
class DropoutMask(Op):
    """Internal (not an nnabla function): dy times the mask of a Dropout node's last forward.
    Dropout's grad rule is this op, and so is its own, so nn.grad works to any order."""

    def __init__(self, input_names=(), dropout=None):
        super().__init__(input_names, dropout=dropout)

    def setup(self, dy):
        if tuple(dy) != self.dropout.mask.shape:
            self.fail("gradient of shape {} does not match the dropout input shape {}", dy,
                      self.dropout.mask.shape)
        return [dy]

    def forward(self, inputs, outputs):
        np.multiply(inputs[0], self.dropout.mask, out=outputs[0])

    backward = dropout_mask_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------------ generators
class Generator(Op):
    """An op without inputs drawing ``shape`` random numbers per forward (no gradient)."""

    def setup(self):
        self.check()
        return [tuple(self.shape)]

    def check(self):
        """Raise on arguments the distribution does not accept."""

    def forward(self, inputs, outputs):
        outputs[0][...] = self.draw(op_rng(self), outputs[0].shape)


def _require(op, ok, message, *fmt):
    if not ok:
        op.fail(message, *fmt)


@register
class Rand(Generator):
    """Uniform on [low, high)."""

    def check(self):
        _require(self, self.high > self.low, "high ({}) must be larger than low ({})", self.high, self.low)

    def draw(self, rng, shape):
        return rng.uniform(self.low, self.high, shape)


@register
class Randint(Generator):
    """Uniform integers in [low, high), as int32."""
    output_dtype = np.dtype(np.int32)

    def check(self):
        _require(self, self.high > self.low, "high ({}) must be larger than low ({})", self.high, self.low)

    def draw(self, rng, shape):
        return rng.randint(self.low, self.high, shape)


@register
class Randn(Generator):
    """Normal with mean mu and standard deviation sigma."""

    def check(self):
        _require(self, self.sigma != 0, "sigma must not be zero")

    def draw(self, rng, shape):
        return rng.normal(self.mu, self.sigma, shape)


@register
class RandBinomial(Generator):
    """Number of successes in n trials of probability p."""

    def check(self):
        _require(self, self.n > 0, "n ({}) must be a positive integer", self.n)
        _require(self, 0 < self.p < 1, "p ({}) must be in (0, 1)", self.p)

    def draw(self, rng, shape):
        return rng.binomial(self.n, self.p, shape)


@register
class RandBeta(Generator):
    """Beta(alpha, beta)."""

    def check(self):
        _require(self, self.alpha > 0, "alpha ({}) must be positive", self.alpha)
        _require(self, self.beta > 0, "beta ({}) must be positive", self.beta)

    def draw(self, rng, shape):
        return rng.beta(self.alpha, self.beta, shape)


@register
class RandGamma(Generator):
    """Gamma with shape k and scale theta."""

    def check(self):
        _require(self, self.k > 0, "k ({}) must be positive", self.k)
        _require(self, self.theta > 0, "theta ({}) must be positive", self.theta)

    def draw(self, rng, shape):
        return rng.gamma(self.k, self.theta, shape)


# ------------------------------------------------------------------------ RandomChoice
@parallel_kernel
def choice_kernel(w2, u2, replace, index):
    """index[b, k]: a draw from population b with weights w2[b] (inverse CDF of the uniform
    u2[b, k]); without replacement a drawn member's weight drops to 0 for later draws. Returns
    the number of populations whose weights cannot be sampled."""
    B, N = w2.shape
    K = u2.shape[1]
    bad = 0
    for b in prange(B):
        w = w2[b].astype(np.float64)
        ok = True
        for j in range(N):
            if w[j] < 0:
                ok = False
        if not replace:
            positive = 0
            for j in range(N):
                if w[j] > 0:
                    positive += 1
            if positive < K:
                ok = False
        for k in range(K):
            total = w.sum()
            if not ok or total <= 0:
                ok = False
                index[b, k] = 0
                continue
            target = u2[b, k] * total
            acc = 0.0
            pick = -1
            for j in range(N):
                if w[j] > 0:
                    pick = j
                    acc += w[j]
                    if acc > target:
                        break
            index[b, k] = pick
            if not replace:
                w[pick] = 0.0
        if not ok:
            bad += 1
    return bad


@register
class RandomChoice(Op):
    """Draw ``shape`` samples from each population (last axis) of x with relative weights w.
    Backward routes the output gradient to the drawn members, for x and for w (as nnabla)."""

    def setup(self, x, w):
        if tuple(x) != tuple(w):
            self.fail("x of shape {} and w of shape {} must have the same shape", tuple(x), tuple(w))
        if not x:
            self.fail("x must have at least one dimension")
        self.populations = int(np.prod(x[:-1], dtype=np.int64))
        draws = tuple(self.shape) or (1,)   # shape=(): one draw per population, as nnabla
        self.draws = int(np.prod(draws, dtype=np.int64))
        return [tuple(x[:-1]) + draws]

    def forward(self, inputs, outputs):
        x, w = inputs
        n = x.shape[-1]
        u = op_rng(self).random_sample((self.populations, self.draws))
        self.saved_index = np.empty((self.populations, self.draws), np.int64)
        if choice_kernel.for_size(w.size + u.size)(w.reshape(-1, n), u, self.replace, self.saved_index):
            rows = w.reshape(-1, n)
            self.fail("weights must be non-negative with a positive sum per population{}, got w of shape "
                      "{} with minimum {} and smallest population sum {}",
                      "" if self.replace else ", and without replacement at least {} of them positive"
                      .format(self.draws), w.shape, rows.min(initial=np.inf).item(),
                      rows.sum(axis=1).min(initial=np.inf).item())
        outputs[0].reshape(self.saved_index.shape)[...] = np.take_along_axis(x.reshape(-1, n), self.saved_index, 1)

    backward = random_choice_backward

    def grad_depends_input_data(self, i, j):
        return False
