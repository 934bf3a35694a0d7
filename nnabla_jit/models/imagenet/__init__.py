"""ImageNet classifiers of nnabla's model zoo (``nnabla.models.imagenet``)."""
from .base import ImageNetBase  # noqa: F401
from .resnet import ResNet, ResNet18, ResNet34, ResNet50, ResNet101, ResNet152  # noqa: F401
