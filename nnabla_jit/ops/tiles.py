"""Register tiles: the inner loop of a small matrix product as explicit SIMD (float32).

OpenBLAS runs a convolution's products far below this machine's peak when one side is small
(16-128 output channels against a col of thousands of positions): it packs the large operand
on every call, and the packing costs as much as the arithmetic. A product whose operands
already sit in cache -- one sample's col, a few hundred KB -- needs no packing, only a loop
that keeps a block of the result in registers. numba's own loops do not get there: LLVM keeps
numba's accumulator arrays in memory and, on AVX-512 machines, prefers 256-bit vectors.

So the tile is written in LLVM IR (``@intrinsic``, numba's public extension API): ``MR`` rows
by ``16 * NV`` columns of ``C`` held in ``<16 x float>`` registers while the inner dimension
runs, one ``llvm.fma`` per row and vector, each element of ``A`` broadcast from memory. With
MR = 8, NV = 2 that is 16 accumulators of the 32 vector registers and 16 FMAs per two loads of
``B``. ``block_product`` covers a whole block with these tiles (8 rows, then single rows; 32 or 16
columns) and plain loops for the last columns.

Operands are flat float32 arrays with offsets and strides, so the same tiles serve a
transposed operand without copying it: element (i, k) of A is ``A[a_off + i*a_row + k*a_k]``,
row k of B starts at ``B[b_off + k*ldb]``, row i of C at ``C[c_off + i*ldc]``.

``FAST`` says whether the tiles run as intended here (AVX-512 in the CPU numba compiles for):
on other CPUs ``<16 x float>`` is split into narrower vectors with too few registers, and the
callers keep their BLAS routes (ops/convolution_tiled.py checks it).
"""
import numba
import numpy as np
from llvmlite import binding, ir
from numba import njit, types
from numba.extending import intrinsic

WIDTH = 16   # float32 lanes of one vector register (AVX-512)


def _host_has_avx512():
    if numba.config.CPU_NAME not in (None, "host"):
        return False   # compiling for another (portable) CPU
    try:
        return bool(binding.get_host_cpu_features().get("avx512f"))
    except RuntimeError:   # LLVM cannot tell (no feature list on this platform)
        return False


FAST = _host_has_avx512()


def _fma_declaration(module, vec):
    name = "llvm.fma.v%df32" % WIDTH
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(vec, [vec] * 3), name=name)


