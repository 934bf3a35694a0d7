"""Random augmentation: each output is checked against the set of results its random draws
allow, gradients go back through the draws of the last forward, and seeds reproduce."""
import itertools

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F


def _var(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a, np.float32), need_grad=need_grad)


def _image(shape=(2, 2, 4, 5)):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _run(fn, x, dy=None):
    """Forward fn on x (a leaf needing grad) and backward ``dy``: (y, x.grad)."""
    v = _var(x, True)
    y = fn(v)
    y.forward()
    v.g = 0
    y.backward(np.ones(y.shape) if dy is None else dy)
    return y.d.copy(), v.g.copy()


def check_linear_gradients(fn, x):
    """Between two forwards the draws are fixed and y = A x is linear. The grad rule builds
    A^T dy from the draws of the last forward, so it must match backward after the same
    forward, and differentiating it again with respect to dy must give A (a gather through the
    same index map). (The generic checkers re-run the forward, and so draw anew, between the
    two sides they compare.)"""
    rng = np.random.RandomState(0)
    xv = _var(x, True)
    y = fn(xv)
    w = _var(rng.randn(*y.shape), True)
    loss = F.sum(y * w)
    gx = nn.grad([loss], [xv])[0]
    gx.forward()                       # draws, then A^T w through the draws
    xv.g = 0
    loss.backward()                    # same draws
    np.testing.assert_allclose(gx.d, xv.g, rtol=1e-6)
    v = rng.randn(*x.shape)
    gw = nn.grad([F.sum(gx * _var(v))], [w])[0]
    gw.forward()
    index = y.parent.op.index
    np.testing.assert_allclose(gw.d.reshape(-1), np.where(index >= 0, v.reshape(-1)[index], 0),
                               rtol=1e-6)


# ------------------------------------------------------------------------------ RandomCrop
def test_random_crop_takes_a_window_per_sample():
    x = _image()
    y, g = _run(lambda v: F.random_crop(v, (2, 2, 3), seed=3), x)
    assert y.shape == (2, 2, 2, 3)
    for b in range(2):
        windows = [x[b, :, i:i + 2, j:j + 3] for i in range(3) for j in range(3)]
        k = [k for k, w in enumerate(windows) if np.array_equal(w, y[b])]
        assert len(k) == 1
        i, j = divmod(k[0], 3)
        mask = np.zeros_like(x[b])
        mask[:, i:i + 2, j:j + 3] = 1
        np.testing.assert_array_equal(g[b], mask)   # the gradient goes back into the window


def test_random_crop_samples_before_base_axis():
    x = _image((2, 2, 4, 5))
    y, _ = _run(lambda v: F.random_crop(v, (3,), base_axis=3, seed=0), x)
    assert y.shape == (2, 2, 4, 3)
    starts = {int(y[b, c, h, 0] - x[b, c, h, 0]) for b in range(2) for c in range(2) for h in range(4)}
    assert starts <= {0, 1, 2} and len(starts) > 1   # offsets drawn per (b, c, h)


def test_random_crop_gradients_and_errors():
    check_linear_gradients(lambda v: F.random_crop(v, (2, 2), seed=1), np.random.rand(2, 3, 4))
    with pytest.raises(ValueError, match="RandomCrop.*shape"):
        F.random_crop(_var(np.ones((2, 3, 4))), (2, 5))


# ------------------------------------------------------------------------------ RandomFlip
def test_random_flip_flips_each_sample_or_not():
    x = _image()
    seen = set()
    for seed in range(8):
        y, g = _run(lambda v: F.random_flip(v, axes=(2, 3), seed=seed), x, dy=x)
        for b in range(2):
            choices = {(fh, fw): x[b][:, ::(-1 if fh else 1), ::(-1 if fw else 1)]
                       for fh, fw in itertools.product((0, 1), repeat=2)}
            match = [k for k, c in choices.items() if np.array_equal(c, y[b])]
            assert len(match) == 1
            seen.add(match[0])
            np.testing.assert_array_equal(g[b], y[b])   # dy = x flipped back the same way
    assert len(seen) == 4


