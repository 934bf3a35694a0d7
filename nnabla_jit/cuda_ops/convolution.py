"""CUDA kernels of Convolution, DepthwiseConvolution, Deconvolution and DepthwiseDeconvolution
(channel-first and channel-last): im2col + GEMM through ``blas.matmul``, as the CPU's
``ConvGeometry`` does, with the node's geometry ``op.geo`` (for the deconvolutions the image
is the output and the map the input).

With the whole batch's col ``(C * K, B * O)`` (rows in the filter's column order, group by
group, so that it is ``(G, C/G * K, B * O)``; a row is ``c * K + k``, or ``g * K * C/G +
k * C/G + c`` channel-last, as the filter's ``(M, *kernel, C/G)`` is laid out) in a workspace
buffer of the device pool (``device.workspace``), the three products are one batched GEMM
over the groups:

    rows (G, M/G, B*O)    = W (G, M/G, C/G*K) @ col(image)             (image -> map)
    dcol (G, C/G*K, B*O)  = W^T @ rows(map)                            (map -> image, col2im)
    dW   (G, M/G, C/G*K) += rows(map) @ col(image)^T                   (filter gradient)

Convolution's forward is image -> map and its data gradient map -> image; the
deconvolutions' are the other way round, and both filter gradients are the third product.
col2im gathers (one thread per image element, summing the col entries that read it), so no
atomics are needed. Any number of spatial dims. ``rows`` is a map with its batch moved next to
its positions, whatever the layout, so the GEMMs never see the layout.

With one group (``DIRECT_CONV``, the default) the first two products run batch outermost
instead, one strided-batched GEMM over the samples, reading and writing the map where it is:

    map_b (M, O)       = W (M, C*K) @ col_b (C*K, O)     (channel-last: col_b^T @ W^T, (O, M))
    dcol_b (C*K, O)    = W^T @ map_b                     (channel-last: W^T @ map_b^T)

with the col laid out (B, C*K, O) (im2col's sample step C*K*O, its row step O), so no rows
and no rows_to_map / map_to_rows copies are made for them: the map is moved once less each
way (read and written once by the copy, and the rows written and read once by GEMM and copy).
The price is a GEMM of O columns per sample rather than one of B*O (more partial tiles where O
is small): below ``DIRECT_MIN_POSITIONS`` positions per sample the rows path runs. A pointwise
convolution (1x1, stride 1, no padding: ``ConvGeometry.col_is_image``, the CPU's rule) has the
image for its col: no im2col and no col2im at all; channel-last its three
products are single GEMMs over the image and map as (B*O, C) and (B*O, M), and channel-first
its filter gradient, a sum over the batch that one GEMM can only take from rows, copies image
and map to rows with ``map_to_rows_kernel`` (no tables, no division). A bias is laid out first
(``channel_fill_kernel``) and the GEMM adds onto it. The filter gradient keeps the rows.

im2col and col2im (and the map <-> rows copies) run over a 3-d grid: x the positions (of the
map, or of the image), y the col rows (or the channels), z the samples, so that a thread finds
its row and sample without dividing, and consecutive threads write consecutive col entries. Per geometry, small tables
built from the CPU's col rules (``col_entry``, ``col_row``, the tap offsets ``koff``) are
uploaded once; a thread decodes its position with one division (two from 3 spatial dims on):
int64 division is emulated on the GPU, and the per-element decoding of row, sample, channel,
tap and every coordinate it replaced made these copies several times slower than memory.
"""
import numpy as np

from ..ops import convolution_kernels as col_rules
from ..ops.convolution import INIT_ADD, INIT_BIAS, INIT_ZERO, init_for_accum, init_for_bias
from . import blas, device, reduction
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

@device_function
def write_init(out, i, v, init, bias, channel):
    """out[i] = v added to out[i] (INIT_ADD), to zero, or to bias[channel] (INIT_BIAS)."""
    if init == INIT_ADD:
        out[i] += v
    elif init == INIT_BIAS:
        out[i] = v + bias[channel]
    else:
        out[i] = v


