"""Linear algebra: matrix diagonals and triangles, batched determinant / inverse / Cholesky,
and Einsum.

Diagonals, triangles and the identity are plain element moves (small ``@njit`` kernels over
(batch, n, n) views). Determinant, inverse, log-determinant and Cholesky factorisation call
``numpy.linalg`` at the Python level: they need pivoted LU / LAPACK's potrf, which are the right
tools for accuracy and speed, and they work on whole (B, N, N) stacks at once. Einsum is
``numpy.einsum`` on an equation put in canonical form in ``setup``; the gradient of each input
is again an Einsum (of dy, the other inputs and constant identities / ones), so the grad rule
is an Einsum node and differentiates to any order.
"""
import string

import numpy as np
from numba import njit, prange

from .array import zero_backward
from .kernels import parallel_kernel
from .registry import Op, accumulate, register


# ------------------------------------------------------------------ backward kernels
def _t(m):
    return np.swapaxes(m, -1, -2)


# ------------------------------------------------------------------------------ kernels
def matrix_diag_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        n = op.shape2[1]
        op.part(output_grads[0].reshape(-1, n, n), input_grads[0].reshape(op.shape2), accum[0])


def matrix_diag_part_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        n = op.shape2[1]
        op.embed(output_grads[0].reshape(op.shape2), input_grads[0].reshape(-1, n, n), accum[0])


def trilu_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        op.kernel(output_grads[0].reshape(op.shape3), input_grads[0].reshape(op.shape3), op.k,
                  op.upper, accum[0])


def batch_det_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        scale = (output_grads[0] * outputs[0])[:, None, None]
        accumulate(input_grads[0], scale * _t(op.linalg(np.linalg.inv, x)), accum[0])


def batch_logdet_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        x = inputs[0]
        accumulate(input_grads[0], output_grads[0][:, None, None] * _t(op.linalg(np.linalg.inv, x)),
                   accum[0])


def batch_inv_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        yt = _t(outputs[0])
        accumulate(input_grads[0], -(yt @ output_grads[0] @ yt), accum[0])


def batch_cholesky_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    if propagate_down[0]:
        y, g = outputs[0], output_grads[0]
        lower, g = (_t(y), _t(g)) if op.upper else (y, g)
        p = np.tril(_t(lower) @ g)
        p -= 0.5 * np.eye(p.shape[-1]) * p   # Phi: halve the diagonal
        lower_inv = op.linalg(np.linalg.inv, lower)
        s = _t(lower_inv) @ p @ lower_inv
        accumulate(input_grads[0], 0.5 * (s + _t(s)), accum[0])


def einsum_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    dy = output_grads[0]
    for i, dx in enumerate(input_grads):
        if propagate_down[i]:
            eq, constants, path = op.gradients[i]
            others = [x for j, x in enumerate(inputs) if j != i]
            operands = [dy] + others + [c.astype(dy.dtype) for c in constants]
            accumulate(dx, np.einsum(eq, *operands, optimize=path), accum[i])


def prod(shape):
    return int(np.prod(shape, dtype=np.int64))


@parallel_kernel
def diag_embed(x2, y3, accum):
    """y3[b, i, i] (+)= x2[b, i]; off the diagonal y3 is zeroed (kept if accumulating)."""
    batch, n = x2.shape
    for row in prange(batch * n):
        b, i = row // n, row % n
        for j in range(n):
            if i == j:
                y3[b, i, j] = y3[b, i, j] + x2[b, i] if accum else x2[b, i]
            elif not accum:
                y3[b, i, j] = 0.0


@parallel_kernel
def diag_part(x3, y2, accum):
    """y2[b, i] (+)= x3[b, i, i]."""
    batch, n = y2.shape
    for b in prange(batch):
        for i in range(n):
            y2[b, i] = y2[b, i] + x3[b, i, i] if accum else x3[b, i, i]