def test_random_flip_default_axis_and_gradients():
    x = np.random.RandomState(0).rand(3, 4).astype(np.float32)
    y, _ = _run(lambda v: F.random_flip(v, seed=2), x)
    for b in range(3):
        assert np.array_equal(y[b], x[b]) or np.array_equal(y[b], x[b, ::-1])
    check_linear_gradients(lambda v: F.random_flip(v, seed=5), x)


# ------------------------------------------------------------------------------ RandomShift
def shift_ref(a, shifts, mode, value):
    """a shifted by ``shifts`` (output[i] = a[i - s]) with the given border."""
    index = []
    for n, s in zip(a.shape, shifts):
        j = np.arange(n) - s
        if mode == "nearest":
            j = np.clip(j, 0, n - 1)
        elif mode == "reflect":
            j = np.mod(j, 2 * n)
            j = np.where(j < n, j, 2 * n - 1 - j)
        index.append(j)
    out = a[np.ix_(*[np.clip(j, 0, n - 1) for j, n in zip(index, a.shape)])]
    if mode == "constant":
        mask = np.ones(a.shape, bool)
        for axis, (j, n) in enumerate(zip(index, a.shape)):
            shape = [1] * a.ndim
            shape[axis] = n
            mask &= ((j >= 0) & (j < n)).reshape(shape)
        out = np.where(mask, out, value)
    return out


@pytest.mark.parametrize("mode", ["nearest", "reflect", "constant"])
def test_random_shift(mode):
    x = _image()
    y, _ = _run(lambda v: F.random_shift(v, (1, 2), border_mode=mode, constant_value=-1, seed=4), x)
    for b in range(2):
        candidates = [(sh, sw) for sh in range(-1, 2) for sw in range(-2, 3)
                      if np.array_equal(shift_ref(x[b], (0, sh, sw), mode, -1), y[b])]
        assert candidates
    check_linear_gradients(lambda v: F.random_shift(v, (1, 1), border_mode=mode, seed=6),
                           np.random.rand(2, 3, 3))


def test_random_shift_errors():
    with pytest.raises(ValueError, match="RandomShift.*shifts"):
        F.random_shift(_var(np.ones((2, 3))), (-1, 1))


# ------------------------------------------------------------------------------ RandomErase
def test_random_erase_replaces_boxes_with_noise():
    x = np.ones((2, 3, 6, 8), np.float32)
    y, g = _run(lambda v: F.random_erase(v, prob=1.0, replacements=(5, 6), seed=1), x, dy=2 * x)
    erased = y != 1
    assert erased.any()
    assert np.all((y[erased] >= 5) & (y[erased] <= 6))
    for b in range(2):
        assert np.array_equal(erased[b, 0], erased[b, 1])   # share: one box for all channels
        rows, cols = np.nonzero(erased[b, 0])
        box = np.zeros_like(erased[b, 0])
        box[rows.min():rows.max() + 1, cols.min():cols.max() + 1] = True
        np.testing.assert_array_equal(erased[b, 0], box)
    np.testing.assert_array_equal(g, np.where(erased, 0, 2))   # fine-grained STE


def test_random_erase_options():
    x = np.ones((1, 3, 6, 8), np.float32)
    y, _ = _run(lambda v: F.random_erase(v, prob=0.0, seed=1), x)
    np.testing.assert_array_equal(y, x)
    y, g = _run(lambda v: F.random_erase(v, prob=1.0, n=3, share=False, seed=2,
                                         ste_fine_grained=False), x)
    np.testing.assert_array_equal(g, 1)
    assert not np.array_equal(y[0, 0] != 1, y[0, 1] != 1)   # boxes drawn per channel
    xc = np.ones((1, 6, 8, 3), np.float32)
    y, _ = _run(lambda v: F.random_erase(v, prob=1.0, seed=1, channel_last=True), xc)
    erased = y != 1
    assert erased.any() and np.array_equal(erased[..., 0], erased[..., 2])


def test_random_erase_gradients_and_errors():
    check_linear_gradients(lambda v: F.random_erase(v, prob=1.0, seed=3), np.random.rand(1, 1, 4, 5))
    with pytest.raises(ValueError, match="RandomErase.*exactly 3 axes"):
        F.random_erase(_var(np.ones((2, 6, 8))))
    with pytest.raises(ValueError, match="RandomErase.*prob"):
        F.random_erase(_var(np.ones((1, 1, 6, 8))), prob=2.0)


