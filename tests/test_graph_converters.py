"""nnabla_jit.experimental.graph_converters: converted graphs compute what the originals do
(and what nnabla's conversions compute, from tests/fixtures/graph_converters_oracle.npz)."""
import os

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.experimental.graph_converters as GC
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF

ORACLE = os.path.join(os.path.dirname(__file__), "fixtures", "graph_converters_oracle.npz")


def function_types(y):
    types = []
    y.visit(lambda f: types.append(f.info.type_name))
    return types


def randomize_parameters(rng):
    """Random weights and running statistics (variances and scales positive)."""
    for k, p in nn.get_parameters(grad_only=False).items():
        if k.endswith(("var", "gamma")):
            p.d = rng.rand(*p.shape) + 0.5
        else:
            p.d = rng.randn(*p.shape) * 0.5


def run(y):
    y.forward()
    return y.d.copy()


def convert(modifiers, y):
    return GC.GraphConverter(modifiers).convert(y)


def conv_bn_net(x, test=True):
    """The network of tests/fixtures/make_graph_converter_fixtures.py."""
    h = PF.convolution(x, 6, (3, 3), pad=(1, 1), name="c1")
    h = PF.batch_normalization(h, batch_stat=not test, name="bn1")
    h = F.relu(h)
    h = PF.convolution(h, 4, (3, 3), pad=(1, 1), with_bias=False, name="c2")
    h = PF.batch_normalization(h, batch_stat=not test, name="bn2")
    h = F.relu(h)
    h = PF.deconvolution(h, 5, (2, 2), stride=(2, 2), name="d1")
    h = PF.batch_normalization(h, batch_stat=not test, name="bn3")
    return F.max_pooling(h, (2, 2))


@pytest.fixture
def oracle():
    data = np.load(ORACLE)
    x = nn.Variable.from_numpy_array(data["x"])
    return data, x


def load_oracle_parameters(data):
    for k, p in nn.get_parameters(grad_only=False).items():
        p.d = data["param:" + k]


