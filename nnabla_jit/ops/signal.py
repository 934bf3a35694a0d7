"""Signal processing: resampling (Interpolate, ONNXResize), FFT / IFFT and STFT / ISTFT.

Every op here is linear in its (float) input, so each is a forward map plus its exact adjoint:
the backward kernel runs the adjoint, and the grad rule builds the adjoint as a graph node (a
LinearAdjoint, ``ops/adjoint.py``) whose own backward and grad rule are the forward again, so
``nn.grad`` goes to any order.

* Resampling is separable: each resized axis is a 1-d map ``y[j] = sum_k w[j, k] x[idx[j, k]]``
  (1 tap nearest, 2 linear, 4 cubic) computed once in ``setup`` from the coordinate rules,
  applied axis by axis with one kernel (:func:`resample_axis`) and its transpose.
* FFT / IFFT call NumPy's pocketfft (numba has no FFT); their adjoints are the inverse
  transforms with the matching scale.
* STFT is ``frames = x[gather index]`` (centre padding folded into the index) times a
  windowed DFT matrix (one GEMM); ISTFT is the synthesis GEMM, overlap-add (a scatter with the
  crop folded into the index) and division by the overlapped squared window.
"""
import numpy as np
from numba import njit, prange

from .blas import gemm
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
STFT_ARGS = ("window_size", "stride", "fft_size", "window_type", "center", "pad_mode")


# ------------------------------------------------------------------ resampling
def resample_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        apply_resample_adjoint(op.plan, output_grads[0], input_grads[0], accum[0])


# ------------------------------------------------------------------ FFT
def dft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        transform(output_grads[0], input_grads[0], op.axes, op.inverse, op.normalized,
                            adjoint=True, accum=accum[0])


def signal_size(shape, signal_ndim):
    return int(np.prod(shape[len(shape) - 1 - signal_ndim:-1]))


# ------------------------------------------------------------------ STFT / ISTFT
def _spectrum_backward(op, dx, input_grads, propagate_down, accum, run):
    """Write the spectrum gradients ``run(dx, gr, gi)`` computes into the wanted inputs."""
    if not (propagate_down[0] or propagate_down[1]):
        return
    shape = next(g.shape for g in input_grads[:2] if g is not None)
    parts = [g if propagate_down[k] and not accum[k] else np.empty(shape, dx.dtype)
             for k, g in enumerate(input_grads[:2])]
    run(dx, parts[0], parts[1])
    for k in range(2):
        if propagate_down[k] and accum[k]:
            input_grads[k] += parts[k]


def stft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if not propagate_down[0]:
        return
    if op.as_istft_backward:
        op.run_synthesis(output_grads[0], output_grads[1], input_grads[0], accum[0])
    else:
        op.run_analysis_adjoint(output_grads[0], output_grads[1], input_grads[0], accum[0])


def istft_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    run = op.run_analysis if op.as_stft_backward else op.run_synthesis_adjoint
    _spectrum_backward(op, output_grads[0], input_grads, propagate_down, accum, run)


# ============================================================================ resampling
@njit(inline="always")
def tap_sum(x, index, weight, a, j, c):
    """sum_k weight[j, k] x[a, index[j, k], c]: one output of a resampled axis (shared with
    the CUDA kernel of ``cuda_ops/signal.py``: a leaf)."""
    acc = 0.0
    for k in range(index.shape[1]):
        acc += weight[j, k] * x[a, index[j, k], c]
    return acc


@parallel_kernel
def resample_axis(x, index, weight, outside, fill, y):
    """y[a, j, c] = sum_k weight[j, k] x[a, index[j, k], c], or ``fill`` where outside[j]."""
    A, M, C = y.shape
    K = index.shape[1]
    for a in prange(A):
        for j in range(M):
            if outside[j]:
                for c in range(C):
                    y[a, j, c] = fill
            elif C == 1:   # the last axis: one sum per output, kept in a register
                y[a, j, 0] = tap_sum(x, index, weight, a, j, 0)
            else:
                i = index[j, 0]
                w = weight[j, 0]
                for c in range(C):
                    y[a, j, c] = w * x[a, i, c]
                for k in range(1, K):
                    i = index[j, k]
                    w = weight[j, k]
                    for c in range(C):
                        y[a, j, c] += w * x[a, i, c]


