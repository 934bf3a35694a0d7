"""CUDA kernels of Convolution and DepthwiseConvolution (channel-first; channel-last ones run
their CPU kernels): im2col + GEMM through ``blas.matmul``, as the CPU's ``ConvGeometry`` does.

With the whole batch's col ``(C * K, B * O)`` (rows in the filter's column order, group by
group, so that it is ``(G, C/G * K, B * O)``) in a workspace buffer of the device pool
(``device.workspace``), the three products are one batched GEMM over the groups:

    rows (G, M/G, B*O)    = W (G, M/G, C/G*K) @ col                    (forward)
    dcol (G, C/G*K, B*O)  = W^T @ rows(dy)                             (dx, then col2im)
    dW   (G, M/G, C/G*K) += rows(dy) @ col^T                           (filter gradient)

col2im gathers (one thread per image element, summing the col entries that read it), so no
atomics are needed. Any number of spatial dims; the geometry is the node's ``op.geo``.
"""
from . import blas, device, reduction
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()


@device_function
def tap_offset(k, kernel_shape, dilation, d):
    """Offset along spatial dim ``d`` of kernel tap ``k`` (C order over ``kernel_shape``)."""
    for e in range(len(kernel_shape) - 1, d, -1):
        k //= kernel_shape[e]
    return (k % kernel_shape[d]) * dilation[d]


@kernel
def im2col_kernel(img, col, n_batch, channels, img_sp, map_sp, kernel_shape, stride, pad,
                  dilation, n_img, n_map, n_taps):
    """col[c * K + k, b * O + o] = img[b, c, o * stride + tap(k) - pad] (0 in the padding)."""
    i = cuda.grid(1)
    if i < col.size:
        width = n_batch * n_map
        row = i // width
        rest = i - row * width
        b = rest // n_map
        o = rest - b * n_map
        c = row // n_taps
        k = row - c * n_taps
        pos = 0
        inside = True
        rem = o
        step = 1
        for d in range(len(img_sp) - 1, -1, -1):
            od = rem % map_sp[d]
            rem //= map_sp[d]
            p = od * stride[d] + tap_offset(k, kernel_shape, dilation, d) - pad[d]
            if p < 0 or p >= img_sp[d]:
                inside = False
            pos += p * step
            step *= img_sp[d]
        col[row, rest] = img[(b * channels + c) * n_img + pos] if inside else 0.0


@kernel
def col2im_kernel(col, img, n_batch, channels, img_sp, map_sp, kernel_shape, stride, pad,
                  dilation, n_img, n_map, n_taps, accum):
    """img[b, c, p] (+)= the sum of col[c * K + k, b * O + o] over the (k, o) that read p."""
    i = cuda.grid(1)
    if i < img.size:
        bc = i // n_img
        p_flat = i - bc * n_img
        b = bc // channels
        c = bc - b * channels
        acc = 0.0
        for k in range(n_taps):
            o = 0
            valid = True
            rem = p_flat
            step = 1
            for d in range(len(img_sp) - 1, -1, -1):
                p = rem % img_sp[d]
                rem //= img_sp[d]
                q = p + pad[d] - tap_offset(k, kernel_shape, dilation, d)
                od = q // stride[d]
                if q < 0 or q - od * stride[d] != 0 or od >= map_sp[d]:
                    valid = False
                o += od * step
                step *= map_sp[d]
            if valid:
                acc += col[c * n_taps + k, b * n_map + o]
        if accum:
            img[i] += acc
        else:
            img[i] = acc


@kernel
def rows_to_map_kernel(rows, mp, bias, has_bias, n_batch, n_map):
    """mp[b, m, o] = rows[m, b * O + o] (+ bias[m])."""
    i = cuda.grid(1)
    if i < mp.size:
        bm = i // n_map
        o = i - bm * n_map
        m = bm % rows.shape[0]
        b = bm // rows.shape[0]
        v = rows[m, b * n_map + o]
        if has_bias:
            v += bias[m]
        mp[i] = v


@kernel
def map_to_rows_kernel(mp, rows, n_batch, n_map):
    """rows[m, b * O + o] = mp[b, m, o]."""
    i = cuda.grid(1)
    if i < mp.size:
        bm = i // n_map
        o = i - bm * n_map
        m = bm % rows.shape[0]
        b = bm // rows.shape[0]
        rows[m, b * n_map + o] = mp[i]