def test_batch_normalization_folding_matches_nnabla(oracle):
    data, x = oracle
    y = conv_bn_net(x)
    load_oracle_parameters(data)
    np.testing.assert_allclose(run(y), data["original"], rtol=1e-5, atol=1e-4)
    folded = convert(GC.BatchNormalizationFoldingModifier(), y)
    assert function_types(folded) == list(data["folded_types"])
    assert sorted(nn.get_parameters(grad_only=False)) == list(data["folded_params"])
    np.testing.assert_allclose(run(folded), data["folded"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(run(y), data["original"], rtol=1e-5, atol=1e-4)   # original untouched


def test_self_folding_and_test_mode_match_nnabla(oracle):
    data, x = oracle
    y = conv_bn_net(x)
    load_oracle_parameters(data)
    self_folded = convert([GC.BatchNormalizationSelfFoldingModifier()], y)
    assert "BatchNormalization" not in function_types(self_folded)
    assert "bn-self-folding/c0-bn-self-folding-2" in nn.get_parameters()
    np.testing.assert_allclose(run(self_folded), data["self_folded"], rtol=1e-5, atol=1e-4)

    nn.clear_parameters()
    y_train = conv_bn_net(x, test=False)
    load_oracle_parameters(data)
    tested = convert(GC.TestModeModifier(), y_train)
    bns = []
    tested.visit(lambda f: bns.append(f.info.args["batch_stat"]) if f.info.type_name == "BatchNormalization" else None)
    assert bns == [False, False, False]
    np.testing.assert_allclose(run(tested), data["test_mode"], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("layer", [
    dict(kind="conv", group=1, channel_last=False),
    dict(kind="conv", group=2, channel_last=False),
    dict(kind="conv", group=2, channel_last=True),
    dict(kind="deconv", group=2, channel_last=False),
    dict(kind="deconv", group=1, channel_last=True),
    dict(kind="affine"),
])
def test_folding_keeps_outputs(layer):
    rng = np.random.RandomState(2)
    channel_last = layer.get("channel_last", False)
    shape = (2, 5, 5, 4) if channel_last else (2, 4, 5, 5)
    x = nn.Variable.from_numpy_array(rng.randn(*shape).astype(np.float32))
    axis = 3 if channel_last else 1
    if layer["kind"] == "conv":
        h = PF.convolution(x, 6, (3, 3), group=layer["group"], channel_last=channel_last, name="l")
    elif layer["kind"] == "deconv":
        h = PF.deconvolution(x, 6, (2, 2), stride=(2, 2), group=layer["group"], channel_last=channel_last,
                             with_bias=False, name="l")
    else:
        h = PF.affine(x, 6, name="l")
        axis = 1
    y = F.tanh(PF.batch_normalization(h, axes=[axis], batch_stat=False, name="bn"))
    randomize_parameters(rng)
    expected = run(y)
    folded = convert(GC.BatchNormalizationFoldingModifier(), y)
    assert "BatchNormalization" not in function_types(folded)
    np.testing.assert_allclose(run(folded), expected, rtol=1e-5, atol=1e-5)


def test_folding_leaves_a_shared_layer_output_alone():
    rng = np.random.RandomState(3)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 6, 6).astype(np.float32))
    h = PF.convolution(x, 4, (3, 3), name="c")
    y = PF.batch_normalization(h, batch_stat=False, name="bn") + F.sigmoid(h)   # h read twice
    randomize_parameters(rng)
    expected = run(y)
    folded = convert(GC.BatchNormalizationFoldingModifier(), y)
    assert "BatchNormalization" in function_types(folded)
    np.testing.assert_allclose(run(folded), expected, rtol=1e-5, atol=1e-5)


def test_computed_weights_are_not_folded_but_follow_the_layout():
    rng = np.random.RandomState(13)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 6, 6).astype(np.float32))
    w = nn.Variable.from_numpy_array(rng.randn(4, 3, 3, 3).astype(np.float32))
    h = F.convolution(x, F.mul_scalar(w, 2.0), pad=(1, 1))   # the weight is computed in the graph
    y = PF.batch_normalization(h, batch_stat=False, name="bn")
    randomize_parameters(rng)
    expected = run(y)
    folded = convert(GC.BatchNormalizationFoldingModifier(), y)
    assert "BatchNormalization" in function_types(folded)
    np.testing.assert_allclose(run(folded), expected, rtol=1e-5, atol=1e-5)
    y_cl = convert([GC.ChannelLastModifier([x])], y)
    np.testing.assert_allclose(run(y_cl), expected.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


def test_opposite_folding():
    rng = np.random.RandomState(4)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 6, 6).astype(np.float32))
    h = PF.batch_normalization(x, batch_stat=False, name="bn0")
    h = F.relu(PF.convolution(h, 4, (3, 3), name="c0"))                     # unpadded: folds
    h = PF.batch_normalization(h, batch_stat=False, name="bn1")
    h = F.relu(PF.convolution(h, 4, (3, 3), pad=(1, 1), name="c1"))         # padded: kept
    h = PF.batch_normalization(h, batch_stat=False, name="bn2")
    y = PF.affine(h, 5, with_bias=False, name="fc")                          # folds
    randomize_parameters(rng)
    expected = run(y)
    folded = convert(GC.BatchNormalizationFoldingModifier(opposite=True), y)
    assert function_types(folded).count("BatchNormalization") == 1
    np.testing.assert_allclose(run(folded), expected, rtol=1e-4, atol=1e-4)


def test_converting_again_reads_the_current_statistics():
    rng = np.random.RandomState(5)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 5, 5).astype(np.float32))
    y = PF.batch_normalization(PF.convolution(x, 4, (3, 3), name="c"), batch_stat=False, name="bn")
    randomize_parameters(rng)
    first = convert(GC.BatchNormalizationFoldingModifier(), y)
    first_out = run(first)
    nn.get_parameters(grad_only=False)["bn/bn/mean"].d = rng.randn(1, 4, 1, 1)
    second = convert(GC.BatchNormalizationFoldingModifier(), y)
    np.testing.assert_allclose(run(second), run(y), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(first), first_out)   # the first conversion keeps its parameters


def mixed_net(x):
    """Layers of every kind ChannelLastModifier converts, and some it transposes around."""
    h = F.relu(PF.batch_normalization(PF.convolution(x, 4, (3, 3), pad=(1, 1), name="c1"),
                                      batch_stat=False, name="bn1"))
    s = PF.convolution(x, 4, (1, 1), name="skip")
    h = F.concatenate(h + s, F.sigmoid(s) * 2.0, axis=1)
    h = F.max_pooling(h, (2, 2))
    h = PF.deconvolution(h, 3, (2, 2), stride=(2, 2), name="d1")
    h = F.unpooling(F.average_pooling(h, (2, 2)), (2, 2))
    z = F.softmax(h, axis=1)                  # has an axis: runs in the original layout
    return PF.affine(F.sum_pooling(z + h, (2, 2)), 3, name="fc"), z


