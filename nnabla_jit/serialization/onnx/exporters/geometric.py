"""Sampling grids: AffineGrid as a product with nnabla_jit's own normalised target grid,
WarpByGrid as ONNX GridSample (opset 16: 2-d bilinear / nearest; opset 20: also 3-d)."""
import numpy as np

from ....ops.geometric import target_grid
from ..builder import Unsupported
from .table import exports

PADDING = {"zero": "zeros", "repeat": "border", "reflect": "reflection"}


@exports("AffineGrid")
def affine_grid(g, n):
    """grid[b, pixel] = base[pixel] @ theta[b]^T."""
    base = g.const(target_grid(tuple(n.args["size"]), n.args["align_corners"]).astype(np.float32))
    grid = g.op("MatMul", [base, g.transpose(n.x, [0, 2, 1])])
    return g.reshape(grid, n.out_shapes[0])


@exports("WarpByGrid")
def warp_by_grid(g, n):
    args = n.args
    spatial = n.in_shapes[1][-1]
    if g.opset < 16 or (spatial == 3 and g.opset < 20):
        raise Unsupported("GridSample needs opset 16 ({}-d grids: opset 20)".format(spatial))
    x = n.x
    channel_last = args["channel_last"]
    if channel_last:
        x = g.transpose(x, [0, n.ndim - 1] + list(range(1, n.ndim - 1)))
    mode = args["mode"]
    if g.opset < 20 and mode == "linear":
        mode = "bilinear"
    y = g.op("GridSample", [x, n.inputs[1]], mode=mode, padding_mode=PADDING[args["padding_mode"]],
             align_corners=int(args["align_corners"]))
    if channel_last:
        y = g.transpose(y, [0] + list(range(2, n.ndim)) + [1])
    return y
