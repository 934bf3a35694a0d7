"""nnabla_jit.communicators in one process: the size-1 communicator a script gets without an MPI
launcher, argument checks, and the all-reduce callback inside backward. (Two processes over MPI:
tests/test_distributed.py.)"""
import sys

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.communicators as C
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit.ext_utils import get_extension_context


@pytest.fixture
def comm(monkeypatch):
    for name in C._LAUNCHER_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    c = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    c.init()
    return c


def nd(values, dtype=np.float32):
    return nn.NdArray.from_numpy_array(np.asarray(values, dtype))


def test_names_and_single_process_ranks(comm):
    assert C.MultiProcessCommunicator is C.MultiProcessDataParallelCommunicator
    assert C.Comm is C.Dist is C.MultiProcessDataParalellCommunicator is C.MultiProcessCommunicator
    assert isinstance(comm, C.Communicator)
    assert (comm.size, comm.rank, comm.local_rank) == (1, 0, 0)
    assert comm.name == "MultiProcessDataParallelCommunicator"
    assert comm.list_groups() == {"world": [0]}
    assert comm.find_group("world") == [0] and comm.find_group("none") == []


def test_collectives_need_init():
    c = C.MultiProcessCommunicator(get_extension_context("cpu"))
    with pytest.raises(RuntimeError, match="init"):
        c.size
    with pytest.raises(RuntimeError, match="init"):
        c.all_reduce(nd([1.0]))
    with pytest.raises(TypeError, match="Context"):
        C.MultiProcessCommunicator("cpu")


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("division", [False, True])
def test_single_process_all_reduce_keeps_values_and_types(comm, inplace, division):
    a, b = nd([[1.5, -2.0]]), nd([3.0, 4.0, 65504.0], np.float16)
    comm.all_reduce([a, b], division=division, inplace=inplace)
    np.testing.assert_array_equal(a.data, [[1.5, -2.0]])
    np.testing.assert_array_equal(b.data, [3.0, 4.0, 65504.0])
    assert a.dtype == np.float32 and b.dtype == np.float16
    comm.all_reduce(a)   # a single NdArray works as well as a list
    np.testing.assert_array_equal(a.data, [[1.5, -2.0]])


def test_single_process_bcast_reduce_gather_scatter(comm):
    a = nd([1, 2, 3], np.int64)
    comm.bcast(a, src=0)
    np.testing.assert_array_equal(a.data, [1, 2, 3])
    comm.reduce([a], dst=0, division=True)
    np.testing.assert_array_equal(a.data, [1, 2, 3])
    out = nn.NdArray((3,))
    comm.all_gather(nd([7, 8, 9]), [out])
    np.testing.assert_array_equal(out.data, [7, 8, 9])
    comm.reduce_scatter([nd([4, 5, 6])], out)
    np.testing.assert_array_equal(out.data, [4, 5, 6])
    comm.barrier()


def test_argument_errors_name_the_problem(comm):
    with pytest.raises(TypeError, match="all_reduce: item 1 of data is a ndarray"):
        comm.all_reduce([nd([1.0]), np.ones(2)])
    with pytest.raises(ValueError, match="no group named 'pairs'"):
        comm.all_reduce(nd([1.0]), group="pairs")
    with pytest.raises(ValueError, match="rank 3 is not in group 'world'"):
        comm.bcast(nd([1.0]), src=3)
    with pytest.raises(ValueError, match="1 NdArrays of shape \\(2,\\)"):
        comm.all_gather(nd([1.0, 2.0]), [nn.NdArray((2,)), nn.NdArray((2,))])
    with pytest.raises(ValueError, match="reduce_scatter: ndarray_list must hold 1 NdArrays of shape \\(3,\\)"):
        comm.reduce_scatter([nd([1.0, 2.0])], nn.NdArray((3,)))
    with pytest.raises(TypeError, match="all_gather: ndarray must be an NdArray, got ndarray"):
        comm.all_gather(np.ones(2), [nn.NdArray((2,))])
    with pytest.raises(TypeError, match="reduce_scatter: ndarray must be an NdArray, got list"):
        comm.reduce_scatter([nd([1.0])], [nd([1.0])])
    with pytest.raises(ValueError, match="distinct ranks in \\[0, 1\\)"):
        comm.new_group(("pair", [0, 1]))
    with pytest.raises(ValueError, match="pack_size must be positive"):
        comm.all_reduce_callback([nd([1.0])], 0)


def test_groups(comm):
    assert comm.new_group(("solo", [0])) == "solo"
    assert comm.new_group("alone", [0]) == "alone"
    assert comm.list_groups() == {"world": [0], "solo": [0], "alone": [0]}
    with pytest.raises(ValueError, match="exists already"):
        comm.new_group(("solo", [0]))
    a = nd([2.0])
    comm.all_reduce(a, division=True, group="solo")
    np.testing.assert_array_equal(a.data, [2.0])


def test_launched_by_mpi_without_mpi4py_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setitem(sys.modules, "mpi4py", None)   # import fails
    with pytest.raises(ImportError, match=r"2 processes.*nnabla_jit\[mpi\]"):
        C.MultiProcessCommunicator(get_extension_context("cpu")).init()


def test_deprecated_allreduce_reduces_registered_parameters(comm):
    with nn.parameter_scope("net"):
        PF.affine(nn.Variable((2, 3)), 4)
    params = nn.get_parameters()
    for p in params.values():
        p.g = 1.5
    comm.add_context_and_parameters((get_extension_context("cpu"), params))
    comm.allreduce(division=True)
    assert all(np.all(p.g == 1.5) for p in params.values())
    comm.clear_context_parameters()
    with pytest.raises(TypeError, match="tuple \\(Context, dict"):
        comm.add_context_and_parameters(params)


