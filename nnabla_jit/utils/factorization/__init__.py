"""Tensor factorizations used by the low-rank parametric functions (``PF.cpd3_convolution``)."""
