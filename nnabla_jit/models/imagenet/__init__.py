"""ImageNet classifiers of nnabla's model zoo (``nnabla.models.imagenet``)."""
from .alexnet import AlexNet  # noqa: F401
from .base import ImageNetBase  # noqa: F401
from .mobilenet import MobileNet, MobileNetV2  # noqa: F401
from .nin import NIN  # noqa: F401
from .resnet import ResNet, ResNet18, ResNet34, ResNet50, ResNet101, ResNet152  # noqa: F401
from .resnext import ResNeXt, ResNeXt50, ResNeXt101  # noqa: F401
from .senet import SENet  # noqa: F401
from .squeezenet import SqueezeNet, SqueezeNetV10, SqueezeNetV11  # noqa: F401
from .vgg import VGG, VGG11, VGG13, VGG16  # noqa: F401
