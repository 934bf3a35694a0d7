"""Random data augmentation: RandomCrop, RandomFlip, RandomShift, RandomErase and
ImageAugmentation.

Randomness comes from ``nnabla_jit.random.get_rng(seed)``: with ``seed=-1`` the global state
is read at each forward, with ``seed >= 0`` the op owns a RandomState created in ``setup``.
Draws are independent per *sample*, i.e. per index over the axes before ``base_axis``.

Crop, flip, shift and erase move or replace elements, so each forward draws an *index map*:
``y.flat[i] = x.flat[index[i]]``, or a fill value where ``index[i] < 0``. The backward is the
scatter-add through the same map (the draws of the last forward), and the grad rule builds
that scatter as a node reading the map when it runs, so the gradient stays in step with the
forward. ImageAugmentation, as in nnabla, passes no gradient.
"""
import math

import numpy as np
from numba import njit, prange

from .. import random as nn_random
from .common import normalize_axis
from .kernels import parallel_kernel
from .registry import Op, register


# ------------------------------------------------------------------ backward kernels
def random_index_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx (+)= dy scattered back through the index map of the last forward."""
    if propagate_down[0]:
        run_index_map(output_grads[0], input_grads[0], op.index, False, accum[0])


def random_index_scatter_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                                  accum):
    if propagate_down[0]:
        run_index_map(output_grads[0], input_grads[0], op.source.index, not op.gather,
                             accum[0])


def random_erase_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """Fine-grained: the gradient reaches the elements that were not erased; else all."""
    if not propagate_down[0]:
        return
    if op.ste_fine_grained:
        random_index_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum)
    elif accum[0]:
        input_grads[0] += output_grads[0]
    else:
        input_grads[0][...] = output_grads[0]


def no_gradient_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0] and not accum[0]:
        input_grads[0].fill(0)


@parallel_kernel
def gather_by_index(x, index, fill, y):
    """y[i] = x[index[i]], or fill[i] (fill[0] if fill has one element) where index[i] < 0."""
    one = fill.size == 1
    for i in prange(y.size):
        k = index[i]
        if k >= 0:
            y[i] = x[k]
        else:
            y[i] = fill[0] if one else fill[i]


@njit(cache=True)
def scatter_by_index(dy, index, dx):
    """dx[index[i]] += dy[i] (several i may share a source: a serial loop)."""
    for i in range(dy.size):
        k = index[i]
        if k >= 0:
            dx[k] += dy[i]


class _RandomIndexOp(Op):
    """A random op whose forward is a gather through a freshly drawn index map."""

    def random_setup(self, x):
        # nnabla's range for base_axis: [-ndim, ndim), a negative one counted from ndim
        self.base_axis = normalize_axis(self, self.base_axis, len(x), "base_axis")
        self.in_shape = tuple(x)
        self.samples = int(np.prod(x[:self.base_axis], dtype=np.int64))
        self.own_rng = nn_random.get_rng(self.seed) if self.seed >= 0 else None
        self.index = None

    def output(self, shape):
        self.out_shape = tuple(shape)
        return [self.out_shape]

    @property
    def rng(self):
        return self.own_rng if self.own_rng is not None else nn_random.get_rng(-1)

    def index_from_tables(self, tables, out_inner, source_samples=None):
        """Flat source indices for per-sample, per-axis source tables ``tables[d]`` of shape
        (samples, out_inner[d]) over the axes from base_axis on (-1: no source).
        ``source_samples``: the input sample each output sample reads (default: the same one)."""
        inner = self.in_shape[self.base_axis:]
        strides = [int(np.prod(inner[d + 1:], dtype=np.int64)) for d in range(len(inner))]
        nd = len(inner)
        if source_samples is None:
            source_samples = np.arange(self.samples, dtype=np.int64)
        flat = (source_samples * int(np.prod(inner, dtype=np.int64))).reshape((-1,) + (1,) * nd)
        invalid = np.zeros((self.samples,) + (1,) * nd, bool)
        for d, table in enumerate(tables):
            shape = [self.samples] + [1] * nd
            shape[d + 1] = out_inner[d]
            t = table.reshape(shape)
            flat = flat + t * strides[d]
            invalid = invalid | (t < 0)
        return np.where(invalid, -1, flat).reshape(-1)

    def forward(self, inputs, outputs):
        self.index, fill = self.draw(inputs[0])
        gather_by_index.for_size(self.index.size)(inputs[0].reshape(-1), self.index,
                                                  np.asarray(fill, inputs[0].dtype).reshape(-1),
                                                  outputs[0].reshape(-1))

    backward = random_index_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class RandomCrop(_RandomIndexOp):
    """Crop a random window of ``shape`` (the trailing axes) from each sample. A ``shape``
    reaching into the axes before base_axis crops them too, as nnabla does: one window of
    those axes per forward, and each sample in it gets its own window of the rest."""

    def setup(self, x):
        shape = tuple(self.shape)
        if len(shape) > len(x) or any(s < 1 or s > n for s, n in zip(shape[::-1], x[::-1])):
            self.fail("shape {} must fit in the trailing axes of the input shape {}", shape, x)
        self.random_setup(x)
        out = tuple(x[:len(x) - len(shape)]) + shape
        self.out_lead = out[:self.base_axis]
        self.samples = int(np.prod(self.out_lead, dtype=np.int64))   # samples of the output
        self.out_inner = out[self.base_axis:]
        return self.output(out)

    def source_samples(self, rng):
        """The input sample each output sample is cropped from (None: the same one)."""
        lead = self.in_shape[:self.base_axis]
        if tuple(self.out_lead) == tuple(lead):
            return None
        starts = [rng.randint(0, n - m + 1) for n, m in zip(lead, self.out_lead)]
        grids = np.meshgrid(*[s + np.arange(m) for s, m in zip(starts, self.out_lead)], indexing="ij")
        return np.ravel_multi_index([g.reshape(-1) for g in grids], lead).astype(np.int64)

    def draw(self, x):
        rng = self.rng
        sources = self.source_samples(rng)
        inner = self.in_shape[self.base_axis:]
        tables = [rng.randint(0, n - m + 1, self.samples)[:, None] + np.arange(m)[None, :]
                  for n, m in zip(inner, self.out_inner)]
        return self.index_from_tables(tables, self.out_inner, sources), 0.0


@register
class RandomFlip(_RandomIndexOp):
    """Reverse each of ``axes`` with probability 1/2, independently per sample."""

    def setup(self, x):
        axes = sorted({normalize_axis(self, a, len(x), "axes") for a in self.axes})
        base = normalize_axis(self, self.base_axis, len(x), "base_axis")
        self.base_axis = min([base] + axes)   # a flipped axis is never a sample axis
        self.random_setup(x)
        self.flip_axes = [a - self.base_axis for a in axes]
        return self.output(x)

    def draw(self, x):
        rng = self.rng
        inner = self.in_shape[self.base_axis:]
        tables = []
        for d, n in enumerate(inner):
            forward = np.arange(n)
            if d in self.flip_axes:
                flip = rng.randint(0, 2, self.samples).astype(bool)[:, None]
                tables.append(np.where(flip, forward[::-1][None, :], forward[None, :]))
            else:
                tables.append(np.broadcast_to(forward, (self.samples, n)))
        return self.index_from_tables(tables, inner), 0.0


def _border_index(j, n, mode):
    """Source index of (possibly outside) positions j on an axis of n: clamp, mirror (the edge
    repeated, as nnabla's 'reflect'), or -1 for a constant border."""
    if mode == "nearest":
        return np.clip(j, 0, n - 1)
    if mode == "reflect":
        period = 2 * n
        j = np.mod(j, period)
        return np.where(j < n, j, period - 1 - j)
    return np.where((j >= 0) & (j < n), j, -1)


@register
class RandomShift(_RandomIndexOp):
    """Shift each sample by a random integer in [-shifts[d], shifts[d]] along the trailing
    axes, filling the border by ``border_mode``."""

    def setup(self, x):
        shifts = tuple(self.shifts)
        if len(shifts) > len(x) or any(s < 0 for s in shifts):
            self.fail("shifts {} must hold a non-negative entry for at most the {} axes of "
                      "input shape {}", shifts, len(x), x)
        self.random_setup(x)
        inner = len(x) - self.base_axis
        used = shifts[len(shifts) - min(len(shifts), inner):]   # the trailing axes
        self.max_shift = (0,) * (inner - len(used)) + used
        return self.output(x)

    def draw(self, x):
        rng = self.rng
        inner = self.in_shape[self.base_axis:]
        tables = []
        for n, s in zip(inner, self.max_shift):
            shift = rng.randint(-s, s + 1, self.samples)[:, None]
            tables.append(_border_index(np.arange(n)[None, :] - shift, n, self.border_mode))
        return self.index_from_tables(tables, inner), self.constant_value


@register
class RandomErase(_RandomIndexOp):
    """Replace up to ``n`` random boxes per sample (and per channel unless ``share``) by
    uniform noise in ``replacements``, each with probability ``prob``."""

    def setup(self, x):
        for name in ("area_ratios", "aspect_ratios", "replacements"):
            if len(getattr(self, name)) != 2:
                self.fail("{} {} must be a (low, high) pair", name, getattr(self, name))
        if not 0.0 <= self.prob <= 1.0:
            self.fail("prob={} must be in [0, 1]", self.prob)
        if self.n < 1:
            self.fail("n={} must be positive (the number of boxes tried per sample)", self.n)
        self.random_setup(x)
        if len(x) - self.base_axis != 3:
            self.fail("input of shape {} must have exactly 3 axes (C, H, W{}) after base_axis={}",
                      x, " with channel_last: H, W, C" if self.channel_last else "", self.base_axis)
        inner = x[self.base_axis:]
        self.channels, self.height, self.width = (inner[2], inner[0], inner[1]) if self.channel_last \
            else inner
        return self.output(x)

    def draw(self, x):
        rng = self.rng
        keep = np.ones((self.samples, self.channels, self.height, self.width), bool)
        area = self.height * self.width
        groups = 1 if self.share else self.channels
        for s in range(self.samples):
            for _ in range(self.n):
                for g in range(groups):
                    if rng.rand() >= self.prob:
                        continue
                    box_area = rng.uniform(*self.area_ratios) * area
                    ratio = rng.uniform(*self.aspect_ratios)
                    h = int(math.sqrt(box_area * ratio))
                    w = int(math.sqrt(box_area / ratio))
                    if h < 1 or w < 1 or h > self.height or w > self.width:
                        continue
                    top = rng.randint(0, self.height - h + 1)
                    left = rng.randint(0, self.width - w + 1)
                    channels = slice(None) if self.share else slice(g, g + 1)
                    keep[s, channels, top:top + h, left:left + w] = False
        if self.channel_last:
            keep = keep.transpose(0, 2, 3, 1)
        keep = keep.reshape(-1)
        fill = rng.uniform(self.replacements[0], self.replacements[1], keep.size)
        return np.where(keep, np.arange(keep.size), -1), fill

    backward = random_erase_backward


@register(name="RandomIndexScatter")
class RandomIndexScatter(Op):
    """Internal: scatter-add through the index map of the last forward of ``source`` (a random
    op); ``gather=True`` is the gather instead (its transpose, without fill values)."""

    def __init__(self, input_names=(), source=None, gather=False):
        super().__init__(input_names, source=source, gather=bool(gather))

    def setup(self, g):
        src = self.source
        given, out = (src.in_shape, src.out_shape) if self.gather else (src.out_shape, src.in_shape)
        # the grad rule builds this node on the source's own output (nn.grad differentiates
        # y * weight), so the source re-runs setup, and forward, before this node on any shape
        assert tuple(g) == tuple(given), (g, given, src.name)
        return [out]

    def forward(self, inputs, outputs):
        index = self.source.index
        assert index is not None, self.source.name   # the source ran first: see setup
        run_index_map(inputs[0], outputs[0], index, self.gather, False)

    backward = random_index_scatter_backward

    def grad_depends_input_data(self, i, j):
        return False


def run_index_map(src, dst, index, gather, accum):
    """dst (+)= the gather (or the scatter-add) of src through ``index``."""
    if gather:
        out = np.empty_like(dst) if accum else dst
        gather_by_index.for_size(index.size)(src.reshape(-1), index, np.zeros(1, src.dtype),
                                             out.reshape(-1))
        if accum:
            dst += out
    else:
        if not accum:
            dst.fill(0)
        scatter_by_index(src.reshape(-1), index, dst.reshape(-1))


# ------------------------------------------------------------------ ImageAugmentation
@parallel_kernel
def augment_images(x, transforms, brightness, contrast, contrast_center, noise, y):
    """y[n, c] = bilinear sample of x[n, c] (edge clamped) at transforms[n] @ (col, row, 1),
    then (v + brightness[n, c] - center) * contrast[n, c] + center + noise."""
    N, C, H, W = x.shape
    h, w = y.shape[2], y.shape[3]
    for n in prange(N):
        t = transforms[n]
        for i in range(h):
            for j in range(w):
                u = t[0, 0] * j + t[0, 1] * i + t[0, 2]
                v = t[1, 0] * j + t[1, 1] * i + t[1, 2]
                u = min(max(u, 0.0), W - 1.0)
                v = min(max(v, 0.0), H - 1.0)
                j0 = min(int(math.floor(u)), W - 1)
                i0 = min(int(math.floor(v)), H - 1)
                j1 = min(j0 + 1, W - 1)
                i1 = min(i0 + 1, H - 1)
                fu = u - j0
                fv = v - i0
                for c in range(C):
                    val = ((x[n, c, i0, j0] * (1 - fu) + x[n, c, i0, j1] * fu) * (1 - fv)
                           + (x[n, c, i1, j0] * (1 - fu) + x[n, c, i1, j1] * fu) * fv)
                    val = (val + brightness[n, c] - contrast_center) * contrast[n, c] + contrast_center
                    y[n, c, i, j] = val + noise[n, c, i, j]


@register
class ImageAugmentation(Op):
    """Random geometric (scale, aspect ratio, rotation, distortion, flips, translation within
    ``pad``) and photometric (brightness, contrast, noise) changes of the trailing (H, W)
    images; axis -3, if any, is the channel. No gradient passes (as in nnabla)."""

    def setup(self, x):
        if len(x) < 2:
            self.fail("input of shape {} must have at least the 2 image axes (H, W)", x)
        shape = tuple(self.shape)
        if (len(shape) < 2 or len(shape) > len(x)
                or tuple(shape[:-2]) != tuple(x[len(x) - len(shape):-2])):
            self.fail("shape {} must be the input's trailing axes {} with new (H, W) last",
                      shape, tuple(x[len(x) - len(shape):]))
        if len(self.pad) != 2 or any(p < 0 for p in self.pad):
            self.fail("pad {} must be two non-negative border sizes (H, W)", tuple(self.pad))
        # the scale is drawn between the two either way round (nnabla takes min > max too)
        if self.min_scale <= 0 or self.max_scale <= 0:
            self.fail("min_scale={} and max_scale={} must be positive", self.min_scale,
                      self.max_scale)
        if self.aspect_ratio <= 0 or self.contrast <= 0:
            self.fail("aspect_ratio={} and contrast={} must be positive", self.aspect_ratio,
                      self.contrast)
        channels = x[-3] if len(x) >= 3 else 1
        images = int(np.prod(x[:-3], dtype=np.int64)) if len(x) >= 3 else 1
        self.in_view = (images, channels, x[-2], x[-1])
        self.out_view = (images, channels) + tuple(shape[-2:])
        self.own_rng = nn_random.get_rng(self.seed) if self.seed >= 0 else None
        self.kernel = augment_images.for_size(int(np.prod(self.out_view)))
        return [tuple(x[:-2]) + tuple(shape[-2:])]

    def draw_transforms(self, rng, N):
        """(N, 2, 3): output pixel (col, row, 1) -> input pixel (x, y) for each image."""
        H, W = self.in_view[2:]
        h, w = self.out_view[2:]
        scale = rng.uniform(self.min_scale, self.max_scale, N)
        log_aspect = math.log(self.aspect_ratio)
        aspect = np.exp(rng.uniform(-abs(log_aspect), abs(log_aspect), N))
        angle = rng.uniform(-self.angle, self.angle, N)
        flip_x = np.where(rng.randint(0, 2, N).astype(bool) & self.flip_lr, -1.0, 1.0)
        flip_y = np.where(rng.randint(0, 2, N).astype(bool) & self.flip_ud, -1.0, 1.0)
        distortion = rng.uniform(-self.distortion, self.distortion, (N, 2, 2))
        shift_x = rng.uniform(-1, 1, N) * max((W - w) / 2.0 + self.pad[1], 0.0)
        shift_y = rng.uniform(-1, 1, N) * max((H - h) / 2.0 + self.pad[0], 0.0)
        cos, sin = np.cos(angle), np.sin(angle)
        sx = flip_x / (scale * np.sqrt(aspect))
        sy = flip_y * np.sqrt(aspect) / scale
        m = np.empty((N, 2, 2))
        m[:, 0, 0], m[:, 0, 1] = cos * sx, -sin * sy
        m[:, 1, 0], m[:, 1, 1] = sin * sx, cos * sy
        m += distortion
        centre_out = np.array([(w - 1) / 2.0, (h - 1) / 2.0])
        centre_in = np.stack([(W - 1) / 2.0 + shift_x, (H - 1) / 2.0 + shift_y], axis=1)
        offset = centre_in - np.einsum("nij,j->ni", m, centre_out)
        return np.concatenate([m, offset[:, :, None]], axis=2)

    def forward(self, inputs, outputs):
        rng = self.own_rng if self.own_rng is not None else nn_random.get_rng(-1)
        N, C = self.in_view[:2]
        transforms = self.draw_transforms(rng, N)
        per = (N, C) if self.brightness_each else (N, 1)
        brightness = np.broadcast_to(rng.uniform(-self.brightness, self.brightness, per), (N, C))
        log_c = math.log(self.contrast)
        per = (N, C) if self.contrast_each else (N, 1)
        contrast = np.broadcast_to(np.exp(rng.uniform(-abs(log_c), abs(log_c), per)), (N, C))
        noise = (rng.normal(0, self.noise, self.out_view) if self.noise > 0
                 else np.zeros((1, 1, 1, 1)))
        noise = np.broadcast_to(noise, self.out_view)
        self.kernel(inputs[0].reshape(self.in_view), transforms, np.ascontiguousarray(brightness),
                    np.ascontiguousarray(contrast), self.contrast_center, noise,
                    outputs[0].reshape(self.out_view))

    backward = no_gradient_backward

    def grad_depends_input_data(self, i, j):
        return False
