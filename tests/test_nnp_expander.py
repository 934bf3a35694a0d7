"""NnpExpander (nnabla.utils.converter.nnabla): unrolling repeat / recurrent loop control."""
import google.protobuf.text_format as text_format
import pytest

from nnabla_jit.serialization.proto import nnabla_pb2
from nnabla_jit.utils.converter.nnabla import NnpExpander, rename_square_bracket

# x -> [Affine(W{r}, b) -> Tanh] x 3 -> Identity -> y, the loop fed back by RepeatStart.
REPEAT = r'''
network {
  name: "net" batch_size: 1
  repeat_info { id: "r" times: 3 }
  variable { name: "x" type: "Buffer" shape { dim: -1 dim: 2 } }
  variable { name: "s" type: "Buffer" repeat_id: "r" shape { dim: -1 dim: 2 } }
  variable { name: "W{r}" type: "Parameter" repeat_id: "r" shape { dim: 2 dim: 2 } }
  variable { name: "b" type: "Parameter" shape { dim: 2 } }
  variable { name: "a" type: "Buffer" repeat_id: "r" shape { dim: -1 dim: 2 } }
  variable { name: "t" type: "Buffer" repeat_id: "r" shape { dim: -1 dim: 2 } }
  variable { name: "e" type: "Buffer" shape { dim: -1 dim: 2 } }
  variable { name: "y" type: "Buffer" shape { dim: -1 dim: 2 } }
  function { name: "Identity" type: "Identity" input: "e" output: "y" }
  function { name: "RepeatStart" type: "RepeatStart" repeat_id: "r" input: "x" input: "t"
             output: "s" repeat_param { repeat_id: "r" times: 3 } }
  function { name: "Affine" type: "Affine" repeat_id: "r" input: "s" input: "W{r}" input: "b"
             output: "a" affine_param { base_axis: 1 } }
  function { name: "Tanh" type: "Tanh" repeat_id: "r" input: "a" output: "t" }
  function { name: "RepeatEnd" type: "RepeatEnd" repeat_id: "r" input: "t" output: "e"
             repeat_param { repeat_id: "r" times: 3 } }
}
executor { name: "runtime" network_name: "net"
  data_variable { variable_name: "x" data_name: "x" }
  output_variable { variable_name: "y" data_name: "y" }
  parameter_variable { variable_name: "b" } parameter_variable { variable_name: "W{r}" } }
'''

# h_i = x[:, i] + h_{i-1}, h_{-1} = h0; y = stack(h).
RECURRENT = r'''
network {
  name: "rnn" batch_size: 1
  repeat_info { id: "t" times: 3 }
  variable { name: "x" type: "Buffer" shape { dim: -1 dim: 3 dim: 2 } }
  variable { name: "h0" type: "Buffer" shape { dim: -1 dim: 2 } }
  variable { name: "xi" type: "Buffer" repeat_id: "t" shape { dim: -1 dim: 2 } }
  variable { name: "hp" type: "Buffer" repeat_id: "t" shape { dim: -1 dim: 2 } }
  variable { name: "h" type: "Buffer" repeat_id: "t" shape { dim: -1 dim: 2 } }
  variable { name: "y" type: "Buffer" shape { dim: -1 dim: 3 dim: 2 } }
  function { name: "RecurrentInput" type: "RecurrentInput" repeat_id: "t" input: "x" output: "xi"
             recurrent_param { repeat_id: "t" length: 3 axis: 1 } }
  function { name: "Delay" type: "Delay" repeat_id: "t" input: "h" input: "h0" output: "hp"
             recurrent_param { repeat_id: "t" } }
  function { name: "Add2" type: "Add2" repeat_id: "t" input: "xi" input: "hp" output: "h" }
  function { name: "RecurrentOutput" type: "RecurrentOutput" repeat_id: "t" input: "h" output: "y"
             recurrent_param { repeat_id: "t" length: 3 axis: 1 } }
}
'''


def expand(text):
    proto = text_format.Merge(text, nnabla_pb2.NNablaProtoBuf())
    before = proto.SerializeToString()
    out = NnpExpander(proto).execute()
    assert proto.SerializeToString() == before      # the input is left as it is
    return out


def functions(network):
    return [(f.name, f.type, list(f.input), list(f.output)) for f in network.function]


def test_repeat_is_unrolled_with_a_parameter_per_step():
    out = expand(REPEAT)
    net = out.network[0]
    assert not net.repeat_info
    assert functions(net) == [
        ("Affine_r_0", "Affine", ["x", "W[0]", "b"], ["a_r_0"]),
        ("Tanh_r_0", "Tanh", ["a_r_0"], ["t_r_0"]),
        ("Affine_r_1", "Affine", ["t_r_0", "W[1]", "b"], ["a_r_1"]),
        ("Tanh_r_1", "Tanh", ["a_r_1"], ["t_r_1"]),
        ("Affine_r_2", "Affine", ["t_r_1", "W[2]", "b"], ["a_r_2"]),
        ("Tanh_r_2", "Tanh", ["a_r_2"], ["t_r_2"]),
        ("Identity", "Identity", ["t_r_2"], ["y"]),     # after its producers
    ]
    assert all(not f.repeat_id for f in net.function)
    names = [v.name for v in net.variable]
    assert names[:4] == ["x", "s_r_0", "s_r_1", "s_r_2"]
    assert {"W[0]", "W[1]", "W[2]", "b", "a_r_2", "t_r_0"} <= set(names)
    assert "W{r}" not in names
    assert [p.variable_name for p in out.executor[0].parameter_variable] == [
        "W[0]", "W[1]", "W[2]", "b"]