@parallel_kernel
def resample_axis_adjoint(dy, index, weight, outside, dx):
    """dx[a, index[j, k], c] += weight[j, k] dy[a, j, c] (rows outside the input get nothing)."""
    A, M, C = dy.shape
    K = index.shape[1]
    for a in prange(A):
        for j in range(M):
            if outside[j]:
                continue
            if C == 1:
                g = dy[a, j, 0]
                for k in range(K):
                    dx[a, index[j, k], 0] += weight[j, k] * g
                continue
            for k in range(K):
                i = index[j, k]
                w = weight[j, k]
                for c in range(C):
                    dx[a, i, c] += w * dy[a, j, c]


class AxisResample:
    """One axis of a separable resampling: taps and the 3-d views of its input and output."""

    def __init__(self, shape, axis, index, weight, outside=None, fill=0.0):
        self.index = np.ascontiguousarray(index, np.int64)
        self.weight = np.ascontiguousarray(weight, np.float64)
        self.outside = np.zeros(len(index), np.bool_) if outside is None else outside
        self.fill = float(fill)
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        self.in_shape = tuple(shape)
        self.out_shape = tuple(shape[:axis]) + (len(index),) + tuple(shape[axis + 1:])
        self.in_view = (outer, shape[axis], inner)
        self.out_view = (outer, len(index), inner)
        work = outer * inner * len(index) * self.index.shape[1]
        self.forward_kernel = resample_axis.for_size(work)
        self.adjoint_kernel = resample_axis_adjoint.for_size(work)

    def is_identity(self):
        n = self.in_view[1]
        return (self.index.shape == (n, 1) and not self.outside.any()
                and np.array_equal(self.index[:, 0], np.arange(n)) and np.all(self.weight == 1))


def resample_plan(shape, taps_per_axis):
    """The non-identity AxisResample steps for ``{axis: (index, weight[, outside, fill])}``."""
    plan = []
    for axis in sorted(taps_per_axis):
        step = AxisResample(shape, axis, *taps_per_axis[axis])
        if not step.is_identity():
            plan.append(step)
        shape = step.out_shape
    return plan


def apply_resample(plan, x, y, linear_part=False):
    """y = the resampling of x (``linear_part``: extrapolated rows are 0, not the fill)."""
    if not plan:
        y[...] = x
        return
    cur = x
    for k, step in enumerate(plan):
        dst = y if k == len(plan) - 1 else np.empty(step.out_shape, x.dtype)
        step.forward_kernel(cur.reshape(step.in_view), step.index, step.weight, step.outside,
                            0.0 if linear_part else step.fill, dst.reshape(step.out_view))
        cur = dst


def apply_resample_adjoint(plan, dy, dx, accum):
    """dx (+)= the transpose of the resampling's linear part applied to dy."""
    if not plan:
        if accum:
            dx += dy
        else:
            dx[...] = dy
        return
    g = dy
    for k in range(len(plan) - 1, -1, -1):
        step = plan[k]
        if k == 0:
            dst = dx
            if not accum:
                dst.fill(0)
        else:
            dst = np.zeros(step.in_shape, dy.dtype)
        step.adjoint_kernel(g.reshape(step.out_view), step.index, step.weight, step.outside,
                            dst.reshape(step.in_view))
        g = dst


def _linear_taps(src, n_in):
    """Two taps around each (clamped) source coordinate, indices clamped to the edge."""
    src = np.clip(src, 0, max(n_in - 1, 0))
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    return np.stack([i0, i1], axis=1), np.stack([1 - lam, lam], axis=1)


def _nearest_taps(index, n_in):
    return np.clip(index, 0, n_in - 1).astype(np.int64)[:, None], np.ones((len(index), 1))