@device_function
def split_position(i, sp):
    """(plane, h, w): flat position ``i`` over the spatial dims ``sp`` (at least two) as its
    last two coordinates and its plane (flat over the dims before them): one division for two
    dims, two for more (int64 division is emulated on the GPU: a few per thread at most)."""
    D = len(sp)
    q = i // sp[D - 1]
    w = i - q * sp[D - 1]
    if D == 2:
        return 0, q, w
    plane = q // sp[D - 2]
    return plane, q - plane * sp[D - 2], w


image_plane = device_function(col_rules.image_plane.py_func)   # the CPU's rules
plane_digit = device_function(col_rules.plane_digit.py_func)


@device_function
def map_coordinate(p, off, stride, n):
    """(o, hit): the map coordinate o (of ``n``) whose tap at offset ``off`` reads image
    coordinate p (o * stride + off == p), and whether there is one."""
    q = p - off
    if q < 0:
        return 0, False
    o = q
    if stride != 1:   # dividing only where the stride needs it
        o = q // stride
    return o, o * stride == q and o < n


@device_function
def map_plane(plane, koff, k, map_sp, img_sp, stride):
    """The map plane whose tap ``k`` reads image plane ``plane``, and whether there is one
    (``image_plane`` inverted)."""
    flat = 0
    step = 1
    hit = True
    for d in range(len(img_sp) - 3, -1, -1):
        p, plane = plane_digit(plane, d, img_sp)
        od, ok = map_coordinate(p, koff[k, d], stride[d], map_sp[d])
        hit = hit and ok
        flat += od * step
        step *= map_sp[d]
    return flat, hit


@kernel
def im2col_kernel(img, col, entries, koff, n_batch, n_map, row_step, sample_step, sample_size,
                  channel_stride, position_stride, img_sp, map_sp, stride):
    """col[row * row_step + b * sample_step + o] = img[b, c, o * stride + koff[k]] (0 in the
    padding), (c, k) = entries[row]: the col (C * K, B * O) with steps (B * O, O), or, batch
    outermost, (B, C * K, O) with steps (O, C * K * O). Threads along x: the map positions o
    (consecutive threads write consecutive col entries), blocks along y: the col rows, threads
    along z: the samples (rows and samples looped over when more than the grid)."""
    o = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if o < n_map:
        D = len(img_sp)
        plane, oh, ow = split_position(o, map_sp)
        b = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
        while b < n_batch:   # while, not range(): a range with a variable step divides
            row = cuda.blockIdx.y
            while row < entries.shape[0]:
                c = entries[row, 0]
                k = entries[row, 1]
                h = oh * stride[D - 2] + koff[k, D - 2]
                w = ow * stride[D - 1] + koff[k, D - 1]
                ip, inside = image_plane(plane, k, map_sp, img_sp, stride, koff)
                inside = inside and 0 <= h < img_sp[D - 2] and 0 <= w < img_sp[D - 1]
                pos = (ip * img_sp[D - 2] + h) * img_sp[D - 1] + w
                col[row * row_step + b * sample_step + o] = (
                    img[b * sample_size + c * channel_stride + pos * position_stride]
                    if inside else 0.0)
                row += cuda.gridDim.y
            b += cuda.gridDim.z * cuda.blockDim.z


