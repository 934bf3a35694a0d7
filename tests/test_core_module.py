"""nnabla's Module API (nnabla_jit.core): Module parameters, Sequential, and graphs captured
from ProtoVariable placeholders (call again, save, load)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.core import graph_def
from nnabla_jit.core.graph_optimizer import IdentityRemover, rename_variable
from nnabla_jit.core.modules import ConvBn, ResUnit


@pytest.fixture(autouse=True)
def fresh_graph():
    nn.clear_parameters()
    graph_def.reset_default_graph()
    yield
    graph_def.reset_default_graph()


class TwoBranch(nn.Module):
    def __init__(self):
        self.left = ConvBn(2)
        self.right = ConvBn(3, kernel=3)

    def call(self, x1, x2):
        return F.concatenate(self.left(x1), self.right(x2), axis=1)


class Shared(nn.Module):
    def __init__(self, inner):
        self.inner = inner

    def call(self, x):
        return self.inner(x)


def _inputs(*shapes, seed=0):
    rng = np.random.RandomState(seed)
    return [nn.Variable.from_numpy_array(rng.randn(*s).astype(np.float32)) for s in shapes]


def test_module_owns_its_parameters_by_submodule_path():
    m = TwoBranch()
    m(*_inputs((2, 3, 6, 6), (2, 3, 6, 6)))
    keys = list(m.get_parameters())
    assert keys[0] == "@left/conv/W" and "@right/bn/var" in keys
    assert nn.get_parameters() == {}                      # the global scope stays clean
    assert m.name == "two_branch" and m.left.name == "left"
    assert m.left.get_path_name() == "@two_branch/@left"


def test_shared_submodule_parameters_are_listed_once():
    inner = ConvBn(2)

    class Twice(nn.Module):
        def __init__(self):
            self.a = Shared(inner)
            self.b = Shared(inner)

        def call(self, x):
            return self.b(self.a(x))
    m = Twice()
    m(*_inputs((1, 2, 4, 4)))
    assert len(m.get_parameters()) == 5


def test_training_flag_propagates_and_zero_grad_and_set_parameter():
    m = ResUnit(8)
    x, = _inputs((2, 8, 4, 4))
    y = m(x)
    m.training = False
    assert m.conv1.training is False
    y.forward()
    y.backward()
    m.zero_grad()
    assert all(np.all(p.g == 0) for p in m.get_parameters().values())
    w = nn.Variable.from_numpy_array(np.ones((2, 8, 1, 1), np.float32))
    m.set_parameter("@conv1/conv/W", w)
    assert m.get_parameters()["@conv1/conv/W"] is w
    with pytest.raises(ValueError, match="cannot be found"):
        m.set_parameter("@nope/conv/W", w, raise_if_missing=True)


def test_module_parameters_round_trip_through_a_file(tmp_path):
    m = TwoBranch()
    m(*_inputs((1, 3, 4, 4), (1, 3, 4, 4)))
    path = str(tmp_path / "m.h5")
    m.save_parameters(path)
    m2 = TwoBranch()
    m2(*_inputs((1, 3, 4, 4), (1, 3, 4, 4)))
    m2.load_parameters(path)
    for (k, a), (k2, b) in zip(m.get_parameters().items(), m2.get_parameters().items()):
        assert k == k2 and np.array_equal(a.d, b.d)


def test_sequential_names_and_chains_modules():
    seq = nn.Sequential(ConvBn(2), ("named", ConvBn(3)))
    assert list(seq.submodules) == ["conv_bn_0", "named"]
    y = seq(*_inputs((1, 3, 4, 4)))
    assert y.shape == (1, 3, 4, 4)
    with pytest.raises(TypeError, match="instance of nn.Module"):
        nn.Sequential(lambda x: x)


def _check_same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    for u, v in zip(a, b):
        u.forward()
        v.forward()
        np.testing.assert_allclose(u.d, v.d, rtol=1e-5, atol=1e-6)


def test_captured_module_network_reruns_on_new_inputs():
    m = TwoBranch()
    placeholders = [nn.ProtoVariable((2, 3, 6, 6)) for _ in range(2)]
    m(*placeholders)
    g = nn.graph_def.get_default_graph()
    assert list(g.networks) == ["two_branch"]
    net = g["two_branch"]
    assert net.inputs == ["Convolution_in", "Convolution_in_1"] and net.outputs == ["Concatenate_out"]
    assert [f.type for f in net.forward_sequence()] == [
        "Convolution", "BatchNormalization", "Convolution", "BatchNormalization", "Concatenate"]
    assert [f.name for f in net.forward_sequence()][:3] == [
        "Convolution", "BatchNormalization", "Convolution_1"]          # nnabla's names
    assert "@left/conv/W" in net.parameters
    xs = _inputs((2, 3, 6, 6), (2, 3, 6, 6), seed=1)
    _check_same(g(*xs), m(*xs))


def test_captured_graph_saves_and_loads(tmp_path):
    m = ResUnit(8)
    with nn.graph_def.graph(name="res") as g:
        m(nn.ProtoVariable((2, 8, 4, 4)))
    assert list(g.networks) == ["res"]
    path = str(tmp_path / "res.nnp")
    g.save(path)
    g2 = nn.graph_def.load(path)
    x, = _inputs((2, 8, 4, 4), seed=2)
    _check_same(g2(x), m(x))
    y_other_batch = g2(*_inputs((5, 8, 4, 4)))      # the batch dimension is variable
    assert y_other_batch.shape == (5, 8, 4, 4)


def test_flat_functions_on_placeholders_capture_a_network_with_all_outputs():
    def mlp(x0, x1):
        h = F.tanh(PF.affine(x0, 6, name="a") + PF.affine(x1, 6, name="b"))
        return PF.affine(h, 3, name="y0"), PF.affine(h, 4, name="y1")
    outs = mlp(nn.ProtoVariable((5, 7)), nn.ProtoVariable((5, 7)))
    net = nn.graph_def.get_default_graph_by_variable(outs[1])
    assert len(net.outputs) == 2
    xs = _inputs((5, 7), (5, 7), seed=3)
    _check_same(net(*xs), mlp(*xs))
    with pytest.raises(ValueError, match="not the output variable"):
        nn.graph_def.get_default_graph_by_variable(nn.Variable((1,)))


def test_named_networks_in_one_graph():
    a, b = ConvBn(2), ConvBn(4)
    pa, pb = nn.ProtoVariable((1, 3, 4, 4)), nn.ProtoVariable((1, 3, 4, 4))
    with nn.graph_def.graph() as g:
        with nn.graph_def.graph_name("first"):
            a(pa)
        with nn.graph_def.graph_name("second"):
            b(pb)
    assert list(g.networks) == ["first", "second"]
    x, = _inputs((1, 3, 4, 4))
    assert g.second(x).shape == (1, 4, 4, 4)


def test_graph_optimizer_removes_identity_and_renames():
    x = nn.ProtoVariable((2, 3))
    y = F.relu(F.identity(F.sin(x)))
    net = nn.graph_def.get_default_graph_by_variable(y)
    renamed = {}
    remover = IdentityRemover(renamed)
    for pf in list(net.functions.values()):
        remover(pf)
    assert [f.type for f in net.forward_sequence()] == ["Sin", "ReLU"]
    rename_variable(net, {net.outputs[0]: "result"})
    assert net.outputs == ["result"]
    v, = _inputs((2, 3))
    out = net(v)
    out.forward()
    np.testing.assert_allclose(out.d, np.maximum(np.sin(v.d), 0), rtol=1e-6)


def test_create_graph_from_variable():
    x = nn.Variable((3, 4))
    y = PF.affine(x, 2, name="fc")
    g = nn.graph_def.create_graph_from_variable("net", y)
    assert list(g.get_parameters()) == ["fc/affine/W", "fc/affine/b"]
    v, = _inputs((3, 4))
    _check_same(g(v), PF.affine(v, 2, name="fc"))


def test_create_graph_from_variable_names_outputs_by_the_names_given():
    x = nn.Variable((1, 4))
    h = F.tanh(PF.affine(x, 3, name="a"))
    y0, y1 = PF.affine(h, 2, name="b0"), PF.affine(h, 2, name="b1")
    g = nn.graph_def.create_graph_from_variable("m", [y0, y1], names={"out0": y0, "out1": y1, "in": x})
    net = g.networks["m"]
    assert net.inputs == ["in"] and net.outputs == ["out0", "out1"]
    rename_variable(net, {"out0": "r0"})
    assert net.variables["r0"].name == "r0" and net.outputs == ["r0", "out1"]


def test_graph_def_save_writes_executors_naming_their_outputs(tmp_path):
    import io
    from nnabla_jit.utils.load import load
    with nn.graph_def.graph(name="m") as g:
        x = nn.ProtoVariable((4, 6), name="x")
        h = F.tanh(PF.affine(x, 5, name="a"))
        y0, y1 = PF.affine(h, 3, name="b"), PF.affine(h, 2, name="c")
    executors = [{"name": "runtime", "network": "m", "data": ["x"], "output": {"y0": y0, "y1": y1},
                  "num_evaluations": 4, "repeat_evaluation_type": "Repeat",
                  "no_image_normalization": True, "need_back_propagation": False}]
    buf = io.BytesIO()
    nn.graph_def.save(buf, [g], executors=executors, extension=".nnp")
    info = load(buf, extension=".nnp")   # read from a file object left at its end
    e = info.executors["runtime"]
    assert e.num_evaluations == 4 and e.repeat_evaluation_type == "Repeat"
    assert e.no_image_normalization and not e.need_back_propagation
    assert [v.variable_name for v in e.proto.output_variable] == ["y0", "y1"]
    assert g.networks["m"].outputs == ["y0", "y1"]


def test_initializers_named_in_files_are_recreated():
    from types import SimpleNamespace
    from nnabla_jit.initializer import NormalInitializer, calc_normal_std_he_forward
    from nnabla_jit.parameter import _create_parameter_by_initializer
    v = SimpleNamespace(initializer=SimpleNamespace(type="NormalAffineHe", multiplier=2.0))
    init = graph_def._create_initializer(v, np.random.RandomState(313))
    p = _create_parameter_by_initializer(init, (3, 4), False)
    expected = NormalInitializer(calc_normal_std_he_forward(3, 4), rng=np.random.RandomState(313))((3, 4)) * 2
    np.testing.assert_allclose(p.d, expected, rtol=1e-6)
    v.initializer.type = "Constant"
    assert np.all(_create_parameter_by_initializer(graph_def._create_initializer(v, None), (2,), False).d == 2)
    assert graph_def._create_initializer(SimpleNamespace(initializer=None), None) is None
