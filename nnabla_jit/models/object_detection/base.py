"""The base of the object detectors (nnabla's ``nnabla.models.object_detection.base``)."""
import os

from ..network import ModelBase
from ...utils.download import get_data_home  # noqa: F401  (nnabla's module exposes these)
from ...utils.nnp_graph import NnpLoader  # noqa: F401
from ..utils import get_model_home, get_model_url_base, get_model_url_base_from_env  # noqa: F401

__all__ = ["ObjectDetection"]


class ObjectDetection(ModelBase):
    """A detector trained on ``_dataset_name`` ('voc' or 'coco'), whose class names
    ``get_category_names()`` gives."""
    _FOLDER = "object_detection"
    _dataset_name = None

    def get_category_names(self):
        """The names of the dataset's classes, in the order of the detector's class scores."""
        if not hasattr(self, "_category_names"):
            with open(os.path.join(os.path.dirname(__file__), "{}.names".format(self._dataset_name))) as f:
                self._category_names = f.read().splitlines()
        return self._category_names
