"""nnabla's model zoo (``nnabla.models``): ImageNet classifiers (``models.imagenet``), YOLOv2
(``models.object_detection``) and DeepLabV3+ (``models.semantic_segmentation``).

    from nnabla_jit.models.imagenet import ResNet50
    model = ResNet50()
    y = model(x, use_up_to="pool", training=True, force_global_pooling=True)

The pretrained weights are Sony's ``.nnp`` files: a model takes the one in its folder under
``get_model_home()`` (``~/nnabla_data/nnp_models/imagenet/Resnet-50.nnp``), downloading it first
when it is not there. The network is then built from the file, as nnabla does. Where the file
cannot be had (offline), the model says so in one line and builds the same architecture from
parametric functions with freshly initialised weights (``.h5`` weights of those names, when
present beside where the ``.nnp`` would be, are loaded into it).
"""