def test_recurrent_becomes_split_and_stack_with_delays_chained():
    net = expand(RECURRENT).network[0]
    assert functions(net) == [
        ("RecurrentInput", "Split", ["x"], ["xi_t_0", "xi_t_1", "xi_t_2"]),
        ("Add2_t_0", "Add2", ["xi_t_0", "h0"], ["h_t_0"]),
        ("Add2_t_1", "Add2", ["xi_t_1", "h_t_0"], ["h_t_1"]),
        ("Add2_t_2", "Add2", ["xi_t_2", "h_t_1"], ["h_t_2"]),
        ("RecurrentOutput", "Stack", ["h_t_0", "h_t_1", "h_t_2"], ["y"]),
    ]
    split, stack = net.function[0], net.function[-1]
    assert split.split_param.axis == 1 and stack.stack_param.axis == 1
    assert not split.HasField("recurrent_param") and not stack.HasField("recurrent_param")


def test_a_network_without_loops_is_only_sorted():
    plain = nnabla_pb2.NNablaProtoBuf()
    net = plain.network.add()
    net.name = "plain"
    for v in ("x", "y", "z"):
        net.variable.add(name=v, type="Buffer").shape.dim.extend([1])
    net.function.add(name="B", type="Tanh", input=["y"], output=["z"])
    net.function.add(name="A", type="Tanh", input=["x"], output=["y"])
    out = NnpExpander(plain).execute().network[0]
    assert [f.name for f in out.function] == ["A", "B"]


def test_a_cycle_is_refused():
    plain = nnabla_pb2.NNablaProtoBuf()
    net = plain.network.add(name="loop")
    net.function.add(name="A", type="Tanh", input=["y"], output=["x"])
    net.function.add(name="B", type="Tanh", input=["x"], output=["y"])
    with pytest.raises(ValueError, match="not a DAG"):
        NnpExpander(plain).execute()


def test_rename_square_bracket_after_expansion():
    looped = text_format.Merge(REPEAT, nnabla_pb2.NNablaProtoBuf())
    rename_square_bracket(looped)             # loops left: nothing renamed
    assert looped.network[0].variable[2].name == "W{r}"
    out = expand(REPEAT)
    rename_square_bracket(out)
    assert [p.variable_name for p in out.executor[0].parameter_variable] == [
        "W_0", "W_1", "W_2", "b"]
    assert list(out.network[0].function[0].input) == ["x", "W_0", "b"]
    assert not any("[" in v.name for v in out.network[0].variable)


# ------------------------------------------------------------------ loading expands the loops
def _repeat_file(tmp_path):
    """REPEAT with parameter values, as an .nnp; returns (path, {name: value})."""
    import numpy as np
    from nnabla_jit.serialization import nnp
    from nnabla_jit.serialization.parameters import ParameterEntry
    rng = np.random.RandomState(0)
    values = {"W[{}]".format(i): rng.randn(2, 2).astype(np.float32) for i in range(3)}
    values["b"] = rng.randn(2).astype(np.float32)
    proto = text_format.Merge(REPEAT, nnabla_pb2.NNablaProtoBuf())
    path = str(tmp_path / "repeat.nnp")
    nnp.write(path, proto, [ParameterEntry(k, v, True) for k, v in values.items()])
    return path, values


def _unrolled(values, x):
    import numpy as np
    for i in range(3):
        x = np.tanh(x @ values["W[{}]".format(i)] + values["b"])
    return x


def test_loading_a_file_with_loops_unrolls_them(tmp_path):
    import numpy as np
    import nnabla_jit as nn
    from nnabla_jit.utils.load import load
    from nnabla_jit.utils.nnp_graph import NnpLoader
    path, values = _repeat_file(tmp_path)
    x = np.array([[0.5, -1.0]], np.float32)
    nn.clear_parameters()
    info = load([path], prepare_data_iterator=False)
    executor = info.executors["runtime"]
    executor.network.variables["x"].variable_instance.d = x
    y = executor.network.variables["y"].variable_instance
    y.forward()
    np.testing.assert_allclose(y.d, _unrolled(values, x), rtol=1e-5, atol=1e-6)
    net = NnpLoader(path).get_network("net", batch_size=1)
    net.inputs["x"].d = x
    out = net.outputs["y"]
    out.forward()
    np.testing.assert_allclose(out.d, _unrolled(values, x), rtol=1e-5, atol=1e-6)
    from nnabla_jit.core import graph_def
    graph = graph_def.load(path)
    types = [f.type for net in graph.networks.values() for f in net.functions.values()]
    assert types.count("Affine") == 3 and "RepeatStart" not in types
    nn.clear_parameters()


def test_dump_shows_the_unrolled_network_unless_told_not_to(tmp_path, capsys):
    from nnabla_jit.utils.cli import main
    path, _ = _repeat_file(tmp_path)
    assert main(["dump", "-F", path]) == 0
    out = capsys.readouterr().out
    assert "Affine_r_2" in out and "RepeatStart" not in out
    assert main(["dump", "-F", "--nnp-no-expand-network", path]) == 0
    assert "RepeatStart" in capsys.readouterr().out