def interpolate_taps(mode, n_in, n_out, align_corners, half_pixel, half_pixel_for_nn):
    """Taps of one axis of nnabla's Interpolate."""
    j = np.arange(n_out, dtype=np.float64)
    if mode == "nearest" and half_pixel_for_nn:   # nnabla's pre-1.8 nearest neighbour
        return _nearest_taps(np.floor((j + 0.5) * (n_in / max(n_out, 1))), n_in)
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = n_in / n_out if n_out > 1 or (n_out == 1 and not half_pixel) else 0.0
    src = np.maximum((j + 0.5) * scale - 0.5 if half_pixel else j * scale, 0.0)
    if mode == "nearest":
        return _nearest_taps(np.floor(src), n_in)
    return _linear_taps(src, n_in)


class _Resample(Op):
    """Shared by Interpolate and ONNXResize, whose setup builds ``self.plan``."""

    def forward(self, inputs, outputs):
        apply_resample(self.plan, inputs[0], outputs[0])

    backward = resample_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Interpolate(_Resample):
    """Resize the last len(output_size) spatial axes (before the channel if channel_last)."""

    def setup(self, x):
        sizes = tuple(self.output_size)
        nd = len(sizes)
        if not 1 <= nd <= 3:
            self.fail("output_size {} must have 1, 2 or 3 entries (1-d, 2-d or 3-d)", sizes)
        if nd + int(self.channel_last) > len(x):
            self.fail("output_size {} resizes {} axes, but the input of shape {} has only {}{}",
                      sizes, nd, x, len(x), " with the channel last" if self.channel_last else "")
        if any(s < 0 for s in sizes):
            self.fail("output_size {} must not be negative", sizes)
        if self.align_corners and self.half_pixel:
            self.fail("align_corners=True and half_pixel=True cannot be used together")
        first = len(x) - nd - int(self.channel_last)
        taps = {first + k: interpolate_taps(self.mode, x[first + k], n_out, self.align_corners,
                                            self.half_pixel, self.half_pixel_for_nn)
                for k, n_out in enumerate(sizes)}
        self.plan = resample_plan(x, taps)
        out = list(x)
        out[first:first + nd] = sizes
        return [tuple(out)]


