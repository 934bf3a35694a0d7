"""Object detection models of nnabla's zoo (``nnabla.models.object_detection``)."""
from .yolov2 import YoloV2  # noqa: F401
