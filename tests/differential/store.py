"""Differential fixtures: one compressed ``.npz`` per function with two members, ``meta`` (the
cases and nnabla's results as JSON, UTF-8 bytes) and ``blob`` (every array's bytes, one after
the other; JSON refers to them as ``{"@": [dtype, shape, offset]}``). Gradients equal to their
preset value (an input that was not propagated to), to the same input's gradient in the
``all`` variant, or to the sum of both (``accum``) are stored as references to those
(``{"=": "init" | "all" | "init+all", ...}``), which keeps the files small.
"""
import io
import json
import os
import tempfile

import numpy as np

from .runner import pattern

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "differential")
METHODS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "differential_methods.npz")


class _Writer:
    def __init__(self):
        self.parts, self.offset = [], 0

    def encode(self, obj):
        if isinstance(obj, np.ndarray):
            data = np.ascontiguousarray(obj).tobytes()
            ref = {"@": [obj.dtype.str, list(obj.shape), self.offset]}
            self.parts.append(data)
            self.offset += len(data)
            return ref
        if isinstance(obj, tuple):
            return {"()": [self.encode(v) for v in obj]}
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj):
                return {k: self.encode(v) for k, v in obj.items()}
            return {"{}": [[k, self.encode(v)] for k, v in obj.items()]}
        if isinstance(obj, list):
            return [self.encode(v) for v in obj]
        if isinstance(obj, (np.generic,)):
            return obj.item()
        return obj


def _decode(obj, blob):
    if isinstance(obj, dict):
        if "@" in obj:
            dtype, shape, offset = obj["@"]
            dtype = np.dtype(dtype)
            n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            return np.frombuffer(blob[offset:offset + n].tobytes(), dtype).reshape(shape).copy()
        if "()" in obj:
            return tuple(_decode(v, blob) for v in obj["()"])
        if "{}" in obj:
            return {k: _decode(v, blob) for k, v in obj["{}"]}
        return {k: _decode(v, blob) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, blob) for v in obj]
    return obj


def _same(a, b):
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
            and a.shape == b.shape and a.tobytes() == b.tobytes())


def _init(shape, dtype, i):
    return pattern(shape, i + 1).astype(dtype)


def compact_grads(result):
    """Replace gradients that follow from others by references (see the module doc)."""
    backward = result.get("backward") or []
    first = {i: g for i, g in backward[0]["grads"].items()} if backward else {}
    for record in backward:
        for i, g in list(record["grads"].items()):
            if not isinstance(g, np.ndarray):
                continue
            init = _init(g.shape, g.dtype, i)
            ref = {"shape": list(g.shape), "dtype": g.dtype.name}
            if _same(g, init):
                record["grads"][i] = dict(ref, **{"=": "init"})
            elif record is backward[0]:
                continue
            elif _same(g, first.get(i)):
                record["grads"][i] = dict(ref, **{"=": "all"})
            elif isinstance(first.get(i), np.ndarray) and _same(g, (init + first[i]).astype(g.dtype)):
                record["grads"][i] = dict(ref, **{"=": "init+all"})
    return result


def expand_grads(result):
    """The inverse of :func:`compact_grads`."""
    backward = result.get("backward") or []
    if not backward:
        return result
    first = backward[0]["grads"]
    for record in backward:     # the first record first: the others refer to it
        for i, g in list(record["grads"].items()):
            if isinstance(g, dict) and "=" in g:
                init = _init(tuple(g["shape"]), np.dtype(g["dtype"]), i)
                if g["="] == "init":
                    record["grads"][i] = init
                elif g["="] == "all":
                    record["grads"][i] = first[i]
                else:
                    record["grads"][i] = (init + first[i]).astype(init.dtype)
    return result


def save(op, meta, path=None):
    """Write ``meta`` (JSON-able apart from arrays and tuples) as ``<op>.npz`` (or ``path``),
    atomically."""
    writer = _Writer()
    encoded = writer.encode(meta)
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    np.savez_compressed(buf, meta=np.frombuffer(text, np.uint8),
                        blob=np.frombuffer(b"".join(writer.parts), np.uint8))
    path = path or os.path.join(FIXTURES, op + ".npz")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(buf.getvalue())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def load(op, path=None):
    with np.load(path or os.path.join(FIXTURES, op + ".npz")) as z:
        meta, blob = json.loads(z["meta"].tobytes().decode()), z["blob"]
    return _decode(meta, blob)


def ops():
    return sorted(f[:-4] for f in os.listdir(FIXTURES) if f.endswith(".npz"))
