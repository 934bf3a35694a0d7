"""Bounded memory on hostile files, each refused with a clear error naming the file (issue 22,
item 3): unrolled repeats, deep unrolled networks, decompression bombs inside HDF5, ONNX constant
folding, huge or overflowing shapes, lying .npy headers, giant sparse text files; and parameter
files loaded and saved without a second copy of the whole file in memory.
"""
import math
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import h5py
import numpy as np
import pytest

import nnabla_jit as nn
from nnabla_jit.parameter import set_parameter
from nnabla_jit.serialization import nnp as nnp_io
from nnabla_jit.serialization.files import FileFormatError
from nnabla_jit.utils.converter.nnabla import NnpExpander
from nnabla_jit.utils.load import load
from nnabla_jit.utils.nnp_graph import NnpLoader
from tests.test_nnp_expander import REPEAT

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _untouched(call, path, match, error=FileFormatError):
    """``call(path)`` raises ``error`` matching ``match`` and naming the file; the current
    parameters are left as they were."""
    keep = nn.Variable.from_numpy_array(np.full((2,), 5.0, np.float32))
    set_parameter("kept", keep)
    with pytest.raises(error, match=match) as err:
        call(path)
    assert os.path.basename(str(path)) in str(err.value)
    assert list(nn.get_parameters(grad_only=False)) == ["kept"]
    return err.value


def _write(path, text):
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------------------------ repeat_info
@pytest.mark.parametrize("loader", [load, NnpLoader])
def test_a_huge_repeat_count_is_refused_before_unrolling(tmp_path, loader):
    path = _write(tmp_path / "repeat.nntxt", REPEAT.replace("times: 3", "times: 100000000"))
    _untouched(loader, path, r"repeat\.nntxt: network 'net': its repeats \('r' times 100000000\) "
                             r"would unroll to 200000001 functions; at most 100000 are unrolled")


def test_nested_repeats_multiply(tmp_path):
    nested = REPEAT.replace('repeat_info { id: "r" times: 3 }',
                            'repeat_info { id: "r" times: 400 } repeat_info { id: "q" times: 400 }')
    nested = nested.replace('repeat_id: "r" input: "s"', 'repeat_id: "r" repeat_id: "q" input: "s"')
    path = _write(tmp_path / "nested.nntxt", nested)
    # Affine: 400 x 400 copies, Tanh: 400, Identity: 1
    _untouched(load, path, r"nested\.nntxt: network 'net': its repeats \('r' times 400, 'q' times "
                           r"400\) would unroll to 160401 functions")


def test_a_1200_step_unrolled_network_loads(tmp_path):
    """The topological order is iterative: 2400 chained functions, no RecursionError."""
    path = _write(tmp_path / "long.nntxt", REPEAT.replace("times: 3", "times: 1200"))
    info = load([path], prepare_data_iterator=False)
    network = info.networks["net"]
    assert len(network.functions) == 2 * 1200 + 1
    names = list(network.functions)
    assert names[:2] == ["Affine_r_0", "Tanh_r_0"] and names[-1] == "Identity"


def test_the_iterative_order_is_the_recursive_one():
    from nnabla_jit.utils.converter.nnabla.expander import _topological_order
    from nnabla_jit.serialization.proto import nnabla_pb2
    proto = nnabla_pb2.NNablaProtoBuf()
    net = proto.network.add(name="dag")
    # a diamond with a side branch, written out of order
    for name, inputs, outputs in [("D", ["b", "c"], ["d"]), ("B", ["a"], ["b"]), ("A", ["x"], ["a"]),
                                  ("C", ["a"], ["c"]), ("E", ["a"], ["e"]), ("F", ["d", "e"], ["f"])]:
        net.function.add(name=name, type="Identity", input=inputs, output=outputs)
    # depth first from each function in file order, readers in file order, reversed post-order
    assert [f.name for f in _topological_order(net.function)] == ["A", "E", "C", "B", "D", "F"]


# ------------------------------------------------------------------------------ HDF5 inflation
def _gzip_h5(path, elements):
    with h5py.File(str(path), "w") as f:
        ds = f.create_dataset("w", shape=(elements,), dtype="f4", chunks=(1 << 16,),
                              compression="gzip")
        ds[:] = 0
        ds.attrs["need_grad"] = True
        ds.attrs["index"] = 0
    return str(path)


@pytest.fixture
def small_limits(monkeypatch):
    """Limits lowered so that the bombs stay CI-sized."""
    monkeypatch.setattr(nnp_io, "MIN_MEMBER_LIMIT", 1 << 20)


BOMB = (r"dataset 'w' \(shape \(4194304,\), float32\) expands to 16777216 bytes from \d+ stored "
        r"bytes: refused as a possible decompression bomb")


