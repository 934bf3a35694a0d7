"""CP (CANDECOMP/PARAFAC) decomposition by alternating least squares, as nnabla's
``nnabla.utils.factorization.cpd``: X ~ sum_r lambda_r a0_r (x) a1_r (x) ... (x) aN_r.

The factors start from ``rng.rand`` draws (``RandomState(313)`` by default), so a seeded call
gives nnabla's factors.
"""
from functools import reduce

import numpy as np
from scipy.linalg import pinv

__all__ = ["ALS"]


class ALS(object):
    """Alternating least squares: each factor in turn is the least-squares fit with the others
    fixed (Kolda and Bader, "Tensor Decompositions and Applications", 2009)."""

    def solve(self, X, rank, max_iter=500, stopping_criterion=1e-5, lambda_reg=0.0,
              dtype=np.float32, rng=None):
        """Factors ``[A_0, ..., A_{N-1}]`` (A_n of shape (X.shape[n], rank), unit columns) and
        weights ``lambda`` (rank,). Stops after ``max_iter`` sweeps or once the explained
        fraction of ||X||^2 changes by less than ``stopping_criterion`` (never when it is
        negative); ``lambda_reg`` adds ridge regularization."""
        n_modes = X.ndim
        squared_norm_x = np.sum(X ** 2)
        if rng is None:
            rng = np.random.RandomState(313)
        factors = [None] * n_modes
        for n in range(1, n_modes):   # factor 0 is solved first, from the others
            factors[n] = np.array(rng.rand(X.shape[n], rank), dtype=dtype)
        criterion = 0
        for itr in range(max_iter):
            criterion_prev = criterion
            for n in range(n_modes):
                gram = self.hadamard_products_of_gramians(factors, n) + np.eye(rank) * lambda_reg
                others = [o for o in range(n_modes) if o != n]
                a_n = np.tensordot(X, self.khatrirao_products(factors, n),
                                   axes=(others, np.arange(n_modes - 1)[::-1])).dot(pinv(gram))
                if itr == 0:
                    lmbda = np.sqrt((a_n ** 2).sum(axis=0))
                else:
                    # Later sweeps normalize by the column maxima (at least 1), as nnabla does.
                    lmbda = a_n.max(axis=0)
                    lmbda[lmbda < 1] = 1
                factors[n] = a_n / lmbda
            if stopping_criterion < 0:
                continue
            approx = self.approximate_tensor(factors, lmbda)
            squared_norm_residual = squared_norm_x + np.sum(approx ** 2) - 2 * np.sum(X * approx)
            criterion = 1.0 - squared_norm_residual / squared_norm_x
            if itr > 0 and abs(criterion_prev - criterion) < stopping_criterion:
                break
        return factors, lmbda

    def khatrirao_product(self, X, Y):
        """Column-wise outer products: P[:, :, r] = outer(X[:, r], Y[:, r]), in float64
        (products taken in the factors' type, as nnabla's)."""
        return np.einsum("ir,jr->ijr", X, Y).astype(np.float64)

    def khatrirao_products(self, A, n, reverse=True):
        """Khatri-Rao product of every factor but ``A[n]``, in reverse mode order."""
        order = sorted([o for o in range(len(A)) if o != n], reverse=reverse)
        return reduce(self.khatrirao_product, [A[o] for o in order])

    def hadamard_products_of_gramians(self, A, n):
        """Elementwise product of A_o^T A_o over every mode o but ``n``."""
        gram = 1.0
        for o in range(len(A)):
            if o != n:
                gram = gram * np.dot(A[o].T, A[o])
        return gram

    def approximate_tensor(self, A, lmbda):
        """sum_r lmbda[r] * outer(A_0[:, r], A_1[:, r], ...)."""
        approx = np.zeros([a.shape[0] for a in A])
        for r in range(len(lmbda)):
            term = A[0][:, r]
            for a in A[1:]:
                term = np.multiply.outer(term, a[:, r])
            approx += lmbda[r] * term
        return approx
