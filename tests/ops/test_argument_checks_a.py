"""Argument checks no other test reached (found with tests/setup_coverage.py), part two: setup
checks, the index-value checks ops make in forward, the shape checks a grad graph meets after
``reset_shape``, and the checks that guard the extension API (``elementwise``,
``linear_adjoint``). Each bad call raises with a message naming the op and what is wrong.
Also the inputs nnabla accepts that these checks used to refuse."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
import nnabla_jit.functions as F
from nnabla_jit.backward_function.adjoint import linear_adjoint
from nnabla_jit.ops.elementwise import elementwise


def V(*shape):
    return nn.Variable(shape)


def data(a):
    return nn.Variable.from_numpy_array(np.asarray(a))


def forward(y):
    y.forward()
    return y


SETUP_CASES = {
    "deconv empty spatial": (lambda: F.deconvolution(V(1, 2, 0, 5), V(2, 3, 3, 3)),
                             r"Deconvolution: spatial dims \(0, 5\) of input shape \(1, 2, 0, 5\) must not be empty"),
    "deconv weight rows": (lambda: F.deconvolution(V(1, 2, 5, 5), V(3, 3, 3, 3)),
                           r"Deconvolution: weight of shape \(3, 3, 3, 3\) does not fit input of shape \(1, 2, 5, 5\)"
                           r": it must have 4 dimensions and 2 rows"),
    "deconv no output": (lambda: F.deconvolution(V(1, 2, 2, 2), V(2, 3, 1, 1), pad=(3, 3)),
                         r"Deconvolution: no output: input \(1, 2, 2, 2\) with kernel \(1, 1\), pad \(3, 3\), "
                         r"stride \(1, 1\), dilation \(1, 1\) gives spatial size \(-4, -4\)"),
    "depthwise deconv divisor": (lambda: F.depthwise_deconvolution(V(1, 3, 4, 4), V(3, 3, 3), divisor=2),
                                 r"DepthwiseDeconvolution: input channels 3 \(input shape \(1, 3, 4, 4\)\) must be "
                                 r"divisible by divisor 2"),
    "deformable 1-d": (lambda: F.deformable_convolution(V(1, 2, 6), V(3, 2, 3), V(1, 6, 6), V(1, 3, 6)),
                       r"DeformableConvolution: only 2-d inputs are supported, got input of shape \(1, 2, 6\)"),
    "deformable group": (lambda: F.deformable_convolution(V(1, 3, 4, 4), V(3, 3, 3, 3), V(1, 36, 4, 4),
                                                          V(1, 18, 4, 4), deformable_group=2),
                         "DeformableConvolution: input channels 3 must be divisible by deformable_group 2"),
    "deformable offset": (lambda: F.deformable_convolution(V(1, 2, 4, 4), V(3, 2, 3, 3), V(1, 17, 4, 4)),
                          r"DeformableConvolution: offset of shape \(1, 17, 4, 4\) must have shape \(1, 18, 4, 4\)"),
    "deformable mask": (lambda: F.deformable_convolution(V(1, 2, 4, 4), V(3, 2, 3, 3), V(1, 18, 4, 4),
                                                         V(1, 8, 4, 4)),
                        r"DeformableConvolution: mask of shape \(1, 8, 4, 4\) must have shape \(1, 9, 4, 4\)"),
    "deformable pad": (lambda: F.deformable_convolution(V(1, 2, 4, 4), V(3, 2, 1, 1), V(1, 2, 4, 4),
                                                        pad=(2, 2)),
                       r"DeformableConvolution: pad \(2, 2\) leaves output positions without an offset"),
    "adaptive separable kernel map": (
        lambda: F.adaptive_separable_convolution(V(1, 2, 5, 5), V(1, 3, 3, 3), V(1, 3, 2, 3)),
        r"AdaptiveSeparableConvolution: vertical_kernel \(1, 3, 3, 3\) and horizontal_kernel \(1, 3, 2, 3\) "
        r"must be \(N, K, 3, 3\) for input \(1, 2, 5, 5\)"),
    # the NHWC op itself (F.patch_correlation checks the shapes before it transposes NCHW input)
    "patch correlation shapes": (lambda: FB.patch_correlation(V(1, 4, 4, 2), V(1, 4, 5, 2)),
                                 r"PatchCorrelation: x1 \(1, 4, 4, 2\) and x2 \(1, 4, 5, 2\) must be 4-d"),
    "patch correlation patch": (lambda: FB.patch_correlation(V(1, 4, 4, 2), V(1, 4, 4, 2), patch=(6, 1)),
                                r"PatchCorrelation: patch \(6, 1\) is larger than the padded input \(1, 4, 4, 2\) "
                                r"\(padding \(0, 0, 0, 0\)\)"),
    "random erase axes": (lambda: F.random_erase(V(2, 3, 4), base_axis=1),
                          r"RandomErase: input of shape \(2, 3, 4\) must have exactly 3 axes \(C, H, W\) after "
                          r"base_axis=1"),
    "image augmentation scale": (lambda: F.image_augmentation(V(1, 1, 4, 4), min_scale=0.0),
                                 "ImageAugmentation: min_scale=0.0 and max_scale=1.0 must be positive"),
    "warp_by_grid batch": (lambda: F.warp_by_grid(V(2, 3, 4, 4), V(3, 4, 4, 2)),
                           r"WarpByGrid: x of shape \(2, 3, 4, 4\) must be a batch of 3 2-d inputs matching grid "
                           r"\(3, 4, 4, 2\)"),
    "scatter_nd without shape or out": (lambda: FB.scatter_nd(V(2), V(1, 2)),
                                        "ScatterNd: needs either the shape argument or the out input"),
    "einsum two output ellipses": (lambda: F.einsum(V(2, 3), equation="...i->......"),
                                   r"Einsum: equation '\.\.\.i->\.\.\.\.\.\.' has more than one ellipsis in the "
                                   r"output"),
    "einsum ellipsis broadcast": (lambda: F.einsum(V(2, 3), V(4, 3), equation="...i,...i->..."),
                                  r"Einsum: ellipsis dimensions of the inputs \(\(2, 3\), \(4, 3\)\) cannot be "
                                  r"broadcast"),
    # 52 letters name 26 + 26 axes; the ellipsis needs a 53rd label
    "einsum out of labels": (lambda: F.einsum(V(*[1] * 26), V(*[1] * 27),
                                              equation="abcdefghijklmnopqrstuvwxyz,...ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
                             "Einsum: the equation needs more than 52 distinct labels"),
}


@pytest.mark.parametrize("case", sorted(SETUP_CASES))
def test_bad_arguments_are_refused_at_setup(case):
    call, message = SETUP_CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


FORWARD_CASES = {
    "embed index": (lambda: F.embed(data([0, 7]), V(4, 3)), r"Embed: index out of range \[0, 4\): min 0 max 7"),
    "one_hot index": (lambda: F.one_hot(data([[0], [7]]), (4,)), r"OneHot: index \(7,\) out of range for shape \(4,\)"),
    "gather index": (lambda: F.gather(V(3, 4), data([0, 5]), axis=1),
                     r"Gather: index out of range \[0, 4\): got values from 0 to 5"),
    "gather_nd index": (lambda: F.gather_nd(V(3, 4), data([[0, 5]])),
                        "GatherNd: index out of range for axis 0 of size 3: got values from 0 to 5"),
    "bool_scatter rows": (lambda: F.bool_scatter(V(2, 3), data([1, 0, 1, 1])),
                          "BoolScatter: the mask has 3 non-zeros but the input has 2 rows"),
    "batch_inv singular": (lambda: F.batch_inv(data(np.zeros((1, 2, 2)))),
                           r"BatchInv: Singular matrix \(input of shape \(1, 2, 2\)\)"),
    "batch_cholesky indefinite": (lambda: F.batch_cholesky(data([[[-1.0, 0.0], [0.0, 1.0]]])),
                                  r"BatchCholesky: Matrix is not positive definite \(input of shape \(1, 2, 2\)\)"),
}


@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_bad_values_are_refused_in_forward(case):
    build, message = FORWARD_CASES[case]
    y = build()
    with pytest.raises(ValueError, match=message):
        y.forward()


def test_empty_index_inputs_give_empty_outputs():
    w = nn.Variable.from_numpy_array(np.ones((4, 3)), need_grad=True)
    y = forward(F.embed(data(np.zeros((0, 2), np.int64)), w))
    assert y.d.shape == (0, 2, 3)
    y.backward(clear_buffer=True)
    np.testing.assert_array_equal(w.g, np.zeros((4, 3)))
    y = forward(F.one_hot(data(np.zeros((0, 2), np.int64)), (3, 4)))
    assert y.d.shape == (0, 3, 4)


def test_sort_only_index_backward_passes_the_index_gradient_as_nnabla():
    # nnabla 1.39 (recorded): the index output's gradient is unsorted as the values' would be
    x = nn.Variable.from_numpy_array(np.array([[0.0, 1, 2], [3, 4, 5]]), need_grad=True)
    y = forward(F.sort(x, axis=1, only_index=True))
    x.g = np.full((2, 3), 7.0)
    y.g = np.ones((2, 3))
    y.parent.backward([x], [y], accum=[False])
    np.testing.assert_array_equal(x.g, np.ones((2, 3)))
    y.parent.backward([x], [y], accum=[True])
    np.testing.assert_array_equal(x.g, np.full((2, 3), 2.0))


def test_pad_gradient_after_reset_shape_names_the_stale_shape():
    x = nn.Variable((2, 3), need_grad=True)
    dx = nn.grad([F.pad(x, (1, 1))], [x])[0]
    x.reset_shape((4, 3), force=True)
    with pytest.raises(ValueError, match=r"LinearAdjoint: gradient shapes \[\(4, 5\)\] do not match the outputs "
                                         r"\[\(2, 5\)\] of Pad on an input of shape \(2, 3\)"):
        dx.forward()


def test_convolution_gradient_after_reset_shape_names_the_stale_shape():
    x, w = nn.Variable((1, 1, 4, 4), need_grad=True), nn.Variable((2, 1, 3, 3), need_grad=True)
    dx = nn.grad([F.convolution(x, w)], [x])[0]
    x.reset_shape((2, 1, 5, 5), force=True)
    with pytest.raises(ValueError, match=r"ConvolutionDataGrad: dy of shape \(2, 2, 3, 3\) is not the shape "
                                         r"\(1, 2, 2, 2\) of Convolution's output for x of shape \(1, 1, 4, 4\)"):
        dx.forward()


def test_linear_adjoint_refuses_an_unknown_source_op():
    with pytest.raises(ValueError, match="LinearAdjoint: unknown source op 'NoSuchOp'"):
        linear_adjoint("NoSuchOp", {}, (4,), [V(4)])


def test_linear_adjoint_needs_the_held_inputs_it_names():
    """A grad rule that names GridCorners' coordinates input but passes none."""
    with pytest.raises(ValueError, match=r"LinearAdjoint: GridCorners takes 1 inputs after the 1 output "
                                         r"gradient\(s\), got 0"):
        linear_adjoint("GridCorners", dict(spatial=(2, 2), nearest=False), (1, 1, 4), [V(1, 1, 3, 4)],
                       held=[], source_inputs=("x", "coords"))