def test_a_gzip_chunked_parameter_file_that_inflates_is_refused(tmp_path, small_limits):
    path = _gzip_h5(tmp_path / "bomb.h5", 4 << 20)
    _untouched(nn.load_parameters, path, r"bomb\.h5: " + BOMB)


@pytest.mark.parametrize("loader", [nn.load_parameters, load, NnpLoader])
def test_a_gzip_chunked_parameter_file_inside_an_nnp_is_refused(tmp_path, small_limits, loader):
    h5 = _gzip_h5(tmp_path / "bomb.h5", 4 << 20)
    path = str(tmp_path / "bomb.nnp")
    with zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp")) as src, zipfile.ZipFile(path, "w") as z:
        for name in src.namelist():
            z.writestr(name, open(h5, "rb").read() if name == "parameter.h5" else src.read(name))
    assert os.path.getsize(path) < 200_000
    _untouched(loader, path, r"bomb\.nnp:parameter\.h5: " + BOMB)


def test_an_unwritten_dataset_of_2_40_elements_is_refused(tmp_path):
    path = str(tmp_path / "huge.h5")
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("w", shape=(2 ** 40,), dtype="f4", chunks=(1 << 16,))
        ds.attrs["need_grad"] = True
    _untouched(nn.load_parameters, path, r"huge\.h5: dataset 'w' \(shape \(1099511627776,\), "
                                         r"float32\) expands to 4398046511104 bytes from 0 stored")


def test_many_unwritten_datasets_are_refused_together(tmp_path, small_limits):
    path = str(tmp_path / "many.h5")
    with h5py.File(path, "w") as f:
        for k in range(40):
            ds = f.create_dataset("w{}".format(k), shape=(200_000,), dtype="f4")   # 0.8 MB each
            ds.attrs["need_grad"] = True
    _untouched(nn.load_parameters, path, r"many\.h5: the datasets expand to 32000000 bytes from a "
                                         r"file of \d+ bytes")


# ------------------------------------------------------------------------------ ONNX folding
def _onnx(path, nodes, initializers, inputs):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with open(str(path), "wb") as f:
        f.write(model.SerializeToString())
    return str(path)


def _import(path):
    from nnabla_jit.serialization.onnx import import_onnx
    return import_onnx(path)


def _x(shape=(1,)):
    from onnx import TensorProto, helper
    return [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]


def test_onnx_constant_of_shape_beyond_the_folding_cap_is_refused_before_it_is_made(tmp_path):
    from onnx import TensorProto, helper
    from nnabla_jit.serialization.onnx import OnnxImportError
    shape = helper.make_tensor("s", TensorProto.INT64, [1], [2 ** 26])
    path = _onnx(tmp_path / "cos.onnx", [helper.make_node("ConstantOfShape", ["s"], ["c"], name="big"),
                                         helper.make_node("Add", ["x", "c"], ["y"])], [shape], _x())
    _untouched(_import, path, r"cos\.onnx: cannot import ConstantOfShape node 'big': folding it "
                              r"would make a constant of 67108864 elements; at most 16777216 are "
                              r"folded", OnnxImportError)


@pytest.mark.parametrize("op", ["Mul", "Expand", "Tile"])
def test_onnx_folded_constants_are_capped_for_every_way_of_growing(tmp_path, monkeypatch, op):
    from onnx import TensorProto, helper
    from nnabla_jit.serialization.onnx import OnnxImportError, importer
    monkeypatch.setattr(importer, "MAX_FOLDED_ELEMENTS", 1000)
    a = helper.make_tensor("a", TensorProto.FLOAT, [64, 1], np.ones(64, np.float32))
    second = {"Mul": helper.make_tensor("b", TensorProto.FLOAT, [1, 64], np.ones(64, np.float32)),
              "Expand": helper.make_tensor("b", TensorProto.INT64, [2], [64, 64]),
              "Tile": helper.make_tensor("b", TensorProto.INT64, [2], [1, 64])}[op]
    path = _onnx(tmp_path / "grow.onnx", [helper.make_node(op, ["a", "b"], ["c"], name="grow"),
                                          helper.make_node("Add", ["x", "c"], ["y"])],
                 [a, second], _x())
    _untouched(_import, path, r"grow\.onnx: cannot import {} node 'grow': folding it would make a "
                              r"constant of 4096 elements; at most 1000 are folded".format(op),
               OnnxImportError)


# ------------------------------------------------------------------------------ huge shapes
HUGE = 2 ** 50


def _nntxt_with_input_dims(tmp_path, dims):
    text = open(os.path.join(FIXTURES, "mlp.nntxt")).read()
    text = text.replace("dim: -1\n      dim: 5\n", "".join("dim: {}\n      ".format(d) for d in dims), 1)
    return _write(tmp_path / "dims.nntxt", text)


