"""Long runs: a save killed with kill -9 loses nothing, and a 2000-step training loop does not
grow the process (issue 9, item 5)."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S

# Saves 8 parameters of 2M float32 each (64 MiB), every value of save k equal to k, and prints
# k once the save is complete.
SAVER = r"""
import sys
import numpy as np
import nnabla_jit as nn
params = {"layer%d/W" % i: nn.Variable.from_numpy_array(np.zeros(2_000_000, np.float32))
          for i in range(8)}
k = 0
while True:
    for v in params.values():
        v.d = k
    nn.save_parameters(sys.argv[1], params)
    print(k, flush=True)
    k += 1
"""


def temporaries(directory):
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs kill -9")
def test_kill_9_mid_save_keeps_the_old_file_and_the_next_save_cleans_up(tmp_path):
    target = str(tmp_path / "params.h5")
    child = subprocess.Popen([sys.executable, "-c", SAVER, target], stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ))
    try:
        assert child.stdout.readline().strip() == "0", "the first save did not complete"
        deadline = time.time() + 120
        while not temporaries(str(tmp_path)):       # wait until a save is under way
            assert time.time() < deadline and child.poll() is None, "no save seen in progress"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    completed = [int(line) for line in child.stdout.read().split()]
    child.stdout.close()
    assert temporaries(str(tmp_path)), "the killed save left no temporary file to clean up"

    nn.load_parameters(target)       # the old file is intact: one complete save, every value k
    params = nn.get_parameters(grad_only=False)
    assert sorted(params) == ["layer{}/W".format(i) for i in range(8)]
    values = {float(v) for p in params.values() for v in np.unique(p.d)}
    assert len(values) == 1 and values.pop() in range(0, max(completed, default=0) + 2)

    nn.clear_parameters()
    nn.save_parameters(target, {"w": nn.Variable.from_numpy_array(np.ones(3, np.float32))})
    assert temporaries(str(tmp_path)) == []
    nn.load_parameters(target)
    np.testing.assert_array_equal(nn.get_parameters(grad_only=False)["w"].d, [1, 1, 1])


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
def test_rss_stays_flat_over_2000_training_steps():
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(32, 16).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 4, (32, 1)))
    h = F.relu(PF.affine(x, 64, name="fc1"))
    loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 4, name="fc2"), t))
    solver = S.Adam(1e-3)
    solver.set_parameters(nn.get_parameters())
    marks = {}
    for step in range(2000):
        x.d = rng.randn(32, 16)
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
        if step in (499, 1999):
            marks[step] = rss_mib()
    # a leak of 1.4 KB a step (one small array, one graph node with its buffers) shows here
    assert marks[1999] - marks[499] < 2.0, marks

    marks = {}
    for step in range(1000):     # a graph built anew every step (dynamic mode)
        with nn.auto_forward():
            y = F.mean(F.tanh(PF.affine(x, 8, name="dynamic")))
        y.backward()
        if step in (199, 999):
            marks[step] = rss_mib()
    assert marks[999] - marks[199] < 2.0, marks
