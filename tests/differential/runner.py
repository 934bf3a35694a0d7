"""Run one differential case on nnabla or on nnabla_jit, the same code for both.

``run_case(nn, FB, op, arrays, args, nograd, random)`` builds the function on Variables
(``FB.<op>(*inputs, **args)``, the table's signature), runs forward through the graph, then the
function's backward (``y.parent.backward(inputs, outputs, accum)``) in several variants: every
input that takes a gradient with ``accum`` False, the same with ``accum`` True over preset
gradients, and each such input alone (the others with ``need_grad`` False: ``propagate_down``).
The result is a dict of plain values and arrays (``store`` writes it, ``compare`` compares two).
Errors are kept by type only: the names of the exception's classes.
"""
import numpy as np


def pattern(shape, salt):
    """Deterministic values in [-2, 2], exact in float16 (output gradients, preset gradients)."""
    n = int(np.prod(shape, dtype=np.int64))
    v = ((np.arange(n, dtype=np.int64) * 7919 + salt * 104729) % 17 - 8) / 4.0
    return v.reshape(shape).astype(np.float32)


def error_names(e):
    return [c.__name__ for c in type(e).__mro__ if c not in (object, BaseException)]


def _flat(slots):
    flat = []
    for s in slots:
        if isinstance(s, list):
            flat.extend(s)
        elif s is not None:
            flat.append(s)
    return flat


def _array(a):
    return np.array(a, copy=True)


def _build(nn, FB, op, arrays, args, need_grad, auto_forward):
    """Variables from ``arrays`` (those at the flat positions ``need_grad`` with need_grad),
    the function on them, and its forward: (flat inputs, outputs)."""
    variables = []
    for s in arrays:
        if s is None:
            variables.append(None)
        elif isinstance(s, list):
            variables.append([nn.Variable.from_numpy_array(a) for a in s])
        else:
            variables.append(nn.Variable.from_numpy_array(s))
    flat = _flat(variables)
    for i, v in enumerate(flat):
        v.need_grad = i in need_grad
    positional = []
    for v in variables:   # a variadic input is spread, as the signature's *x takes it
        positional.extend(v) if isinstance(v, list) else positional.append(v)
    with nn.auto_forward(auto_forward):
        ys = getattr(FB, op)(*positional, **args)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    if not auto_forward:
        ys[0].forward()
    return flat, ys


def run_case(nn, FB, op, arrays, args, nograd, random, auto_forward=False, progress=None):
    """``arrays``: per table input None, an array, or a list of arrays (variadic). ``nograd``:
    the positions in the flat input list that never take a gradient (labels, indices).
    ``progress(result)``, if given, sees the result so far before each backward variant, with
    ``result["pending"]`` naming the variant about to run (the generator keeps it in case
    nnabla dies in that variant). ``auto_forward``: build under ``nn.auto_forward()`` (nnabla
    computes functions with value-dependent output shapes, Unique, NonZero, only so).
    Each backward variant runs on a graph of its own, built and run forward afresh, so no
    state a function keeps between calls leaks from one variant into the next."""
    flat_arrays = _flat(arrays)
    grad_ok = [i for i in range(len(flat_arrays)) if i not in nograd]
    result = {"error": None, "stage": None}
    try:
        flat, ys = _build(nn, FB, op, arrays, args, grad_ok, auto_forward)
        outputs = [_array(y.d) for y in ys]
    except Exception as e:  # noqa: BLE001 (the type is the record)
        result["error"] = error_names(e)
        return result
    if random:
        result["outputs"] = [[list(o.shape), o.dtype.name] for o in outputs]
    else:
        result["outputs"] = outputs
    result["inputs_after"] = {} if random else {
        i: _array(v.d) for i, v in enumerate(flat)
        if _array(v.d).tobytes() != np.asarray(flat_arrays[i]).tobytes()}
    result["backward"] = []
    if not flat or not ys[0].parent:
        return result
    variants = [("all", grad_ok, False), ("all+accum", grad_ok, True)] if grad_ok else []
    if len(grad_ok) > 1:
        variants += [("only{}".format(i), [i], False) for i in grad_ok]
    if nograd:   # labels and indices with need_grad too
        variants.append(("every", list(range(len(flat))), False))
    for label, mask, accum in variants:
        if progress is not None:
            progress(dict(result, pending=label))
        record = {"label": label, "error": None, "grads": {}}
        try:
            flat, ys = _build(nn, FB, op, arrays, args, mask, auto_forward)
            _backward(flat, ys, accum)
        except Exception as e:  # noqa: BLE001
            record["error"] = error_names(e)
        else:
            for i in sorted(set(grad_ok) | set(mask)):
                g = _array(flat[i].g)
                record["grads"][i] = [list(g.shape), g.dtype.name] if random else g
        result["backward"].append(record)
    return result