@njit(cache=True, inline="always")
def triangle_at(x3, y3, b, i, j, k, upper, accum):
    """Element (b, i, j) of ``triangle`` (the CUDA kernel compiles its py_func)."""
    keep = j - i >= k if upper else j - i <= k
    if accum:
        if keep:
            y3[b, i, j] += x3[b, i, j]
    else:
        y3[b, i, j] = x3[b, i, j] if keep else 0.0


@parallel_kernel
def triangle(x3, y3, k, upper, accum):
    """y3 (+)= x3 on and above the k-th diagonal (j - i >= k) if upper, else on and below it
    (j - i <= k); zero elsewhere."""
    batch, rows, cols = x3.shape
    for row in prange(batch * rows):
        b, i = row // rows, row % rows
        for j in range(cols):
            triangle_at(x3, y3, b, i, j, k, upper, accum)


def _as3d(shape):
    return (prod(shape[:-2]), shape[-2], shape[-1])


@register
class MatrixDiag(Op):
    """(..., n) -> (..., n, n) diagonal matrices."""

    def setup(self, x):
        if not x:
            self.fail("input must have at least one dimension, got shape {}", x)
        self.shape2 = (prod(x[:-1]), x[-1])
        self.embed = diag_embed.for_size(prod(x) * x[-1])
        self.part = diag_part.for_size(prod(x))
        return [tuple(x) + (x[-1],)]

    def forward(self, inputs, outputs):
        n = self.shape2[1]
        self.embed(inputs[0].reshape(self.shape2), outputs[0].reshape(-1, n, n), False)

    backward = matrix_diag_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class MatrixDiagPart(Op):
    """(..., n, n) -> (..., n): the diagonals."""

    def setup(self, x):
        if len(x) < 2 or x[-1] != x[-2]:
            self.fail("input must be (..., n, n) square matrices, got shape {}", x)
        self.shape2 = (prod(x[:-2]), x[-1])
        self.embed = diag_embed.for_size(prod(x))
        self.part = diag_part.for_size(prod(x[:-1]))
        return [tuple(x[:-1])]

    def forward(self, inputs, outputs):
        n = self.shape2[1]
        self.part(inputs[0].reshape(-1, n, n), outputs[0].reshape(self.shape2), False)

    backward = matrix_diag_part_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class Trilu(Op):
    """The upper (j - i >= k) or lower (j - i <= k) triangle of the last two dimensions, zeros
    elsewhere (numpy.triu / numpy.tril)."""

    def setup(self, x):
        if len(x) < 2:
            self.fail("input must have at least 2 dimensions, got shape {}", x)
        self.shape3 = _as3d(x)
        self.kernel = triangle.for_size(prod(x))
        return [tuple(x)]

    def forward(self, inputs, outputs):
        self.kernel(inputs[0].reshape(self.shape3), outputs[0].reshape(self.shape3), self.k,
                    self.upper, False)

    backward = trilu_backward

    def grad_depends_input_data(self, i, j):
        return False


@register
class EyeLike(Op):
    """Ones on the k-th diagonal of a matrix shaped like x, zeros elsewhere. Its value does not
    depend on x's values: the gradient is zero."""

    def setup(self, x):
        if len(x) != 2:
            self.fail("input must be a 2-D array, got shape {}", x)
        return [tuple(x)]

    def forward(self, inputs, outputs):
        y = outputs[0]
        y.fill(0)
        np.fill_diagonal(y[:, self.k:] if self.k >= 0 else y[-self.k:], 1)

    backward = zero_backward

    def grad_depends_input_data(self, i, j):
        return False


# ------------------------------------------------------------------------------ LAPACK
class _BatchMatrixOp(Op):
    """Ops on a batch of square matrices (B, N, N)."""

    def setup(self, x):
        if len(x) != 3 or x[1] != x[2]:
            self.fail("input must be a batch of square matrices (B, N, N), got shape {}", x)
        return [self.output_shape(tuple(x))]

    def output_shape(self, x):
        return x

    def linalg(self, fn, *args):
        """Call numpy.linalg, turning its error (singular, not positive definite) into ours."""
        try:
            return fn(*args)
        except np.linalg.LinAlgError as e:
            self.fail("{} (input of shape {})", e, args[0].shape)


