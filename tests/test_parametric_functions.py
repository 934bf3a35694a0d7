"""PF: parameter names, shapes, initial values and flags as nnabla creates them, and forwards
checked against NumPy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.initializer as I
import nnabla_jit.parametric_functions as PF
from nnabla_jit.ops.registry import REGISTRY

R = np.random.RandomState


def variable(shape, seed=0):
    return nn.Variable.from_numpy_array(R(seed).randn(*shape).astype(np.float32))


def params():
    """{name: (shape, need_grad)} of every registered parameter."""
    return {k: (v.shape, v.need_grad) for k, v in nn.get_parameters(grad_only=False).items()}


def glorot(rng_seed, shape, inmaps, outmaps, kernel=(1, 1)):
    bound = np.sqrt(6. / (np.prod(kernel) * (inmaps + outmaps)))
    return np.float32(R(rng_seed).uniform(-bound, bound, size=shape))


def needs(*ops):
    missing = [op for op in ops if op not in REGISTRY]
    return pytest.mark.skipif(bool(missing), reason="ops not registered yet: {}".format(missing))


# ------------------------------------------------------------------------------ NumPy references
def conv_ref(x, w, b, pad, stride, dilation, group):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // group
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dilation[0]:i * dilation[0] + stride[0] * (oh - 1) + 1:stride[0],
                       j * dilation[1]:j * dilation[1] + stride[1] * (ow - 1) + 1:stride[1]]
            for g in range(group):
                y[:, g * og:(g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", patch[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og, :, i, j])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def deconv_ref(x, w, b, pad, stride, group):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // group
    full = np.zeros((n, og * group, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw))
    for i in range(kh):
        for j in range(kw):
            for g in range(group):
                full[:, g * og:(g + 1) * og, i:i + stride[0] * (h - 1) + 1:stride[0],
                     j:j + stride[1] * (wd - 1) + 1:stride[1]] += np.einsum(
                    "nchw,co->nohw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
    y = full[:, :, pad[0]:full.shape[2] - pad[0], pad[1]:full.shape[3] - pad[1]]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


# ------------------------------------------------------------------------------ parameters
X2, X4 = (2, 3, 4), (2, 4, 5, 5)

PARAMETER_CASES = [
    ("affine", lambda: PF.affine(variable(X2), (2, 3)),
     {"affine/W": ((12, 2, 3), True), "affine/b": ((2, 3), True)}),
    ("affine_base_axis", lambda: PF.affine(variable(X2), 5, base_axis=2, with_bias=False),
     {"affine/W": ((4, 5), True)}),
    ("convolution", lambda: PF.convolution(variable(X4), 6, (3, 2), group=2),
     {"conv/W": ((6, 2, 3, 2), True), "conv/b": ((6,), True)}),
    ("convolution_channel_last", lambda: PF.convolution(variable((2, 5, 5, 4)), 6, (3, 3), channel_last=True),
     {"conv/W": ((6, 3, 3, 4), True), "conv/b": ((6,), True)}),
    ("deconvolution", lambda: PF.deconvolution(variable(X4), 6, (3, 3), group=2),
     {"deconv/W": ((4, 3, 3, 3), True), "deconv/b": ((6,), True)}),
    ("depthwise_convolution", lambda: PF.depthwise_convolution(variable(X4), (3, 3), multiplier=2),
     {"depthwise_conv/W": ((8, 3, 3), True), "depthwise_conv/b": ((8,), True)}),
    ("depthwise_deconvolution", lambda: PF.depthwise_deconvolution(variable(X4), (3, 3), divisor=2),
     {"depthwise_deconv/W": ((4, 3, 3), True), "depthwise_deconv/b": ((2,), True)}),
    ("batch_normalization", lambda: PF.batch_normalization(variable(X4)),
     {"bn/beta": ((1, 4, 1, 1), True), "bn/gamma": ((1, 4, 1, 1), True),
      "bn/mean": ((1, 4, 1, 1), False), "bn/var": ((1, 4, 1, 1), False)}),
    ("batch_normalization_axes", lambda: PF.batch_normalization(variable(X4), axes=[1, 2], no_scale=True),
     {"bn/beta": ((1, 4, 5, 1), True), "bn/mean": ((1, 4, 5, 1), False), "bn/var": ((1, 4, 5, 1), False)}),
    ("fused_batch_normalization", lambda: PF.fused_batch_normalization(variable(X4), variable(X4, 1)),
     {"bn/beta": ((1, 4, 1, 1), True), "bn/gamma": ((1, 4, 1, 1), True),
      "bn/mean": ((1, 4, 1, 1), False), "bn/var": ((1, 4, 1, 1), False)}),
    ("mean_subtraction", lambda: PF.mean_subtraction(variable(X4)),
     {"mean_subtraction/mean": ((4, 5, 5), False), "mean_subtraction/t": ((1,), False)}),
    ("layer_normalization", lambda: PF.layer_normalization(variable(X4), batch_axis=[0, 2], no_bias=True),
     {"layer_normalization/gamma": ((1, 4, 1, 5), True)}),
    ("instance_normalization", lambda: PF.instance_normalization(variable(X4)),
     {"instance_normalization/beta": ((1, 4, 1, 1), True), "instance_normalization/gamma": ((1, 4, 1, 1), True)}),
    ("group_normalization", lambda: PF.group_normalization(variable(X4), 2),
     {"group_normalization/beta": ((1, 4, 1, 1), True), "group_normalization/gamma": ((1, 4, 1, 1), True)}),
    ("embed", lambda: PF.embed(nn.Variable.from_numpy_array(np.array([[0, 3], [1, 6]])), 7, 3),
     {"embed/W": ((7, 3), True)}),
    ("prelu", lambda: PF.prelu(variable(X4)), {"prelu/slope": ((), True)}),
    ("prelu_channels", lambda: PF.prelu(variable(X4), shared=False), {"prelu/slope": ((4,), True)}),
    ("svd_affine", lambda: PF.svd_affine(variable(X2), 4, 2),
     {"svd_affine/U": ((12, 2), True), "svd_affine/V": ((2, 4), True), "svd_affine/b": ((4,), True)}),
    ("svd_convolution", lambda: PF.svd_convolution(variable(X4), 6, (3, 3), 2),
     {"svd_conv/U": ((8, 3, 3), True), "svd_conv/V": ((6, 8, 1, 1), True), "svd_conv/b": ((6,), True)}),
    ("cpd3_convolution", lambda: PF.cpd3_convolution(variable(X4), 6, (3, 3), 2, max_iter=5),
     {"cpd3_conv/I": ((2, 4, 1, 1), True), "cpd3_conv/O": ((6, 2, 1, 1), True),
      "cpd3_conv/K": ((2, 3, 3), True), "cpd3_conv/b": ((6,), True)}),
    ("binary_connect_affine", lambda: PF.binary_connect_affine(variable(X2), 4),
     {"bicon_affine/W": ((12, 4), True), "bicon_affine/Wb": ((12, 4), False), "bicon_affine/b": ((4,), True)}),
    ("binary_weight_affine", lambda: PF.binary_weight_affine(variable(X2), 4),
     {"bwn_affine/W": ((12, 4), True), "bwn_affine/Wb": ((12, 4), False),
      "bwn_affine/alpha": ((4,), False), "bwn_affine/b": ((4,), True)}),
    ("inq_affine", lambda: PF.inq_affine(variable(X2), 4),
     {"inq_affine/W": ((12, 4), True), "inq_affine/I": ((12, 4), False), "inq_affine/b": ((4,), True)}),
    pytest.param("binary_connect_convolution", lambda: PF.binary_connect_convolution(variable(X4), 6, (3, 3)),
                 {"bicon_conv/W": ((6, 4, 3, 3), True), "bicon_conv/Wb": ((6, 4, 3, 3), False),
                  "bicon_conv/b": ((6,), True)}, marks=needs("BinaryConnectConvolution")),
    pytest.param("binary_weight_convolution", lambda: PF.binary_weight_convolution(variable(X4), 6, (3, 3)),
                 {"bwn_conv/W": ((6, 4, 3, 3), True), "bwn_conv/Wb": ((6, 4, 3, 3), False),
                  "bwn_conv/alpha": ((6,), False), "bwn_conv/b": ((6,), True)},
                 marks=needs("BinaryWeightConvolution")),
    pytest.param("inq_convolution", lambda: PF.inq_convolution(variable(X4), 6, (3, 3)),
                 {"inq_conv/W": ((6, 4, 3, 3), True), "inq_conv/I": ((6, 4, 3, 3), False),
                  "inq_conv/b": ((6,), True)}, marks=needs("INQConvolution")),
    ("fixed_point_quantized_affine", lambda: PF.fixed_point_quantized_affine(variable(X2), 4),
     {"fp_quantized_affine/W": ((12, 4), True), "fp_quantized_affine/W_q": ((12, 4), False),
      "fp_quantized_affine/b": ((4,), True), "fp_quantized_affine/b_q": ((4,), False)}),
    ("pow2_quantized_convolution", lambda: PF.pow2_quantized_convolution(variable(X4), 6, (3, 3), quantize_b=False),
     {"pow2_quantized_conv/W": ((6, 4, 3, 3), True), "pow2_quantized_conv/W_q": ((6, 4, 3, 3), False),
      "pow2_quantized_conv/b": ((6,), True)}),
    ("pruned_convolution", lambda: PF.pruned_convolution(variable(X4), 6, (3, 3), with_bias=False),
     {"pruned_conv/W": ((6, 4, 3, 3), True), "pruned_conv/W_q": ((6, 4, 3, 3), False)}),
    ("min_max_quantized_affine", lambda: PF.min_max_quantized_affine(variable(X2), 4, with_bias=False),
     {"min_max_quantized_affine/W": ((12, 4), True), "min_max_quantized_affine/W_q": ((12, 4), False),
      "min_max_quantized_affine/min_max_quantize_w/min_max_quantize/ql_min": ((1, 1), False),
      "min_max_quantized_affine/min_max_quantize_w/min_max_quantize/ql_max": ((1, 1), False),
      "min_max_quantized_affine/min_max_quantize_w/min_max_quantize/qr_min": ((1, 1), True),
      "min_max_quantized_affine/min_max_quantize_w/min_max_quantize/qr_max": ((1, 1), True)}),
    ("spectral_norm", lambda: PF.spectral_norm(variable((4, 3)), dim=1), {"spectral-norm/u": ((3,), False)}),
    ("weight_normalization", lambda: PF.weight_normalization(variable((4, 3)), dim=1), {"wn/g": ((3,), True)}),
]


@pytest.mark.parametrize("label, build, expected", PARAMETER_CASES)
def test_parameter_names_shapes_and_flags(label, build, expected):
    y = build()
    assert params() == expected
    # parameters are created in nnabla's order
    assert list(params()) == list(expected)
    (y if not isinstance(y, tuple) else y[0]).forward()


def test_name_argument_nests_the_scope():
    x = variable(X2)
    PF.affine(x, 3, name="fc1")
    with nn.parameter_scope("net"):
        PF.convolution(variable(X4), 2, (1, 1), name="c1")
    assert list(params()) == ["fc1/affine/W", "fc1/affine/b", "net/c1/conv/W", "net/c1/conv/b"]


def test_fix_parameters_and_reuse():
    x = variable(X2)
    y = PF.affine(x, 3, fix_parameters=True)
    w_used, b_used = y.parent.inputs[1:]
    assert not w_used.need_grad and not b_used.need_grad
    # registered with need_grad=True (a solver given get_parameters() still sees them), as nnabla
    assert params() == {"affine/W": ((12, 3), True), "affine/b": ((3,), True)}
    y2 = PF.affine(x, 3)
    assert y2.parent.inputs[1].need_grad
    # the second call reuses the same arrays
    y.forward()
    y2.forward()
    np.testing.assert_array_equal(y.d, y2.d)
    with pytest.raises(ValueError, match="affine/W|W"):
        PF.affine(x, 4)
    with nn.no_grad():
        y3 = PF.affine(x, 3)
    assert not y3.parent.inputs[1].need_grad


# ------------------------------------------------------------------------------ affine
@given(st.sampled_from([(3, 4), (2, 3, 2), (1, 5)]), st.integers(1, 2),
       st.sampled_from([3, (2, 2)]), st.booleans(), st.integers(0, 1000))
def test_affine_forward_and_init(shape, base_axis, n_outmaps, with_bias, seed):
    base_axis = min(base_axis, len(shape) - 1)
    nn.clear_parameters()
    x = variable(shape, seed)
    y = PF.affine(x, n_outmaps, base_axis=base_axis, rng=R(seed), with_bias=with_bias,
                  b_init=I.ConstantInitializer(0.5))
    y.forward()
    outs = list(n_outmaps) if isinstance(n_outmaps, tuple) else [n_outmaps]
    inmaps = int(np.prod(shape[base_axis:]))
    w = nn.get_parameters()["affine/W"].d
    np.testing.assert_array_equal(w, glorot(seed, [inmaps] + outs, inmaps, int(np.prod(outs))))
    ref = x.d.reshape(int(np.prod(shape[:base_axis])), inmaps).astype(np.float64).dot(w.reshape(inmaps, -1))
    if with_bias:
        ref = ref + 0.5
    assert y.shape == tuple(shape[:base_axis]) + tuple(outs)
    np.testing.assert_allclose(y.d.reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)


def test_affine_apply_w_and_arrays():
    x = variable(X2)
    w0 = R(1).randn(12, 2).astype(np.float32)
    y = PF.affine(x, 2, w_init=w0, b_init=np.array([1., 2.], dtype=np.float32),
                  apply_w=lambda w: w * 2, apply_b=lambda b: b * 0)
    y.forward()
    np.testing.assert_allclose(y.d, x.d.reshape(2, 12).dot(2 * w0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(nn.get_parameters()["affine/b"].d, [1., 2.])


def test_global_rng_is_used_without_rng():
    nn.random.seed(11)
    PF.affine(variable(X2), 3)
    np.testing.assert_array_equal(nn.get_parameters()["affine/W"].d, glorot(11, (12, 3), 12, 3))


# ------------------------------------------------------------------------------ convolutions
@given(st.sampled_from([(3, 3), (2, 1), (1, 1)]), st.sampled_from([(0, 0), (1, 2)]),
       st.sampled_from([(1, 1), (2, 1)]), st.sampled_from([(1, 1), (1, 2)]), st.sampled_from([1, 2]),
       st.booleans(), st.integers(0, 1000))
def test_convolution_forward_and_init(kernel, pad, stride, dilation, group, with_bias, seed):
    nn.clear_parameters()
    x = variable((2, 4, 6, 5), seed)
    y = PF.convolution(x, 6, kernel, pad=pad, stride=stride, dilation=dilation, group=group,
                       rng=R(seed), with_bias=with_bias, b_init=I.NormalInitializer(1.0, R(seed + 1)))
    y.forward()
    p = nn.get_parameters()
    w = p["conv/W"].d
    np.testing.assert_array_equal(w, glorot(seed, (6, 4 // group) + kernel, 4, 6, kernel))
    b = p["conv/b"].d if with_bias else None
    ref = conv_ref(x.d.astype(np.float64), w, b, pad, stride, dilation, group)
    np.testing.assert_allclose(y.d, ref, rtol=1e-4, atol=1e-4)


def test_convolution_channel_last():
    x = variable((2, 5, 6, 4))
    y = PF.convolution(x, 3, (3, 2), pad=(1, 0), channel_last=True, rng=R(2))
    y.forward()
    w = nn.get_parameters()["conv/W"].d            # (outmaps, *kernel, channels)
    np.testing.assert_array_equal(w, glorot(2, (3, 3, 2, 4), 4, 3, (3, 2)))
    ref = conv_ref(x.d.transpose(0, 3, 1, 2).astype(np.float64), w.transpose(0, 3, 1, 2), None,
                   (1, 0), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(y.d, ref.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


@given(st.sampled_from([(3, 3), (2, 1)]), st.sampled_from([(0, 0), (1, 0)]),
       st.sampled_from([(1, 1), (2, 2)]), st.sampled_from([1, 2]), st.integers(0, 1000))
def test_deconvolution_forward_and_init(kernel, pad, stride, group, seed):
    nn.clear_parameters()
    x = variable((2, 4, 3, 4), seed)
    y = PF.deconvolution(x, 6, kernel, pad=pad, stride=stride, group=group, rng=R(seed))
    y.forward()
    w = nn.get_parameters()["deconv/W"].d
    np.testing.assert_array_equal(w, glorot(seed, (4, 6 // group) + kernel, 6, 4, kernel))
    np.testing.assert_allclose(y.d, deconv_ref(x.d.astype(np.float64), w, np.zeros(6), pad, stride, group),
                               rtol=1e-4, atol=1e-4)


def test_depthwise_convolution_and_deconvolution():
    x = variable((2, 3, 5, 5))
    y = PF.depthwise_convolution(x, (3, 3), pad=(1, 1), multiplier=2, rng=R(3))
    y.forward()
    w = nn.get_parameters()["depthwise_conv/W"].d
    np.testing.assert_array_equal(w, glorot(3, (6, 3, 3), 6, 3, (3, 3)))
    # output map c * multiplier + m sees input map c only: a grouped convolution
    ref = conv_ref(x.d.astype(np.float64), w.reshape(6, 1, 3, 3), None, (1, 1), (1, 1), (1, 1), 3)
    np.testing.assert_allclose(y.d, ref, rtol=1e-4, atol=1e-4)
    z = PF.depthwise_deconvolution(x, (2, 2), stride=(2, 2), rng=R(4))
    z.forward()
    wd = nn.get_parameters()["depthwise_deconv/W"].d
    np.testing.assert_array_equal(wd, glorot(4, (3, 2, 2), 3, 3, (2, 2)))
    ref = deconv_ref(x.d.astype(np.float64), wd.reshape(3, 1, 2, 2), None, (0, 0), (2, 2), 3)
    np.testing.assert_allclose(z.d, ref, rtol=1e-4, atol=1e-4)


def test_svd_layers_are_exact_at_full_rank():
    x = variable(X2)
    full = R(5).randn(12, 4).astype(np.float32)
    y = PF.svd_affine(x, 4, 4, uv_init=full, b_init=I.ConstantInitializer(1))
    y.forward()
    p = nn.get_parameters()
    np.testing.assert_allclose(p["svd_affine/U"].d.dot(p["svd_affine/V"].d), full, atol=1e-5)
    np.testing.assert_allclose(y.d, x.d.reshape(2, 12).dot(full) + 1, rtol=1e-4, atol=1e-4)
    xc = variable((2, 3, 5, 5))
    filt = R(6).randn(5, 3, 2, 2).astype(np.float32)
    yc = PF.svd_convolution(xc, 5, (2, 2), 4, uv_init=filt, with_bias=False)
    yc.forward()
    np.testing.assert_allclose(yc.d, conv_ref(xc.d.astype(np.float64), filt, None, (0, 0), (1, 1), (1, 1), 1),
                               rtol=1e-4, atol=1e-4)


def test_cpd3_convolution_recovers_a_low_rank_filter():
    # a rank-2 filter: sum_r O[:, r] (x) I[r, :] (x) K[r, :, :]
    o, i, k = R(1).rand(4, 2) + 0.5, R(2).rand(2, 3) + 0.5, R(3).rand(2, 2, 2) + 0.5
    filt = np.einsum("or,ri,rhw->oihw", o, i, k).astype(np.float32)
    x = variable((2, 3, 4, 4))
    y = PF.cpd3_convolution(x, 4, (2, 2), 2, oik_init=filt, with_bias=False, rng=R(0))
    y.forward()
    p = nn.get_parameters()
    approx = np.einsum("or,ri,rhw->oihw", p["cpd3_conv/O"].d[:, :, 0, 0], p["cpd3_conv/I"].d[:, :, 0, 0],
                       p["cpd3_conv/K"].d)
    assert np.linalg.norm(approx - filt) < 0.05 * np.linalg.norm(filt)
    # the three convolutions compute the convolution with the factorized filter
    ref = conv_ref(x.d.astype(np.float64), approx, None, (0, 0), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(y.d, ref, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ normalization
def test_batch_normalization_training_and_inference():
    x = variable(X4, 3)
    y = PF.batch_normalization(x, decay_rate=0.8, eps=1e-3)
    y.forward()
    xd = x.d.astype(np.float64)
    mean, var = xd.mean(axis=(0, 2, 3), keepdims=True), xd.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y.d, (xd - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-4)
    p = nn.get_parameters(grad_only=False)
    n = xd.size / 4
    np.testing.assert_allclose(p["bn/mean"].d, 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p["bn/var"].d, 0.8 + 0.2 * var * n / (n - 1), rtol=1e-5)
    # inference uses the running statistics; beta and gamma are shared
    p["bn/beta"].d = 0.5
    p["bn/gamma"].d = 2.0
    z = PF.batch_normalization(x, batch_stat=False, eps=1e-3)
    z.forward()
    rm, rv = p["bn/mean"].d, p["bn/var"].d
    np.testing.assert_allclose(z.d, (xd - rm) / np.sqrt(rv + 1e-3) * 2 + 0.5, rtol=1e-4, atol=1e-4)


def test_batch_normalization_options():
    x = variable(X4, 4)
    y, mean, var = PF.batch_normalization(x, output_stat=True, name="s")
    F.sink(y, mean, var).forward()
    np.testing.assert_allclose(mean.d, x.d.mean(axis=(0, 2, 3), keepdims=True), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(var.d, x.d.var(axis=(0, 2, 3), keepdims=True), rtol=1e-4)
    init = {"beta": np.full((1, 4, 1, 1), 3, np.float32), "gamma": I.ConstantInitializer(2),
            "mean": I.ConstantInitializer(1), "var": I.ConstantInitializer(4)}
    z = PF.batch_normalization(x, batch_stat=False, param_init=init, fix_parameters=True, name="t")
    z.forward()
    np.testing.assert_allclose(z.d, (x.d - 1) / np.sqrt(4 + 1e-5) * 2 + 3, rtol=1e-4, atol=1e-4)
    assert not any(v.need_grad for v in z.parent.inputs[1:])


def test_fused_batch_normalization():
    x, r = variable(X4, 5), variable(X4, 6)
    y = PF.fused_batch_normalization(x, r)
    y.forward()
    xd = x.d.astype(np.float64)
    bn = (xd - xd.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(xd.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.d, np.maximum(bn + r.d, 0), rtol=1e-4, atol=1e-4)


def test_layer_instance_group_normalization():
    x = variable(X4, 7)
    xd = x.d.astype(np.float64)

    def normalize(a, axes):
        return (a - a.mean(axis=axes, keepdims=True)) / np.sqrt(a.var(axis=axes, keepdims=True) + 1e-5)

    ln = PF.layer_normalization(x, param_init={"gamma": I.ConstantInitializer(2)})
    inorm = PF.instance_normalization(x)
    gn = PF.group_normalization(x, 2)
    F.sink(ln, inorm, gn).forward()
    np.testing.assert_allclose(ln.d, 2 * normalize(xd, (1, 2, 3)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inorm.d, normalize(xd, (2, 3)), rtol=1e-4, atol=1e-4)
    grouped = normalize(xd.reshape(2, 2, 2, 5, 5), (2, 3, 4)).reshape(X4)
    np.testing.assert_allclose(gn.d, grouped, rtol=1e-4, atol=1e-4)


def test_mean_subtraction():
    x = variable(X4, 8)
    y = PF.mean_subtraction(x)
    y.forward()
    np.testing.assert_allclose(y.d, x.d - x.d.mean(axis=0), rtol=1e-5, atol=1e-5)
    p = nn.get_parameters(grad_only=False)
    np.testing.assert_allclose(p["mean_subtraction/mean"].d, x.d.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert p["mean_subtraction/t"].d[0] == 1


def test_spectral_and_weight_normalization():
    w = variable((5, 3), 9)
    y = PF.convolution(variable((2, 3, 4, 4)), 5, (1, 1), w_init=w.d.reshape(5, 3, 1, 1), with_bias=False,
                       apply_w=lambda w: PF.spectral_norm(w, dim=0, itr=60))
    y.forward()
    sigma = np.linalg.svd(w.d.astype(np.float64), compute_uv=False)[0]
    np.testing.assert_allclose(y.parent.inputs[1].d.reshape(5, 3), w.d / sigma, rtol=1e-3, atol=1e-4)
    assert params()["conv/spectral-norm/u"] == ((5,), False)
    # weight normalization starts as the identity (g = the norms of w)
    wn = PF.weight_normalization(w, dim=1)
    wn.forward()
    np.testing.assert_allclose(nn.get_parameters()["wn/g"].d, np.linalg.norm(w.d, axis=0), rtol=1e-6)
    np.testing.assert_allclose(wn.d, w.d, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="dim"):
        PF.spectral_norm(w, dim=2)


def test_spectral_norm_v1_keeps_its_result_in_w_sn():
    w = variable((3, 4, 2), 3)
    u0 = np.random.RandomState(0).randn(2).astype(np.float32)
    y = PF._spectral_norm_v1(w, dim=2, itr=2, u_init=u0)
    assert list(params()) == ["spectral-norm/W_sn", "spectral-norm/u"]
    y.forward()
    W = np.moveaxis(w.d, 2, 0).reshape(2, 12).astype(np.float64)
    u = u0.astype(np.float64)
    for _ in range(2):
        v = W.T @ u / np.linalg.norm(W.T @ u)
        u = W @ v / np.linalg.norm(W @ v)
    np.testing.assert_allclose(y.d, w.d / (u @ W @ v), rtol=1e-5)
    np.testing.assert_allclose(nn.get_parameters(grad_only=False)["spectral-norm/u"].d, u, rtol=1e-5)
    # test=True returns what the last training forward left in W_sn
    np.testing.assert_array_equal(PF._spectral_norm_v1(w, dim=2, test=True).d, y.d)


def test_embed_and_prelu():
    nn.random.seed(3)
    idx = nn.Variable.from_numpy_array(np.array([[0, 4], [2, 2]]))
    y = PF.embed(idx, 5, 3)
    y.forward()
    w = nn.get_parameters()["embed/W"].d
    np.testing.assert_array_equal(w, np.float32(R(3).uniform(-np.sqrt(3), np.sqrt(3), (5, 3))))
    np.testing.assert_array_equal(y.d, w[idx.d])
    x = variable(X4, 2)
    p = PF.prelu(x, shared=False, slope_init=np.array([0.1, 0.2, 0.3, 0.4], np.float32))
    q = PF.prelu(x, name="shared")
    F.sink(p, q).forward()
    slope = np.array([0.1, 0.2, 0.3, 0.4]).reshape(1, 4, 1, 1)
    np.testing.assert_allclose(p.d, np.where(x.d > 0, x.d, slope * x.d), rtol=1e-6)
    np.testing.assert_allclose(q.d, np.where(x.d > 0, x.d, 0.25 * x.d), rtol=1e-6)


# ------------------------------------------------------------------------------ quantized layers
def test_quantized_weights_live_in_their_parameters():
    x = variable(X2)
    y = PF.fixed_point_quantized_affine(x, 4, rng=R(1), n_w=4, delta_w=0.25)
    y.forward()
    p = nn.get_parameters(grad_only=False)
    w = p["fp_quantized_affine/W"]
    expected = F.fixed_point_quantize(w.data, True, 4, 0.25, True)
    np.testing.assert_array_equal(p["fp_quantized_affine/W_q"].d, expected.data)
    np.testing.assert_allclose(y.d, x.d.reshape(2, 12).dot(expected.data), rtol=1e-5, atol=1e-5)
    z = PF.pruned_convolution(variable(X4), 6, (3, 3), rate_w=0.5, with_bias=False, rng=R(2))
    z.forward()
    p = nn.get_parameters(grad_only=False)
    pruned = F.prune(p["pruned_conv/W"].data, 0.5)
    np.testing.assert_array_equal(p["pruned_conv/W_q"].d, pruned.data)
    assert 0 < (pruned.data == 0).sum() < pruned.size


def test_min_max_quantize_parameters():
    x = variable(X2)
    y = PF.min_max_quantize(x, ql_min=0, ql_max=15, x_min_max=True, ema=True)
    y.forward()
    assert params() == {"min_max_quantize/ql_min": ((1, 1, 1), False),
                        "min_max_quantize/ql_max": ((1, 1, 1), False),
                        "min_max_quantize/qr_min": ((1, 1, 1), False),
                        "min_max_quantize/qr_max": ((1, 1, 1), False)}
    # the ranges are exponential moving averages of the input's min and max, from -6 and 6
    p = nn.get_parameters(grad_only=False)
    np.testing.assert_allclose(p["min_max_quantize/qr_min"].d, 0.999 * -6 + 0.001 * x.d.min(), rtol=1e-5)
    np.testing.assert_allclose(p["min_max_quantize/qr_max"].d, 0.999 * 6 + 0.001 * x.d.max(), rtol=1e-5)
    levels = np.unique(y.d)
    step = (p["min_max_quantize/qr_max"].d - p["min_max_quantize/qr_min"].d).item() / 15
    np.testing.assert_allclose(np.diff(levels) / step, np.round(np.diff(levels) / step), atol=1e-3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rank"):
        PF.svd_affine(variable(X2), 3, 0)
    with pytest.raises(ValueError, match="base_axis"):
        PF.mean_subtraction(variable((2,)), base_axis=3)


# ------------------------------------------------------------------ float sizes, as nnabla takes them
def _float_size_cases():
    import json
    import os
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    sys.path.insert(0, here)
    try:
        from float_sizes_cases import CASES, run_case
    finally:
        sys.path.remove(here)
    with open(os.path.join(here, "float_sizes_oracle.json")) as f:
        oracle = json.load(f)   # nnabla 1.39's records: tests/fixtures/make_float_sizes_fixtures.py
    return CASES, run_case, oracle


_FS_CASES, _FS_RUN, _FS_ORACLE = _float_size_cases()


def _same_outcome(got, want, where):
    if "error" in want:
        assert "error" in got, "{}: nnabla raises {}, nnabla_jit gives {}".format(where, want["error"], got)
        return
    assert "error" not in got, "{}: nnabla gives {}, nnabla_jit raises {}".format(where, want, got["error"])
    assert got["outputs"] == want["outputs"], where
    want_params = want.get("params", {})
    assert {k: p["shape"] for k, p in got.get("params", {}).items()} == {
        k: p["shape"] for k, p in want_params.items()}, where
    for k, p in want_params.items():   # initial values drawn with nnabla's bounds
        for stat in ("sum", "abs"):
            assert got["params"][k][stat] == pytest.approx(p[stat], rel=1e-4, abs=1e-4), (where, k, stat)


def test_float_size_fixture_covers_the_stops():
    assert _FS_ORACLE["PF.convolution/outmaps=4.7"]["build"]["outputs"] == [[2, 4, 4, 4]]
    assert "PF.deconvolution/maps*0.5" in _FS_ORACLE and len(_FS_CASES) == len(_FS_ORACLE)


@pytest.mark.parametrize("cid,builder", _FS_CASES, ids=[c for c, _ in _FS_CASES])
def test_float_sizes_as_nnabla(cid, builder):
    want = _FS_ORACLE[cid]
    got = {}
    try:
        got = _FS_RUN(nn, F, PF, builder, cid)
    finally:
        nn.clear_parameters()
    _same_outcome(got["build"], want["build"], cid + " (build)")
    if "error" in want["build"]:
        # the error is of nnabla's kind, a clear one rather than something deep inside
        # (a TypeError where nnabla's is one: a float where only an int is taken)
        kind = TypeError if want["build"]["error"] == "TypeError" else Exception
        assert issubclass(_raised_type(builder), kind), cid
        return
    _same_outcome(got["forward"], want["forward"], cid + " (forward)")


def _raised_type(builder):
    nn.clear_parameters()
    try:
        with nn.parameter_scope("case"):
            builder(nn, F, PF)
    except Exception as e:
        return type(e)
    finally:
        nn.clear_parameters()
    return type(None)
