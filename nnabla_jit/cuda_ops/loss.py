"""CUDA kernels of SoftmaxCrossEntropy, CategoricalCrossEntropy and KLMultinomial (the other
losses are elementwise table lines): one thread per sample forward (SoftmaxCrossEntropy keeps
the softmax on the op for backward, as on the CPU), one per element backward. Labels are
decoded by the CPU's ``label_of``, compiled as a device function; invalid ones are counted
into host memory mapped into the device (no copy), and reported by the op's own check."""
import math

from ..ops.common import label_of as cpu_label_of
from . import device
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

label_of = device_function(cpu_label_of.py_func)


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


@kernel
def softmax_cross_entropy_kernel(x3, t3, prob3, y, bad):
    """y = logsumexp(x) - x[label] per sample (o, i); the softmax into prob3; bad[0] counts
    invalid labels."""
    r = cuda.grid(1)
    n_outer, n_class, n_inner = x3.shape
    if r < n_outer * n_inner:
        o, i, k = counted_label(t3, r, n_inner, n_class, bad)
        m = x3[o, 0, i]
        for c in range(1, n_class):
            m = max(m, x3[o, c, i])
        total = 0.0
        for c in range(n_class):
            e = math.exp(x3[o, c, i] - m)
            prob3[o, c, i] = e
            total += e
        inv = 1.0 / total
        for c in range(n_class):
            prob3[o, c, i] *= inv
        y[r] = m + math.log(total) - x3[o, k, i] if k >= 0 else 0.0


@kernel
def softmax_cross_entropy_backward_kernel(prob3, t3, dy, dx3, accum):
    """dx (+)= dy (softmax - onehot(label)); 0 for ignored samples."""
    r = cuda.grid(1)
    n_outer, n_class, n_inner = prob3.shape
    if r < prob3.size:
        o = r // (n_class * n_inner)
        rest = r - o * n_class * n_inner
        c = rest // n_inner
        i = rest - c * n_inner
        k = label_of(t3, o, i, n_class)
        g = dy[o * n_inner + i] if k >= 0 else 0.0
        v = g * (prob3[o, c, i] - (1.0 if c == k else 0.0))
        if accum:
            dx3[o, c, i] += v
        else:
            dx3[o, c, i] = v


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
    n_outer, n_class, n_inner = x3.shape
    if r < n_outer * n_inner:
        o, i, k = counted_label(t3, r, n_inner, n_class, bad)
        y[r] = -math.log(x3[o, k, i]) if k >= 0 else 0.0


@kernel
def categorical_cross_entropy_backward_kernel(x3, t3, dy, dx3, accum):
    """dx[label] (+)= -dy / x[label]; the other classes get 0."""
    r = cuda.grid(1)
    n_outer, n_class, n_inner = x3.shape
    if r < x3.size:
        o = r // (n_class * n_inner)
        rest = r - o * n_class * n_inner
        c = rest // n_inner
        i = rest - c * n_inner
        k = label_of(t3, o, i, n_class)
        v = -dy[o * n_inner + i] / x3[o, c, i] if c == k else 0.0
        if accum:
            dx3[o, c, i] += v
        else:
            dx3[o, c, i] = v


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
        s = 0.0
        for k in range(p2.shape[1]):
            pk = p2[n, k]
            if pk != 0:
                s += pk * (math.log(pk) - math.log(q2[n, k]))
        y[n] = s


@kernel
def kl_multinomial_backward_kernel(p2, q2, dy, dp2, dq2, want_p, want_q, accum_p, accum_q):
    """dp = dy (log(p / q) + 1), dq = -dy p / q."""
    j = cuda.grid(1)
    if j < p2.size:
        n = j // p2.shape[1]
        k = j - n * p2.shape[1]
        g = dy[n]
        p = p2[n, k]
        q = q2[n, k]
        if want_p:
            v = g * (math.log(p) - math.log(q) + 1.0)
            if accum_p:
                dp2[n, k] += v
            else:
                dp2[n, k] = v
        if want_q:
            v = -g * p / q
            if accum_q:
                dq2[n, k] += v
            else:
                dq2[n, k] = v


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
