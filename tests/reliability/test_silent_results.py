"""No silent wrong results from labels, indices or byte order (issue 22, item 4).

nnabla 1.39 (checked with the oracle) gives a softmax cross entropy of 0 for a label of +inf or
NaN and crashes in top_n_error; here every class-label op raises on them, as it does on NaN and
out-of-range labels. Big-endian arrays (``>f4`` from an .h5 file written elsewhere) are stored in
this machine's byte order wherever they come in, as nnabla does, so numba can compile for them.
"""
import io
import re
import zipfile

import h5py
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.ops.registry import OpValueError
from nnabla_jit.utils.nnp_graph import NnpLoader

from tests.reliability.test_parameter_loading import MLP


# ------------------------------------------------------------------------------------ labels
LABEL_OPS = {
    "SoftmaxCrossEntropy": lambda x, t, axis: F.softmax_cross_entropy(x, t, axis=axis),
    "CategoricalCrossEntropy": lambda x, t, axis: F.categorical_cross_entropy(
        F.softmax(x, axis=axis), t, axis=axis),
    "TopNError": lambda x, t, axis: F.top_n_error(x, t, axis=axis),
    "ConfusionMatrix": lambda x, t, axis: F.confusion_matrix(x, t, axis=axis),
}


def run_label_op(name, label, dtype, axis):
    """The op on 2 samples of 3 classes, the second sample's label ``label``; ``axis`` 1 of a
    (2, 3, 2) input reaches the kernels of a class axis that is not last."""
    rng = np.random.RandomState(0)
    shape = (2, 3) if axis == -1 else (2, 3, 2)
    x = nn.Variable.from_numpy_array(rng.randn(*shape).astype(dtype))
    t_shape = (2, 1) if axis == -1 else (2, 1, 2)
    t = np.zeros(t_shape, dtype)
    t[1] = label
    y = LABEL_OPS[name](x, nn.Variable.from_numpy_array(t), axis)
    y.forward()
    return y.d.copy()


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label", [np.inf, 1e30, 3.0])
@pytest.mark.parametrize("name", sorted(LABEL_OPS))
def test_infinite_or_huge_label_raises_naming_the_op(name, label, dtype, axis):
    quoted = re.escape("label {}".format(float(np.dtype(dtype).type(label))))
    with pytest.raises(OpValueError, match=name + ".*" + quoted):
        run_label_op(name, label, dtype, axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label", [-np.inf, -1e30])
@pytest.mark.parametrize("name", sorted(LABEL_OPS))
def test_minus_infinity_is_ignored_as_every_negative_label(name, label, dtype):
    np.testing.assert_array_equal(run_label_op(name, label, dtype, 1), run_label_op(name, -1, dtype, 1))


# ------------------------------------------------------------------------------------ indices
def x_of(shape):
    return nn.Variable.from_numpy_array(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def idx(values):
    return nn.Variable.from_numpy_array(np.array(values, np.float32))


INDEX_OPS = {
    "Embed": lambda bad: F.embed(idx([0, bad]), x_of((3, 2))),
    "OneHot": lambda bad: F.one_hot(idx([[0], [bad]]), (3,)),
    "Gather": lambda bad: F.gather(x_of((3, 2)), idx([0, bad])),
    "GatherNd": lambda bad: F.gather_nd(x_of((3, 2)), idx([[0, bad]])),
    "ScatterAdd": lambda bad: F.scatter_add(x_of((3, 2)), idx([[0, 1], [bad, 0]]), x_of((2, 2))),
    "RoiAlign": lambda bad: F.roi_align(x_of((1, 1, 4, 4)), idx([[bad, 0, 0, 2, 2]]), (2, 2)),
}


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e30])
@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_float_index_that_is_no_integer_raises_naming_the_op(name, bad):
    """Cast to int64 these become INT64_MIN on x86 (another integer elsewhere): an out-of-range
    message quoting -9223372036854775808, or (RoiAlign's NaN batch index) no error at all."""
    with pytest.raises(OpValueError, match=name + ".* {} is not an integer index".format(re.escape(str(float(np.float32(bad)))))):
        INDEX_OPS[name](bad).forward()