def _backward(flat, ys, accum):
    """Preset every input's gradient and every output's, then run the function's backward;
    an input without need_grad shows whether its preset gradient was left alone."""
    for i, v in enumerate(flat):
        v.g = pattern(v.shape, i + 1)
    for k, y in enumerate(ys):
        y.g = pattern(y.shape, 100 + k)
    ys[0].parent.backward(flat, ys, accum=[accum] * len(flat))


# ------------------------------------------------------------------------- comparing
RTOL, ATOL = 1e-4, 1e-5    # float results (nnabla computes in float32 on the CPU)


def _close(actual, expected):
    """None when ``actual`` matches ``expected`` (shape, dtype, values within tolerance), else
    a short description of the difference."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return "shape", "{} (nnabla {})".format(actual.shape, expected.shape)
    if actual.dtype != expected.dtype:
        return "dtype", "{} (nnabla {})".format(actual.dtype, expected.dtype)
    if expected.dtype.kind not in "fc":
        bad = actual != expected
    else:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        finite = np.isfinite(e)
        scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
        bad = ~np.isclose(a, e, rtol=RTOL, atol=ATOL * scale, equal_nan=True)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return "values", "{} of {} differ, at {}: {!r} (nnabla {!r})".format(
            int(bad.sum()), bad.size, i, actual[i].item(), expected[i].item())
    return None


def _errors(where, actual_error, expected_error):
    """Compare two outcomes that may be errors: (kind, detail) or None."""
    if expected_error and actual_error:
        if expected_error[0] not in actual_error:
            return "error-type", "{}: raises {} (nnabla {})".format(where, actual_error[0], expected_error[0])
        return None
    if expected_error:
        return "no-error", "{}: computes (nnabla raises {})".format(where, expected_error[0])
    if actual_error:
        return "error", "{}: raises {} (nnabla computes)".format(where, actual_error[0])
    return None


def compare(actual, expected):
    """The differences between two ``run_case`` results as (kind, detail) pairs; nothing is
    compared where nnabla crashed."""
    if expected.get("crash"):
        return []
    diff = _errors("forward", actual["error"], expected["error"])
    if diff or expected["error"]:
        return [diff] if diff else []
    found = []
    if len(actual["outputs"]) != len(expected["outputs"]):
        return [("outputs", "{} outputs (nnabla {})".format(len(actual["outputs"]), len(expected["outputs"])))]
    for k, (a, e) in enumerate(zip(actual["outputs"], expected["outputs"])):
        d = _close(a, e) if isinstance(e, np.ndarray) else (
            None if a == e else ("shape", "{} (nnabla {})".format(a, e)))
        if d:
            found.append(("output" + d[0], "output {}: {}".format(k, d[1])))
    for i in sorted(set(actual["inputs_after"]) | set(expected["inputs_after"])):
        a, e = actual["inputs_after"].get(i), expected["inputs_after"].get(i)
        if a is None or e is None:
            found.append(("input-written", "input {} {} by forward (nnabla: {})".format(
                i, "changed" if a is not None else "left", "changed" if e is not None else "left")))
        else:
            d = _close(a, e)
            if d:
                found.append(("input-written", "input {} after forward: {}".format(i, d[1])))
    by_label = {b["label"]: b for b in actual.get("backward", [])}
    for e in expected.get("backward", []):
        if e.get("crash"):
            continue
        a = by_label.get(e["label"])
        where = "backward " + e["label"]
        if a is None:
            found.append(("grad", where + ": not run (nnabla runs it)"))
            continue
        diff = _errors(where, a["error"], e["error"])
        if diff:
            found.append(("grad-" + diff[0], diff[1]))
            continue
        for i, g in e["grads"].items():
            ga = a["grads"].get(i)
            d = (_close(ga, g) if isinstance(g, np.ndarray) else
                 None if ga == g else ("shape", "{} (nnabla {})".format(ga, g)))
            if d:
                found.append(("grad" + d[0], "{}, input {}: {}".format(where, i, d[1])))
    return found