# ------------------------------------------------------------------------------ seeds
def test_seed_reproduces_and_minus_one_follows_the_global_state():
    x = _var(np.random.rand(4, 6))
    draws = []
    for _ in range(2):
        y = F.random_crop(x, (3,), seed=7)
        y.forward()
        draws.append(y.d.copy())
    np.testing.assert_array_equal(draws[0], draws[1])
    y = F.random_crop(x, (3,))
    nn.random.seed(11)
    y.forward()
    first = y.d.copy()
    changed = False
    for _ in range(5):
        y.forward()
        changed |= not np.array_equal(y.d, first)
    assert changed   # a new draw at every forward
    nn.random.seed(11)
    y.forward()
    np.testing.assert_array_equal(y.d, first)


# ------------------------------------------------------------------------------ ImageAugmentation
def test_image_augmentation_defaults_are_the_identity():
    x = _image((2, 3, 4, 5))
    y, g = _run(lambda v: F.image_augmentation(v, seed=1), x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(g, 0)   # no gradient, as in nnabla
    gx = nn.grad([F.image_augmentation(_var(x, True), seed=1)], [_var(x, True)])[0]
    gx.forward()
    np.testing.assert_array_equal(gx.d, 0)


def test_image_augmentation_flip_and_crop():
    x = _image((4, 1, 4, 5))
    y, _ = _run(lambda v: F.image_augmentation(v, flip_lr=True, seed=2), x)
    flipped = [np.array_equal(y[b], x[b, :, :, ::-1]) for b in range(4)]
    kept = [np.array_equal(y[b], x[b]) for b in range(4)]
    assert all(f or k for f, k in zip(flipped, kept)) and any(flipped)
    y, _ = _run(lambda v: F.image_augmentation(v, shape=(1, 2, 3), seed=3), x)
    assert y.shape == (4, 1, 2, 3)
    assert y.min() >= x.min() and y.max() <= x.max()


def test_image_augmentation_photometric():
    x = _image((3, 2, 4, 5))
    y, _ = _run(lambda v: F.image_augmentation(v, brightness=0.5, seed=4), x)
    shift = y - x
    for b in range(3):
        np.testing.assert_allclose(shift[b], shift[b, 0, 0, 0], atol=1e-4)
        assert abs(shift[b, 0, 0, 0]) <= 0.5
    y, _ = _run(lambda v: F.image_augmentation(v, brightness=0.5, brightness_each=True, seed=4), x)
    assert not np.allclose((y - x)[:, 0], (y - x)[:, 1])
    y, _ = _run(lambda v: F.image_augmentation(v, contrast=2.0, contrast_center=10, seed=5), x)
    ratio = (y - 10)[x != 10] / (x - 10)[x != 10]
    assert ratio.min() >= 0.5 - 1e-5 and ratio.max() <= 2.0 + 1e-5
    y, _ = _run(lambda v: F.image_augmentation(v, noise=0.1, seed=6), _image((4, 3, 8, 8)))
    assert 0.07 < (y - _image((4, 3, 8, 8))).std() < 0.13


def test_image_augmentation_geometry_keeps_values_in_range():
    x = np.random.RandomState(0).rand(2, 3, 6, 6).astype(np.float32)
    y, _ = _run(lambda v: F.image_augmentation(v, pad=(1, 1), min_scale=0.8, max_scale=1.2,
                                               angle=0.3, aspect_ratio=1.2, distortion=0.1,
                                               flip_ud=True, seed=7), x)
    assert y.shape == x.shape
    assert y.min() >= x.min() - 1e-5 and y.max() <= x.max() + 1e-5
    assert not np.allclose(y, x)


def test_image_augmentation_errors():
    x = _var(np.ones((2, 3, 4, 5)))
    with pytest.raises(ValueError, match="ImageAugmentation.*shape"):
        F.image_augmentation(x, shape=(2, 4, 5))
    with pytest.raises(ValueError, match="ImageAugmentation: min_scale=-1.0 and max_scale=1.0 must be positive"):
        F.image_augmentation(x, min_scale=-1.0, max_scale=1.0)
