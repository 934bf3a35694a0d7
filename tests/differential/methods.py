"""Variable and NdArray: their members and what their methods and operators do, compared with
nnabla 1.39 the way ``runner`` compares functions.

``members(nn)`` lists the public members of both classes with their kind (method, property,
static method) and parameter names. ``SNIPPETS`` are calls, each a few statements that leave
their result in ``out``; the operators are generated (every binary operator over pairs of a
Variable, an NdArray, a NumPy array and a Python number, both ways), the methods listed by hand.
``run_snippet(nn, F, code)`` runs one and summarizes ``out`` by type, shape, dtype and values
(``summary``), or records the error's type.
"""
import inspect

import numpy as np

from .runner import _close, error_names

X = [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]
Y = [[0.5, 2.0, -1.0], [2.0, -0.5, 3.0]]
M = [[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]]
MASK = [[1, 0, 1], [0, 0, 1]]

_OPERANDS = {"V": "V(X)", "V2": "V(Y)", "A": "A(X)", "A2": "A(Y)", "s": "2.0", "i": "3",
             "np": "np.array(Y, np.float32)", "Vm": "V(M)", "Am": "A(M)", "npm": "np.array(M, np.float32)"}
_PAIRS = [("V", "V2"), ("V", "s"), ("s", "V"), ("V", "i"), ("V", "np"), ("np", "V"), ("A", "A2"),
          ("A", "s"), ("s", "A"), ("A", "np"), ("V", "A2"), ("A", "V2")]
_MATMUL = [("V", "Vm"), ("A", "Am"), ("V", "npm"), ("np", "Vm"), ("V", "Am")]
_BINARY = ["+", "-", "*", "/", "**", "%", "//", "==", "!=", "<", "<=", ">", ">="]


def _operator_snippets():
    found = []
    for op in _BINARY:
        for left, right in _PAIRS:
            found.append(("{} {} {}".format(left, op, right),
                          "out = show(({}) {} ({}))".format(_OPERANDS[left], op, _OPERANDS[right])))
    for left, right in _MATMUL:
        found.append(("{} @ {}".format(left, right),
                      "out = show(({}) @ ({}))".format(_OPERANDS[left], _OPERANDS[right])))
    for op in ["-", "+", "abs", "~"]:
        for operand in ("V", "A"):
            expr = "abs({})" if op == "abs" else op + "({})"
            found.append((op + operand, "out = show({})".format(expr.format(_OPERANDS[operand]))))
    for op in ["+=", "-=", "*=", "/=", "**="]:
        for left, right in [("V", "V2"), ("V", "s"), ("A", "A2"), ("A", "s")]:
            found.append(("{} {} {}".format(left, op, right),
                          "a = {}; b = a\na {} {}\nout = (a is b, show(a))".format(
                              _OPERANDS[left], op, _OPERANDS[right])))
    return found


