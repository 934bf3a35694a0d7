"""nnabla's ``nnabla.experimental.parametric_function_classes`` (an empty module in nnabla
1.39); the layer classes are in :mod:`nnabla_jit.experimental.parametric_function_class`."""