@kernel
def col2im_kernel(col, img, bias, init, col_rows, koff, n_batch, n_map, n_img, row_step,
                  sample_step, sample_size, channel_stride, position_stride, img_sp, map_sp,
                  stride):
    """img[b, c, p] = the sum of col[col_rows[c, k] * row_step + b * sample_step + o] over the
    (k, o) that read p (im2col's layouts), added to img (INIT_ADD), to zero or to bias[c] (the
    CPU's init modes). Threads along x: the image positions p, blocks along y: the channels,
    threads along z: the samples (channels and samples looped over when more than the grid)."""
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p < n_img:
        D = len(img_sp)
        plane, ph, pw = split_position(p, img_sp)
        b = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
        while b < n_batch:   # while, not range(): a range with a variable step divides
            c = cuda.blockIdx.y
            while c < col_rows.shape[0]:
                acc = np.float64(0.0)   # float64 in numba's typing, and so in the simulator
                for k in range(col_rows.shape[1]):
                    oh, hit_h = map_coordinate(ph, koff[k, D - 2], stride[D - 2], map_sp[D - 2])
                    ow, hit_w = map_coordinate(pw, koff[k, D - 1], stride[D - 1], map_sp[D - 1])
                    if hit_h and hit_w:
                        mp, hit = map_plane(plane, koff, k, map_sp, img_sp, stride)
                        if hit:
                            o = (mp * map_sp[D - 2] + oh) * map_sp[D - 1] + ow
                            acc += col[col_rows[c, k] * row_step + b * sample_step + o]
                write_init(img, b * sample_size + c * channel_stride + p * position_stride,
                           acc, init, bias, c)
                c += cuda.gridDim.y
            b += cuda.gridDim.z * cuda.blockDim.z


@kernel
def rows_to_map_kernel(rows, mp, bias, init, n_batch, n_map, sample_size, channel_stride,
                       position_stride):
    """mp[b, m, o] = rows[m, b * O + o], added to mp (INIT_ADD), to zero or to bias[m]. Threads
    along x: the map positions o, blocks along y: the channels m, threads along z: the samples
    (as im2col's)."""
    o = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if o < n_map:
        b = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
        while b < n_batch:
            m = cuda.blockIdx.y
            while m < rows.shape[0]:
                write_init(mp, b * sample_size + m * channel_stride + o * position_stride,
                           rows[m, b * n_map + o], init, bias, m)
                m += cuda.gridDim.y
            b += cuda.gridDim.z * cuda.blockDim.z


@kernel
def map_to_rows_kernel(mp, rows, n_batch, n_map, sample_size, channel_stride, position_stride):
    """rows[m, b * O + o] = mp[b, m, o] (the grid of ``rows_to_map_kernel``)."""
    o = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if o < n_map:
        b = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
        while b < n_batch:
            m = cuda.blockIdx.y
            while m < rows.shape[0]:
                rows[m, b * n_map + o] = mp[b * sample_size + m * channel_stride +
                                            o * position_stride]
                m += cuda.gridDim.y
            b += cuda.gridDim.z * cuda.blockDim.z


@kernel
def channel_fill_kernel(out, values, n_batch, n_pos, sample_size, channel_stride,
                        position_stride):
    """out[b, m, o] = values[m]: a bias laid out over a map or an image, for a GEMM to add onto
    (the grid of ``rows_to_map_kernel``)."""
    o = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if o < n_pos:
        b = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
        while b < n_batch:
            m = cuda.blockIdx.y
            while m < values.shape[0]:
                out[b * sample_size + m * channel_stride + o * position_stride] = values[m]
                m += cuda.gridDim.y
            b += cuda.gridDim.z * cuda.blockDim.z


GRID_YZ = 65535     # the most blocks along grid y and z; the kernels loop over more
BLOCK_Z = 64        # the most threads of a block along z