def _geometry(op):
    geo = op.geo
    D = len(geo.img_sp)
    as_tuple = (lambda v: tuple(int(e) for e in v) if len(v) == D else (int(v[0]),) * D)
    return geo, (tuple(geo.img_sp), tuple(geo.map_sp), tuple(geo.kernel), as_tuple(op.stride),
                 as_tuple(op.pad), as_tuple(op.dilation), geo.S, geo.O, geo.K)


def _col(geo, spatial, x, name="conv col"):
    """The whole batch's col of image x, in the workspace ``name``, as (G, C/G * K, B * O)."""
    col = device.workspace(name, geo.C * geo.K * geo.B * geo.O, x.dtype)
    col2 = col.reshape(geo.C * geo.K, geo.B * geo.O)
    device.launch(im2col_kernel, col.size, x.reshape(x.size), col2, geo.B, geo.C, *spatial)
    return col.reshape(geo.group, geo.C // geo.group * geo.K, geo.B * geo.O)


def _filters(geo, w):
    return w.reshape(geo.group, geo.M // geo.group, geo.C // geo.group * geo.K)


def _rows(geo, dtype, name):
    return device.workspace(name, geo.M * geo.B * geo.O, dtype).reshape(geo.M, geo.B * geo.O)


def _grouped(geo, rows):
    return rows.reshape(geo.group, geo.M // geo.group, geo.B * geo.O)


def _same_batches(geo):
    return blas.batch_map(geo.group, (geo.group,), (geo.group,))


def _channel_first(op):
    return not op.geo.channel_last


@forward("Convolution", "DepthwiseConvolution", when=_channel_first)
def convolution_forward(op, inputs, outputs):
    geo, spatial = _geometry(op)
    x, w, y = inputs[0], inputs[1], outputs[0]
    if y.size == 0:
        return
    col = _col(geo, spatial, x)
    rows = _rows(geo, x.dtype, "conv rows")
    same = _same_batches(geo)
    blas.matmul(_filters(geo, w), col, _grouped(geo, rows), a_batch=same, b_batch=same)
    bias = inputs[2] if len(inputs) > 2 else rows   # rows: a stand-in, not read
    device.launch(rows_to_map_kernel, y.size, rows, y.reshape(y.size), bias.reshape(bias.size),
                  len(inputs) > 2, geo.B, geo.O)


@backward("Convolution", "DepthwiseConvolution")
def convolution_backward(op, inputs, outputs, output_grads, input_grads, propagate_down, accum):
    """dx = col2im(W^T rows(dy)), dW (+)= rows(dy) col(x)^T, db (+)= the row sums of rows(dy)."""
    geo, spatial = _geometry(op)
    dy = output_grads[0]
    if dy.size == 0:
        return
    rows = _rows(geo, dy.dtype, "conv rows")
    device.launch(map_to_rows_kernel, dy.size, dy.reshape(dy.size), rows, geo.B, geo.O)
    grouped = _grouped(geo, rows)
    same = _same_batches(geo)
    if propagate_down[0]:
        dcol = device.workspace("conv dcol", geo.C * geo.K * geo.B * geo.O, dy.dtype)
        dcol3 = dcol.reshape(geo.group, geo.C // geo.group * geo.K, geo.B * geo.O)
        blas.matmul(_filters(geo, inputs[1]), grouped, dcol3, trans_a=True, a_batch=same,
                    b_batch=same)
        dx = input_grads[0]
        device.launch(col2im_kernel, dx.size, dcol.reshape(geo.C * geo.K, geo.B * geo.O),
                      dx.reshape(dx.size), geo.B, geo.C, *spatial, accum[0])
    if propagate_down[1]:
        col = _col(geo, spatial, inputs[0])
        blas.matmul(grouped, col, _filters(geo, input_grads[1]), trans_b=True, accum=accum[1],
                    a_batch=same, b_batch=same)
    if len(inputs) > 2 and propagate_down[2]:
        reduction.reduce(rows, input_grads[2].reshape(geo.M), (1,), accum=accum[2])