_METHODS = [
    # Variable: construction
    ("Variable()", "out = show(nn.Variable())"),
    ("Variable((2, 3))", "v = nn.Variable((2, 3)); out = (v.shape, v.need_grad, v.ndim, v.size)"),
    ("Variable([2, 3], need_grad=True)", "out = nn.Variable([2, 3], need_grad=True).need_grad"),
    ("Variable.from_numpy_array int", "v = nn.Variable.from_numpy_array(np.arange(3)); out = (v.d, v.need_grad)"),
    ("Variable.from_numpy_array grad", "v = nn.Variable.from_numpy_array(np.array(X), np.array(Y)); out = (v.d, v.g)"),
    ("Variable.from_numpy_array need_grad", "out = nn.Variable.from_numpy_array(np.array(X), need_grad=True).need_grad"),
    # Variable: properties
    ("Variable properties", "v = V(X); out = (v.shape, v.ndim, v.size, v.need_grad, v.persistent, v.name, "
                            "v.parent, v.recompute, v.rank)"),
    ("Variable.size_from_axis", "v = V(np.zeros((2, 3, 4))); out = (v.size_from_axis(), v.size_from_axis(1), "
                                "v.size_from_axis(0), v.size_from_axis(-2))"),
    ("Variable.d set", "v = V(X); v.d = Y; out = v.d"),
    ("Variable.d set scalar", "v = V(X); v.d = 3; out = v.d"),
    ("Variable.d set wrong shape", "v = V(X); v.d = np.zeros((3, 2)); out = v.d"),
    ("Variable.g set", "v = V(X); v.g = 2; out = v.g"),
    ("Variable.data", "v = V(X); out = show(v.data)"),
    ("Variable.grad", "v = V(X); v.g = 1; out = show(v.grad)"),
    ("Variable.data set", "v = V(X); v.data = A(Y); out = v.d"),
    ("Variable.need_grad set", "v = V(X); v.need_grad = True; out = v.need_grad"),
    ("Variable.persistent set", "v = V(X); v.persistent = True; out = v.persistent"),
    ("Variable.name set", "v = V(X); v.name = 'w'; out = v.name"),
    # Variable: methods
    ("Variable.reshape", "v = V(X); r = v.reshape((3, 2)); out = (show(r), r.d)"),
    ("Variable.reshape unlink", "v = V(X, True); r = v.reshape((6,), unlink=True); out = (show(r), r.d, r.parent)"),
    ("Variable.reshape -1", "v = V(X); r = v.reshape((-1, 2)); out = r.shape"),
    ("Variable.reshape bad", "out = show(V(X).reshape((4, 2)))"),
    ("Variable.reset_shape", "v = V(X); v.reset_shape((3, 2), force=True); out = v.shape"),
    ("Variable.reset_shape no force", "v = V(X); v.reset_shape((3, 2)); out = v.shape"),
    ("Variable.get_unlinked_variable", "y = F.sin(V(X, True)); u = y.get_unlinked_variable()\n"
                                       "out = (u.parent is None, u.need_grad, u.shape)"),
    ("Variable.get_unlinked_variable need_grad", "u = F.sin(V(X, True)).get_unlinked_variable(need_grad=False)\n"
                                                 "out = u.need_grad"),
    ("Variable.unlinked", "u = F.sin(V(X, True)).unlinked(); out = (u.parent is None, u.need_grad)"),
    ("Variable.no_grad", "v = V(X, True); w = v.no_grad(); out = (w is v, w.need_grad, v.need_grad)"),
    ("Variable.apply", "v = V(X); w = v.apply(need_grad=True, persistent=True); out = (w is v, v.need_grad, "
                       "v.persistent)"),
    ("Variable.visit", "y = F.sin(F.cos(V(X, True))); seen = []; r = y.visit(lambda f: seen.append(f.name))\n"
                       "out = (seen, r)"),
    ("Variable.visit_check", "y = F.sin(F.cos(V(X, True))); seen = []\n"
                             "r = y.visit_check(lambda f: seen.append(f.name))\nout = (seen, r)"),
    ("Variable.function_references", "v = V(X, True); y = F.sin(v); z = F.cos(v)\n"
                                     "out = [f.name for f in v.function_references]"),
    ("Variable.clear_all_graph_links", "y = F.sin(V(X, True)); y.clear_all_graph_links(); out = y.parent"),
    ("Variable.bool_fill_", "v = V(X); r = v.bool_fill_(V(MASK), 9.0); v.forward(); out = (r is v, v.d)"),
    ("Variable.masked_fill_", "v = V(X); r = v.masked_fill_(V(MASK), 9.0); v.forward(); out = (r is v, v.d)"),
    ("Variable.forward leaf", "v = V(X); r = v.forward(); out = (r, v.d)"),
    ("Variable.backward", "v = V(X, True); y = F.sum(v * v); y.forward(); v.g = 0; r = y.backward(); out = (r, v.g)"),
    ("Variable.backward grad", "v = V(X, True); y = v * 2.0; y.forward(); v.g = 0; y.backward(np.array(Y, "
                               "np.float32)); out = v.g"),
    ("Variable.backward clear_buffer", "v = V(X, True); y = F.sum(F.sin(v) * 2.0); y.forward(); v.g = 0\n"
                                       "y.backward(clear_buffer=True); out = v.g"),
    # Variable: indexing, containers
    ("V[0]", "out = show(V(X)[0])"),
    ("V[:, 1]", "out = show(V(X)[:, 1])"),
    ("V[..., None]", "out = show(V(X)[..., None])"),
    ("V[1, ::-1]", "out = show(V(X)[1, ::-1])"),
    ("V[-1]", "out = show(V(X)[-1])"),
    ("V[[1, 0]]", "out = show(V(X)[[1, 0]])"),
    ("V[mask]", "out = show(V(X)[np.array(MASK, bool)])"),
    ("V[5]", "out = show(V(X)[5])"),
    ("Variable setitem int", "v = V(X); v[0] = 7.0; out = v.d"),
    ("Variable setitem slice", "v = V(X); v[:, 1] = np.array([8.0, 9.0]); out = v.d"),
    ("len(V)", "out = len(V(X))"),
    ("np.asarray(V.d)", "out = np.asarray(V(X).d).dtype.name"),
    ("V.d dtype int", "out = nn.Variable.from_numpy_array(np.arange(3, dtype=np.int64)).d.dtype.name"),
    ("bool(V)", "out = bool(V([1.0]))"),
    ("hash(V)", "v = V(X); out = hash(v) == hash(v)"),
    # NdArray
    ("NdArray()", "out = show(nn.NdArray())"),
    ("NdArray((2, 3))", "a = nn.NdArray((2, 3)); out = (a.shape, a.ndim, a.size)"),
    ("NdArray.from_numpy_array int", "a = nn.NdArray.from_numpy_array(np.arange(3)); out = (a.dtype.__name__ "
                                     "if isinstance(a.dtype, type) else str(a.dtype), a.data)"),
    ("NdArray properties", "a = A(np.zeros((2, 3, 4))); out = (a.shape, a.ndim, a.size, a.size_from_axis(1), "
                           "a.strides)"),
    ("NdArray.dtype", "out = str(np.dtype(A(X).dtype))"),
    ("NdArray.fill", "a = A(X); r = a.fill(3); out = (r, a.data)"),
    ("NdArray.zero", "a = A(X); r = a.zero(); out = (r, a.data, a.zeroing)"),
    ("NdArray.zeroing", "a = A(X); out = a.zeroing"),
    ("NdArray.clear", "a = A(X); a.clear(); out = a.clear_called"),
    ("NdArray.clear_called", "a = A(X); out = a.clear_called"),
    ("NdArray.data set", "a = A(X); a.data = Y; out = a.data"),
    ("NdArray.data set scalar", "a = A(X); a.data = 4; out = a.data"),
    ("NdArray.cast", "a = A(X); r = a.cast(np.int32); out = (show(r), a.data.dtype.name)"),
    ("NdArray.copy_from", "a = A(X); b = A(Y); r = a.copy_from(b); out = (r, a.data)"),
    ("NdArray.get_data", "a = A(X); out = (a.get_data('r'), a.get_data('rw', np.float64).dtype.name)"),
    ("NdArray.narrow", "a = A(np.arange(12.0).reshape(4, 3)); r = a.narrow(0, 1, 2); out = show(r)"),
    ("NdArray.narrow shares", "a = A(np.arange(12.0).reshape(4, 3)); r = a.narrow(0, 1, 2); r.fill(-1)\n"
                              "out = a.data"),
    ("NdArray.view", "a = A(X); r = a.view((3, 2)); r.fill(0); out = (show(r), a.data)"),
    ("NdArray.bool_fill", "a = A(X); r = a.bool_fill(A(MASK), 9.0); out = (show(r), a.data)"),
    ("NdArray.masked_fill", "a = A(X); r = a.masked_fill(A(MASK), 9.0); out = (show(r), a.data)"),
    ("NdArray.modification_count", "a = A(X); c0 = a.modification_count; a.fill(1); a.data = Y\n"
                                   "out = a.modification_count - c0"),
    ("NdArray.data_ptr", "out = type(A(X).data_ptr(np.float32)).__name__"),
    ("A[0]", "out = show(A(X)[0])"),
    ("A[:, 1]", "out = show(A(X)[:, 1])"),
    ("NdArray setitem int", "a = A(X); a[0] = 7.0; out = a.data"),
    ("len(A)", "out = len(A(X))"),
    ("np.asarray(A.data)", "out = np.asarray(A(X).data).dtype.name"),
]