@pytest.mark.parametrize("dims, elements", [((-1, HUGE), 2 * HUGE),
                                            ((2 ** 40, 2 ** 40, 5), 5 * 2 ** 80)])
@pytest.mark.parametrize("loader", [load, NnpLoader])
def test_network_variable_shapes_beyond_the_limit_are_refused(tmp_path, loader, dims, elements):
    path = _nntxt_with_input_dims(tmp_path, dims)

    def run(p):
        return loader([p], batch_size=2) if loader is load else loader(p).get_network("mlp", batch_size=2)
    _untouched(run, path, r"dims\.nntxt: network 'mlp': variable 'x' has shape .* \({} elements\); "
                          r"at most 2\*\*40 elements".format(elements if dims[0] > 0 else math.prod(dims[1:])))


@pytest.mark.parametrize("dims", [(2 ** 32, 2 ** 32), (HUGE,)])
def test_parameter_shapes_beyond_the_limit_are_refused(tmp_path, dims):
    path = _write(tmp_path / "param.nntxt", 'parameter {{ variable_name: "w" shape {{ {} }} '
                  'need_grad: true }}\n'.format(" ".join("dim: {}".format(d) for d in dims)))
    _untouched(nn.load_parameters, path, r"param\.nntxt: parameter 'w' has shape \({}\) \({} "
                                         r"elements\); at most 2\*\*40".format(
                                             ", ".join(map(str, dims)) + ("," if len(dims) == 1 else ""),
                                             math.prod(dims)))


@pytest.mark.parametrize("dims", [(HUGE,), (2 ** 40, 2 ** 40, 16)])
def test_onnx_input_shapes_beyond_the_limit_are_refused(tmp_path, dims):
    from onnx import helper
    path = _onnx(tmp_path / "big.onnx", [helper.make_node("Relu", ["x"], ["y"])], [], _x(dims))
    _untouched(_import, path, r"big\.onnx: input 'x' has shape .* \({} elements\); at most 2\*\*40"
               .format(math.prod(dims)))