@register
class BatchDet(_BatchMatrixOp):
    def output_shape(self, x):
        return x[:1]

    def forward(self, inputs, outputs):
        outputs[0][...] = np.linalg.det(inputs[0])

    backward = batch_det_backward

    def grad_depends_output_data(self, i, o):
        return True


@register
class BatchLogdet(_BatchMatrixOp):
    """log |det x| per matrix."""

    def output_shape(self, x):
        return x[:1]

    def forward(self, inputs, outputs):
        outputs[0][...] = np.linalg.slogdet(inputs[0])[1]

    backward = batch_logdet_backward


@register
class BatchInv(_BatchMatrixOp):
    def forward(self, inputs, outputs):
        outputs[0][...] = self.linalg(np.linalg.inv, inputs[0])

    backward = batch_inv_backward

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return True


@register
class BatchCholesky(_BatchMatrixOp):
    """L with x = L L^T (or U = L^T with x = U^T U), from the lower triangle of x (x is
    assumed symmetric; its gradient is symmetric)."""

    def forward(self, inputs, outputs):
        lower = self.linalg(np.linalg.cholesky, inputs[0])
        outputs[0][...] = np.swapaxes(lower, 1, 2) if self.upper else lower

    backward = batch_cholesky_backward

    def grad_depends_input_data(self, i, j):
        return False

    def grad_depends_output_data(self, i, o):
        return True


# ------------------------------------------------------------------------------ einsum
_LABELS = string.ascii_letters