SNIPPETS = _operator_snippets() + _METHODS


def namespace(nn, F):
    def V(a, need_grad=False, dtype=np.float32):
        return nn.Variable.from_numpy_array(np.array(a, dtype), need_grad=need_grad)

    def A(a, dtype=np.float32):
        return nn.NdArray.from_numpy_array(np.array(a, dtype))

    def show(v):
        """A Variable forwarded and summarized by type, shape and values; anything else as is."""
        if isinstance(v, nn.Variable):
            if v.parent is not None:
                v.forward()
            return ("Variable", list(v.shape), bool(v.need_grad), np.array(v.d, copy=True))
        if isinstance(v, nn.NdArray):
            return ("NdArray", list(v.shape), np.array(v.data, copy=True))
        return v

    return dict(nn=nn, F=F, np=np, V=V, A=A, show=show, X=X, Y=Y, M=M, MASK=MASK)


def summary(value, nn):
    """Plain data for ``value``: tuples and lists element-wise, arrays as arrays, numbers with
    their type, library objects by class name."""
    if isinstance(value, (tuple, list)):
        return [summary(v, nn) for v in value]
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    if isinstance(value, (bool, int, float, str, type(None))):
        return {"py": type(value).__name__, "v": value}
    if isinstance(value, (np.generic,)):
        return {"py": "numpy." + type(value).__name__, "v": value.item()}
    return {"py": type(value).__name__}


