"""NnpNetworkPass: editing a network of an .nnp while NnpLoader builds it (nnabla's passes)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.utils.nnp_graph import NnpLoader, NnpNetworkPass
from nnabla_jit.utils.save import save

# Our save names the functions '@net/Affine', '@net/Tanh', '@net/Affine_1' and the
# intermediates '@net/Affine_out', '@net/Tanh_out', as nnabla's does.


@pytest.fixture
def mlp_file(tmp_path):
    nn.clear_parameters()
    x = nn.Variable((4, 3))
    h = F.tanh(PF.affine(x, 5, name="fc1", rng=np.random.RandomState(1)))
    y = PF.affine(h, 3, name="fc2", rng=np.random.RandomState(2))
    path = str(tmp_path / "mlp.nnp")
    save(path, {"networks": [{"name": "net", "batch_size": 4, "outputs": {"y": y},
                              "names": {"x": x}}]})
    nn.clear_parameters()
    yield path
    nn.clear_parameters()


def params(name):
    return nn.get_parameters(grad_only=False)[name].d


def test_set_variable_and_fix_parameters(mlp_file):
    x = nn.Variable.from_numpy_array(np.random.RandomState(0).randn(1, 3).astype(np.float32))
    npass = NnpNetworkPass()
    npass.set_variable("x", x)
    npass.fix_parameters()
    net = NnpLoader(mlp_file).get_network("net", callback=npass)
    assert net.inputs["x"] is x and x.name == "x"
    y = net.outputs["y"]
    assert y.shape == (1, 3)
    assert not nn.get_parameters()          # all published with need_grad=False
    assert sorted(nn.get_parameters(grad_only=False)) == [
        "fc1/affine/W", "fc1/affine/b", "fc2/affine/W", "fc2/affine/b"]
    y.forward()
    h = np.tanh(x.d @ params("fc1/affine/W") + params("fc1/affine/b"))
    np.testing.assert_allclose(y.d, h @ params("fc2/affine/W") + params("fc2/affine/b"),
                               rtol=1e-5, atol=1e-6)


def test_remove_and_rewire_bypasses_a_function(mlp_file):
    npass = NnpNetworkPass()
    npass.remove_and_rewire("@net/Tanh")
    net = NnpLoader(mlp_file).get_network("net", batch_size=2, callback=npass)
    x, y = net.inputs["x"], net.outputs["y"]
    assert "@net/Tanh_out" not in net.variables
    x.d = np.random.RandomState(3).randn(2, 3)
    y.forward()
    h = x.d @ params("fc1/affine/W") + params("fc1/affine/b")
    np.testing.assert_allclose(y.d, h @ params("fc2/affine/W") + params("fc2/affine/b"),
                               rtol=1e-5, atol=1e-6)


def test_use_up_to_makes_the_variable_the_output(mlp_file):
    npass = NnpNetworkPass()
    npass.use_up_to("@net/Tanh_out")
    net = NnpLoader(mlp_file).get_network("net", callback=npass)
    assert list(net.outputs) == ["@net/Tanh_out"]
    assert "fc2/affine/W" not in net.variables
    assert net.outputs["@net/Tanh_out"].parent.info.type_name == "Tanh"


def test_drop_function_and_function_callbacks(mlp_file):
    npass = NnpNetworkPass()
    npass.drop_function("@net/Affine_1")
    seen = []

    @npass.on_generate_function_by_type("Affine")
    def widen(f):
        seen.append(f.name)
        return f

    @npass.on_generate_variable("x")
    def rename(v):
        seen.append(v.name)
        return v
    net = NnpLoader(mlp_file).get_network("net", callback=npass)
    assert seen == ["@net/Affine", "x"]
    assert list(net.outputs) == ["@net/Tanh_out"]


def test_a_pass_edits_the_message_of_the_built_network_only(mlp_file):
    loader = NnpLoader(mlp_file)
    npass = NnpNetworkPass()

    @npass.on_generate_function_by_name("@net/Affine")
    def flatten_less(f):
        f.proto.affine_param.base_axis = 1
        f.proto.name = "renamed"
        return f
    loader.get_network("net", callback=npass)
    assert loader.network_dict["net"].function[0].name == "@net/Affine"


def test_check_average_pooling_global_and_bad_callback(tmp_path):
    nn.clear_parameters()
    x = nn.Variable((1, 2, 4, 4))
    y = F.average_pooling(x, (2, 2))
    path = str(tmp_path / "pool.nnp")
    save(path, {"networks": [{"name": "net", "batch_size": 1, "outputs": {"y": y},
                              "names": {"x": x}}]})
    loader = NnpLoader(path)
    check = NnpNetworkPass()
    check.check_average_pooling_global("AveragePooling", by_type=True)
    with pytest.raises(ValueError, match="not global"):
        loader.get_network("net", callback=check)
    force = NnpNetworkPass()
    force.force_average_pooling_global("AveragePooling", by_type=True)
    assert loader.get_network("net", callback=force).outputs["y"].shape == (1, 2, 1, 1)
    with pytest.raises(TypeError, match="NnpNetworkPass"):
        loader.get_network("net", callback=lambda f: f)
