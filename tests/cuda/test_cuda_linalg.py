"""The batched small-matrix ops and the diagonal / triangle moves on the device against the
CPU (numpy.linalg there)."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

from .compare import assert_same_on_cuda, cuda_context

rng = np.random.RandomState(0)


def well_conditioned(batch, n):
    """Matrices near the identity, one needing row swaps (a zero leading entry)."""
    x = (np.eye(n) * 2 + rng.uniform(-0.5, 0.5, (batch, n, n))).astype(np.float32)
    x[0, 0, 0] = 0.0
    return x


def positive_definite(batch, n):
    a = rng.uniform(-1, 1, (batch, n, n))
    return (a @ a.transpose(0, 2, 1) + n * np.eye(n)).astype(np.float32)


def signed(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


CASES = [
    ("inverse", F.batch_inv, well_conditioned(2, 3)),
    ("determinant", F.batch_det, well_conditioned(3, 3)),
    ("log-determinant of a negative determinant", F.batch_logdet, well_conditioned(2, 3) * -1),
    ("cholesky lower", F.batch_cholesky, positive_definite(2, 3)),
    ("cholesky upper", lambda x: F.batch_cholesky(x, upper=True), positive_definite(2, 3)),
    ("matrix diag", F.matrix_diag, signed(2, 3)),
    ("matrix diag part", F.matrix_diag_part, signed(2, 3, 3)),
    ("trilu upper k=1", lambda x: F.trilu(x, k=1), signed(2, 3, 4)),
    ("trilu lower k=-1", lambda x: F.trilu(x, k=-1, upper=False), signed(3, 4)),
    ("gradients accumulate",
     lambda x: F.batch_inv(x) * 2.0 + F.matrix_diag(F.matrix_diag_part(x)) + F.trilu(x)
     + F.reshape(F.batch_det(x), (2, 1, 1)) + F.eye_like(x[0]),
     well_conditioned(2, 3)),
]


@pytest.mark.parametrize("name, build, x", CASES, ids=[c[0] for c in CASES])
def test_linalg(name, build, x):
    assert_same_on_cuda(build, x, rtol=1e-4, atol=1e-5)


def test_no_gradient_asked():
    assert_same_on_cuda(lambda x, w: F.batch_inv(x) * w, well_conditioned(2, 3), signed(2, 3, 3),
                        no_grad=(0,), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("build, x, message", [
    (F.batch_inv, np.zeros((2, 2, 2), np.float32), "BatchInv: Singular matrix"),
    (F.batch_cholesky, -np.ones((1, 2, 2), np.float32), "BatchCholesky: Matrix is not positive"),
])
def test_failures_are_the_cpus(build, x, message):
    with nn.context_scope(cuda_context()):
        y = build(nn.Variable.from_numpy_array(x))
    with pytest.raises(Exception, match=message):
        y.forward()


def test_singular_determinants():
    x = np.zeros((2, 2, 2), np.float32)
    x[1] = np.eye(2)
    with nn.context_scope(cuda_context()):
        v = nn.Variable.from_numpy_array(x)
        det, logdet = F.batch_det(v), F.batch_logdet(v)
    F.sink(det, logdet).forward()
    np.testing.assert_array_equal(det.d, [0, 1])
    np.testing.assert_array_equal(logdet.d, [-np.inf, 0])