def _tile(MR, NV, table=None):
    """The intrinsic ``tile(pa, pb, pc, K, a_row, a_k, ldb, ldc, accumulate)``: C (MR x 16 NV)
    (+)= A (MR x K) @ B (K x 16 NV), operands given as float32 addresses and element strides.
    With ``table="b"``, ``ldb`` is the address of an int64 table: row k of B starts at
    ``pb + 4 * table[k]``; with ``table="a"``, ``a_row`` is: row i of A starts at
    ``pa + 4 * table[i]`` (the rows of an implicit col, ``table_product``)."""

    @intrinsic
    def tile(typingctx, pa, pb, pc, K, a_row, a_k, ldb, ldc, accumulate):
        sig = types.void(*([types.intp] * 8), types.boolean)

        def codegen(context, builder, signature, args):
            pa, pb, pc, K, a_row, a_k, ldb, ldc, accumulate = args
            f32, i64, i32 = ir.FloatType(), ir.IntType(64), ir.IntType(32)
            vec = ir.VectorType(f32, WIDTH)
            vptr = vec.as_pointer()
            fma = _fma_declaration(builder.module, vec)
            A, B, C = (builder.inttoptr(p, f32.as_pointer()) for p in (pa, pb, pc))
            if table == "a":   # the rows' offsets, read once before the loop
                a_rows = builder.inttoptr(a_row, i64.as_pointer())
                a_start = [builder.load(builder.gep(a_rows, [ir.Constant(i64, i)])) for i in range(MR)]
            else:
                a_start = [builder.mul(ir.Constant(i64, i), a_row) for i in range(MR)]
            zero = ir.Constant(vec, [0.0] * WIDTH)
            undef = ir.Constant(vec, ir.Undefined)
            broadcast = ir.Constant(ir.VectorType(i32, WIDTH), [0] * WIDTH)

            def const(v):
                return ir.Constant(i64, v)

            entry = builder.block
            loop = builder.function.append_basic_block("tile_loop")
            done = builder.function.append_basic_block("tile_done")
            builder.cbranch(builder.icmp_signed(">", K, const(0)), loop, done)

            # loop: k and the accumulators as phis; one step of the inner dimension
            builder.position_at_end(loop)
            k = builder.phi(i64)
            k.add_incoming(const(0), entry)
            acc = [[builder.phi(vec) for _ in range(NV)] for _ in range(MR)]
            for row in acc:
                for phi in row:
                    phi.add_incoming(zero, entry)
            if table == "b":
                b_row = builder.load(builder.gep(builder.inttoptr(ldb, i64.as_pointer()), [k]))
            else:
                b_row = builder.mul(k, ldb)
            b = [builder.load(builder.bitcast(builder.gep(B, [builder.add(b_row, const(v * WIDTH))]), vptr),
                              align=4) for v in range(NV)]
            a_col = builder.mul(k, a_k)
            stepped = []
            for i in range(MR):
                a = builder.load(builder.gep(A, [builder.add(a_col, a_start[i])]))
                a = builder.shuffle_vector(builder.insert_element(undef, a, ir.Constant(i32, 0)), undef,
                                           broadcast)
                stepped.append([builder.call(fma, [a, b[v], acc[i][v]]) for v in range(NV)])
            k_next = builder.add(k, const(1))
            k.add_incoming(k_next, loop)
            for i in range(MR):
                for v in range(NV):
                    acc[i][v].add_incoming(stepped[i][v], loop)
            builder.cbranch(builder.icmp_signed("<", k_next, K), loop, done)

            # done: the sums (zero when K is 0) stored to C, or added to it
            builder.position_at_end(done)
            sums = []
            for i in range(MR):
                for v in range(NV):
                    phi = builder.phi(vec)
                    phi.add_incoming(zero, entry)
                    phi.add_incoming(stepped[i][v], loop)
                    sums.append(phi)
            for i in range(MR):
                for v in range(NV):
                    at = builder.add(builder.mul(const(i), ldc), const(v * WIDTH))
                    c = builder.bitcast(builder.gep(C, [at]), vptr)
                    s = sums[i * NV + v]
                    builder.store(builder.select(accumulate, builder.fadd(builder.load(c, align=4), s), s),
                                  c, align=4)
            return context.get_dummy_value()

        return sig, codegen

    return tile


def _column_block_of(table):
    """The helper covering rows 0..M of one block of 32 columns (``two``) or 16 with ``_tile``'s
    tiles of one ``table`` mode: tiles of 8 rows, then of one (a few more tile shapes would cost
    compile time for the last rows only). Tile m0 reads A from ``pa + pa_step * m0`` and gets
    ``a_row + a_row_step * m0`` as its ``a_row`` (strided A: pa_step = 4 * a_row; A's rows
    through a table: the table's address, a_row_step = 8)."""
    tile_8x2, tile_8x1, tile_1x2, tile_1x1 = (_tile(8, 2, table), _tile(8, 1, table), _tile(1, 2, table),
                                              _tile(1, 1, table))

    @njit(inline="always")
    def column_block(pa, pa_step, pb, pc, M, K, a_row, a_row_step, a_k, ldb, ldc, accumulate, two):
        m0 = 0
        while m0 + 8 <= M:
            ta, tr, tc = pa + pa_step * m0, a_row + a_row_step * m0, pc + 4 * m0 * ldc
            if two:
                tile_8x2(ta, pb, tc, K, tr, a_k, ldb, ldc, accumulate)
            else:
                tile_8x1(ta, pb, tc, K, tr, a_k, ldb, ldc, accumulate)
            m0 += 8
        while m0 < M:
            ta, tr, tc = pa + pa_step * m0, a_row + a_row_step * m0, pc + 4 * m0 * ldc
            if two:
                tile_1x2(ta, pb, tc, K, tr, a_k, ldb, ldc, accumulate)
            else:
                tile_1x1(ta, pb, tc, K, tr, a_k, ldb, ldc, accumulate)
            m0 += 1
    return column_block


