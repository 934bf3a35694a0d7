"""Experimental features (nnabla's ``nnabla.experimental``): ``mixed_precision_training`` and
the other submodules, imported by name (``from nnabla_jit.experimental.mixed_precision_training
import DynamicLossScalingUpdater``)."""
