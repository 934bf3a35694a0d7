"""The base of the segmentation models (nnabla's ``nnabla.models.semantic_segmentation.base``)."""
import os

from ..network import ModelBase
from ...utils.download import get_data_home  # noqa: F401  (nnabla's module exposes these)
from ...utils.nnp_graph import NnpLoader  # noqa: F401
from ..utils import get_model_home, get_model_url_base, get_model_url_base_from_env  # noqa: F401

__all__ = ["SemanticSegmentation"]


class SemanticSegmentation(ModelBase):
    """A segmentation model; ``category_names`` are Pascal VOC's 20 classes (the outputs add
    the background first)."""
    _FOLDER = "semantic_segmentation"

    @property
    def category_names(self):
        """Pascal VOC's class names."""
        if not hasattr(self, "_category_names"):
            names = os.path.join(os.path.dirname(os.path.dirname(__file__)), "object_detection", "voc.names")
            with open(names) as f:
                self._category_names = f.read().splitlines()
        return self._category_names
