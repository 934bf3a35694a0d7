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
"""
from ..ops import convolution as cpu_conv
from ..ops.convolution import INIT_ADD, INIT_BIAS, INIT_ZERO, init_for_accum, init_for_bias
from . import blas, device, reduction
from .device import unravel3
from .registry import backward, device_function, forward, kernel

cuda = None  # numba.cuda, bound by device.load()

# The CPU's layout and col rules (ops/convolution.py), compiled for the device.
sample_strides = device_function(cpu_conv.sample_strides.py_func)
col_row = device_function(cpu_conv.col_row.py_func)
col_entry = device_function(cpu_conv.col_entry.py_func)


@device_function
def tap_offset(k, kernel_shape, dilation, d):
    """Offset along spatial dim ``d`` of kernel tap ``k`` (C order over ``kernel_shape``)."""
    for e in range(len(kernel_shape) - 1, d, -1):
        k //= kernel_shape[e]
    return (k % kernel_shape[d]) * dilation[d]


@device_function
def element_at(b, c, p, channels, n_positions, channel_last):
    """Flat index of element (channel c, position p) of sample b of an image or map."""
    cs, ps = sample_strides(channels, n_positions, channel_last)
    return b * channels * n_positions + c * cs + p * ps


@device_function
def element_of(i, channels, n_positions, channel_last):
    """(b, c, p): sample, channel and position of flat element i of an image or map
    (``element_at`` inverted)."""
    if channel_last:
        b, p, c = unravel3(i, n_positions, channels)
    else:
        b, c, p = unravel3(i, channels, n_positions)
    return b, c, p


@device_function
def write_init(out, i, v, init, bias, channel):
    """out[i] = v added to out[i] (INIT_ADD), to zero, or to bias[channel] (INIT_BIAS)."""
    if init == INIT_ADD:
        out[i] += v
    elif init == INIT_BIAS:
        out[i] = v + bias[channel]
    else:
        out[i] = v


@kernel
def im2col_kernel(img, col, n_batch, channels, group, channel_last, img_sp, map_sp,
                  kernel_shape, stride, pad, dilation, n_img, n_map, n_taps):
    """col[row(c, k), b * O + o] = img[b, c, o * stride + tap(k) - pad] (0 in the padding)."""
    i = cuda.grid(1)
    if i < col.size:
        row, b, o = unravel3(i, n_batch, n_map)
        c, k = col_entry(row, n_taps, channels // group, channel_last)
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
        col[row, b * n_map + o] = (img[element_at(b, c, pos, channels, n_img, channel_last)]
                                   if inside else 0.0)


@kernel
def col2im_kernel(col, img, bias, init, n_batch, channels, group, channel_last, img_sp, map_sp,
                  kernel_shape, stride, pad, dilation, n_img, n_map, n_taps):
    """img[b, c, p] = the sum of col[row(c, k), b * O + o] over the (k, o) that read p, added
    to img (INIT_ADD), to zero or to bias[c] (the CPU's init modes)."""
    i = cuda.grid(1)
    if i < img.size:
        b, c, p_flat = element_of(i, channels, n_img, channel_last)
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
                acc += col[col_row(c, k, n_taps, channels // group, channel_last), b * n_map + o]
        write_init(img, i, acc, init, bias, c)


@kernel
def rows_to_map_kernel(rows, mp, bias, init, n_map, channel_last):
    """mp[b, m, o] = rows[m, b * O + o], added to mp (INIT_ADD), to zero or to bias[m]."""
    i = cuda.grid(1)
    if i < mp.size:
        b, m, o = element_of(i, rows.shape[0], n_map, channel_last)
        write_init(mp, i, rows[m, b * n_map + o], init, bias, m)


@kernel
def map_to_rows_kernel(mp, rows, n_map, channel_last):
    """rows[m, b * O + o] = mp[b, m, o]."""
    i = cuda.grid(1)
    if i < mp.size:
        b, m, o = element_of(i, rows.shape[0], n_map, channel_last)
        rows[m, b * n_map + o] = mp[i]


class ConvLaunch:
    """One node's geometry as the kernels take it, and the three products over device arrays."""

    def __init__(self, op):
        geo = self.geo = op.geo
        self.layout = (int(geo.group), bool(geo.channel_last))
        as_ints = (lambda v: tuple(int(e) for e in v))
        self.spatial = (as_ints(geo.img_sp), as_ints(geo.map_sp), as_ints(geo.kernel), geo.stride,
                        geo.pad, geo.dilation, int(geo.S), int(geo.O), int(geo.K))
        self.same = blas.batch_map(geo.group, (geo.group,), (geo.group,))

    def filters(self, w):
        geo = self.geo
        return device.reshaped(w, geo.group, geo.M // geo.group, geo.C // geo.group * geo.K)

    def col(self, img):
        """The whole batch's col of ``img``, in a workspace, as (G, C/G * K, B * O)."""
        geo = self.geo
        col = device.workspace("conv col", geo.C * geo.K * geo.B * geo.O, img.dtype)
        device.launch(im2col_kernel, col.size, device.flat(img),
                      device.reshaped(col, geo.C * geo.K, geo.B * geo.O), geo.B, geo.C,
                      *self.layout, *self.spatial)
        return device.reshaped(col, geo.group, geo.C // geo.group * geo.K, geo.B * geo.O)

    def rows(self, mp):
        """``mp`` as rows (M, B * O), in a workspace."""
        geo = self.geo
        rows = device.workspace("conv rows", geo.M * geo.B * geo.O, mp.dtype)
        rows = device.reshaped(rows, geo.M, geo.B * geo.O)
        device.launch(map_to_rows_kernel, mp.size, device.flat(mp), rows, geo.O,
                      self.layout[1])
        return rows

    def grouped(self, rows):
        geo = self.geo
        return device.reshaped(rows, geo.group, geo.M // geo.group, geo.B * geo.O)

    def image_to_map(self, img, w, mp, bias=None, init=INIT_ZERO):
        """mp = conv(img, w), onto zero, bias or mp (``init``)."""
        geo = self.geo
        rows = device.workspace("conv rows", geo.M * geo.B * geo.O, img.dtype)
        rows = device.reshaped(rows, geo.M, geo.B * geo.O)
        blas.matmul(self.filters(w), self.col(img), self.grouped(rows), a_batch=self.same,
                    b_batch=self.same)
        bias = rows if bias is None else bias   # rows: a stand-in, not read
        device.launch(rows_to_map_kernel, mp.size, rows, device.flat(mp),
                      device.flat(bias), init, geo.O, self.layout[1])

    def rows_to_image(self, rows, w, img, bias=None, init=INIT_ZERO):
        """img = conv^T(the map of ``rows``, w), onto zero, bias or img (``init``)."""
        geo = self.geo
        dcol = device.workspace("conv dcol", geo.C * geo.K * geo.B * geo.O, rows.dtype)
        blas.matmul(self.filters(w), self.grouped(rows),
                    device.reshaped(dcol, geo.group, geo.C // geo.group * geo.K, geo.B * geo.O),
                    trans_a=True, a_batch=self.same, b_batch=self.same)
        bias = dcol if bias is None else bias   # dcol: a stand-in, not read
        device.launch(col2im_kernel, img.size, device.reshaped(dcol, geo.C * geo.K, geo.B * geo.O),
                      device.flat(img), device.flat(bias), init, geo.B, geo.C,
                      *self.layout, *self.spatial)

    def filter_grad(self, img, rows, dw, accum):
        """dw (+)= rows(map) @ col(img)^T: the filter gradient when the map is dL/dmap (or,
        for the deconvolutions, when the image is dL/dimage)."""
        blas.matmul(self.grouped(rows), self.col(img), self.filters(dw), trans_b=True,
                    accum=accum, a_batch=self.same, b_batch=self.same)


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
    """dx = col2im(W^T rows(dy)), dW (+)= rows(dy) col(x)^T, db (+)= the row sums of rows(dy)."""
    dy = output_grads[0]
    if dy.size == 0:
        zero_unless_accum(input_grads, propagate_down, accum)
        return
    launch = _launch_of(op)
    rows = launch.rows(dy)
    if propagate_down[0]:
        launch.rows_to_image(rows, inputs[1], input_grads[0], init=init_for_accum(accum[0]))
    if propagate_down[1]:
        launch.filter_grad(inputs[0], rows, input_grads[1], accum[1])
    if len(inputs) > 2 and propagate_down[2]:
        reduction.reduce(rows, device.reshaped(input_grads[2], rows.shape[0]), (1,),
                         accum=accum[2])


@forward("Deconvolution", "DepthwiseDeconvolution")
def deconvolution_forward(op, inputs, outputs):
    """y = col2im(W^T rows(x)) (+ b): the convolution's data gradient."""
    y = outputs[0]
    if y.size:
        launch = _launch_of(op)
        bias = inputs[2] if len(inputs) > 2 else None
        launch.rows_to_image(launch.rows(inputs[0]), inputs[1], y, bias, init_for_bias(bias))


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
        launch.filter_grad(dy, launch.rows(inputs[0]), input_grads[1], accum[1])
    if len(inputs) > 2 and propagate_down[2]:
        geo = op.geo
        per_channel = (device.reshaped(dy, geo.B * geo.S, geo.C), (0,)) if geo.channel_last else \
            (device.reshaped(dy, geo.B, geo.C, geo.S), (0, 2))
        reduction.reduce(per_channel[0], device.reshaped(input_grads[2], geo.C), per_channel[1],
                         accum=accum[2])
