"""Parametric layers as objects holding their parameters (nnabla's
``nnabla.experimental.parametric_function_class``): ``Affine``/``Linear``, ``Convolution``
(``Conv1d``/``2d``/``3d``/``ConvNd``), ``Deconvolution`` (``Deconv*``), ``BatchNormalization``
(``BatchNorm1d``/``2d``/``3d``) and ``Embed``, each in its own submodule, all built on
:class:`.module.Module`.

    fc = Affine(784, 10)          # the parameters are fc.W, fc.b (not in the global scope)
    y = fc(x)
"""