def test_channel_last_and_back():
    rng = np.random.RandomState(6)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 8, 8).astype(np.float32))
    y, z = mixed_net(x)
    randomize_parameters(rng)
    nn.forward_all([y, z])
    y_ref, z_ref = y.d.copy(), z.d.copy()

    modifier = GC.ChannelLastModifier([x])
    y_cl, z_cl = convert([modifier], [y, z])
    assert modifier.inputs_cl[0].shape == (2, 8, 8, 3)
    convs = []
    y_cl.visit(lambda f: convs.append(f.info.args["channel_last"]) if f.info.type_name == "Convolution" else None)
    assert convs == [True, True]
    nn.forward_all([y_cl, z_cl])
    np.testing.assert_allclose(y_cl.d, y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z_cl.d, z_ref, rtol=1e-5, atol=1e-5)

    # A new input value flows through the stand-in.
    modifier.inputs_cl[0].d = np.zeros((2, 8, 8, 3))
    x.d = 0
    y.forward()
    np.testing.assert_allclose(run(y_cl), y.d, rtol=1e-5, atol=1e-5)

    # Back to channel first from the channel-last graph.
    x_cl = modifier.inputs_cl[0]
    x_cl.d = rng.randn(2, 8, 8, 3)
    first = GC.ChannelFirstModifier([x_cl])
    y_cf = convert([first], y_cl)
    assert first.inputs_cf[0].shape == (2, 3, 8, 8)
    np.testing.assert_allclose(run(y_cf), run(y_cl), rtol=1e-5, atol=1e-5)


def test_channel_last_output_stays_channel_last():
    rng = np.random.RandomState(7)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 6, 6).astype(np.float32))
    y = F.relu(PF.convolution(x, 4, (3, 3), pad=(1, 1), name="c"))
    randomize_parameters(rng)
    y_cl = convert([GC.ChannelLastModifier([x])], y)
    assert y_cl.shape == (2, 6, 6, 4)
    assert "Transpose" not in function_types(y_cl)
    np.testing.assert_allclose(run(y_cl), run(y).transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="converted input of shape"):
        GC.ChannelLastModifier([x], [nn.Variable((2, 3, 6, 6))])


def test_remove_function():
    rng = np.random.RandomState(8)
    x = nn.Variable.from_numpy_array(rng.randn(3, 4).astype(np.float32))
    y = F.tanh(F.mul_scalar(F.exp(x), 3.0))
    removed = convert([GC.RemoveFunctionModifier(rm_funcs=["MulScalar"])], y)
    assert function_types(removed) == ["Exp", "Tanh"]
    np.testing.assert_allclose(run(removed), np.tanh(np.exp(x.d)), rtol=1e-6)
    pair = F.split(x, axis=1)
    with pytest.raises(ValueError, match="cannot remove Split"):
        convert([GC.RemoveFunctionModifier(rm_funcs=["Split"])], F.add2(pair[0], pair[1]))


def test_identity_onto_other_inputs():
    rng = np.random.RandomState(9)
    x = nn.Variable.from_numpy_array(rng.randn(2, 5).astype(np.float32))
    y = F.sigmoid(PF.affine(x, 3, name="fc"))
    expected = run(y)
    copy = convert([GC.IdentityModifier()], y)
    assert function_types(copy) == function_types(y)
    np.testing.assert_allclose(run(copy), expected)

    other = nn.Variable.from_numpy_array(rng.randn(2, 5).astype(np.float32))
    moved = convert([GC.IdentityModifier({x: other})], y)
    w, b = nn.get_parameters()["fc/affine/W"].d, nn.get_parameters()["fc/affine/b"].d
    np.testing.assert_allclose(run(moved), 1 / (1 + np.exp(-(other.d @ w + b))), rtol=1e-5)

    fresh = nn.Variable((2, 5))
    copied = convert([GC.IdentityModifier({x: fresh}, copy_value=True)], y)
    np.testing.assert_allclose(fresh.d, x.d)
    np.testing.assert_allclose(run(copied), expected)
    with pytest.raises(ValueError, match="copy_value"):
        convert([GC.IdentityModifier({x: nn.Variable((3, 5))}, copy_value=True)], y)


