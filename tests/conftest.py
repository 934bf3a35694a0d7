"""Shared test set-up: a clean parameter scope and default context per test, and the
hypothesis profile that keeps the suite inside CI's time budget."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

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
