"""The tests here run graphs under a CUDA context: in numba's CUDA simulator (tests/test_cuda.py
starts them so, in a subprocess with NUMBA_ENABLE_CUDASIM=1) or on a GPU. The simulator must be
chosen before numba is imported, so the rest of the suite, which runs on the real CPU path,
cannot host them; in such a process they are skipped."""
import pytest


def _cuda_usable():
    from numba import config
    if config.ENABLE_CUDASIM:
        return True
    try:
        from numba import cuda
    except ImportError:
        return False
    return cuda.is_available()


_USABLE = _cuda_usable()


@pytest.fixture(autouse=True)
def needs_cuda():
    if not _USABLE:
        pytest.skip("needs numba.cuda: a GPU, or NUMBA_ENABLE_CUDASIM=1 (tests/test_cuda.py runs "
                    "these under the simulator)")
