"""CUDA kernels of SoftmaxCrossEntropy, CategoricalCrossEntropy and KLMultinomial (the other
losses are elementwise table lines): one thread per sample forward (SoftmaxCrossEntropy keeps
the softmax on the op for backward, as on the CPU), one per element backward. Labels are
decoded by the CPU's ``label_of``, compiled as a device function; invalid ones are counted
into host memory mapped into the device (no copy), and reported by the op's own check."""
import math

from ..ops import loss as cpu_loss
from ..ops.common import label_of as cpu_label_of
from . import device
from .device import store, unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

# The CPU's per-sample and per-element rules, compiled for the device.
label_of = device_function(cpu_label_of.py_func)
softmax_at = device_function(cpu_loss.softmax_at.py_func)
softmax_cross_entropy_grad = device_function(cpu_loss.softmax_cross_entropy_grad.py_func)
categorical_cross_entropy_grad = device_function(cpu_loss.categorical_cross_entropy_grad.py_func)
kl_divergence_at = device_function(cpu_loss.kl_divergence_at.py_func)
kl_backward_at = device_function(cpu_loss.kl_backward_at.py_func)


@device_function
def counted_label(t3, r, n_inner, n_class, bad):
    """(o, i, class index) of sample r as the CPU's label_of decodes it; an invalid label is
    counted in bad[0] (the op's host check then reports it)."""
    o = r // n_inner
    i = r - o * n_inner
    k = label_of(t3, o, i, n_class)
    if k == -2:
        cuda.atomic.add(bad, 0, 1)
    return o, i, k


@device_function
def class_element(r, t3, n_class, n_inner):
    """(o, c, i, k): element r of (outer, n_class, n_inner) scores and its sample's class index
    (``label_of``)."""
    o, c, i = unravel3(r, n_class, n_inner)
    return o, c, i, label_of(t3, o, i, n_class)


@kernel
def softmax_cross_entropy_kernel(x3, t3, prob3, y, bad):
    """y = logsumexp(x) - x[label] per sample (o, i); the softmax into prob3; bad[0] counts
    invalid labels."""
    r = cuda.grid(1)
    if r < t3.size:   # one thread per sample
        o, i, k = counted_label(t3, r, x3.shape[2], x3.shape[1], bad)
        logsumexp = softmax_at(x3, prob3, o, i)
        y[r] = logsumexp - x3[o, k, i] if k >= 0 else 0.0


@kernel
def softmax_cross_entropy_backward_kernel(prob3, t3, dy, dx3, accum):
    """dx (+)= dy (softmax - onehot(label)); 0 for ignored samples."""
    r = cuda.grid(1)
    if r < prob3.size:
        o, c, i, k = class_element(r, t3, prob3.shape[1], prob3.shape[2])
        g = dy[o * prob3.shape[2] + i] if k >= 0 else 0.0
        v = softmax_cross_entropy_grad(g, prob3[o, c, i], c, k)
        store(dx3, (o, c, i), v, accum)


@forward("SoftmaxCrossEntropy")
def softmax_cross_entropy_forward(op, inputs, outputs):
    n_outer, n_class, n_inner = op.shape3
    x3 = device.reshaped(inputs[0], op.shape3)
    t3 = device.reshaped(inputs[1], n_outer, 1, n_inner)
    prob = getattr(op, "saved_device_prob", None)
    if prob is None or prob.shape != x3.shape or prob.dtype != x3.dtype:
        prob = op.saved_device_prob = device.empty(x3.shape, x3.dtype)
    y = device.flat(outputs[0])
    checked_labels(op, t3, lambda bad: device.launch(
        softmax_cross_entropy_kernel, n_outer * n_inner, x3, t3, prob, y, bad))


@backward("SoftmaxCrossEntropy")
def softmax_cross_entropy_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                   accum):
    if not propagate_down[0]:
        return
    n_outer, n_class, n_inner = op.shape3
    dy = output_grads[0]
    device.launch(softmax_cross_entropy_backward_kernel, n_outer * n_class * n_inner,
                  op.saved_device_prob, device.reshaped(inputs[1], n_outer, 1, n_inner),
                  device.flat(dy), device.reshaped(input_grads[0], op.shape3), accum[0])