class EinsumEquation:
    """An einsum equation in canonical form: one letter per dimension of every operand, the
    ellipsis expanded and the output explicit. ``gradient(i)`` gives the equation computing
    the gradient of operand i and the constant operands it needs."""

    def __init__(self, op, equation, shapes):
        eq = equation.replace(" ", "")
        if eq.count("->") > 1:
            op.fail("equation {!r} has more than one '->'", equation)
        lhs, out = eq.split("->") if "->" in eq else (eq, None)
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            op.fail("equation {!r} has {} input terms for {} inputs", equation, len(terms), len(shapes))
        letters = set(eq) - set(".,->")
        if not all(c in _LABELS for c in letters):
            op.fail("equation {!r}: labels must be letters", equation)
        self._fresh = (c for c in _LABELS if c not in letters)
        self.op = op
        ellipsis = self._ellipsis_sizes(terms, shapes, equation)
        ell_labels = [self.fresh() for _ in ellipsis]
        self.sizes = dict(zip(ell_labels, ellipsis))
        self.terms = []
        for term, shape in zip(terms, shapes):
            labels = self._expand(term, shape, ell_labels, ellipsis)
            for label, size in zip(labels, shape):
                if self.sizes.setdefault(label, size) != size:
                    op.fail("label {!r} has sizes {} and {} (equation {!r}, input shapes {})", label,
                            self.sizes[label], size, equation, ", ".join(map(str, shapes)))
            self.terms.append(labels)
        named = [c for term in terms for c in term.replace("...", "")]
        if out is None:
            out = ell_labels + sorted(c for c in set(named) if named.count(c) == 1)
        else:
            if out.count("...") > 1:
                op.fail("equation {!r} has more than one ellipsis in the output", equation)
            out = list(out.replace("...", "\0"))
            if "\0" in out:
                i = out.index("\0")
                out[i:i + 1] = ell_labels
        if len(set(out)) != len(out) or not all(c in self.sizes for c in out):
            op.fail("output {!r} of equation {!r} must name distinct labels of the inputs",
                    "".join(c for c in out if c in letters), equation)
        self.out = out
        self.output_shape = tuple(self.sizes[c] for c in out)

    def fresh(self):
        label = next(self._fresh, None)
        if label is None:
            self.op.fail("the equation needs more than {} distinct labels", len(_LABELS))
        return label

    def _ellipsis_sizes(self, terms, shapes, equation):
        """The broadcast sizes of the dimensions the ellipses stand for (aligned right)."""
        sizes = []
        for term, shape in zip(terms, shapes):
            n_named = len(term.replace("...", ""))
            if term.count("...") > 1 or ("..." not in term and n_named != len(shape)) or \
                    n_named > len(shape) or "." in term.replace("...", ""):
                self.op.fail("term {!r} of equation {!r} does not fit an input of shape {}", term,
                             equation, shape)
            if "..." not in term:
                continue
            i = term.index("...")
            dims = shape[i:len(shape) - (n_named - i)]
            sizes = [1] * (len(dims) - len(sizes)) + sizes
            for k, d in enumerate(dims):
                k += len(sizes) - len(dims)
                if d != sizes[k] and 1 not in (d, sizes[k]):
                    self.op.fail("ellipsis dimensions of the inputs ({}) cannot be broadcast",
                                 ", ".join(map(str, shapes)))
                sizes[k] = max(d, sizes[k])
        return sizes

    def _expand(self, term, shape, ell_labels, ellipsis):
        """The labels of one term; a broadcast (size 1) ellipsis dimension gets a label of its
        own, so it is summed away and its gradient is spread back over it by a ones vector."""
        if "..." not in term:
            return list(term)
        i = term.index("...")
        dims = shape[i:len(shape) - (len(term) - 3 - i)]
        labels = []
        for d, label, size in zip(dims, ell_labels[len(ell_labels) - len(dims):],
                                  ellipsis[len(ellipsis) - len(dims):]):
            if d == size:
                labels.append(label)
            else:
                labels.append(self.fresh())
                self.sizes[labels[-1]] = 1
        return list(term[:i]) + labels + list(term[i + 3:])

    def text(self, terms, out):
        return ",".join("".join(t) for t in terms) + "->" + "".join(out)

    @property
    def equation(self):
        return self.text(self.terms, self.out)

    def gradient(self, i):
        """(equation, constants) for d operand i: operands (dy, the other inputs, *constants).

        A label repeated in operand i (a diagonal) is renamed and tied to the first by an
        identity matrix; a label found nowhere else (summed away) comes from a ones vector.
        """
        seen, renamed, constants = set(), [], []
        for label in self.terms[i]:
            if label in seen:
                renamed.append(self.fresh())
                constants.append(([label, renamed[-1]], np.eye(self.sizes[label])))
            else:
                seen.add(label)
                renamed.append(label)
        others = [t for j, t in enumerate(self.terms) if j != i]
        present = set(self.out).union(*others, *[c[0] for c in constants])
        constants += [([label], np.ones(self.sizes[label])) for label in dict.fromkeys(renamed)
                      if label not in present]
        terms = [self.out] + others + [labels for labels, _ in constants]
        return self.text(terms, renamed), [value for _, value in constants]


def einsum_path(equation, shapes):
    """numpy's contraction order for operands of these shapes (found once, in setup)."""
    dummies = [np.broadcast_to(np.zeros(()), s) for s in shapes]
    return np.einsum_path(equation, *dummies, optimize="greedy")[0]


@register
class Einsum(Op):
    """numpy.einsum of the inputs (explicit or implicit output, ellipsis broadcasting)."""

    def setup(self, *xs):
        if not xs:
            self.fail("needs at least one input")
        self.canonical = EinsumEquation(self, self.equation, xs)
        self.path = einsum_path(self.canonical.equation, xs)
        self.gradients = []
        for i in range(len(xs)):
            eq, constants = self.canonical.gradient(i)
            shapes = [self.canonical.output_shape] + [s for j, s in enumerate(xs) if j != i]
            self.gradients.append((eq, constants, einsum_path(eq, shapes + [c.shape for c in constants])))
        return [self.canonical.output_shape]

    def forward(self, inputs, outputs):
        np.einsum(self.canonical.equation, *inputs, out=outputs[0], optimize=self.path)

    backward = einsum_backward

    def grad_depends_input_data(self, i, j):
        return i != j
