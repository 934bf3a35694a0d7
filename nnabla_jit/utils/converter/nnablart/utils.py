"""nnabla's ``nnabla.utils.converter.nnablart.utils`` module path: the exporters' network info
and weight rewrites, defined in :mod:`.network_info`."""
from .network_info import (CSRC_PREPROCESS_LIST, NNB_PREPROCESS_LIST, PREPROCESS_DICT,
                           affine_transpose_weight, create_nnabart_info, generate_value,
                           pack_bin_conv_unused_weight, preprocess_for_exporter, revise_buffer_size)

__all__ = ["CSRC_PREPROCESS_LIST", "NNB_PREPROCESS_LIST", "PREPROCESS_DICT", "affine_transpose_weight",
           "create_nnabart_info", "generate_value", "pack_bin_conv_unused_weight",
           "preprocess_for_exporter", "revise_buffer_size"]