# ------------------------------------------------------------------ ONNX Resize (opset 11-13)
def _cubic_coefficients(r, a):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for fractions r."""
    def near(t):   # |t| <= 1
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t):    # 1 < |t| < 2
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.stack([far(r + 1), near(r), near(1 - r), far(2 - r)], axis=1)


def onnx_source_coordinates(ctm, j, n_in, n_out, scale, start, end):
    if ctm == "half_pixel":
        return (j + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (j + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(j)
    if ctm == "align_corners":
        return j * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(j)
    if ctm == "asymmetric":
        return j / scale
    if n_out > 1:   # tf_crop_and_resize
        return start * (n_in - 1) + j * (end - start) * (n_in - 1) / (n_out - 1)
    return np.full_like(j, 0.5 * (start + end) * (n_in - 1))


def onnx_resize_taps(op, n_in, n_out, scale, start, end):
    """Taps (and extrapolated rows) of one axis of ONNX Resize."""
    j = np.arange(n_out, dtype=np.float64)
    ctm = op.coordinate_transformation_mode
    src = onnx_source_coordinates(ctm, j, n_in, n_out, scale, start, end)
    outside = (src < 0) | (src > n_in - 1) if ctm == "tf_crop_and_resize" else None
    if op.mode == "nearest":
        rounding = {"round_prefer_floor": lambda s: np.ceil(s - 0.5),
                    "round_prefer_ceil": lambda s: np.floor(s + 0.5),
                    "floor": np.floor, "ceil": np.ceil}[op.nearest_mode]
        index, weight = _nearest_taps(rounding(src), n_in)
    elif op.mode == "linear":
        index, weight = _linear_taps(src, n_in)
    else:
        base = np.floor(src).astype(np.int64)
        index = base[:, None] + np.arange(-1, 3)[None, :]
        weight = _cubic_coefficients(src - base, op.cubic_coeff_a)
        if op.exclude_outside:
            weight = np.where((index >= 0) & (index < n_in), weight, 0.0)
            total = weight.sum(axis=1, keepdims=True)
            weight = weight / np.where(total == 0, 1.0, total)
        index = np.clip(index, 0, n_in - 1)
    return index, weight, outside, op.extrapolation_value


@register
class ONNXResize(_Resample):
    """ONNX's Resize: nearest / linear / cubic with ONNX's coordinate transformations."""

    def setup(self, x):
        nd = len(x)
        if bool(self.scales) == bool(self.sizes):
            self.fail("give exactly one of scales {} and sizes {}", self.scales, self.sizes)
        if self.sizes:
            if len(self.sizes) != nd or any(s < 0 for s in self.sizes):
                self.fail("sizes {} must have one non-negative entry per input axis (shape {})",
                          self.sizes, x)
            out = tuple(self.sizes)
            scales = [o / i if i else 1.0 for o, i in zip(out, x)]
        else:
            if len(self.scales) != nd or any(s <= 0 for s in self.scales):
                self.fail("scales {} must have one positive entry per input axis (shape {})",
                          self.scales, x)
            scales = list(self.scales)
            out = tuple(int(np.floor(n * s)) for n, s in zip(x, scales))
        roi = tuple(self.roi) if self.roi else (0.0,) * nd + (1.0,) * nd
        if self.coordinate_transformation_mode == "tf_crop_and_resize" and len(roi) != 2 * nd:
            self.fail("roi {} must hold {} starts then {} ends for tf_crop_and_resize", roi, nd, nd)
        taps = {a: onnx_resize_taps(self, x[a], out[a], scales[a], roi[a], roi[nd + a])
                for a in range(nd) if x[a] != out[a] or scales[a] != 1.0
                or self.coordinate_transformation_mode == "tf_crop_and_resize"}
        self.plan = resample_plan(x, taps)
        return [out]


# ============================================================================ FFT
class _DFT(Op):
    """Complex DFT over the ``signal_ndim`` axes before the last (real, imaginary) axis."""
    inverse = False

    def setup(self, x):
        if self.signal_ndim not in (1, 2, 3):
            self.fail("signal_ndim={} must be 1, 2 or 3", self.signal_ndim)
        if len(x) < self.signal_ndim + 1 or x[-1] != 2:
            self.fail("input of shape {} must be (..., {}, 2): {} signal axes then (real, imag)",
                      x, ", ".join(["N"] * self.signal_ndim), self.signal_ndim)
        self.axes = tuple(range(len(x) - 1 - self.signal_ndim, len(x) - 1))
        self.n = int(np.prod([x[a] for a in self.axes], dtype=np.int64))
        return [x]

    def forward(self, inputs, outputs):
        transform(inputs[0], outputs[0], self.axes, self.inverse, self.normalized, False)

    backward = dft_backward

    def grad_depends_input_data(self, i, j):
        return False


def _complex(a):
    return np.ascontiguousarray(a).view(np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]


def transform(x, y, axes, inverse, normalized, adjoint, accum=False):
    """y (+)= the DFT (``inverse``: IDFT) of x over ``axes``, or the adjoint of that map.

    Unnormalised, the DFT W has adjoint W^H = an unscaled inverse DFT, and the IDFT W^H / n
    has adjoint W / n; normalised (unitary), each adjoint is the other transform."""
    norm = "ortho" if normalized else ("forward" if adjoint else "backward")
    z = _complex(x)
    if inverse != adjoint:
        r = np.fft.ifftn(z, axes=axes, norm=norm)
    else:
        r = np.fft.fftn(z, axes=axes, norm=norm)
    out = y.view(np.complex64 if y.dtype == np.float32 else np.complex128)[..., 0]
    if accum:
        out += r
    else:
        out[...] = r


@register
class FFT(_DFT):
    pass


@register
class IFFT(_DFT):
    inverse = True


# ============================================================================ STFT / ISTFT
def stft_window(window_type, window_size, fft_size):
    """The periodic analysis window, zero-padded and centred in fft_size samples."""
    k = np.arange(window_size)
    if window_type == "hanning":
        w = 0.5 - 0.5 * np.cos(2 * np.pi * k / window_size)
    elif window_type == "hamming":
        w = 0.54 - 0.46 * np.cos(2 * np.pi * k / window_size)
    else:
        w = np.ones(window_size)
    full = np.zeros(fft_size)
    off = (fft_size - window_size) // 2
    full[off:off + window_size] = w
    return full


@parallel_kernel
def gather_frames(x, index, frames):
    """frames[b, f, n] = x[b, index[f, n]] (0 where the index is -1)."""
    for b in prange(frames.shape[0]):
        for f in range(frames.shape[1]):
            for n in range(frames.shape[2]):
                i = index[f, n]
                frames[b, f, n] = x[b, i] if i >= 0 else 0.0


@parallel_kernel
def scatter_frames(frames, index, x):
    """x[b, index[f, n]] += frames[b, f, n] (entries with index -1 are dropped)."""
    for b in prange(frames.shape[0]):
        for f in range(frames.shape[1]):
            for n in range(frames.shape[2]):
                i = index[f, n]
                if i >= 0:
                    x[b, i] += frames[b, f, n]


class StftGeometry:
    """Frames, windows and DFT matrices of one STFT configuration.

    analysis (STFT):   Y = frames(x) @ [W cos | -W sin]               (K = N/2 + 1 bins)
    synthesis (ISTFT): x = overlap_add(Y @ S) / overlap_add(W^2)       S = (A * c / N)^T
    with c = 1 for the DC (and, N even, Nyquist) bin and 2 otherwise, i.e. irfft.
    """

    def __init__(self, op):
        n = op.fft_size
        self.n, self.stride = n, op.stride
        self.bins = n // 2 + 1
        self.half = n // 2 if op.center else 0
        self.pad_mode = op.pad_mode
        self.window = stft_window(op.window_type, op.window_size, n)
        theta = 2 * np.pi * np.outer(np.arange(n), np.arange(self.bins)) / n
        self.analysis = np.concatenate([self.window[:, None] * np.cos(theta),
                                        -self.window[:, None] * np.sin(theta)], axis=1)
        c = np.full(self.bins, 2.0)
        c[0] = 1.0
        if n % 2 == 0:
            c[-1] = 1.0
        self.synthesis = np.ascontiguousarray((self.analysis * np.tile(c / n, 2)[None, :]).T)
        self._typed = {}

    def matrix(self, name, dtype):
        key = (name, np.dtype(dtype))
        if key not in self._typed:
            self._typed[key] = np.ascontiguousarray(getattr(self, name), dtype)
        return self._typed[key]

    def frames_for(self, length):
        return (length + 2 * self.half - self.n) // self.stride + 1

    def length_for(self, frames):
        return (frames - 1) * self.stride + self.n - 2 * self.half

    def signal_index(self, length, frames):
        """(frames, N): the sample of an input of ``length`` each frame position reads, the
        centre padding folded in (reflect, or -1 for zeros)."""
        p = np.arange(frames)[:, None] * self.stride + np.arange(self.n)[None, :] - self.half
        if self.pad_mode == "reflect":
            p = np.abs(p)
            p = np.where(p >= length, 2 * (length - 1) - p, p)
            return p.astype(np.int64)
        return np.where((p >= 0) & (p < length), p, -1).astype(np.int64)

    def placement_index(self, length, frames):
        """(frames, N): where ISTFT's overlap-add puts each frame sample in an output of
        ``length`` (the centre crop folded in; -1 where cropped away)."""
        p = np.arange(frames)[:, None] * self.stride + np.arange(self.n)[None, :] - self.half
        return np.where((p >= 0) & (p < length), p, -1).astype(np.int64)

    def inverse_norm(self, op, length, frames):
        """1 / overlap-added squared window at each output sample (NOLA must hold)."""
        index = self.placement_index(length, frames)
        norm = np.zeros((1, length))
        scatter_frames(np.broadcast_to(self.window ** 2, (1, frames, self.n)).copy(), index, norm)
        if length and norm.min() < 1e-11:
            op.fail("the NOLA (nonzero overlap-add) condition is not met: the squared windows "
                    "overlap-add to {} at sample {} (window_size={}, stride={}, fft_size={})",
                    norm.min(), int(norm.argmin()), op.window_size, op.stride, op.fft_size)
        return 1.0 / norm[0]

    # ---------------------------------------------------------------- the four linear maps
    def analyze(self, x, index, yr, yi, scale=None):
        """(yr, yi)[b, k, f] = DFT of the frames x[b, index[f]] (times scale[k])."""
        B, F = yr.shape[0], index.shape[0]
        frames = np.empty((B, F, self.n), x.dtype)
        gather_frames.for_size(frames.size)(x, index, frames)
        z = np.empty((B * F, 2 * self.bins), x.dtype)
        gemm(frames.reshape(B * F, self.n), self.matrix("analysis", x.dtype), z)
        z = z.reshape(B, F, 2, self.bins)
        if scale is not None:
            z *= scale
        yr[...] = z[:, :, 0].transpose(0, 2, 1)
        yi[...] = z[:, :, 1].transpose(0, 2, 1)

    def frames_of(self, yr, yi, matrix):
        """(B*F, N): the frames a (B, K, F) spectrum synthesises through ``matrix``."""
        B, K, F = yr.shape
        z = np.empty((B, F, 2, K), yr.dtype)
        z[:, :, 0] = yr.transpose(0, 2, 1)
        z[:, :, 1] = yi.transpose(0, 2, 1)
        frames = np.empty((B * F, self.n), yr.dtype)
        if matrix == "analysis":   # the transpose of analysis
            gemm(z.reshape(B * F, 2 * K), self.matrix("analysis", yr.dtype), frames, trans_b=True)
        else:
            gemm(z.reshape(B * F, 2 * K), self.matrix("synthesis", yr.dtype), frames)
        return frames.reshape(B, F, self.n)

    def overlap_add(self, frames, index, x, accum):
        if not accum:
            x.fill(0)
        scatter_frames.for_size(frames.size)(frames, index, x)


class _StftOp(Op):
    """STFT and ISTFT: one of the four maps forward, its transpose backward (``kind``:
    'analysis' STFT, 'synthesis' ISTFT, or their adjoints)."""

    def grad_depends_input_data(self, i, j):
        return False

    def check_common(self):
        if self.fft_size < 1 or self.stride < 1 or self.window_size < 1:
            self.fail("window_size={}, stride={} and fft_size={} must be positive",
                      self.window_size, self.stride, self.fft_size)
        if self.window_size > self.fft_size:
            self.fail("window_size={} must not exceed fft_size={}", self.window_size, self.fft_size)
        self.geometry = StftGeometry(self)

    def setup_spectrum_input(self, y_r, y_i):
        if tuple(y_r) != tuple(y_i) or len(y_r) != 3 or y_r[1] != self.geometry.bins:
            self.fail("y_r {} and y_i {} must both be (batch, fft_size // 2 + 1 = {}, frames)",
                      y_r, y_i, self.geometry.bins)
        return y_r[0], y_r[2]

    def setup_signal_input(self, x):
        if len(x) != 2:
            self.fail("x of shape {} must be (batch, samples)", x)
        g = self.geometry
        if x[1] + 2 * g.half < g.n:
            self.fail("a signal of {} samples (+{} padding) is shorter than fft_size={}", x[1],
                      2 * g.half, g.n)
        if g.pad_mode == "reflect" and g.half >= x[1]:
            self.fail("reflect padding of {} needs more than {} samples", g.half, x[1])
        return x[0], g.frames_for(x[1])

    # analysis: x (B, T) -> spectrum;  its adjoint: spectrum -> x (B, T)
    def setup_analysis(self, x):
        B, F = self.setup_signal_input(x)
        self.index = self.geometry.signal_index(x[1], F)
        return [(B, self.geometry.bins, F)] * 2

    def setup_analysis_adjoint(self, y_r, y_i):
        """The output is the shortest signal whose analysis has the spectrum's F frames
        (``length_for`` inverts ``frames_for`` there, so the two always agree)."""
        B, F = self.setup_spectrum_input(y_r, y_i)
        length = self.geometry.length_for(F)
        self.index = self.geometry.signal_index(length, F)
        return [(B, length)]

    # synthesis: spectrum -> x (B, L);  its adjoint: x (B, L) -> spectrum
    def setup_synthesis(self, y_r, y_i):
        if self.fft_size % self.stride:
            self.fail("fft_size={} must be a multiple of stride={}", self.fft_size, self.stride)
        B, F = self.setup_spectrum_input(y_r, y_i)
        length = self.geometry.length_for(F)
        self.index = self.geometry.placement_index(length, F)
        self.inv_norm = self.geometry.inverse_norm(self, length, F)
        return [(B, length)]

    def setup_synthesis_adjoint(self, x):
        if self.fft_size % self.stride:
            self.fail("fft_size={} must be a multiple of stride={}", self.fft_size, self.stride)
        if len(x) != 2:
            self.fail("x of shape {} must be (batch, samples)", x)
        F = self.geometry.frames_for(x[1])
        if F < 1 or self.geometry.length_for(F) != x[1]:
            self.fail("{} samples are not an ISTFT output length for stride={}, fft_size={}",
                      x[1], self.stride, self.fft_size)
        self.index = self.geometry.placement_index(x[1], F)
        self.inv_norm = self.geometry.inverse_norm(self, x[1], F)
        return [(x[0], self.geometry.bins, F)] * 2

    def run_analysis(self, x, yr, yi):
        self.geometry.analyze(x, self.index, yr, yi)

    def run_analysis_adjoint(self, yr, yi, x, accum=False):
        g = self.geometry
        g.overlap_add(g.frames_of(yr, yi, "analysis"), self.index, x, accum)

    def run_synthesis(self, yr, yi, x, accum=False):
        g = self.geometry
        out = np.zeros_like(x) if accum else x
        g.overlap_add(g.frames_of(yr, yi, "synthesis"), self.index, out, False)
        out *= self.inv_norm
        if accum:
            x += out

    def run_synthesis_adjoint(self, x, yr, yi):
        g = self.geometry
        scaled = x * self.inv_norm
        B, F = x.shape[0], self.index.shape[0]
        frames = np.empty((B, F, g.n), x.dtype)
        gather_frames.for_size(frames.size)(scaled, self.index, frames)
        z = np.empty((B * F, 2 * g.bins), x.dtype)
        gemm(frames.reshape(B * F, g.n), g.matrix("synthesis", x.dtype), z, trans_b=True)
        z = z.reshape(B, F, 2, g.bins)
        yr[...] = z[:, :, 0].transpose(0, 2, 1)
        yi[...] = z[:, :, 1].transpose(0, 2, 1)


@register
class STFT(_StftOp):
    """Short-time Fourier transform (as_istft_backward: the transpose of ISTFT)."""

    def setup(self, x):
        self.check_common()
        if self.as_istft_backward:
            if self.pad_mode != "constant":
                self.fail("pad_mode must be 'constant' when as_istft_backward=True (ISTFT does "
                          "not pad; it slices its output)")
            return self.setup_synthesis_adjoint(x)
        return self.setup_analysis(x)

    def forward(self, inputs, outputs):
        if self.as_istft_backward:
            self.run_synthesis_adjoint(inputs[0], *outputs)
        else:
            self.run_analysis(inputs[0], *outputs)

    backward = stft_backward


@register
class ISTFT(_StftOp):
    """Inverse STFT by overlap-add (as_stft_backward: the transpose of STFT)."""

    def setup(self, y_r, y_i):
        self.check_common()
        if self.as_stft_backward:
            return self.setup_analysis_adjoint(y_r, y_i)
        if self.pad_mode != "constant":
            self.fail("pad_mode must be 'constant' for the normal use of ISTFT "
                      "(as_stft_backward=False): ISTFT ignores padding and slices its output")
        return self.setup_synthesis(y_r, y_i)

    def forward(self, inputs, outputs):
        if self.as_stft_backward:
            self.run_analysis_adjoint(inputs[0], inputs[1], outputs[0])
        else:
            self.run_synthesis(inputs[0], inputs[1], outputs[0])

    backward = istft_backward