# ------------------------------------------------------------------------------------ byte order
@pytest.mark.parametrize("dtype", [">f4", ">f8"])
def test_big_endian_arrays_are_stored_in_native_order(dtype):
    values = np.arange(6, dtype=dtype).reshape(2, 3)
    native = np.dtype(dtype).newbyteorder("=")
    v = nn.Variable((2, 3), need_grad=True)
    v.d = values
    v.g = values
    a = nn.NdArray((2, 3))
    a.data = values
    stored = [v.d, v.g, a.data, nn.Variable.from_numpy_array(values).d,
              nn.Variable.from_numpy_array(values, grad=values).g,
              nn.NdArray.from_numpy_array(values).data, nn.NdArray((2, 3), dtype).data,
              nn.NdArray((2, 3)).cast(dtype)]
    for got in stored:
        assert got.dtype == native and got.dtype.isnative
    np.testing.assert_array_equal(stored[0], values)


def write_big_endian_params(path, w, b):
    with h5py.File(path, "w") as f:
        for i, (name, value) in enumerate([("fc/affine/W", w), ("fc/affine/b", b)]):
            ds = f.create_dataset(name, data=value.astype(">f4"))
            ds.attrs["need_grad"] = True
            ds.attrs["index"] = i


def train_step(solver):
    """One Adam step of a sum of fc(x) on the parameters loaded; the new weight."""
    x = nn.Variable.from_numpy_array(np.ones((1, 3), np.float32))
    y = F.sum(PF.affine(x, 2, name="fc"))
    solver.set_parameters(nn.get_parameters())
    y.forward()
    solver.zero_grad()
    y.backward()
    solver.update()
    return nn.get_parameters()["fc/affine/W"].d.copy()


def test_big_endian_parameter_file_loads_and_trains(tmp_path):
    """nnabla 1.39 loads '>f4' parameters as float32 and trains them; a solver update failed
    here with a numba TypingError ("Unsupported array dtype: >f4")."""
    w, b = np.arange(6, dtype=np.float32).reshape(3, 2), np.zeros(2, np.float32)
    write_big_endian_params(tmp_path / "p.h5", w, b)
    nn.clear_parameters()
    nn.load_parameters(str(tmp_path / "p.h5"))
    assert all(p.d.dtype == np.float32 and p.d.dtype.isnative for p in nn.get_parameters().values())
    np.testing.assert_array_equal(nn.get_parameters()["fc/affine/W"].d, w)
    np.testing.assert_allclose(train_step(S.Adam(0.1)), w - 0.1, rtol=1e-5)   # Adam's first step: alpha


def test_big_endian_solver_states_load_and_update(tmp_path):
    nn.clear_parameters()
    write_big_endian_params(tmp_path / "p.h5", np.ones((3, 2), np.float32), np.zeros(2, np.float32))
    nn.load_parameters(str(tmp_path / "p.h5"))
    solver = S.Momentum(0.1, 0.9)
    train_step(solver)
    solver.save_states(str(tmp_path / "s.h5"))
    with h5py.File(tmp_path / "s.h5", "r+") as f:   # rewrite every state big-endian
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.ndim else None)
        for n in names:
            value, attrs = f[n][()], dict(f[n].attrs)
            del f[n]
            f.create_dataset(n, data=value.astype(">f4")).attrs.update(attrs)
    fresh = S.Momentum(0.1, 0.9)
    fresh.set_parameters(nn.get_parameters())
    fresh.load_states(str(tmp_path / "s.h5"))
    for state in fresh.get_states().values():
        assert all(v.d.dtype.isnative for v in state.pstate.values())
    train_step(fresh)


def test_nnp_with_big_endian_parameters_runs(tmp_path):
    src = zipfile.ZipFile(MLP)
    with h5py.File(tmp_path / "be.h5", "w") as out, h5py.File(io.BytesIO(src.read("parameter.h5")), "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            out.create_dataset(n, data=f[n][()].astype(">f4")).attrs.update(dict(f[n].attrs))
    with zipfile.ZipFile(tmp_path / "be.nnp", "w") as z:
        for name in src.namelist():
            z.writestr(name, (tmp_path / "be.h5").read_bytes() if name == "parameter.h5" else src.read(name))
    expected = np.load(str(MLP).replace("mlp.nnp", "mlp_io.npz"))
    loader = NnpLoader(str(tmp_path / "be.nnp"))
    net = loader.get_network(loader.get_network_names()[0])
    for name, v in net.inputs.items():
        v.d = expected[name]
    y = net.variables["y"]
    y.forward()
    np.testing.assert_allclose(y.d, expected["y"], rtol=1e-5, atol=1e-6)
    params = nn.get_parameters(grad_only=False)
    assert params and all(p.d.dtype.isnative for p in params.values())