def _mlp_loss(seed):
    rng = np.random.RandomState(seed)
    x = nn.Variable.from_numpy_array(rng.randn(6, 5).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 3, (6, 1)).astype(np.int32))
    h = F.tanh(PF.affine(x, 7, name="l1"))
    return F.mean(F.softmax_cross_entropy(PF.affine(h, 3, name="l2"), t))


@pytest.mark.parametrize("pack_size", [1, 10, 1 << 20])
def test_all_reduce_callback_in_backward_leaves_single_process_grads(comm, pack_size):
    loss = _mlp_loss(0)
    params = nn.get_parameters()
    loss.forward()
    for p in params.values():
        p.grad.zero()
    loss.backward()
    expected = {k: p.g.copy() for k, p in params.items()}
    callback = comm.all_reduce_callback([p.grad for p in params.values()], pack_size,
                                        division=True, scale_grad=0.5)
    for _ in range(2):   # one callback serves any number of backward passes
        loss.forward(clear_no_need_grad=True)
        for p in params.values():
            p.grad.zero()
        loss.backward(clear_buffer=True, communicator_callbacks=callback)
        for k, p in params.items():
            np.testing.assert_allclose(p.g, 0.5 * expected[k], rtol=1e-6)


def test_all_reduce_callback_under_half_widens_unless_keep_dtype(comm):
    nn.set_default_context(get_extension_context("cpu", type_config="half"))
    loss = _mlp_loss(1)
    params = nn.get_parameters()
    for keep_dtype, dtype in [(True, np.float16), (False, np.float32)]:
        loss.forward()
        for p in params.values():
            p.grad.zero()
        callback = comm.all_reduce_callback([p.grad for p in params.values()], 64, keep_dtype=keep_dtype)
        loss.backward(communicator_callbacks=[callback])
        assert all(p.grad.dtype == dtype for p in params.values())


def test_all_reduce_callback_rejects_shared_parameters(comm):
    x = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32))
    h = PF.affine(x, 3, name="shared")
    y = F.sum(PF.affine(h, 3, name="shared"))    # the same weights used twice
    params = nn.get_parameters()
    y.forward()
    callback = comm.all_reduce_callback([p.grad for p in params.values()], 1)
    with pytest.raises(RuntimeError, match="shared by several functions"):
        y.backward(communicator_callbacks=callback)


def test_all_reduce_callback_accepts_an_input_used_twice_by_one_function(comm):
    w = nn.Variable.from_numpy_array(np.array([1.0, -2.0], np.float32), need_grad=True)
    y = F.sum(w * w)
    y.forward()
    w.grad.zero()
    y.backward(communicator_callbacks=comm.all_reduce_callback([w.grad], 1))
    np.testing.assert_allclose(w.g, [2.0, -4.0])


def test_data_parallel_communicator_over_cpu_devices_trains_like_one_copy_on_the_whole_batch():
    import nnabla_jit.solvers as S
    rng = np.random.RandomState(0)
    X = rng.randn(8, 5).astype(np.float32)
    T = rng.randint(0, 3, (8, 1)).astype(np.int32)

    def net(x, t, scope):
        with nn.parameter_scope(scope):
            return F.mean(F.softmax_cross_entropy(PF.affine(F.tanh(PF.affine(x, 4, name="l1")), 3,
                                                            name="l2"), t))

    var = nn.Variable.from_numpy_array
    ctxs = [get_extension_context("cpu", device_id=str(i)) for i in range(2)]
    losses = [net(var(X[4 * i:4 * i + 4]), var(T[4 * i:4 * i + 4]), "device{}".format(i)) for i in range(2)]
    ref = net(var(X), var(T), "ref")
    comm = C.DataParallelCommunicator(ctxs[0])
    with pytest.raises(RuntimeError, match="add_context_and_parameters"):
        comm.init()
    copies = []
    for i, ctx in enumerate(ctxs):
        with nn.parameter_scope("device{}".format(i)):
            copies.append(nn.get_parameters())
            comm.add_context_and_parameters((ctx, copies[-1]))
    comm.init()
    assert (comm.size, comm.rank) == (2, 0)
    with nn.parameter_scope("ref"):
        ref_params = nn.get_parameters()
    for a, b, r in zip(copies[0].values(), copies[1].values(), ref_params.values()):
        comm.bcast([a.data, b.data], src=1)      # one starting point: device 1's
        r.d = b.d
    solvers = [S.Sgd(0.5) for _ in range(3)]
    for s, p in zip(solvers, copies + [ref_params]):
        s.set_parameters(p)
    for step in range(3):
        for loss, s in zip(losses + [ref], solvers):
            loss.forward()
            s.zero_grad()
            loss.backward()
        comm.allreduce(division=True)          # the mean of the halves' gradients
        for s in solvers:
            s.update()
    for a, b, r in zip(copies[0].values(), copies[1].values(), ref_params.values()):
        np.testing.assert_array_equal(a.d, b.d)
        np.testing.assert_allclose(a.d, r.d, rtol=1e-5, atol=1e-6)
    # the collectives on one array per device
    arrays = [nd([1.0, 2.0]), nd([3.0, 4.0])]
    comm.all_reduce(arrays)
    assert [a.data.tolist() for a in arrays] == [[4.0, 6.0]] * 2
    arrays = [nd([1.0]), nd([3.0])]
    comm.reduce(arrays, dst=0, division=True)
    assert [a.data.tolist() for a in arrays] == [[2.0], [3.0]]
    with pytest.raises(ValueError, match="one NdArray per device"):
        comm.all_reduce([nd([1.0])])
    with pytest.raises(NotImplementedError, match="sync_batch_normalization"):
        F.sync_batch_normalization(nn.Variable((4, 2)), None, None, None, None, comm).forward()
