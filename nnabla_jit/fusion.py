"""Elementwise fusion: a run of table-line ops becomes one generated loop, forward and backward.

When ``forward`` is called with ``clear_no_need_grad`` or ``clear_buffer`` the caller has given
up the intermediate values nobody needs, so a run of consecutive same-shaped elementwise nodes
(``tanh(2x+1) * sigmoid(x)``...) can be computed in one pass over the elements, keeping the
intermediates in registers and storing only what later nodes, the caller or the backward pass
read. Under ``backward(clear_buffer=True)`` the gradients inside such a run are likewise
accumulated in registers and only the gradients of the run's inputs are written.

Without clearing flags the runs are fused too, storing every value and gradient (nnabla keeps
them all): one pass still reads each input once instead of once per op.

A host region whose last output a Sum or Mean of every element reads next sums it in the same
pass (:func:`_sum_kernel_pair`: values go through a small tile, summed as ``sum_all`` sums,
since a running total in the element loop would stop LLVM from vectorising it); in backward such
a region takes that Sum's gradient as one scalar instead of the array the Sum's backward would
broadcast it into.

The fused kernels are generated from the ops' expressions (``ops/elementwise.py``) into a
module in the kernel cache directory named by a hash of its text, so numba's on-disk cache
serves the next process. Scalar arguments are kernel parameters: graphs of the same structure
share one compiled kernel.
"""
import ast
import re

import numba
import numpy as np

from . import runners
from .buffers import HOST, InputNotComputed, fetch_all, forward_fetches
from .ndarray import NotComputed
from .ops.elementwise import ElementwiseOp, prelude, load_generated, typed_scalars
from .ops.kernels import uses_parallel
from .ops.normalization import BatchNormalization
from .ops.reduction import Sum

ZERO_REF = "__zero_ref__"   # placeholder for the value zeros are typed like
MIN_REGION = 2    # a single op gains nothing from fusion
MAX_REGION = 12   # LLVM's compile time grows faster than linearly with a kernel's length;
                  # long chains split into equal pieces that share one compiled kernel


class HostFusion:
    """The host's fused kernels: a serial and a prange loop, the latter for large arrays;
    scalars typed as the compute type. A device registers its own (``runners.register_device``'s
    ``fusion``), with the same three methods."""

    @staticmethod
    def takes(node):
        return True

    @staticmethod
    def kernel(body_lines, params, arrays, size, dtype):
        serial, parallel = _kernel_pair(body_lines, params, arrays)
        return parallel if uses_parallel(size) else serial

    @staticmethod
    def sum_kernel(body_lines, params, arrays, size, dtype, last):
        """``kernel``'s loop that also returns the sum of the values ``last`` names (the
        whole-array Sum reading the region's last output), summed in ``n_blocks`` blocks, its
        last parameter: the blocks of ``reduction.sum_of_everything``."""
        serial, parallel = _sum_kernel_pair(body_lines, params, arrays, last)
        if uses_parallel(size):
            return lambda *args: parallel(*args, 4 * numba.get_num_threads())
        return lambda *args: serial(*args, 1)

    # backward takes a whole-array Sum's gradient as a scalar read on the host (a device's
    # fusion would copy it down every step: it leaves the Sum's backward as it is)
    takes_sum_gradients = True

    scalars = staticmethod(typed_scalars)


HOST_FUSION = HostFusion()


def _fusion_of(node):
    """(fused-kernel builder, memory) of the device ``node`` runs on; None when that device
    fuses nothing."""
    if node.ctx.device == runners.HOST_DEVICE:
        return HOST_FUSION, HOST
    device = runners.DEVICES.get(node.ctx.device)
    if device is None or device.fusion is None:
        return None
    return device.fusion, device.memory


def whole_sum_scale(node):
    """For a Sum or Mean of every element of its input: the factor from that sum to its output
    (1, or 1 / the element count); else None."""
    op = node.op
    if not isinstance(op, Sum) or node._outputs[0]() is None or len(node.inputs) != 1:
        return None
    lay = op.layout
    if lay.perm is not None or lay.shape3[0] != 1 or lay.shape3[2] != 1:
        return None
    return 1.0 / max(lay.size_reduced, 1) if op.mean else 1.0


