"""Argument checks of op setups that no other test reached (found with tests/setup_coverage.py):
each bad call raises at graph-building time with a message naming the op and what is wrong.
No kernel runs: these are setup-level checks only."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
import nnabla_jit.functions as F


def V(*shape):
    return nn.Variable(shape)


CASES = {
    "affine bias": (lambda: F.affine(V(2, 3), V(3, 4), V(5)), r"Affine: bias of shape \(5,\) must have shape \(4,\)"),
    "reshape two -1": (lambda: F.reshape(V(2, 3), (-1, -1)), r"Reshape: shape \(-1, -1\) has more than one -1"),
    "slice step 0": (lambda: F.slice(V(4), (0,), (4,), (0,)), r"Slice: step \(0,\) must not contain 0"),
    "sum axes twice": (lambda: F.sum(V(2, 3), axis=(0, 0)), r"Sum: axes \(0, 0\) name axis 0 more than once"),
    "batch_matmul batch dims": (lambda: F.batch_matmul(V(2, 3, 4), V(3, 4, 5)),
                                r"BatchMatmul: batch dimensions of a \(2, 3, 4\) and b \(3, 4, 5\) cannot be"),
    "linspace num": (lambda: FB.linspace(0, 1, -2), "Linspace: num must be non-negative, got -2"),
    "einsum two arrows": (lambda: F.einsum(V(2, 3), equation="ij->i->j"), "Einsum: equation 'ij->i->j' has more than one '->'"),
    "einsum labels": (lambda: F.einsum(V(2, 3), equation="i1->i"), "Einsum: equation 'i1->i': labels must be letters"),
    "einsum sizes": (lambda: F.einsum(V(2, 3), V(2, 4), equation="ij,ij->i"), "Einsum: label 'j' has sizes 3 and 4"),
    "einsum repeated output": (lambda: F.einsum(V(2, 2), equation="ij->ii"),
                               "Einsum: output 'ii' of equation 'ij->ii' must name distinct labels"),
    "conv bias": (lambda: F.convolution(V(1, 2, 5, 5), V(3, 2, 3, 3), V(4)),
                  r"Convolution: bias of shape \(4,\) must have shape \(3,\)"),
    "conv empty weight": (lambda: F.convolution(V(1, 2, 5, 5), V(0, 2, 3, 3)),
                          r"Convolution: weight of shape \(0, 2, 3, 3\) has an empty dimension"),
    "conv group": (lambda: F.convolution(V(1, 3, 5, 5), V(4, 1, 3, 3), group=2),
                   "Convolution: input channels 3 and output channels 4 .* must be divisible by"),
    "conv weight channels": (lambda: F.convolution(V(1, 2, 5, 5), V(3, 4, 3, 3)),
                             r"Convolution: weight of shape \(3, 4, 3, 3\) does not fit input of shape"),
    "conv kernel too large": (lambda: F.convolution(V(1, 2, 2, 2), V(3, 2, 3, 3)),
                              r"Convolution: kernel \(3, 3\) .* is larger than the padded input"),
    "deconv group": (lambda: F.deconvolution(V(1, 3, 5, 5), V(3, 2, 3, 3), group=2),
                     "Deconvolution: input channels 3 must be divisible by group 2"),
    "deconv output_padding": (lambda: F.deconvolution(V(1, 2, 5, 5), V(2, 3, 3, 3), output_padding=(1, 1)),
                              r"Deconvolution: output_padding \(1, 1\) must be smaller than stride"),
    "interpolate corners and half pixel": (
        lambda: F.interpolate(V(1, 1, 4, 4), output_size=(8, 8), mode="linear", align_corners=True,
                              half_pixel=True),
        "Interpolate: align_corners=True and half_pixel=True cannot be used together"),
    "batch norm without statistics": (
        lambda: FB.batch_normalization(V(2, 3), V(1, 3), V(1, 3), None, None, batch_stat=False),
        "BatchNormalization: batch_stat=False needs the running mean and variance inputs"),
    "top_k_data with_index": (lambda: F.top_k_data(V(2, 5), 2, reduce=False, with_index=True),
                              "TopKData: with_index=True needs reduce=True"),
    "gather_nd 1-d indices": (lambda: F.gather_nd(V(3, 4), V(2)),
                              r"GatherNd: indices must have at least 2 dimensions \(M, ...\), got shape \(2,\)"),
    "scatter_nd shape and out": (lambda: FB.scatter_nd(V(2), V(1, 2), shape=(5,), out=V(6)),
                                 r"ScatterNd: shape \(5,\) does not match out of shape \(6,\)"),
    "istft stride": (lambda: F.istft(V(2, 9, 4), V(2, 9, 4), window_size=16, stride=5, fft_size=16,
                                     pad_mode="constant"),
                     "ISTFT: fft_size=16 must be a multiple of stride=5"),
    "add_n without inputs": (lambda: FB.add_n(), "AddN: needs at least one input"),
    "concatenate without inputs": (lambda: FB.concatenate(axis=0), "Concatenate: needs at least one input"),
    "stack without inputs": (lambda: FB.stack(), "Stack: needs at least one input"),
    "sink without inputs": (lambda: FB.sink(), "Sink: needs at least one input"),
    "einsum without inputs": (lambda: FB.einsum(equation="->"), "Einsum: needs at least one input"),
    "conv weight dims": (lambda: F.convolution(V(1, 2, 5, 5), V(3, 2, 3)),
                         r"Convolution: weight of shape \(3, 2, 3\) must have 4 dimensions"),
    "conv empty spatial": (lambda: F.convolution(V(1, 2, 0, 5), V(3, 2, 1, 1)),
                           r"Convolution: spatial dims \(0, 5\) of input shape"),
    "gather batch_dims": (lambda: F.gather(V(2, 3), V(3, 1), axis=1, batch_dims=1),
                          "Gather: x of shape .* differ in the first batch_dims=1"),
    "gather_nd too many dims": (lambda: F.gather_nd(V(3, 4), V(3, 2)),
                                r"GatherNd: indices of shape \(3, 2\) index 3 dimensions of x of shape \(3, 4\)"),
    "roi_align output_size": (lambda: F.roi_align(V(1, 2, 8, 8), V(3, 5), (0, 2)),
                              r"RoiAlign: output_size \(0, 2\) must be a positive"),
    "roi_align spatial_scale": (lambda: F.roi_align(V(1, 2, 8, 8), V(3, 5), (2, 2), spatial_scale=(1.0, 1.0, 1.0)),
                                r"RoiAlign: spatial_scale \(1.0, 1.0, 1.0\) must have 2 entries"),
    "nms center_point_box": (lambda: F.onnx_non_max_suppression(V(1, 4, 4), V(1, 1, 4), center_point_box=2),
                             "ONNXNonMaxSuppression: center_point_box=2 must be 0 or 1"),
    "stft 3-d input": (lambda: F.stft(V(2, 3, 64), window_size=16, stride=4, fft_size=16),
                       r"STFT: x of shape \(2, 3, 64\) must be \(batch, samples\)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_arguments_are_refused_at_setup(case):
    call, message = CASES[case]
    with pytest.raises(ValueError, match=message):
        call()
