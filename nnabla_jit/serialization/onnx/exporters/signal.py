"""Resampling. nnabla's linear Interpolate is ONNX Resize with the matching coordinate
transformation; its nearest-neighbour modes (one of which ONNX dropped after opset 11) are
gathers at the source positions nnabla_jit computes. ONNXResize is Resize itself."""
import numpy as np

from ....ops.signal import interpolate_taps
from ..dependencies import INT64
from .table import exports


@exports("Interpolate")
def interpolate(g, n):
    args = n.args
    sizes = list(args["output_size"])
    in_shape, out_shape = n.in_shapes[0], n.out_shapes[0]
    first = n.ndim - len(sizes) - int(args["channel_last"])
    if args["mode"] == "linear":
        ctm = "align_corners" if args["align_corners"] else (
            "half_pixel" if args["half_pixel"] else "asymmetric")
        return g.resize(n.x, sizes=list(out_shape), mode="linear",
                        coordinate_transformation_mode=ctm)
    y = n.x
    for k, size in enumerate(sizes):
        axis = first + k
        index, _ = interpolate_taps("nearest", in_shape[axis], size, args["align_corners"],
                                    args["half_pixel"], args["half_pixel_for_nn"])
        y = g.op("Gather", [y, g.const(np.asarray(index[:, 0], np.int64), INT64)], axis=axis)
    return y


@exports("ONNXResize")
def onnx_resize(g, n):
    args = n.args
    ctm = args["coordinate_transformation_mode"]
    roi = list(args["roi"]) or [0.0] * n.ndim + [1.0] * n.ndim
    return g.resize(n.x, scales=list(args["scales"]) or None, sizes=list(args["sizes"]) or None,
                    roi=roi if ctm == "tf_crop_and_resize" else None,
                    mode=args["mode"], coordinate_transformation_mode=ctm,
                    cubic_coeff_a=float(args["cubic_coeff_a"]),
                    exclude_outside=int(args["exclude_outside"]),
                    extrapolation_value=float(args["extrapolation_value"]),
                    nearest_mode=args["nearest_mode"])