def _closing_sum(node, after, capability):
    """(``after``, its scale) when ``after`` is a whole-array Sum or Mean of ``node``'s output,
    on a device whose fusion has ``capability``: ``takes_sum_gradients`` (a fused backward
    region ending at ``node`` takes the Sum's gradient as a scalar) or ``sum_kernel`` (a fused
    forward region ending at ``node`` sums it in its pass); else None."""
    target = _fusion_of(node)
    if after is None or target is None or not getattr(target[0], capability, False):
        return None
    scale = whole_sum_scale(after)
    if scale is None or after.inputs[0] is not node._outputs[0]() or after.ctx.device != node.ctx.device:
        return None
    return after, scale


def fusible(node):
    """Whether ``node`` can join a fused region: a same-shape elementwise op on the host, or
    on a device that fuses it."""
    op = node.op
    if not (isinstance(op, ElementwiseOp) and op.same_shape
            and node.storage_dtype == node.compute_dtype and len(node._outputs) == 1
            and node._outputs[0]() is not None):
        return False
    target = _fusion_of(node)
    return target is not None and target[0].takes(node)


def _regions(nodes, taken=()):
    """Maximal runs of consecutive fusible nodes with one output shape, compute type and
    device, leaving out the nodes whose ids are in ``taken``."""
    runs, current = [], []
    for k, node in enumerate(nodes):
        key = ((node._outputs[0]().shape, node.compute_dtype, node.ctx.device)
               if id(node) not in taken and fusible(node) else None)
        if key is not None and current and current[0][1] == key and len(current) < MAX_REGION:
            current.append((k, key))
            continue
        if len(current) >= MIN_REGION:
            runs.append([k for k, _ in current])
        current = [(k, key)] if key is not None else []
    if len(current) >= MIN_REGION:
        runs.append([k for k, _ in current])
    return runs


