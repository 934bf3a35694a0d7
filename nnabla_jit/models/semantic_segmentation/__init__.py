"""Semantic segmentation models of nnabla's zoo (``nnabla.models.semantic_segmentation``)."""
from .deeplabv3plus import DeepLabV3plus  # noqa: F401
