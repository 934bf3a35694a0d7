"""ONNX resampling and transforms: Resize / Upsample (nnabla's ONNXResize), GridSample
(WarpByGrid), AffineGrid and DFT (nnabla's FFT / IFFT over one axis at a time)."""

from .... import functions as F
from ..builder import Unsupported
from .table import imports
from .tensor import const_ints

GRID_MODE = {"bilinear": "linear", "linear": "linear", "nearest": "nearest"}
GRID_PADDING = {"zeros": "zero", "border": "repeat", "reflection": "reflect"}


@imports("Upsample")
def upsample(c, node):
    """Upsample (opsets 7 to 9) and Resize-10: ``scales``, asymmetric coordinates."""
    x = c.var(node.inputs[0])
    scales = node.attr("scales") or c.const(node.inputs[1], "scales").reshape(-1)
    mode = node.attr("mode", "nearest")
    return F.onnx_resize(x, scales=tuple(float(s) for s in scales),
                         mode="linear" if mode in ("linear", "bilinear") else mode,
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@imports("Resize")
def resize(c, node):
    if c.opset < 11:
        return upsample(c, node)
    x = c.var(node.inputs[0])
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if node.attr("antialias", 0) or node.attr("axes") or policy != "stretch":
        raise Unsupported("antialias, axes and keep_aspect_ratio_policy are not supported")

    def floats(k):
        name = node.input(k)
        return tuple(float(v) for v in c.const(name, "resize input").reshape(-1)) if name else ()
    sizes = tuple(const_ints(c, node.input(3), "sizes")) if node.input(3) else ()
    transform = node.attr("coordinate_transformation_mode", "half_pixel")
    try:
        return F.onnx_resize(x, roi=floats(1), scales=() if sizes else floats(2), sizes=sizes,
                             mode=node.attr("mode", "nearest"), coordinate_transformation_mode=transform,
                             cubic_coeff_a=node.attr("cubic_coeff_a", -0.75),
                             exclude_outside=node.attr("exclude_outside", 0),
                             extrapolation_value=node.attr("extrapolation_value", 0.0),
                             nearest_mode=node.attr("nearest_mode", "round_prefer_floor"))
    except ValueError as e:
        raise Unsupported(str(e)) from None


@imports("GridSample")
def grid_sample(c, node):
    mode, padding = node.attr("mode", "bilinear"), node.attr("padding_mode", "zeros")
    if mode not in GRID_MODE:
        raise Unsupported("mode '{}' is not supported".format(mode))
    return F.warp_by_grid(c.var(node.inputs[0]), c.var(node.inputs[1]), GRID_MODE[mode],
                          GRID_PADDING[padding], bool(node.attr("align_corners", 0)))


@imports("AffineGrid")
def affine_grid(c, node):
    size = const_ints(c, node.inputs[1], "size")
    return F.affine_grid(c.var(node.inputs[0]), tuple(size[2:]), bool(node.attr("align_corners", 0)))


@imports("DFT")
def dft(c, node):
    """A complex (..., 2) input transformed along one axis, moved next to the last for nnabla."""
    if node.attr("onesided", 0) or node.input(1):
        raise Unsupported("onesided and dft_length are not supported")
    x = c.var(node.inputs[0])
    if x.shape[-1] == 1:   # real input: a zero imaginary part
        x = F.concatenate(x, F.constant(0.0, x.shape), axis=x.ndim - 1)
    if c.opset >= 20:
        axis = int(c.const(node.input(2), "axis").reshape(-1)[0]) if node.input(2) else -2
    else:
        axis = node.attr("axis", 1)
    axis %= x.ndim
    last = x.ndim - 2
    perm = list(range(x.ndim))
    perm[axis], perm[last] = perm[last], perm[axis]
    fn = F.ifft if node.attr("inverse", 0) else F.fft
    moved = x if axis == last else F.transpose(x, tuple(perm))
    y = fn(moved, 1)
    return y if axis == last else F.transpose(y, tuple(perm))
