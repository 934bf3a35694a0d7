"""An MPI job whose rank fails ends promptly with that rank's error, instead of the other ranks
waiting for it in a collective forever (issue 22, item 5). Run with ``mpirun -np 2`` (the MPI
extra; skipped without it); a job that hangs fails by its timeout."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.test_distributed import ROOT, mpirun

HANG = 120   # seconds after which a job counts as hung: every one here ends in a few


def run_job(command, cwd):
    """(exit status, output) of an MPI job; a hung job is killed, its ranks too (its own process
    group), and fails the test."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           cwd=cwd, env=dict(os.environ, PYTHONPATH=ROOT), start_new_session=True)
    try:
        output, _ = job.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        output, _ = job.communicate()
        pytest.fail("the job hung: still running after {} s\n{}".format(HANG, output))
    return job.returncode, output


API_WORKER = textwrap.dedent('''
    import numpy as np
    import nnabla_jit as nn
    import nnabla_jit.communicators as C
    from nnabla_jit.ext_utils import get_extension_context

    comm = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    comm.init()
    a = nn.NdArray.from_numpy_array(np.ones(3, np.float32))
    comm.all_reduce(a)
    if comm.rank == 1:
        raise RuntimeError("rank 1 failed between two collectives")
    comm.all_reduce(a)        # rank 0 waits here for a rank that is gone
    print("rank 0 finished")
''')


def test_api_user_whose_rank_raises(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(API_WORKER)
    status, output = run_job(mpirun(2) + [sys.executable, str(script)], str(tmp_path))
    assert status != 0
    assert "RuntimeError: rank 1 failed between two collectives" in output
    assert "rank 0 finished" not in output


CLI_WORKER = textwrap.dedent('''
    import os
    import sys
    from nnabla_jit.utils.cli import main

    rank = int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
    config, failure = sys.argv[1], sys.argv[2]
    if rank == 1 and failure == "missing config":
        config = "missing.nnp"
    if rank == 1 and failure == "bug":
        from nnabla_jit.utils.cli import train

        def broken(*args, **kwargs):
            raise RuntimeError("a bug on rank 1")
        train._Trainer.run = broken
    sys.exit(main(["-m", "train", "-c", config, "-o", "out{}".format(rank)]))
''')


@pytest.mark.parametrize("failure, words", [
    ("missing config", "nnabla_jit train: error: missing.nnp: no such file"),
    ("bug", "RuntimeError: a bug on rank 1"),
])
def test_cli_train_whose_rank_fails(failure, words, tmp_path):
    """Rank 0 trains and waits in its first all_reduce; rank 1 fails: a user's mistake (one
    line) or a bug (its traceback). nnabla's CLI kills itself there too."""
    for name in ("train_mlp.nnp", "train_data.csv"):
        shutil.copy(os.path.join(ROOT, "tests", "fixtures", name), str(tmp_path / name))
    (tmp_path / "worker.py").write_text(CLI_WORKER)
    status, output = run_job(mpirun(2) + [sys.executable, "worker.py", "train_mlp.nnp", failure],
                             str(tmp_path))
    assert status != 0
    assert words in output
    assert "Training Completed" not in output
