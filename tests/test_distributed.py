"""Data-parallel training over MPI with two processes (mpirun -np 2): the collectives, a
training run that matches one process on the whole batch, and the distributed digits example.
Skipped when MPI (mpi4py and an mpirun) is not installed: pip install 'nnabla_jit[mpi]'."""
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nnabla_jit.communicators import threads_per_rank

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpirun(n):
    """The command line starting ``n`` processes, or a skip when MPI is missing."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("MPI is not installed: pip install 'nnabla_jit[mpi]' (mpi4py and an MPI runtime)")
    here = [os.path.join(os.path.dirname(sys.executable), name) for name in ("mpirun", "mpiexec")]
    found = [path for path in here if os.access(path, os.X_OK)]
    launcher = found[0] if found else shutil.which("mpirun") or shutil.which("mpiexec")
    if launcher is None:
        pytest.skip("mpi4py is installed but no mpirun / mpiexec was found")
    version = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=60)
    # Open MPI refuses to run as root, and more processes than cores, unless told to.
    flags = ["--allow-run-as-root", "--oversubscribe"] if "Open MPI" in version.stdout else []
    return [launcher] + flags + ["-np", str(n)]


def run(command, timeout):
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, "exit code {}\n{}\n{}".format(
        result.returncode, result.stdout, result.stderr)
    return result.stdout


WORKER = textwrap.dedent('''
    import sys
    import numpy as np
    import nnabla_jit as nn
    import nnabla_jit.communicators as C
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    import nnabla_jit.solvers as S
    from nnabla_jit.ext_utils import get_extension_context

    comm = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    comm.init()
    r, n = comm.rank, comm.size
    nd = lambda v, dtype=np.float32: nn.NdArray.from_numpy_array(np.asarray(v, dtype))
    import numba
    out = {"size": n, "local_rank": comm.local_rank, "threads": numba.get_num_threads()}

    a, b = nd(np.full((2, 3), r + 1.0)), nd([10.0 * (r + 1)] * 4, np.float16)
    comm.all_reduce([a, b])
    out["sum"], out["sum16"], out["sum16_dtype"] = a.data, b.data, str(b.dtype)
    c = nd([r + 1.0] * 3)
    comm.all_reduce(c, division=True, inplace=True)
    out["mean"] = c.data
    d = nd(np.arange(4) * (r + 1), np.int64)
    comm.bcast(d, src=1)
    out["bcast"] = d.data
    e = nd([r + 1.0, 2.0 * (r + 1)])
    comm.reduce(e, dst=1)
    out["reduce"] = e.data
    gathered = [nn.NdArray((2,)) for _ in range(n)]
    comm.all_gather(nd([r, 10 * r]), gathered)
    out["gather"] = np.stack([g.data for g in gathered])
    scattered = nn.NdArray((2,))
    comm.reduce_scatter([nd([10.0 * k + r] * 2) for k in range(n)], scattered, division=True)
    out["scatter"] = scattered.data
    comm.new_group(("first", [0]))
    f = nd([r + 5.0])
    if r == 0:
        comm.all_reduce(f, group="first")
    out["group"] = f.data
    comm.barrier()

    # Training: each process takes half of the batch; the averaged gradients are the whole
    # batch's, so the parameters follow one process training on all of it ("ref").
    rng = np.random.RandomState(0)
    X = rng.randn(8, 5).astype(np.float32)
    T = rng.randint(0, 3, (8, 1)).astype(np.int32)

    def net(x, t, scope):
        with nn.parameter_scope(scope):
            h = F.tanh(PF.affine(x, 6, name="l1"))
            return F.mean(F.softmax_cross_entropy(PF.affine(h, 3, name="l2"), t))

    mine = slice(4 * r, 4 * r + 4)
    loss = net(nn.Variable.from_numpy_array(X[mine]), nn.Variable.from_numpy_array(T[mine]), "dist")
    ref = net(nn.Variable.from_numpy_array(X), nn.Variable.from_numpy_array(T), "ref")
    with nn.parameter_scope("dist"):
        params = nn.get_parameters()
    with nn.parameter_scope("ref"):
        ref_params = nn.get_parameters()
    init = np.random.RandomState(1 + r)   # different on each process: bcast makes them agree
    for p in params.values():
        p.d = init.randn(*p.shape)
    comm.bcast([p.data for p in params.values()], src=0)
    for p, q in zip(params.values(), ref_params.values()):
        q.d = p.d
    solver, ref_solver = S.Momentum(0.5), S.Momentum(0.5)
    solver.set_parameters(params)
    ref_solver.set_parameters(ref_params)
    callback = comm.all_reduce_callback([p.grad for p in params.values()], 16, division=True)
    for step in range(4):
        for l, s, cb in ((loss, solver, callback), (ref, ref_solver, None)):
            l.forward(clear_no_need_grad=True)
            s.zero_grad()
            l.backward(clear_buffer=True, communicator_callbacks=cb)
            s.update()
    out["params"] = np.concatenate([p.d.ravel() for p in params.values()])
    out["ref_params"] = np.concatenate([p.d.ravel() for p in ref_params.values()])
    np.savez(sys.argv[1] + "/rank{}.npz".format(r), **out)
''')


def test_two_processes(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run(mpirun(2) + [sys.executable, str(script), str(tmp_path)], timeout=300)
    ranks = [dict(np.load(tmp_path / "rank{}.npz".format(r))) for r in range(2)]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    expected_threads = threads_per_rank(2, cores, os.cpu_count())
    for r, out in enumerate(ranks):
        assert out["size"] == 2 and out["local_rank"] == r   # both on this machine
        assert out["threads"] == expected_threads              # the cores are shared
        np.testing.assert_array_equal(out["sum"], np.full((2, 3), 3.0))
        np.testing.assert_array_equal(out["sum16"], [30.0] * 4)
        assert out["sum16_dtype"] == "float16"
        np.testing.assert_array_equal(out["mean"], [1.5] * 3)
        np.testing.assert_array_equal(out["bcast"], [0, 2, 4, 6])
        np.testing.assert_array_equal(out["gather"], [[0, 0], [1, 10]])
        # rank r receives the mean over processes of their r-th arrays: 10 r + (0 + 1) / 2
        np.testing.assert_array_equal(out["scatter"], [10.0 * r + 0.5] * 2)
        np.testing.assert_allclose(out["params"], out["ref_params"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ranks[1]["reduce"], [3.0, 6.0])
    np.testing.assert_array_equal(ranks[0]["reduce"], [1.0, 2.0])   # not the destination
    np.testing.assert_array_equal(ranks[0]["group"], [5.0])          # a group of one
    np.testing.assert_array_equal(ranks[1]["group"], [6.0])          # not in the group
    np.testing.assert_array_equal(ranks[0]["params"], ranks[1]["params"])


SYNC_BN = textwrap.dedent('''
    import sys
    import numpy as np
    import nnabla_jit as nn
    import nnabla_jit.communicators as C
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    from nnabla_jit.ext_utils import get_extension_context

    comm = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    comm.init()
    r, n = comm.rank, comm.size
    rng = np.random.RandomState(0)
    X = (rng.randn(8, 3, 2, 2) * np.array([1.0, 3.0, 0.5])[None, :, None, None] + 2.0).astype(np.float64)
    W = rng.randn(*X.shape)                # weights of the loss sum(W * y)
    A, B = rng.randn(1, 3, 1, 1), rng.randn(1, 3, 1, 1)   # ... + sum(A * mean) + sum(B * var)
    beta0, gamma0 = rng.randn(1, 3, 1, 1), rng.rand(1, 3, 1, 1) + 0.5
    out = {}

    def run(x_np, w_np, comm_or_none, tag):
        x = nn.Variable.from_numpy_array(x_np, need_grad=True)
        beta = nn.Variable.from_numpy_array(beta0, need_grad=True)
        gamma = nn.Variable.from_numpy_array(gamma0, need_grad=True)
        rmean = nn.Variable.from_numpy_array(np.full((1, 3, 1, 1), 0.5))
        rvar = nn.Variable.from_numpy_array(np.full((1, 3, 1, 1), 2.0))
        if comm_or_none is None:
            y, m, v = F.batch_normalization(x, beta, gamma, rmean, rvar, output_stat=True)
        else:
            y, m, v = F.sync_batch_normalization(x, beta, gamma, rmean, rvar, comm_or_none,
                                                 output_stat=True)
        const = nn.Variable.from_numpy_array
        loss = F.sum(y * const(w_np)) + F.sum(m * const(A)) + F.sum(v * const(B))
        loss.forward()
        loss.backward()
        for name, value in (("y", y.d), ("mean", m.d), ("var", v.d), ("dx", x.g), ("dbeta", beta.g),
                            ("dgamma", gamma.g), ("rmean", rmean.d), ("rvar", rvar.d)):
            out[tag + name] = np.array(value)
        # nn.grad: the gradient as a graph (differentiable again: a second order too)
        gx = nn.grad([loss], [x])[0]
        g2 = nn.grad([F.sum(gx ** 2)], [x])[0]
        F.sink(gx, g2).forward()
        out[tag + "grad_dx"], out[tag + "grad2_dx"] = np.array(gx.d), np.array(g2.d)

    mine = slice(4 * r, 4 * r + 4)
    # The loss of every process weighs the shared statistics with A and B: together they are
    # n times the one-process loss's, so the one-process reference weighs them n times.
    run(X[mine], W[mine], comm, "sync_")
    A, B = A * n, B * n
    run(X, W, None, "ref_")
    # the layer's own parameters, over both processes at once
    h = PF.sync_batch_normalization(nn.Variable.from_numpy_array(X[mine]), comm, name="bn")
    h.forward()
    out["pf_y"] = h.d
    np.savez(sys.argv[1] + "/rank{}.npz".format(r), **out)
''')


def test_sync_batch_normalization_over_two_processes_is_one_process_on_the_whole_batch(tmp_path):
    script = tmp_path / "sync_bn.py"
    script.write_text(SYNC_BN)
    run(mpirun(2) + [sys.executable, str(script), str(tmp_path)], timeout=300)
    ranks = [dict(np.load(tmp_path / "rank{}.npz".format(r))) for r in range(2)]
    tol = dict(rtol=1e-9, atol=1e-10)
    for r, out in enumerate(ranks):
        mine = slice(4 * r, 4 * r + 4)
        np.testing.assert_allclose(out["sync_y"], out["ref_y"][mine], **tol)
        np.testing.assert_allclose(out["sync_dx"], out["ref_dx"][mine], **tol)
        for name in ("mean", "var", "rmean", "rvar"):       # the whole batch's statistics
            np.testing.assert_allclose(out["sync_" + name], out["ref_" + name], **tol)
        # nn.grad's graphs compute in float32
        np.testing.assert_allclose(out["sync_grad_dx"], out["ref_dx"][mine], rtol=1e-5, atol=1e-6)
        # the second order of the sum over processes of sum(dx ** 2): one process's whole batch
        np.testing.assert_allclose(out["sync_grad2_dx"], out["ref_grad2_dx"][mine], rtol=1e-4, atol=1e-5)
    # beta's and gamma's gradients are each process's own: their sum is the whole batch's
    for name in ("dbeta", "dgamma"):
        np.testing.assert_allclose(ranks[0]["sync_" + name] + ranks[1]["sync_" + name],
                                   ranks[0]["ref_" + name], rtol=1e-5, atol=1e-6)   # float32 grads
        assert not np.allclose(ranks[0]["sync_" + name], ranks[0]["ref_" + name])
    # PF: gamma 1, beta 0 normalizes each channel over both halves: mean 0 and variance 1 overall
    both = np.concatenate([ranks[0]["pf_y"], ranks[1]["pf_y"]])
    np.testing.assert_allclose(both.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(both.var(axis=(0, 2, 3)), 1, rtol=1e-3)
    assert not np.allclose(ranks[0]["pf_y"].mean(axis=(0, 2, 3)), 0, atol=1e-2)


def test_threads_per_rank_divides_the_machine_among_its_ranks():
    assert threads_per_rank(1, 8, 8) == 8
    assert threads_per_rank(2, 8, 8) == 4
    assert threads_per_rank(3, 8, 8) == 2
    assert threads_per_rank(4, 2, 2) == 1      # more ranks than cores: one thread each
    assert threads_per_rank(2, 3, 16) == 3     # bound by the launcher to 3 cores: its share


THREADS = textwrap.dedent('''
    import sys
    import numba
    if sys.argv[1] == "set":
        numba.set_num_threads(1)
    import nnabla_jit.communicators as C
    from nnabla_jit.ext_utils import get_extension_context
    comm = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    comm.init()
    print("rank", comm.rank, "threads", numba.get_num_threads())
''')


def test_the_users_thread_settings_win_over_the_share(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(THREADS)
    env = dict(os.environ, NUMBA_NUM_THREADS="3")
    result = subprocess.run(mpirun(2) + [sys.executable, str(script), "env"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr
    assert sorted(re.findall(r"threads (\d+)", result.stdout)) == ["3", "3"]
    if os.cpu_count() > 2:   # with 2 cores the share is 1 anyway
        env.pop("NUMBA_NUM_THREADS")
        result = subprocess.run(mpirun(2) + [sys.executable, str(script), "set"], capture_output=True,
                                text=True, timeout=120, cwd=ROOT, env=env)
        assert result.returncode == 0, result.stderr
        assert sorted(re.findall(r"threads (\d+)", result.stdout)) == ["1", "1"]


@pytest.mark.slow
def test_distributed_digits_example_reaches_the_single_process_accuracy(tmp_path):
    out = run(mpirun(2) + [sys.executable, os.path.join(ROOT, "examples", "distributed", "train.py"),
                           "--epochs", "4", "--out", str(tmp_path / "params.h5"),
                           "--monitor-path", str(tmp_path / "monitor")], timeout=600)
    assert "on 2 process(es)" in out
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out).group(1))
    assert accuracy >= 0.95
    assert (tmp_path / "params.h5").exists()
    lines = (tmp_path / "monitor" / "Training-loss.series.txt").read_text().split()
    assert len(lines) >= 2 and float(lines[-1]) < float(lines[1])   # the loss went down