_column_block, _b_table_column_block, _a_table_column_block = (_column_block_of(t) for t in (None, "b", "a"))


@njit(cache=True)   # not inlined: compiled once, shared by every kernel that calls it
def block_product(A, a_off, a_row, a_k, B, b_off, ldb, C, c_off, ldc, M, N, K, accumulate):
    """C (M x N) (+)= A (M x K) @ B (K x N) on flat float32 arrays (the module docstring's
    offsets and strides); ``accumulate`` adds to C. Every index must lie inside its array."""
    pa = A.ctypes.data + 4 * a_off
    pb = B.ctypes.data + 4 * b_off
    pc = C.ctypes.data + 4 * c_off
    n0 = 0
    while n0 + 2 * WIDTH <= N:
        _column_block(pa, 4 * a_row, pb + 4 * n0, pc + 4 * n0, M, K, a_row, 0, a_k, ldb, ldc, accumulate, True)
        n0 += 2 * WIDTH
    if n0 + WIDTH <= N:
        _column_block(pa, 4 * a_row, pb + 4 * n0, pc + 4 * n0, M, K, a_row, 0, a_k, ldb, ldc, accumulate, False)
        n0 += WIDTH
    for i in range(M):   # the last columns, fewer than a vector
        for j in range(n0, N):
            s = np.float32(0.0)
            for k in range(K):
                s += A[a_off + i * a_row + k * a_k] * B[b_off + k * ldb + j]
            at = c_off + i * ldc + j
            C[at] = C[at] + s if accumulate else s


@njit(cache=True)
def table_product(A, a_rows, a_k, B, b_rows, ldb, C, ldc, M, N, K, accumulate):
    """C (M x N) (+)= A (M x K) @ B (K x N) over a col that is never written: its rows are
    windows of one padded image (ops/convolution_tiled.py's implicit convolution), found
    through one table of int64 offsets -- either ``a_rows`` (row i of A starts at
    ``A[a_rows[i]]``, elements ``a_k`` apart; B's rows ``ldb`` apart) or ``b_rows`` (row k of B
    starts at ``B[b_rows[k]]``; A's rows ``a_k`` apart, elements contiguous), the other table
    empty. N should be a multiple of 16: other columns take plain loops. ``accumulate`` only
    with ``a_rows``. Every index must lie inside its array."""
    pa, pb, pc = A.ctypes.data, B.ctypes.data, C.ctypes.data
    by_a = a_rows.shape[0] > 0
    n0 = 0
    while n0 + WIDTH <= N:
        two = n0 + 2 * WIDTH <= N
        if by_a:
            _a_table_column_block(pa, 0, pb + 4 * n0, pc + 4 * n0, M, K, a_rows.ctypes.data, 8, a_k, ldb, ldc,
                                  accumulate, two)
        else:
            _b_table_column_block(pa, 4 * a_k, pb + 4 * n0, pc + 4 * n0, M, K, a_k, 0, 1, b_rows.ctypes.data,
                                  ldc, False, two)
        n0 += 2 * WIDTH if two else WIDTH
    for i in range(M):   # the last columns, fewer than a vector
        for j in range(n0, N):
            s = np.float32(0.0)
            for k in range(K):
                if by_a:
                    s += A[a_rows[i] + k * a_k] * B[k * ldb + j]
                else:
                    s += A[i * a_k + k] * B[b_rows[k] + j]
            at = i * ldc + j
            C[at] = C[at] + s if accumulate else s