def test_no_grad_leaves_parameters_out_of_backward():
    rng = np.random.RandomState(10)
    x = nn.Variable.from_numpy_array(rng.randn(2, 5).astype(np.float32), need_grad=True)
    y = F.sum(F.tanh(PF.affine(x, 3, name="fc")))
    frozen = convert([GC.NoGradModifier()], y)
    for p in nn.get_parameters().values():
        p.g = 0
    x.g = 0
    frozen.forward()
    frozen.backward()
    assert all(not p.g.any() for p in nn.get_parameters().values())
    assert x.g.any()


def test_fused_and_unfused_batch_normalization():
    rng = np.random.RandomState(11)
    x = nn.Variable.from_numpy_array(rng.randn(2, 4, 5, 5).astype(np.float32))
    a = PF.batch_normalization(PF.convolution(x, 4, (3, 3), pad=(1, 1), name="c1"), batch_stat=False, name="bn1")
    b = PF.batch_normalization(PF.convolution(x, 4, (1, 1), name="c2"), batch_stat=False, name="bn2")
    y = F.relu(a + b)
    randomize_parameters(rng)
    expected = run(y)
    fused = convert([GC.FusedBatchNormalizationModifier()], y)
    types = function_types(fused)
    assert types.count("FusedBatchNormalization") == 1 and "Add2" not in types and "ReLU" not in types
    np.testing.assert_allclose(run(fused), expected, rtol=1e-5, atol=1e-5)
    unfused = convert([GC.UnfusedBatchNormalizationModifier()], fused)
    assert "FusedBatchNormalization" not in function_types(unfused)
    np.testing.assert_allclose(run(unfused), expected, rtol=1e-5, atol=1e-5)


def test_pruning():
    rng = np.random.RandomState(12)
    x = nn.Variable.from_numpy_array(rng.randn(2, 3, 5, 5).astype(np.float32))
    y = PF.convolution(x, 4, (3, 3), name="c")
    w = nn.get_parameters()["c/conv/W"]
    w.d = rng.randn(4, 3, 3, 3)
    w.d[1] *= 1e-3
    w.d[3] *= 1e-3
    pruned = convert([GC.PruningModifier(pruning_threshold=0.1)], y)
    kept = run(y)
    kept[:, [1, 3]] = 0
    np.testing.assert_allclose(run(pruned), kept, rtol=1e-5, atol=1e-5)
    assert not nn.get_parameters()["c/conv/w-pruned"].d[[1, 3]].any()
    with pytest.raises(ValueError, match="cannot prune"):
        GC.PruningModifier(0.1, functions_to_prune=["ReLU"])


class ReLUToLeakyReLU(GC.FunctionModifier):
    def modify(self, f, inputs):
        if f.info.type_name == "ReLU":
            return self._call_function("LeakyReLU", inputs, {"alpha": 0.5})


def test_custom_modifier_and_several_outputs():
    x = nn.Variable.from_numpy_array(np.array([[-2.0, 1.0], [3.0, -4.0]], dtype=np.float32))
    y1, y2 = F.relu(x) * 2.0, F.relu(-x)
    new1, new2 = convert([ReLUToLeakyReLU()], [y1, y2])
    np.testing.assert_allclose(run(new1), np.where(x.d > 0, x.d, 0.5 * x.d) * 2.0)
    np.testing.assert_allclose(run(new2), np.where(-x.d > 0, -x.d, -0.5 * x.d))
    assert isinstance(convert([ReLUToLeakyReLU()], (y1, y2)), list)


class ReturnsANumber(GC.FunctionModifier):
    def modify(self, f, inputs):
        return 1.0


def test_bad_modifiers_are_rejected():
    y = F.relu(nn.Variable((2,)))
    with pytest.raises(ValueError, match="expected None or 1 Variable"):
        convert([ReturnsANumber()], y)
    with pytest.raises(TypeError, match="not a FunctionModifier"):
        GC.GraphConverter(["ReLU"])
    with pytest.raises(ValueError, match="no function named"):
        GC.FunctionModifier()._call_function("NoSuchFunction", [], {})
