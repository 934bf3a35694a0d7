"""Shared test set-up: a clean parameter scope and default context per test, and the
hypothesis profile that keeps the suite inside CI's time budget."""
import os

# The suite compiles the kernels it meets in its own process, as numba does: a background compile
# worker per test process (and per Python process a test starts) would compete for CI's cores.
# tests/test_deferred_compile.py switches deferral on for its scenarios.
os.environ.setdefault("NNABLA_JIT_DEFER_PARALLEL", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from nnabla_jit.utils import progress  # noqa: E402

settings.register_profile("ci", max_examples=int(os.environ.get("NNABLA_JIT_HYPOTHESIS_EXAMPLES", "25")),
                          deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.register_profile("thorough", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("NNABLA_JIT_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def clean_state():
    """Every test starts with no parameters, the CPU float context and static graphs."""
    import nnabla_jit as nn
    from nnabla_jit.context import Context
    nn.clear_parameters()
    nn.set_default_context(Context())
    nn.set_auto_forward(False)
    np.random.seed(0)
    yield
    nn.clear_parameters()
    nn.set_auto_forward(False)
    nn.set_default_context(Context())
    # a CLI command's progress file (one per process in real use) is not the next test's
    progress.state_file_name = None
    progress.state_callback = None


@pytest.fixture
def fuse_from_first_run(monkeypatch):
    """Plans fuse from their first run (graph.FUSE_FROM_RUN): for tests of the fused kernels,
    whose graphs run once or twice."""
    from nnabla_jit import graph
    monkeypatch.setattr(graph, "FUSE_FROM_RUN", 1)