def test_elementwise_refuses_derivatives_of_inputs_the_op_lacks():
    with pytest.raises(TypeError, match=r"elementwise\(Sin\): unknown derivative names \['dx1'\]"):
        elementwise("Sin", "sin(x)", dx1="dy * cos(x)")


# ------------------------------------------------------------ what nnabla accepts, so do we
def test_reflect_padding_wider_than_the_axis_reflects_again():
    x = np.arange(6.0).reshape(2, 3)
    y = forward(F.pad(data(x), (5, 4), mode="reflect"))
    np.testing.assert_array_equal(y.d, np.pad(x, ((0, 0), (5, 4)), mode="reflect"))
    one = forward(F.pad(data([[7.0]]), (2, 2), mode="reflect"))
    np.testing.assert_array_equal(one.d, np.full((1, 5), 7.0))


def test_random_crop_into_the_sample_axes_crops_them_once_per_forward():
    x = np.arange(120.0).reshape(4, 5, 6)
    y = forward(F.random_crop(data(x), shape=(3, 3, 4), base_axis=1, seed=3))
    assert y.shape == (3, 3, 4)
    rows = [int(y.d[i, 0, 0]) // 30 for i in range(3)]
    assert rows == list(range(rows[0], rows[0] + 3))   # one window of axis 0
    for i, r in enumerate(rows):   # each row a window of its own input row
        top, left = divmod(int(y.d[i, 0, 0]) % 30, 6)
        np.testing.assert_array_equal(y.d[i], x[r, top:top + 3, left:left + 4])


def test_image_augmentation_takes_min_scale_above_max_scale():
    y = F.image_augmentation(V(1, 1, 4, 4), min_scale=2.0, max_scale=1.0)
    assert y.shape == (1, 1, 4, 4)


# ------------------------------------------------------------ good arguments get nnabla's shapes
GOOD_SHAPES = {   # the output shapes nnabla 1.39 gives for the same calls
    "reshape -1": (lambda: F.reshape(V(2, 6), (-1, 3)), [(4, 3)]),
    "meshgrid ij": (lambda: F.meshgrid(V(2), V(3), ij_indexing=True), [(2, 3), (2, 3)]),
    "affine_grid": (lambda: F.affine_grid(V(2, 2, 3), (4, 5)), [(2, 4, 5, 2)]),
    "warp_by_grid": (lambda: F.warp_by_grid(V(2, 3, 4, 4), V(2, 5, 6, 2)), [(2, 3, 5, 6)]),
    "warp_by_grid channel_last": (lambda: F.warp_by_grid(V(2, 4, 4, 3), V(2, 5, 6, 2), channel_last=True),
                                  [(2, 5, 6, 3)]),
    "warp_by_flow": (lambda: F.warp_by_flow(V(2, 3, 4, 5), V(2, 2, 4, 5)), [(2, 3, 4, 5)]),
    "deformable_convolution": (lambda: F.deformable_convolution(V(1, 2, 4, 4), V(3, 2, 3, 3), V(1, 18, 4, 4),
                                                                V(1, 9, 4, 4), V(3)), [(1, 3, 2, 2)]),
    "adaptive_separable_convolution": (
        lambda: F.adaptive_separable_convolution(V(1, 2, 5, 5), V(1, 3, 3, 3), V(1, 3, 3, 3)), [(1, 2, 3, 3)]),
    "patch_correlation": (lambda: FB.patch_correlation(V(1, 4, 4, 2), V(1, 4, 4, 2), shift=(1, 1)),
                          [(1, 4, 4, 3, 3)]),
    "scatter_nd": (lambda: F.scatter_nd(V(2), data([[0, 1]]), shape=(5,)), [(5,)]),
    "depthwise_convolution": (lambda: F.depthwise_convolution(V(1, 2, 5, 5), V(2, 3, 3)), [(1, 2, 3, 3)]),
    "deconvolution": (lambda: F.deconvolution(V(1, 2, 3, 3), V(2, 3, 3, 3), V(3)), [(1, 3, 5, 5)]),
    "depthwise_deconvolution": (lambda: F.depthwise_deconvolution(V(1, 4, 3, 3), V(4, 3, 3), divisor=2),
                                [(1, 2, 5, 5)]),
}


@pytest.mark.parametrize("case", sorted(GOOD_SHAPES))
def test_good_arguments_get_nnablas_shapes(case):
    call, shapes = GOOD_SHAPES[case]
    ys = call()
    ys = ys if isinstance(ys, (list, tuple)) else [ys]
    assert [tuple(y.shape) for y in ys] == shapes


@pytest.mark.parametrize("build", [
    lambda x, g: F.warp_by_grid(x, g),
    lambda x, g: F.random_crop(x, shape=(2, 3), seed=0),
], ids=["warp_by_grid", "random_crop"])
def test_gradient_graphs_of_checked_ops_build_with_the_input_shapes(build):
    """The internal nodes of these grad rules (the warps' coordinates and corners, the random
    ops' index scatter) take the shapes the op checked; building the graph runs no kernel."""
    x, grid = nn.Variable((2, 3, 4, 4), need_grad=True), nn.Variable((2, 5, 6, 2), need_grad=True)
    grads = nn.grad([build(x, grid)], [x, grid])
    assert tuple(grads[0].shape) == (2, 3, 4, 4)
