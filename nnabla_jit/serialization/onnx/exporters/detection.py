"""Detection: ONNX's own NonMaxSuppression, and RoiAlign (Mask R-CNN's aligned boxes are ONNX
RoiAlign's ``half_pixel`` coordinates, opset 16)."""
import numpy as np

from ..builder import Unsupported
from ..dependencies import INT64
from .table import exports


@exports("ONNXNonMaxSuppression")
def non_max_suppression(g, n):
    args = n.args
    limit = g.const(np.asarray([args["max_output_boxes_per_class"]], np.int64), INT64)
    inputs = [n.inputs[0], n.inputs[1], limit, g.scalar(float(args["iou_threshold"])),
              g.scalar(float(args["score_threshold"]))]
    return g.op("NonMaxSuppression", inputs, elem=INT64, center_point_box=int(args["center_point_box"]))


@exports("RoiAlign")
def roi_align(g, n):
    args = n.args
    scale_y, scale_x = args["spatial_scale"]
    if g.opset < 16:
        raise Unsupported("RoiAlign with half-pixel coordinates needs opset 16")
    if scale_y != scale_x:
        raise Unsupported("spatial_scale {} differs along y and x; ONNX RoiAlign takes one scale"
                          .format(tuple(args["spatial_scale"])))
    x, boxes = n.inputs
    channel_last = args["channel_last"]
    if channel_last:
        x = g.transpose(x, [0, 3, 1, 2])
    corners = g.slice(boxes, [1], [5], [1])
    index = g.as_int64(g.reshape(g.slice(boxes, [0], [1], [1]), [-1]))
    height, width = args["output_size"]
    y = g.op("RoiAlign", [x, corners, index], coordinate_transformation_mode="half_pixel", mode="avg",
             output_height=int(height), output_width=int(width), spatial_scale=float(scale_x),
             sampling_ratio=max(int(args["sampling_ratio"]), 0))
    return g.transpose(y, [0, 2, 3, 1]) if channel_last else y
