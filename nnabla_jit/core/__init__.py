"""nnabla's Module API (``nnabla.core``): ``Module`` / ``Sequential`` for building models as
objects owning their parameters, and ``graph_def`` for capturing the graph a model builds from
``ProtoVariable`` placeholders, to call it again on other inputs or save it as ``.nnp``."""
