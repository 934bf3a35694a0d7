"""The base of the ImageNet classifiers (nnabla's ``nnabla.models.imagenet.base``)."""
import os

from ..network import ModelBase
from ...utils.download import get_data_home  # noqa: F401  (nnabla's module exposes these)
from ...utils.nnp_graph import NnpLoader  # noqa: F401
from ..utils import get_model_home, get_model_url_base, get_model_url_base_from_env  # noqa: F401

__all__ = ["ImageNetBase"]


class ImageNetBase(ModelBase):
    """An ImageNet classifier: ``category_names`` of its 1000 classes, ``input_shape``, and
    ``model(x, use_up_to=..., training=..., ...)`` (see ``ModelBase.__call__``)."""

    @property
    def category_names(self):
        """The names of the 1000 ImageNet classes, in the order of the classifier's outputs."""
        if not hasattr(self, "_category_names"):
            with open(os.path.join(os.path.dirname(__file__), "category_names.txt")) as f:
                self._category_names = f.read().splitlines()
        return self._category_names

    def use_up_to(self, key, callback, **variable_format_dict):
        """Tell the ``.nnp`` pass ``callback`` to stop at the variable of ``key``."""
        if key not in self._KEY_VARIABLE:
            raise ValueError('The key "{}" is not present in {}. Available keys are {}.'.format(
                key, type(self).__name__, list(self._KEY_VARIABLE.keys())))
        callback.use_up_to(self._KEY_VARIABLE[key].format(**variable_format_dict))


class AuxTowerModel(ImageNetBase):
    """An ImageNet model with auxiliary classifiers (GoogLeNet, InceptionV3): ``with_aux_tower``
    also builds them (for training) and returns the list of outputs, the main classifier's
    first."""
    _with_aux = False

    def __call__(self, input_var=None, use_from=None, use_up_to="classifier", training=False,
                 force_global_pooling=False, check_global_pooling=True, returns_net=False, verbose=0,
                 with_aux_tower=False):
        if use_up_to.startswith("_"):
            raise ValueError("{}: '{}' is internal; use 'classifier', 'pool' or 'prepool'"
                             .format(type(self).__name__, use_up_to))
        self._with_aux = with_aux_tower
        net = super().__call__(input_var, use_from, use_up_to, training, force_global_pooling,
                               check_global_pooling, True, verbose)
        if returns_net:
            return net
        outputs = list(net.outputs.values())
        return outputs if with_aux_tower else outputs[0]