def test_onnx_initializer_dims_overflowing_int64_are_refused(tmp_path):
    from onnx import TensorProto
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2 ** 32, 2 ** 32])
    w.raw_data = b""
    from onnx import helper
    path = _onnx(tmp_path / "init.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w], _x())
    _untouched(_import, path, r"init\.onnx: initializer 'w' has shape \(4294967296, 4294967296\) "
                              r"\(18446744073709551616 elements\); at most 2\*\*40")


# ------------------------------------------------------------------------------ .npy headers
def _lying_npy(path, shape):
    import numpy.lib.format as fmt
    with open(str(path), "wb") as f:
        fmt.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": shape})
        f.write(b"\0" * 64)
    return str(path)


@pytest.mark.parametrize("shape", [(2 ** 40,), (2 ** 40, 2 ** 40)])
def test_npy_header_claiming_more_than_the_file_holds_is_refused(tmp_path, shape):
    from nnabla_jit.utils.data_source_loader import load_npy
    path = _lying_npy(tmp_path / "huge.npy", shape)
    with pytest.raises(ValueError, match=r"huge\.npy: the header says shape {} of float64 \({} "
                                         r"bytes\) but the file holds 64 bytes of data".format(
                                             re.escape(str(shape)), math.prod(shape) * 8)):
        load_npy(path)


def test_npy_in_a_csv_dataset_claiming_too_much_is_refused(tmp_path):
    from nnabla_jit.utils.data_iterator import data_iterator_csv_dataset
    _lying_npy(tmp_path / "huge.npy", (2 ** 40,))
    csv = tmp_path / "data.csv"
    csv.write_text("x,y\nhuge.npy,0\nhuge.npy,1\n")
    with pytest.raises(ValueError, match=r"huge\.npy: the header says shape \(1099511627776,\)"):
        with data_iterator_csv_dataset(str(csv), 2, shuffle=False) as it:
            it.next()


def test_npy_cache_file_claiming_too_much_is_refused(tmp_path):
    from nnabla_jit.utils.data_source import DataSourceWithFileCacheError, read_cache_file
    path = _lying_npy(tmp_path / "cache_00000000_00000001.npy", (2 ** 40,))
    with pytest.raises(DataSourceWithFileCacheError, match=r"cache_00000000_00000001\.npy: the "
                                                           r"header says shape \(1099511627776,\)"):
        read_cache_file(path, ["x"])


# ------------------------------------------------------------------------------ sparse text files
def _sparse(path, size, head=b""):
    with open(str(path), "wb") as f:
        f.write(head)
        f.truncate(size)
    return str(path)


@pytest.mark.parametrize("loader", [load, nn.load_parameters, NnpLoader])
def test_a_4gb_sparse_nntxt_is_refused_without_reading_it(tmp_path, loader):
    path = _sparse(tmp_path / "sparse.nntxt", 4 << 30)
    _untouched(loader, path, r"sparse\.nntxt: the file is 4294967296 bytes; protobuf text files of "
                             r"at most 2147483647 bytes are read")


def test_a_text_file_of_nul_bytes_is_refused_at_the_first_chunk(tmp_path):
    path = _sparse(tmp_path / "nul.nntxt", 256 << 20, b'network { name: "x" }\n')
    _untouched(load, path, r"nul\.nntxt: not a text file \(a NUL byte at offset 22\)")


def test_a_text_member_of_nul_bytes_in_an_nnp_is_refused(tmp_path):
    path = str(tmp_path / "nul.nnp")
    with zipfile.ZipFile(os.path.join(FIXTURES, "mlp.nnp")) as src, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in src.namelist():
            data = src.read(name)
            z.writestr(name, data + b"\0" * (8 << 20) if name.endswith(".nntxt") else data)
    _untouched(load, path, r"nul\.nnp:network\.nntxt: not a text file \(a NUL byte at offset \d+\)")


# ------------------------------------------------------------------------------ memory, measured
HOSTILE_RUN = textwrap.dedent('''
    import os, sys, zipfile
    import numpy as np
    import nnabla_jit as nn
    from nnabla_jit.utils.load import load

    def peak_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) >> 10

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) >> 10

    def attempt(call, path):
        open("/proc/self/clear_refs", "w").write("5")   # the peak starts from here
        before = rss_mb()
        try:
            call(path)
            outcome = "loaded"
        except Exception as e:
            outcome = type(e).__name__
        print(os.path.basename(path), outcome, peak_mb() - before, flush=True)

    for path in sys.argv[1:]:
        attempt(nn.load_parameters if path.endswith(".h5") else load, path)
''')


def _peaks(paths, tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", HOSTILE_RUN] + [str(p) for p in paths], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {line.split()[0]: (line.split()[1], int(line.split()[2]))
            for line in done.stdout.splitlines() if len(line.split()) == 3}


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
def test_hostile_files_are_refused_within_bounded_memory(tmp_path):
    """Each refusal costs at most a few tens of MB (generous: the allocator's noise); before,
    the repeat grew past gigabytes, the sparse file took 4 GB and the unwritten dataset
    raised MemoryError."""
    repeat = _write(tmp_path / "repeat.nntxt", REPEAT.replace("times: 3", "times: 100000000"))
    sparse = _sparse(tmp_path / "sparse.nntxt", 4 << 30)
    nul = _sparse(tmp_path / "nul.nntxt", 1 << 30, b'network { name: "x" }\n')
    huge = str(tmp_path / "huge.h5")
    with h5py.File(huge, "w") as f:
        f.create_dataset("w", shape=(2 ** 34,), dtype="f4", chunks=(1 << 16,)).attrs["need_grad"] = True
    peaks = _peaks([repeat, sparse, nul, huge], tmp_path)
    for path in (repeat, sparse, nul, huge):
        outcome, peak = peaks[os.path.basename(path)]
        assert outcome == "FileFormatError", (path, outcome)
        assert peak < 64, (path, peak)


LOAD_SAVE = textwrap.dedent('''
    import os, sys
    import numpy as np
    import nnabla_jit as nn

    def peak_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) >> 10

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) >> 10

    path, mb = sys.argv[1], int(sys.argv[2])
    rng = np.random.RandomState(0)
    for k in range(8):
        nn.parameter.set_parameter("layer{}/W".format(k), nn.Variable.from_numpy_array(
            rng.rand(mb << 15).astype(np.float32)))            # mb / 8 MB each
    open("/proc/self/clear_refs", "w").write("5")
    before = rss_mb()
    nn.save_parameters(path)
    print("save", peak_mb() - before)
    nn.clear_parameters()
    import gc; gc.collect()
    open("/proc/self/clear_refs", "w").write("5")
    before = rss_mb()
    nn.load_parameters(path)
    print("load", peak_mb() - before, rss_mb() - before)
''')


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
def test_parameter_files_are_loaded_and_saved_without_a_second_copy(tmp_path):
    """Measured on a 64 MB file: load's peak above the parameters it makes, save's peak above
    the parameters it writes. Before: the file's bytes and then every array were held as well
    (load 2.25x the file, save 2x the parameters); the bounds are generous for the allocator."""
    mb = 64
    path = str(tmp_path / "params.h5")
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", LOAD_SAVE, path, str(mb)], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in done.stdout.splitlines()}
    save_peak, = figures["save"]
    load_peak, load_kept = figures["load"]
    assert save_peak < 0.5 * mb, figures
    assert load_peak < 1.5 * mb, figures