def run_snippet(nn, F, code):
    scope = namespace(nn, F)
    try:
        with np.errstate(all="ignore"):
            exec(code, scope)
        return {"error": None, "out": summary(scope["out"], nn)}
    except Exception as e:  # noqa: BLE001 (the type is the record)
        return {"error": error_names(e)}


def compare(actual, expected):
    """The differences between two ``run_snippet`` results, as (kind, detail) pairs."""
    if expected.get("crash"):
        return []
    if expected["error"] or actual["error"]:
        if expected["error"] and actual["error"]:
            if expected["error"][0] in actual["error"]:
                return []
            return [("error-type", "raises {} (nnabla {})".format(actual["error"][0], expected["error"][0]))]
        if expected["error"]:
            return [("no-error", "computes (nnabla raises {})".format(expected["error"][0]))]
        return [("error", "raises {} (nnabla computes)".format(actual["error"][0]))]
    return _diff(actual["out"], expected["out"], "out")


def _diff(a, e, where):
    if isinstance(e, np.ndarray):
        if not isinstance(a, np.ndarray):
            return [("type", "{}: {} (nnabla an array)".format(where, type(a).__name__))]
        d = _close(a, e)
        return [("value", "{}: {}".format(where, d[1]))] if d else []
    if isinstance(e, list):
        if not isinstance(a, list) or len(a) != len(e):
            return [("type", "{}: {!r:.60} (nnabla {!r:.60})".format(where, a, e))]
        found = []
        for k, (x, y) in enumerate(zip(a, e)):
            found += _diff(x, y, "{}[{}]".format(where, k))
        return found
    if a != e:
        return [("value", "{}: {!r:.60} (nnabla {!r:.60})".format(where, a, e))]
    return []


def members(nn):
    """{class: {name: [kind, parameter names or None]}} of Variable and NdArray."""
    found = {}
    for cls in (nn.Variable, nn.NdArray):
        entries = {}
        for name in dir(cls):
            if name.startswith("_"):
                continue
            static = inspect.getattr_static(cls, name)
            kind = ("staticmethod" if isinstance(static, (staticmethod, classmethod)) else
                    "method" if callable(getattr(cls, name)) else "property" if not isinstance(
                        static, (list, dict, int, str)) else "attribute")
            try:
                params = [p for p in inspect.signature(getattr(cls, name)).parameters if p != "self"]
            except (TypeError, ValueError):
                params = None
            entries[name] = [kind, params]
        found[cls.__name__] = entries
    return found


def snippet_class(label):
    """The class a snippet exercises: NdArray when its operands or subject are NdArrays."""
    return "NdArray" if label.startswith(("A", "NdArray", "len(A)", "np.asarray(A")) or label in ("absA", "-A", "+A", "~A") \
        else "Variable"


def replay(nn, F):
    """[(class, label, kind, detail)]: the differences from the recorded members and snippets."""
    from . import store
    meta = store.load("methods", path=store.METHODS)
    found = []
    ours = members(nn)
    for cls, entries in meta["members"].items():
        for name, (kind, params) in entries.items():
            mine = ours[cls].get(name)
            if mine is None:
                found.append((cls, "member:" + name, "missing", "not provided"))
            elif mine[0] != kind:
                found.append((cls, "member:" + name, "kind", "{} (nnabla {})".format(mine[0], kind)))
            elif params is not None and mine[1] != params:
                found.append((cls, "member:" + name, "parameters", "{} (nnabla {})".format(mine[1], params)))
    for s in meta["snippets"]:
        actual = run_snippet(nn, F, s["code"])
        for kind, detail in compare(actual, s["result"]):
            found.append((snippet_class(s["label"]), s["label"], kind, detail))
    return found, meta
