"""Linear algebra ops against NumPy: MatrixDiag, MatrixDiagPart, Trilu, EyeLike, BatchDet,
BatchInv, BatchLogdet, BatchCholesky, Einsum; gradients to second order."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from tests.ops.test_indexing import check_clear_no_need_grad
from nnabla_jit.testing import check_backward, check_function, strategies as nst


def V(a, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(a), need_grad=need_grad)


# ------------------------------------------------------------------------------ diagonals
@given(nst.arrays(nst.shapes(1, 2, max_side=3)))
def test_matrix_diag(x):
    check_function(F.matrix_diag, [x], lambda a: a[..., :, None] * np.eye(a.shape[-1]))


@given(st.integers(0, 1), st.integers(1, 3), st.integers(0, 2 ** 31 - 1))
def test_matrix_diag_part(batch_dims, n, seed):
    x = np.random.RandomState(seed).randn(*((2,) * batch_dims + (n, n)))
    check_function(F.matrix_diag_part, [x], lambda a: np.diagonal(a, axis1=-2, axis2=-1))


@given(nst.arrays(nst.shapes(2, 3, max_side=3)), st.integers(-3, 3), st.booleans())
def test_trilu(x, k, upper):
    check_function(lambda v: F.trilu(v, k, upper), [x],
                   lambda a: np.triu(a, k) if upper else np.tril(a, k))


@pytest.mark.parametrize("shape, k", [((3, 4), 1), ((4, 3), -2), ((2, 2), 0), ((2, 3), 5)])
def test_eye_like(shape, k):
    x = np.random.RandomState(0).randn(*shape)
    # The output does not depend on x's values: the gradient is zero (as in nnabla).
    check_function(lambda v: F.eye_like(v, k), [x], lambda a: np.eye(*a.shape, k=k))


def test_diagonal_errors():
    with pytest.raises(ValueError, match="MatrixDiagPart: input must be .* square"):
        F.matrix_diag_part(nn.Variable((2, 3)))
    with pytest.raises(ValueError, match="MatrixDiag: input must have at least one dimension"):
        F.matrix_diag(nn.Variable(()))
    with pytest.raises(ValueError, match="Trilu: input must have at least 2 dimensions"):
        F.trilu(nn.Variable((3,)))
    with pytest.raises(ValueError, match="EyeLike: input must be a 2-D array"):
        F.eye_like(nn.Variable((2, 3, 3)))


# ------------------------------------------------------------------------------ LAPACK ops
@st.composite
def well_conditioned(draw, max_n=3):
    b, n = draw(st.integers(1, 2)), draw(st.integers(1, max_n))
    a = np.random.RandomState(draw(st.integers(0, 2 ** 31 - 1))).uniform(-1, 1, (b, n, n))
    sign = draw(st.sampled_from([1.0, -1.0]))
    return a + sign * 2 * n * np.eye(n)   # diagonally dominant: invertible, either sign of det


@given(well_conditioned())
def test_batch_det(x):
    check_function(F.batch_det, [x], np.linalg.det)


@given(well_conditioned())
def test_batch_inv(x):
    check_function(F.batch_inv, [x], np.linalg.inv)


@given(well_conditioned())
def test_batch_logdet(x):
    check_function(F.batch_logdet, [x], lambda a: np.linalg.slogdet(a)[1])


@given(well_conditioned(), st.booleans())
def test_batch_cholesky(a, upper):
    # Cholesky reads a symmetric positive definite matrix: build one from a, so the numerical
    # gradient sees the symmetric gradient nnabla defines.
    n = a.shape[-1]
    eye = V(np.eye(n))

    def spd(v):
        return F.batch_matmul(v, v, False, True) + eye * n

    def ref(v):
        lower = np.linalg.cholesky(v @ np.swapaxes(v, 1, 2) + n * np.eye(n))
        return np.swapaxes(lower, 1, 2) if upper else lower

    check_function(lambda v: F.batch_cholesky(spd(v), upper), [a], ref)


@pytest.mark.parametrize("upper, expected", [
    (False, [[0.13787784, 0.44848866], [0.44848866, 1.20604538]]),
    (True, [[0.20037784, 0.19848866], [0.19848866, 1.20604538]]),
])
def test_batch_cholesky_symmetric_gradient_matches_nnabla(upper, expected):
    x = V([[[4.0, 1.0], [1.0, 3.0]]], need_grad=True)
    y = F.batch_cholesky(x, upper)
    y.forward()
    x.g = 0
    y.backward(np.array([[[1.0, 2.0], [3.0, 4.0]]]))
    np.testing.assert_allclose(x.g[0], expected, rtol=1e-5)


def test_batch_cholesky_reads_the_lower_triangle():
    x = np.array([[[4.0, 100.0], [1.0, 3.0]]])
    y = F.batch_cholesky(V(x))
    y.forward()
    np.testing.assert_allclose(y.d[0], np.linalg.cholesky(np.tril(x[0]) + np.tril(x[0], -1).T), rtol=1e-6)


def test_lapack_errors():
    with pytest.raises(ValueError, match=r"BatchDet: input must be a batch of square matrices \(B, N, N\)"):
        F.batch_det(nn.Variable((3, 3)))
    with pytest.raises(ValueError, match="BatchInv: input must be a batch of square"):
        F.batch_inv(nn.Variable((2, 2, 3)))
    y = F.batch_inv(V(np.ones((1, 2, 2))))
    with pytest.raises(ValueError, match="BatchInv: Singular matrix"):
        y.forward()
    y = F.batch_cholesky(V(np.array([[[1.0, 2.0], [2.0, 1.0]]])))
    with pytest.raises(ValueError, match="BatchCholesky: .*not positive definite"):
        y.forward()


def test_det_and_logdet_of_singular_matrix():
    x = V(np.ones((1, 3, 3)))
    d, ld = F.batch_det(x), F.batch_logdet(x)
    d.forward()
    ld.forward()
    assert d.d[0] == 0 and ld.d[0] == -np.inf


# ------------------------------------------------------------------------------ einsum
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij,jk", [(2, 3), (3, 2)]),                  # implicit output
    ("ii->i", [(3, 3)]),                          # diagonal
    ("ii", [(3, 3)]),                             # trace
    ("ij->", [(2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 2), (2, 3), (3, 2)]),
    ("...j,jk->...k", [(2, 2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(1, 2, 3), (2, 3, 2)]),  # broadcast ellipsis dimension
    ("...ij->ij", [(2, 2, 3)]),                   # ellipsis summed away (numpy refuses it)
    ("iij->ji", [(2, 2, 3)]),
    ("Ab,bC -> AC", [(2, 3), (3, 2)]),            # capitals, spaces
]


@pytest.mark.parametrize("equation, shapes", EINSUM_CASES)
def test_einsum(equation, shapes):
    rng = np.random.RandomState(len(equation))
    xs = [rng.uniform(-1, 1, s) for s in shapes]
    reference = equation.replace(" ", "").replace("...ij->ij", "zij->ij")
    check_function(lambda *vs: F.einsum(*vs, equation=equation), xs,
                   lambda *a: np.einsum(reference, *a))


def test_einsum_one_operand_twice():
    x = np.random.RandomState(0).randn(2, 3)
    check_backward(lambda v: F.einsum(v, v, equation="ij,ij->"), [x])


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3), (2, 3)], "label 'j' has sizes 3 and 2"),
    ("ij,jk->ik", [(2, 3)], "2 input terms for 1 inputs"),
    ("ij->i", [(2, 3, 4)], "term 'ij' .* does not fit an input of shape"),
    ("ij->il", [(2, 3)], "must name distinct labels of the inputs"),
    ("ij->ii", [(2, 2)], "must name distinct labels"),
    ("i1->i", [(2, 3)], "labels must be letters"),
    ("...i,...i->...", [(2, 3), (3, 3)], "ellipsis dimensions .* cannot be broadcast"),
])
def test_einsum_errors(equation, shapes, message):
    with pytest.raises(ValueError, match="Einsum: .*" + message):
        F.einsum(*[nn.Variable(s) for s in shapes], equation=equation)


@pytest.mark.parametrize("fn, shape", [
    (F.matrix_diag, (2, 3)), (F.matrix_diag_part, (2, 3, 3)), (lambda x: F.trilu(x, 1, False), (3, 2)),
    (F.eye_like, (2, 3)), (F.batch_det, (2, 2, 2)), (F.batch_logdet, (2, 2, 2)), (F.batch_inv, (2, 2, 2)),
    (lambda x: F.batch_cholesky(x, True), (2, 2, 2)),
    (lambda x: F.einsum(x, x, equation="bij,bjk->bik"), (2, 2, 2)),
])
def test_grad_depends_flags(fn, shape):
    x = np.random.RandomState(0).uniform(-0.5, 0.5, shape)
    if len(shape) == 3:
        x = x @ np.swapaxes(x, 1, 2) + 2 * np.eye(shape[-1])   # positive definite
    check_clear_no_need_grad(fn, [x])
