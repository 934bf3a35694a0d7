"""Utilities with nnabla's module paths (data_iterator, save/load, nnp_graph, ...)."""
