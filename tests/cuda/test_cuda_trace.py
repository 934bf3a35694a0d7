"""A traced training step under a CUDA context: the ops ran on the device, the host<->device
copies that device.stats() counts are slices, and everything nests (tests/test_trace.py checks
the CPU side)."""
import numpy as np

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
from nnabla_jit.cuda_ops import device
from nnabla_jit.utils.profiler import trace

from ..test_trace import check_chrome_trace, check_nested, ran, slices
from .compare import cuda_context


def test_a_traced_device_step_shows_device_ops_and_each_copy():
    rng = np.random.RandomState(0)
    with nn.context_scope(cuda_context()):
        x = nn.Variable.from_numpy_array(rng.randn(2, 3).astype(np.float32))
        t = nn.Variable.from_numpy_array(rng.randint(0, 2, (2, 1)).astype(np.int32))
        loss = F.mean(F.softmax_cross_entropy(PF.affine(F.tanh(PF.affine(x, 4, name="fc1")), 2,
                                                        name="fc2"), t))
    solver = S.Sgd(0.1)
    solver.set_parameters(nn.get_parameters())
    device.reset_stats()
    with trace(synchronize=True) as tr:
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True)
        solver.update()
        value = float(loss.d)   # one copy down
    copies = device.stats()
    events = check_chrome_trace(tr.chrome_trace())
    check_nested(events)
    assert np.isfinite(value)
    ops = [f.info.type_name for f in _functions(loss)]
    assert ran(events, "forward") == ops
    assert all(e["args"]["device"] == "cuda" for e in slices(events, "op"))
    copied = slices(events, "copy")
    up = [e for e in copied if e["name"] == "copy host_to_device"]
    down = [e for e in copied if e["name"] == "copy device_to_host"]
    assert len(up) == copies["host_to_device"] > 0
    assert len(down) == copies["device_to_host"] >= 1
    assert sum(e["args"]["bytes"] for e in up) == copies["host_to_device_bytes"]
    # the first step copies the input and the parameters up inside the ops that read them
    first = [e for e in slices(events, "op") if e["args"]["phase"] == "forward"][0]
    assert any(first["ts"] <= c["ts"] <= first["ts"] + first["dur"] for c in up)
    update = [e for e in slices(events, "solver") if e["name"] in nn.get_parameters()]
    assert sorted(e["name"] for e in update) == sorted(nn.get_parameters())


def _functions(loss):
    found = []
    loss.visit(found.append)
    return found
