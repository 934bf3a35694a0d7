"""ONNX NonMaxSuppression and RoiAlign (half-pixel, average: nnabla's aligned boxes)."""
from .... import functions as F
from ..builder import Unsupported
from .table import imports


@imports("NonMaxSuppression")
def non_max_suppression(c, node):
    def scalar(k, default):
        return float(c.const(node.input(k), "input {}".format(k)).reshape(-1)[0]) if node.input(k) else default
    return F.onnx_non_max_suppression(c.var(node.inputs[0]), c.var(node.inputs[1]),
                                      node.attr("center_point_box", 0), int(scalar(2, 0)),
                                      scalar(3, 0.0), scalar(4, 0.0))


@imports("RoiAlign")
def roi_align(c, node):
    half_pixel = c.opset >= 16 and node.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    if not half_pixel or node.attr("mode", "avg") != "avg":
        raise Unsupported("only mode 'avg' with half_pixel coordinates (opset 16) is supported")
    x, rois, index = (c.var(i) for i in node.inputs)
    boxes = F.concatenate(F.reshape(index, (index.shape[0], 1)), rois, axis=1)
    scale = node.attr("spatial_scale", 1.0)
    return F.roi_align(x, boxes, (node.attr("output_height", 1), node.attr("output_width", 1)),
                       (scale, scale), node.attr("sampling_ratio", 0) or -1)