@kernel
def categorical_cross_entropy_kernel(x3, t3, y, bad):
    """y = -log(x[label]) per sample (o, i); bad[0] counts invalid labels."""
    r = cuda.grid(1)
    if r < t3.size:   # one thread per sample
        o, i, k = counted_label(t3, r, x3.shape[2], x3.shape[1], bad)
        y[r] = -math.log(x3[o, k, i]) if k >= 0 else 0.0


@kernel
def categorical_cross_entropy_backward_kernel(x3, t3, dy, dx3, accum):
    """dx[label] (+)= -dy / x[label]; the other classes get 0."""
    r = cuda.grid(1)
    if r < x3.size:
        o, c, i, k = class_element(r, t3, x3.shape[1], x3.shape[2])
        v = categorical_cross_entropy_grad(dy[o * x3.shape[2] + i], x3[o, c, i], c, k)
        store(dx3, (o, c, i), v, accum)


def checked_labels(op, t3, launch_kernel):
    """Run ``launch_kernel(bad)`` with a mapped counter of invalid labels; the op's own check
    reports them (copying the labels down only then)."""
    bad = device.kept_counter(op, "bad labels")
    launch_kernel(bad)
    n_bad = device.read_counter(bad)
    if n_bad:
        op.check_labels(device.copy_down(t3), n_bad)


@forward("CategoricalCrossEntropy")
def categorical_cross_entropy_forward(op, inputs, outputs):
    n_outer, n_class, n_inner = op.shape3
    x3 = device.reshaped(inputs[0], op.shape3)
    t3 = device.reshaped(inputs[1], n_outer, 1, n_inner)
    y = device.flat(outputs[0])
    checked_labels(op, t3, lambda bad: device.launch(categorical_cross_entropy_kernel,
                                                     n_outer * n_inner, x3, t3, y, bad))


@backward("CategoricalCrossEntropy")
def categorical_cross_entropy_backward(op, inputs, outputs, output_grads, input_grads,
                                       propagate_down, accum):
    if propagate_down[0]:
        n_outer, n_class, n_inner = op.shape3
        x3 = device.reshaped(inputs[0], op.shape3)
        dy = output_grads[0]
        device.launch(categorical_cross_entropy_backward_kernel, x3.size, x3,
                      device.reshaped(inputs[1], n_outer, 1, n_inner), device.flat(dy),
                      device.reshaped(input_grads[0], op.shape3), accum[0])


@kernel
def kl_multinomial_kernel(p2, q2, y):
    """y[n] = sum over k of p log(p / q) (terms with p == 0 contribute 0)."""
    n = cuda.grid(1)
    if n < p2.shape[0]:
        y[n] = kl_divergence_at(p2, q2, n)


@kernel
def kl_multinomial_backward_kernel(p2, q2, dy, dp2, dq2, want_p, want_q, accum_p, accum_q):
    """dp = dy (log(p / q) + 1), dq = -dy p / q."""
    j = cuda.grid(1)
    if j < p2.size:
        n, k = j // p2.shape[1], j % p2.shape[1]
        kl_backward_at(p2, q2, dy[n], n, k, dp2, dq2, want_p, want_q, accum_p, accum_q)


@forward("KLMultinomial")
def kl_multinomial_forward(op, inputs, outputs):
    y = outputs[0]
    device.launch(kl_multinomial_kernel, op.shape2[0], device.reshaped(inputs[0], op.shape2),
                  device.reshaped(inputs[1], op.shape2), device.flat(y))


@backward("KLMultinomial")
def kl_multinomial_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                            accum):
    s = op.shape2
    p2, q2 = device.reshaped(inputs[0], s), device.reshaped(inputs[1], s)
    dp2 = device.reshaped(input_grads[0], s) if propagate_down[0] else p2
    dq2 = device.reshaped(input_grads[1], s) if propagate_down[1] else q2
    dy = output_grads[0]
    device.launch(kl_multinomial_backward_kernel, p2.size, p2, q2, device.flat(dy), dp2, dq2,
                  propagate_down[0], propagate_down[1], accum[0], accum[1])