def grid_launch(kern, n_x, n_y, n_z):
    """``kern`` configured for ``n_x`` positions (threads along x) by ``n_y`` rows (blocks
    along y) by ``n_z`` samples (threads along z): blocks of up to device.THREADS threads,
    as many samples to a block as fit when the positions are few (consecutive threads then
    run on into the next sample, whose col columns follow: a warp stays whole and its writes
    consecutive even for a 4 x 4 map)."""
    threads = device.THREADS
    x = 1
    while x < min(n_x, threads):
        x *= 2
    z = 1
    while z < min(n_z, threads // x, BLOCK_Z):
        z *= 2
    grid = ((n_x + x - 1) // x, min(n_y, GRID_YZ), min((n_z + z - 1) // z, GRID_YZ))
    return device.configured(kern, grid, (x, 1, z))


# The products of one group run batch outermost and write the map (or the image) themselves,
# with no rows in between (see the module docstring); NNABLA_JIT_CUDA_DIRECT_CONV=0: every
# product through the rows and the rows layout of the col, as before. A module flag, read on
# every product.
DIRECT_CONV = device.switch("DIRECT_CONV")
# The fewest map positions per sample for the batched products. A GEMM of O columns per sample
# leaves each sample's last tile partly idle, up to T / O of its work for T-wide tiles (cuBLAS's
# are 64 to 256 wide: 31% more tiles than columns at O = 196 or 49), where one GEMM over B * O
# columns has a single partial tile; the copies the batched products save scale with O. Below
# it, the rows path (except for the pointwise channel-last products, one GEMM over the whole
# batch). Chosen from tile sizes, not yet tuned on a GPU.
DIRECT_MIN_POSITIONS = 256


class ConvLaunch:
    """One node's geometry as the kernels take it, and the three products over device arrays."""

    direct_col = True   # the col may be laid out batch outermost (not a deformable one's)

    def __init__(self, op):
        geo = self.geo = op.geo
        self.same = blas.batch_map(geo.group, (geo.group,), (geo.group,))
        self.col_tables = None   # set up on the first im2col or col2im (see tables())

    def one_group(self):
        """One group, the switch on, and a col of the image's own (not the deformable one)."""
        return DIRECT_CONV and self.direct_col and self.geo.group == 1

    def direct(self):
        """Whether the map and image are written by the GEMMs (see DIRECT_MIN_POSITIONS)."""
        geo = self.geo
        return self.one_group() and (geo.O >= DIRECT_MIN_POSITIONS or
                                     (geo.col_is_image and geo.channel_last))

    def tables(self):
        """What im2col and col2im read, built once per geometry from the CPU's col rules and
        kept on the device: per col row its (channel, tap) (``col_entry``), per (channel, tap)
        its col row (``col_row``), per tap its offsets (tap * dilation - pad, the CPU's
        ``koff``, over at least two spatial dims as the CPU's kernels see them), and the
        scalars and shapes after them."""
        if self.col_tables is None:
            geo = self.geo
            C, K, Cg, last = int(geo.C), int(geo.K), int(geo.C // geo.group), bool(geo.channel_last)
            entries = np.stack(col_rules.col_entry.py_func(np.arange(C * K), K, Cg, last), 1)
            col_rows = col_rules.col_row.py_func(np.arange(C)[:, None], np.arange(K)[None, :], K,
                                                Cg, last)
            B, S, sample_size, channel_stride, position_stride = self.image_layout()
            as_ints = (lambda v: tuple(int(e) for e in v))
            self.col_tables = (
                device.upload(entries.astype(np.int64)), device.upload(col_rows.astype(np.int64)),
                device.upload(np.asarray(geo.koff, np.int64)),
                (B, int(geo.O), S, sample_size, channel_stride, position_stride,
                 as_ints(geo.img_sp_a), as_ints(geo.map_sp_a), as_ints(geo.stride_a)))
        return self.col_tables

    def _layout(self, channels, positions):
        geo = self.geo
        strides = col_rules.sample_strides.py_func(channels, positions, bool(geo.channel_last))
        return (int(geo.B), int(positions), int(channels * positions), int(strides[0]),
                int(strides[1]))

    def map_layout(self):
        """(samples, positions, sample size, channel stride, position stride) of the map."""
        return self._layout(int(self.geo.M), int(self.geo.O))

    def image_layout(self):
        """(samples, positions, sample size, channel stride, position stride) of the image."""
        return self._layout(int(self.geo.C), int(self.geo.S))

    def filters(self, w):
        geo = self.geo
        return device.reshaped(w, geo.group, geo.M // geo.group, geo.C // geo.group * geo.K)

    def col(self, img, batch_outer=False):
        """The whole batch's col of ``img``, in a workspace, as (G, C/G * K, B * O), or, batch
        outermost, (B, C * K, O) (one group: the direct products')."""
        geo = self.geo
        B, O, CK = int(geo.B), int(geo.O), int(geo.C * geo.K)
        col = device.workspace("conv col", CK * B * O, img.dtype)
        if geo.col_is_image and self.one_group() and not batch_outer:
            # a pointwise col is the image with its batch moved next to its positions: the
            # map -> rows copy, with neither tables nor divisions
            grid_launch(map_to_rows_kernel, O, CK, B)(
                device.flat(img), device.reshaped(col, CK, B * O), *self.image_layout())
            return device.reshaped(col, 1, CK, B * O)
        entries, _, koff, (B, O, S, *scalars) = self.tables()
        steps = (O, CK * O) if batch_outer else (B * O, O)
        grid_launch(im2col_kernel, O, CK, B)(device.flat(img), col, entries, koff, B, O, *steps,
                                             *scalars)
        if batch_outer:
            return device.reshaped(col, B, CK, O)
        return device.reshaped(col, geo.group, CK // geo.group, B * O)

    def rows(self, mp):
        """``mp`` as rows (M, B * O), in a workspace."""
        geo = self.geo
        rows = device.workspace("conv rows", geo.M * geo.B * geo.O, mp.dtype)
        rows = device.reshaped(rows, geo.M, geo.B * geo.O)
        grid_launch(map_to_rows_kernel, geo.O, geo.M, geo.B)(device.flat(mp), rows,
                                                             *self.map_layout())
        return rows

    def grouped(self, rows):
        geo = self.geo
        return device.reshaped(rows, geo.group, geo.M // geo.group, geo.B * geo.O)

    def _start(self, out, bias, init, layout):
        """Lay ``bias`` out over ``out`` when ``init`` asks for it (a GEMM then adds onto it);
        whether the GEMM adds onto ``out`` (the bias, or INIT_ADD's contents)."""
        if init != INIT_BIAS:
            return init == INIT_ADD
        B, positions, *strides = layout
        grid_launch(channel_fill_kernel, positions, bias.size, B)(
            device.flat(out), device.flat(bias), B, positions, *strides)
        return True

    def image_to_map(self, img, w, mp, bias=None, init=INIT_ZERO):
        """mp = conv(img, w), onto zero, bias or mp (``init``)."""
        geo = self.geo
        if self.direct():
            self._direct_image_to_map(img, w, mp, bias, init)
            return
        rows = device.workspace("conv rows", geo.M * geo.B * geo.O, img.dtype)
        rows = device.reshaped(rows, geo.M, geo.B * geo.O)
        blas.matmul(self.filters(w), self.col(img), self.grouped(rows), a_batch=self.same,
                    b_batch=self.same)
        bias = rows if bias is None else bias   # rows: a stand-in, not read
        grid_launch(rows_to_map_kernel, geo.O, geo.M, geo.B)(rows, device.flat(mp),
                                                             device.flat(bias), init,
                                                             *self.map_layout())

    def _direct_image_to_map(self, img, w, mp, bias, init):
        """Per sample b, map_b (M, O) = W (M, C*K) @ col_b (C*K, O) channel-first, and
        (O, M) = col_b^T @ W^T channel-last, as one batched GEMM writing the map; a pointwise
        channel-last one is the single GEMM (B*O, C) @ W^T over the image itself."""
        geo = self.geo
        B, O, M, CK = int(geo.B), int(geo.O), int(geo.M), int(geo.C * geo.K)
        accum = self._start(mp, bias, init, self.map_layout())
        w1 = device.reshaped(w, 1, M, CK)
        if geo.col_is_image and geo.channel_last:
            blas.matmul(device.reshaped(img, 1, B * O, CK), w1, device.reshaped(mp, 1, B * O, M),
                        trans_b=True, accum=accum)
            return
        col = device.reshaped(img, B, CK, O) if geo.col_is_image else self.col(img, True)
        each = blas.batch_map(B, (B,), (B,))
        if geo.channel_last:
            blas.matmul(col, w1, device.reshaped(mp, B, O, M), trans_a=True, trans_b=True,
                        accum=accum, a_batch=each)
        else:
            blas.matmul(w1, col, device.reshaped(mp, B, M, O), accum=accum, b_batch=each)

    def map_to_image(self, mp, w, img, bias=None, init=INIT_ZERO, rows=None):
        """img = conv^T(mp, w), onto zero, bias or img (``init``); ``rows``: mp's rows when
        already made."""
        if not self.direct():
            self.rows_to_image(self.rows(mp) if rows is None else rows, w, img, bias, init)
            return
        geo = self.geo
        B, O, M, CK = int(geo.B), int(geo.O), int(geo.M), int(geo.C * geo.K)
        w1 = device.reshaped(w, 1, M, CK)
        each = blas.batch_map(B, (B,), (B,))
        if geo.col_is_image:   # the col gradient is the image's: written in place
            accum = self._start(img, bias, init, self.image_layout())
            if geo.channel_last:
                blas.matmul(device.reshaped(mp, 1, B * O, M), w1,
                            device.reshaped(img, 1, B * O, CK), accum=accum)
            else:
                blas.matmul(w1, device.reshaped(mp, B, M, O), device.reshaped(img, B, CK, O),
                            trans_a=True, accum=accum, b_batch=each)
            return
        dcol = device.workspace("conv dcol", CK * B * O, mp.dtype)
        if geo.channel_last:   # dcol_b (C*K, O) = W^T @ map_b^T
            blas.matmul(w1, device.reshaped(mp, B, O, M), device.reshaped(dcol, B, CK, O),
                        trans_a=True, trans_b=True, b_batch=each)
        else:
            blas.matmul(w1, device.reshaped(mp, B, M, O), device.reshaped(dcol, B, CK, O),
                        trans_a=True, b_batch=each)
        self.col_to_image(dcol, img, bias, init, batch_outer=True)

    def rows_to_image(self, rows, w, img, bias=None, init=INIT_ZERO):
        """img = conv^T(the map of ``rows``, w), onto zero, bias or img (``init``)."""
        geo = self.geo
        dcol = device.workspace("conv dcol", geo.C * geo.K * geo.B * geo.O, rows.dtype)
        blas.matmul(self.filters(w), self.grouped(rows),
                    device.reshaped(dcol, geo.group, geo.C // geo.group * geo.K, geo.B * geo.O),
                    trans_a=True, a_batch=self.same, b_batch=self.same)
        self.col_to_image(dcol, img, bias, init)

    def col_to_image(self, dcol, img, bias=None, init=INIT_ZERO, batch_outer=False):
        """img = col2im(dcol) (a flat col of C * K rows, laid out as ``col`` lays it out), onto
        zero, bias or img (``init``)."""
        geo = self.geo
        bias = dcol if bias is None else bias   # dcol: a stand-in, not read
        _, col_rows, koff, (B, O, S, *scalars) = self.tables()
        steps = (O, geo.C * geo.K * O) if batch_outer else (B * O, O)
        grid_launch(col2im_kernel, S, geo.C, B)(
            device.flat(dcol), device.flat(img), device.flat(bias), init, col_rows, koff, B, O, S,
            *steps, *scalars)

    def filter_grad(self, img, mp, dw, accum, rows=None):
        """dw (+)= rows(mp) @ col(img)^T: the filter gradient when the map is dL/dmap (or,
        for the deconvolutions, when the image is dL/dimage); ``rows``: mp's rows when already
        made. Returns the rows it used (None: a pointwise channel-last one needs none, it is
        the one GEMM map^T (M, B*O) @ image (B*O, C))."""
        geo = self.geo
        if rows is None and geo.col_is_image and geo.channel_last and self.direct():
            B, O, M, C = int(geo.B), int(geo.O), int(geo.M), int(geo.C)
            blas.matmul(device.reshaped(mp, 1, B * O, M), device.reshaped(img, 1, B * O, C),
                        device.reshaped(dw, 1, M, C), trans_a=True, accum=accum)
            return None
        rows = self.rows(mp) if rows is None else rows
        blas.matmul(self.grouped(rows), self.col(img), self.filters(dw), trans_b=True,
                    accum=accum, a_batch=self.same, b_batch=self.same)
        return rows

    def channel_sums(self, a, of_map, out, accum):
        """out (+)= the per-channel sums of ``a``, the map (``of_map``) or the image: a bias
        gradient."""
        geo = self.geo
        channels, positions = (geo.M, geo.O) if of_map else (geo.C, geo.S)
        if geo.channel_last:
            reduction.reduce(device.reshaped(a, geo.B * positions, channels),
                             device.reshaped(out, channels), (0,), accum=accum)
        else:
            reduction.reduce(device.reshaped(a, geo.B, channels, positions),
                             device.reshaped(out, channels), (0, 2), accum=accum)


def _launch_of(op):
    """The node's :class:`ConvLaunch`, kept on it while its geometry is the same object (set up
    again, it gets a new one)."""
    kept = op.__dict__.get("device_conv_launch")
    if kept is None or kept.geo is not op.geo:
        kept = op.__dict__["device_conv_launch"] = ConvLaunch(op)
    return kept


def zero_unless_accum(grads, propagate_down, accum):
    """The gradients of an empty batch: zero, or unchanged when accumulated."""
    for g, pd, acc in zip(grads, propagate_down, accum):
        if pd and not acc and g.size:
            device.fill(g, 0)


@forward("Convolution", "DepthwiseConvolution")
def convolution_forward(op, inputs, outputs):
    if outputs[0].size:
        bias = inputs[2] if len(inputs) > 2 else None
        _launch_of(op).image_to_map(inputs[0], inputs[1], outputs[0], bias, init_for_bias(bias))


@backward("Convolution", "DepthwiseConvolution")
def convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx = conv^T(dy, W), dW (+)= rows(dy) col(x)^T, db (+)= the channel sums of dy (the rows of
    dy made once for all three when the products need them)."""
    dy = output_grads[0]
    if dy.size == 0:
        zero_unless_accum(input_grads, propagate_down, accum)
        return
    launch = _launch_of(op)
    rows = None if launch.direct() else launch.rows(dy)
    if propagate_down[0]:
        launch.map_to_image(dy, inputs[1], input_grads[0], init=init_for_accum(accum[0]),
                            rows=rows)
    if propagate_down[1]:
        rows = launch.filter_grad(inputs[0], dy, input_grads[1], accum[1], rows=rows)
    if len(inputs) > 2 and propagate_down[2]:
        if rows is None:
            launch.channel_sums(dy, True, input_grads[2], accum[2])
        else:
            reduction.reduce(rows, device.reshaped(input_grads[2], rows.shape[0]), (1,),
                             accum=accum[2])


@forward("Deconvolution", "DepthwiseDeconvolution")
def deconvolution_forward(op, inputs, outputs):
    """y = conv^T(x, W) (+ b): the convolution's data gradient."""
    y = outputs[0]
    if y.size:
        bias = inputs[2] if len(inputs) > 2 else None
        _launch_of(op).map_to_image(inputs[0], inputs[1], y, bias, init_for_bias(bias))


@backward("Deconvolution", "DepthwiseDeconvolution")
def deconvolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down,
                           accum):
    """dx = conv(dy, W), dW (+)= rows(x) col(dy)^T, db (+)= the channel sums of dy."""
    dy = output_grads[0]
    if dy.size == 0:
        zero_unless_accum(input_grads, propagate_down, accum)
        return
    launch = _launch_of(op)
    if propagate_down[0]:
        launch.image_to_map(dy, inputs[1], input_grads[0], init=init_for_accum(accum[0]))
    if propagate_down[1]:
        launch.filter_grad(dy, inputs[0], input_grads[1], accum[1])
    if len(inputs) > 2 and propagate_down[2]:
        launch.channel_sums(dy, False, input_grads[2], accum[2])