class _Renamer(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        new = self.names.get(node.id)
        if new is None:
            return node
        if isinstance(new, ast.AST):
            return ast.copy_location(new, node)
        return ast.copy_location(ast.Name(id=new, ctx=node.ctx), node)


def _names(expr):
    """The names an expression reads."""
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def _rename(expr, names):
    """``expr`` with its names replaced (inputs -> value names, args -> parameter names or
    literal expressions)."""
    tree = _Renamer(names).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(tree)


def _literal(value, ref):
    """``like(value, ref)``: a baked argument typed like the value ``ref`` names."""
    return ast.Call(func=ast.Name(id="like", ctx=ast.Load()),
                    args=[ast.Constant(value), ast.Name(id=ref, ctx=ast.Load())], keywords=[])


def _arguments(op, k, mapping, ref):
    """Map op k's arguments to kernel parameters (returned) or baked literals."""
    params = []
    for a in op.line.arg_names:
        if a in op.line.baked_args:
            mapping[a] = _literal(op.args[a], ref)
        else:
            mapping[a] = "p{}_{}".format(k, a)
            params.append(a)
    return params


SUM_TILE = 1024   # values per pass of the summing loop: a few KB, in L1

# The element loop stores the summed value into a tile; the tile is then summed with eight
# running sums, as ``reduction.sum_all`` sums (the same order: the same float64 total). The loop
# runs over views of the tile's span indexed from 0 (an index like i - start would get numba's
# negative-index check, which stops LLVM from vectorising the loop).
_SUM_KERNEL = """

{deco}
def fused_sum{suffix}({params}, n_blocks):
{flat}    n = {first}.size
    partial = np.zeros(n_blocks, np.float64)
    for blk in {loop}(n_blocks):
        lo = blk * n // n_blocks
        hi = (blk + 1) * n // n_blocks
        acc = np.zeros(8, np.float64)
        tile = np.empty({tile}, {first}.dtype)
        start = lo
        j = 0
        m = 0
        while start < hi:
            stop = min(start + {tile}, hi)
{views}            for i in range(stop - start):
{body}                tile[i] = {last}
            m = stop - start
            j = 0
            while j + 8 <= m:
                for q in range(8):
                    acc[q] += tile[j + q]
                j += 8
            start = stop
        total = 0.0
        for q in range(8):
            total += acc[q]
        for r in range(j, m):    # the block's last few values, after the running sums
            total += tile[r]
        partial[blk] = total
    return partial.sum()
"""


def _sum_kernel_pair(body_lines, params, arrays, last):
    """Source and loader of a serial and a prange :data:`_SUM_KERNEL`."""
    flat = "".join("    {0} = {0}.reshape({0}.size)\n".format(a) for a in arrays)
    views = "".join("            {0}_t = {0}[start:stop]\n".format(a) for a in arrays)
    spans = re.compile(r"\b({})\[i\]".format("|".join(arrays)))
    body = "".join("                " + spans.sub(r"\1_t[i]", line) + "\n" for line in body_lines)
    text = prelude() + "import numpy as np\n"
    for suffix, deco, loop in (("", '@njit(cache=True, error_model="numpy")', "range"),
                               ("_parallel", '@njit(cache=True, parallel=True, error_model="numpy")', "prange")):
        text += _SUM_KERNEL.format(deco=deco, suffix=suffix, params=", ".join(params), flat=flat,
                                   first=arrays[0], loop=loop, tile=SUM_TILE, views=views, body=body,
                                   last=last)
    module = load_generated("nnabla_jit_fused_", text)
    return module.fused_sum, module.fused_sum_parallel


def _kernel_pair(body_lines, params, arrays):
    """Source and loader of a serial and a prange kernel running ``body_lines`` per element."""
    flat = "".join("    {0} = {0}.reshape({0}.size)\n".format(a) for a in arrays)
    body = "".join("        " + line + "\n" for line in body_lines)
    text = prelude()
    for suffix, deco, loop in (("", '@njit(cache=True, error_model="numpy")', "range"),
                               ("_parallel", '@njit(cache=True, parallel=True, error_model="numpy")', "prange")):
        text += "\n\n{}\ndef fused{}({}):\n{}    for i in {}({}.size):\n{}".format(
            deco, suffix, ", ".join(params), flat, loop, arrays[0], body)
    module = load_generated("nnabla_jit_fused_", text)
    return module.fused, module.fused_parallel


# ------------------------------------------------------------------------------ forward
class FusedForward:
    """Runs a region's forward in one kernel call."""

    def __init__(self, region_nodes, keep, closing_sum=None):
        """``keep(var)`` says whether an intermediate must be stored. ``closing_sum``: the
        whole-array Sum or Mean node reading the last output next, whose output is computed in
        the same pass."""
        names, inputs, lines, scalars = {}, [], [], []
        for k, node in enumerate(region_nodes):
            op = node.op
            mapping = {}
            for name, v in zip(op.line.input_names, node.inputs):
                if id(v) not in names:       # an input from outside the region
                    names[id(v)] = "e{}_v".format(len(inputs))
                    inputs.append(v)
                mapping[name] = names[id(v)]
            taken = _arguments(op, k, mapping, mapping[op.line.input_names[0]])
            scalars += [(k, op, a) for a in taken]
            names[id(node._outputs[0]())] = "v{}".format(k)
            lines.append("v{} = {}".format(k, _rename(op.line.kernel_forward, mapping)))
        stored = [(node._outputs[0](), "v{}".format(k)) for k, node in enumerate(region_nodes)
                  if keep(node._outputs[0]())]
        in_arrays = ["e{}".format(j) for j in range(len(inputs))]
        out_arrays = ["o{}".format(m) for m in range(len(stored))]
        loads = ["{0}_v = {0}[i]".format(a) for a in in_arrays]
        stores = ["o{}[i] = {}".format(m, name) for m, (_, name) in enumerate(stored)]
        params = out_arrays + in_arrays + ["p{}_{}".format(k, a) for k, _, a in scalars]
        target, memory = _fusion_of(region_nodes[0])
        size = int(np.prod(region_nodes[0]._outputs[0]().shape, dtype=np.int64))
        self.dtype = region_nodes[0].compute_dtype
        self.total = None
        if closing_sum is None:
            self.kernel = target.kernel(loads + lines + stores, params, out_arrays + in_arrays,
                                        size, self.dtype)
        else:
            self.kernel = target.sum_kernel(loads + lines + stores, params, out_arrays + in_arrays,
                                            size, self.dtype, "v{}".format(len(region_nodes) - 1))
            self.total = memory.write(closing_sum._outputs[0]()._body.data)
            op = closing_sum.op   # a Mean divides its total as the Sum op does
            self.divisor = max(op.layout.size_reduced, 1) if op.mean else 1
        # the outputs (overwritten), then the inputs, all as the compute type
        self.fetches = ([(memory.write(v._body.data), self.dtype) for v, _ in stored]
                        + [(memory.read(v._body.data), self.dtype) for v in inputs])
        self.scalars = target.scalars([op.args[a] for _, op, a in scalars], self.dtype)
        # what the region holds (a trace names them)
        self.nodes = region_nodes + ([closing_sum] if closing_sum else [])

    def __call__(self):
        if self.total is None:
            self.kernel(*fetch_all(self.fetches), *self.scalars)
            return
        total = self.kernel(*fetch_all(self.fetches), *self.scalars)
        self.total(self.dtype)[...] = total / self.divisor if self.divisor != 1 else total


def _keeper(roots, needed_by_backward, clear_buffer, keep_all=False):
    """``keep(v, members)``: whether ``v``, computed inside a fused group of nodes whose ids are
    ``members``, must still be stored (someone outside the group, the caller or backward reads
    it; ``keep_all``: a forward without clearing flags, after which every value is there)."""
    root_ids = {id(r._body) for r in roots}

    def keep(v, members):
        if keep_all or v._persistent or id(v._body) in root_ids or v._body.data.kept_for_user:
            return True
        if not clear_buffer and id(v) in needed_by_backward:
            return True
        return any(id(f) not in members for f in v.function_references)
    return keep


def fuse_forward(plan, roots, needed_by_backward, clear_buffer, keep_all=False):
    """Replace the runners of each fusible region of ``plan`` by one fused runner; the frees of
    the region's nodes move to after it. First, a BatchNormalization whose output only a ReLU
    (or an Add2 and then a ReLU) reads runs with them (:class:`NormalizationEpilogue`), and so
    does an op whose output only a ReLU reads when the op applies it for free (a tiled
    Convolution, ``relu_epilogue``).
    ``keep_all``: every value is stored (a forward without clearing flags)."""
    keep = _keeper(roots, needed_by_backward, clear_buffer, keep_all)
    nodes = [node for node, _ in plan.steps]
    runners, steps = list(plan.runners), list(plan.steps)
    position = {id(node): k for k, node in enumerate(nodes)}
    taken = set()
    for k, node in enumerate(nodes):
        found = _normalization_epilogue(node, position, keep) or _relu_epilogue(node, position, keep)
        if found is None or any(id(n) in taken for n in found[0]):
            continue
        chain, z = found
        runners[k] = NormalizationEpilogue(chain, z)
        later = [position[id(n)] for n in chain[1:]]
        steps[k] = (node, steps[k][1] + [v for j in later for v in steps[j][1]])
        for j in later:
            runners[j] = None
        taken.update(id(n) for n in chain)
    for region in _regions(nodes, taken):
        closing = _forward_closing_sum(nodes, region)
        if closing is not None:
            region = region + [region[-1] + 1]
        members = {id(nodes[k]) for k in region}
        runners[region[0]] = FusedForward([nodes[k] for k in region[:-1 if closing else None]],
                                          lambda v, members=members: keep(v, members), closing)
        frees = [v for k in region for v in steps[k][1]]
        steps[region[0]] = (nodes[region[-1]], frees)
        for k in region[1:]:
            runners[k] = None
    plan.steps = [st for st, r in zip(steps, runners) if r is not None]
    plan.runners = [r for r in runners if r is not None]


def _forward_closing_sum(nodes, region):
    """The node after ``region`` when it is a whole-array Sum or Mean of the region's last
    output, which the region's device can sum in its pass; else None."""
    last = nodes[region[-1]]
    after = nodes[region[-1] + 1] if region[-1] + 1 < len(nodes) else None
    if (_closing_sum(last, after, "sum_kernel") is None or after.compute_dtype != last.compute_dtype
            or after.storage_dtype != after.compute_dtype):
        return None
    return after


def _plain_host(node):
    return (node.ctx.device == runners.HOST_DEVICE and node.storage_dtype == node.compute_dtype
            and len(node._outputs) == 1 and node._outputs[0]() is not None)


def _normalization_epilogue(bn, position, keep):
    """([bn, (add2,) relu], z) when BatchNormalization ``bn``'s output only a ReLU reads, or
    only an Add2 whose other operand ``z`` is computed before ``bn`` and whose output only a
    ReLU reads, none of the values in between kept (all plain host nodes of one compute type);
    else None."""
    if type(bn.op) is not BatchNormalization or not _plain_host(bn):
        return None
    chain, z, v = [bn], None, bn._outputs[0]()
    while True:
        readers = v.function_references
        if len(readers) != 1:
            return None
        node = readers[0]
        if (id(node) not in position or not _plain_host(node)
                or node.compute_dtype != bn.compute_dtype
                or any(node.op.inplace_data(i) for i in range(len(node.inputs)))):
            return None
        chain.append(node)
        if node.op.name == "ReLU":
            break
        if node.op.name != "Add2" or len(chain) != 2 or not node.op.same_shape:
            return None
        others = [u for u in node.inputs if u is not v]
        if len(others) != 1:
            return None
        z = others[0]
        if z._parent is not None and position.get(id(z._parent), len(position)) > position[id(bn)]:
            return None   # computed after the normalization: not there when it runs
        v = node._outputs[0]()
    members = {id(n) for n in chain}
    if any(keep(n._outputs[0](), members) for n in chain[:-1]):
        return None
    return chain, z


def _relu_epilogue(node, position, keep):
    """([node, relu], None) when ``node``'s op applies a ReLU as it writes at no extra cost
    (its ``relu_epilogue``) and only a ReLU reads its output, which is not kept (plain host
    nodes of one compute type); else None."""
    relu_epilogue = getattr(node.op, "relu_epilogue", None)
    if relu_epilogue is None or not _plain_host(node) or not relu_epilogue(node.compute_dtype):
        return None
    readers = node._outputs[0]().function_references
    if len(readers) != 1:
        return None
    relu = readers[0]
    if (relu.op.name != "ReLU" or id(relu) not in position or not _plain_host(relu)
            or relu.compute_dtype != node.compute_dtype or relu.op.inplace_data(0)
            or keep(node._outputs[0](), {id(node), id(relu)})):
        return None
    return [node, relu], None


class NormalizationEpilogue:
    """A BatchNormalization with the (Add2 and) ReLU that alone read it: the normalisation's
    kernel adds ``z`` and applies the ReLU as it writes (FusedBatchNormalization's epilogue),
    straight into the ReLU's output: one pass over the elements instead of two or three. The
    values in between are never stored; the backward steps are unchanged (the normalization's
    reads its input and the batch statistics, the ReLU's its own output). A tiled Convolution
    and its ReLU run the same way (``forward_fused`` with z None: the convolution's backward
    reads its inputs only)."""

    def __init__(self, chain, z):
        bn, relu = chain[0], chain[-1]
        self.op = bn.op
        self.ins = forward_fetches(bn, HOST)[0]
        self.z = None if z is None else (HOST.read(z._body.data), bn.compute_dtype)
        self.outs = forward_fetches(relu, HOST)[1]
        self.nodes = chain   # what the runner holds (a trace names them)

    def __call__(self):
        z = None if self.z is None else self.z[0](self.z[1])
        self.op.forward_fused(fetch_all(self.ins), fetch_all(self.outs), z, True)


# ------------------------------------------------------------------------------ backward
class FusedBackward:
    """Runs a region's backward in one kernel call, gradients inside kept in registers."""

    def __init__(self, steps, root, seed, outside_receives, closing_sum=None, stored=()):
        """``closing_sum``: (the whole-array Sum step before ``steps``, its scale): the last
        output's gradient is that Sum's output gradient times the scale, one scalar.
        ``stored``: ids of the region's outputs whose total gradient is also written to their
        gradient buffers (a backward without clear_buffer keeps every gradient)."""
        nodes = [s.node for s in steps]
        forward_order = list(reversed(nodes))          # steps come in backward order
        step_of = {id(s.node): s for s in steps}
        region_vars = {id(n._outputs[0]()) for n in nodes}
        values, value_arrays = {}, []                  # forward values the derivatives read
        grads_in, grad_arrays = [], []                 # region outputs' incoming gradients
        ext_grads = {}                                 # external input -> (name, accum)
        lines, scalars, params_scalar = [], [], []

        def value(v):
            if id(v) not in values:
                values[id(v)] = "x{}".format(len(value_arrays))
                value_arrays.append(v)
            return values[id(v)]

        # incoming gradients of the region's outputs; the stores of those kept
        grad_stores, grads_out = [], []
        for k, node in enumerate(forward_order):
            out = node._outputs[0]()
            g = "g{}".format(k)
            if closing_sum is not None and k == len(forward_order) - 1:
                lines.append("{} = gsum".format(g))
            elif id(out) in outside_receives:
                grads_in.append((out, g))
                lines.append("{0} = {0}_in[i]".format(g))
                if id(out) in stored:    # the total goes back where the outside part came from
                    grad_stores.append("{0}_in[i] = {0}".format(g))
                    continue
            else:
                lines.append("{} = like(0.0, {})".format(g, ZERO_REF))
            if id(out) in stored:
                grads_out.append((out, g))
                grad_stores.append("{0}_out[i] = {0}".format(g))
        gname = {id(node._outputs[0]()): "g{}".format(k) for k, node in enumerate(forward_order)}
        # walk the region backwards, adding each derivative into its input's gradient
        first_write = []
        for k in reversed(range(len(forward_order))):
            node = forward_order[k]
            s = step_of[id(node)]
            op = node.op
            for i, (name, v) in enumerate(zip(op.line.input_names, node.inputs)):
                d = op.line.kernel_derivatives[i]
                if d is None or not s.propagate_down[i]:
                    continue
                # only the values the derivative reads are loaded (the others may be freed)
                used = _names(d)
                mapping = {"dy": "g{}".format(k)}
                if "y" in used:
                    mapping["y"] = value(node._outputs[0]())
                for n2, v2 in zip(op.line.input_names, node.inputs):
                    if n2 in used:
                        mapping[n2] = value(v2)
                _arguments(op, k, mapping, "g{}".format(k))
                term = _rename(d, mapping)
                if id(v) in region_vars:
                    target = gname[id(v)]
                else:
                    if id(v._body) not in ext_grads:
                        ext_grads[id(v._body)] = ("d{}".format(len(ext_grads)), s.accum[i], v)
                        first_write.append(id(v._body))
                        lines.append("{} = like(0.0, {})".format(ext_grads[id(v._body)][0], ZERO_REF))
                    target = ext_grads[id(v._body)][0]
                lines.append("{0} = {0} + ({1})".format(target, term))
            for a in _arguments(op, k, {}, "g{}".format(k)):
                params_scalar.append("p{}_{}".format(k, a))
                scalars.append((op, a))
        # values are loaded before anything else; zeros are typed like the first of them
        loads = ["{0} = {0}_a[i]".format(values[id(v)]) for v in value_arrays]
        ref = (values[id(value_arrays[0])] if value_arrays
               else ("{}_in[i]".format(grads_in[0][1]) if grads_in else None))
        lines = [ln.replace(ZERO_REF, ref) if ref else ln.replace("like(0.0, {})".format(ZERO_REF), "0.0")
                 for ln in lines]
        stores = list(grad_stores)
        for key in first_write:
            name, accum, v = ext_grads[key]
            stores.append("{0}_out[i] {1}= {0}".format(name, "+" if accum else ""))
        arrays = (["{}_out".format(ext_grads[k][0]) for k in first_write]
                  + ["{}_out".format(g) for _, g in grads_out]
                  + ["{}_in".format(g) for _, g in grads_in]
                  + ["{}_a".format(values[id(v)]) for v in value_arrays])
        target, memory = _fusion_of(nodes[0])
        shape = nodes[0]._outputs[0]().shape
        self.dtype = nodes[0].compute_dtype
        self.total_grad = None
        if closing_sum is not None:
            sum_out = closing_sum[0].node._outputs[0]()
            self.total_grad = [(memory.accumulate(seed if sum_out is root else sum_out._body.grad),
                                closing_sum[0].node.compute_dtype)]
            self.total_scale = closing_sum[1]
            params_scalar.append("gsum")
        self.kernel = target.kernel(loads + lines + stores, arrays + params_scalar, arrays,
                                    int(np.prod(shape, dtype=np.int64)), self.dtype)
        dt = self.dtype
        # the region inputs' gradients (accumulated or overwritten), the stored gradients of
        # region outputs, their incoming gradients, then the forward values the derivatives read
        self.fetches = ([((memory.accumulate if ext_grads[k][1] else memory.overwrite_grad)(
                             ext_grads[k][2]._body.grad), dt) for k in first_write]
                        + [(memory.overwrite_grad(v._body.grad), dt) for v, _ in grads_out]
                        + [(memory.accumulate(seed if v is root else v._body.grad), dt)
                           for v, _ in grads_in]
                        + [(memory.read_needed(v._body.data), dt) for v in value_arrays])
        self.nodes = nodes + ([closing_sum[0].node] if closing_sum else [])
        self.scalars = target.scalars([op.args[a] for op, a in scalars], self.dtype)
        self.typed = target.scalars

    def __call__(self):
        scalars = self.scalars
        if self.total_grad is not None:   # the Sum's gradient, read now: the seed is set per call
            g = float(fetch_all(self.total_grad)[0].reshape(-1)[0]) * self.total_scale
            scalars = scalars + self.typed([g], self.dtype)
        try:
            arrays = fetch_all(self.fetches)
        except NotComputed as e:
            raise InputNotComputed(
                "backward: the elementwise ops {} need the data of a variable ({}), which no "
                "forward() has computed or which forward(clear_buffer=True) freed; call "
                "forward() on this graph before backward()".format(
                    ", ".join(sorted({n.op.name for n in self.nodes})), e)) from None
        self.kernel(*arrays, *scalars)


def _split_before_persistent(region, steps):
    """A backward region cut before each step whose output is persistent: that output's
    gradient must be stored (it outlives backward(clear_buffer=True)), not kept in a register
    of the fused kernel. Parts too short to fuse run unfused."""
    parts, current = [], []
    for k in region:
        out = steps[k].node._outputs[0]()
        if current and out is not None and out._persistent:
            parts.append(current)
            current = []
        current.append(k)
    parts.append(current)
    return [part for part in parts if len(part) >= MIN_REGION]


def _closing_sum_step(steps, region, writers):
    """(the step before ``region``, its scale) when it is a whole-array Sum of the region's
    last output and the only gradient that output receives; else None."""
    first = region[0]
    if first == 0:
        return None
    before, head = steps[first - 1], steps[first]
    out = head.node._outputs[0]()
    closing = _closing_sum(head.node, before.node, "takes_sum_gradients")
    if (closing is None or out is None or out._persistent or not before.propagate_down[0]
            or before.accum[0] or writers.get(id(out)) != [first - 1]):
        return None
    return before, closing[1]


def fuse_backward(plan, root, keep_grads=False):
    """Replace the runners of each fusible run of backward steps by one fused runner.
    ``keep_grads``: the gradients of the region's variables are stored too (a backward without
    clear_buffer, after which nnabla holds every gradient)."""
    steps = plan.steps
    regions = [part for region in _regions([s.node for s in steps])
               for part in _split_before_persistent(region, steps)]
    if not regions:
        return
    # which steps write into each variable's gradient buffer
    writers = {}
    for k, s in enumerate(steps):
        for inp, pd in zip(s.node.inputs, s.propagate_down):
            if pd:
                writers.setdefault(id(inp), []).append(k)
    runners = list(plan.runners)
    for region in regions:
        closing = _closing_sum_step(steps, region, writers)
        fused_steps = [steps[k] for k in region]
        if closing is not None:
            region = [region[0] - 1] + region
        members = set(region)
        # A region output's buffer holds gradient from outside when it is the root or a step
        # outside the region propagated into it.
        outside = set()
        for k in region:
            out = steps[k].node._outputs[0]()
            if out is root or any(j not in members for j in writers.get(id(out), ())):
                outside.add(id(out))
        # the gradients the unfused steps would have written (some step propagates into them)
        stored = ({id(steps[k].node._outputs[0]()) for k in region
                   if writers.get(id(steps[k].node._outputs[0]()))} if keep_grads else ())
        runners[region[0]] = FusedBackward(fused_steps, root, plan.seed, outside, closing, stored)
        head = steps[region[0]]
        for k in region[1:]:
            head.free_grads.extend(steps[k].free_grads)
            head.free_data.extend(steps[k].free_data)
            runners[k] = None
    plan.steps = [s for s, r in zip(steps, runners) if r is not None]
    plan.runners = [r for r in runners if r is not None]
