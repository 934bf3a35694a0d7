"""Where the model zoo keeps and finds pretrained weights (nnabla's ``nnabla.models.utils``)."""
import os

from ..logger import logger
from ..utils.download import get_data_home

__all__ = ["get_data_home", "get_model_home", "get_model_url_base_from_env", "get_model_url_base"]

_DEFAULT_URL_BASE = "https://nnabla.org/pretrained-models/nnp_models/"


def get_model_home():
    """The folder pretrained models are downloaded to: ``<data home>/nnp_models``."""
    d = os.path.join(get_data_home(), "nnp_models")
    os.makedirs(d, exist_ok=True)
    return d


def get_model_url_base_from_env():
    """``NNABLA_MODELS_URL_BASE`` from the environment, or None."""
    return os.environ.get("NNABLA_MODELS_URL_BASE", None)


def get_model_url_base():
    """The URL the models are downloaded from (``NNABLA_MODELS_URL_BASE`` overrides it)."""
    url_base = get_model_url_base_from_env()
    if url_base is not None:
        logger.info("NNABLA_MODELS_URL_BASE is set as {}.".format(url_base))
        return url_base
    return _DEFAULT_URL_BASE
