"""``SimpleGraph``: draw the graph that computes a Variable (nnabla's
``nnabla.experimental.viewers``).

Functions are boxes, variables ellipses (parameters labelled by name within the function's
parameter scope). With the ``graphviz`` Python package and its ``dot`` program, drawings go
through graphviz (any format it writes, colours per function type as in nnabla); without them
nnabla_jit lays the graph out itself (the ``draw_graph`` command's layout) and writes SVG, or
PNG through matplotlib.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict, defaultdict

from ..utils.cli.graph_drawing import Node, layout_graph, save_png, to_svg
from ..utils.inspection import listed

__all__ = ["SimpleGraph"]


def _graphviz_digraph_class():
    try:
        from graphviz import Digraph
    except ImportError:
        return None
    return Digraph


def _graphviz_renders():
    """Whether graphviz can render here (the Python package and the ``dot`` program)."""
    return _graphviz_digraph_class() is not None and shutil.which("dot") is not None


def _function_color(name):
    """nnabla's default colour of a function box, by type."""
    for part, color in (("Conv", "blue"), ("Affine", "red"), ("Norm", "orange"), ("ReLU", "green"),
                        ("Pool", "lightblue2")):
        if part in name:
            return color
    if any(op in name for op in ("Add", "Sub", "Mul", "Div")):
        return "purple"
    return "gray"


class _Drawing:
    """The graph as nodes (key -> kind, label lines, fill colour, border colour) and edges."""

    def __init__(self):
        self.nodes = OrderedDict()
        self.edges = []


class SimpleGraph:
    """Draws the graph upstream of a Variable.

    Args:
        format (str): file format of :meth:`save` and :meth:`view` ('png'; 'svg' and 'png'
            without graphviz, any graphviz format with it).
        verbose (bool): add shapes and ``need_grad`` to variables, arguments to functions.
        fname_color_map (dict): function type -> graphviz colour (others: lightgray).
        vname_color_map (dict): ``Variable.name`` -> graphviz colour (others: lightgray;
            parameters are pink).
    """

    def __init__(self, format="png", verbose=False, fname_color_map=None, vname_color_map=None):
        self._format = format
        self._verbose = verbose
        self._fname_color_map = fname_color_map
        self._vname_color_map = vname_color_map

    # ----------------------------------------------------------------------- the graph
    def _describe(self, vleaf, params):
        """Nodes and edges of the graph computing ``vleaf``, labelled as nnabla labels them."""
        if params is None:
            from ..parameter import get_parameters
            params = get_parameters(grad_only=False)
        param_name = {v: k for k, v in params.items()}
        functions = []
        vleaf.visit(functions.append)
        drawing = _Drawing()
        seen_type = defaultdict(int)
        for f in functions:
            names = [param_name[v] for v in f.inputs if v in param_name]
            scope, short = "", {}
            if names:
                # The function's scope is what its parameters' names share (conv1/conv for
                # conv1/conv/W and conv1/conv/b); a parameter is labelled by the rest (W, b).
                scope = os.path.commonprefix([os.path.dirname(names[0])] + names[1:])
                short = {n: n[len(scope) + 1:] if scope else n for n in names}
            seen_type[f.name] += 1
            fkey = "function-{}-{}".format(f.name, seen_type[f.name])
            lines = [f.name] + ([scope] if scope else [])
            if self._verbose:
                lines.append(json.dumps({k: listed(v) for k, v in f.info.args.items()}, default=str))
            fcolor = _function_color(f.name)
            if self._fname_color_map is not None:
                fcolor = self._fname_color_map.get(f.name, "lightgray")
            drawing.nodes[fkey] = ("function", lines, fcolor, fcolor)
            for v in f.inputs:
                drawing.edges.append((self._variable_node(drawing, v, param_name, short), fkey))
            for v in f.outputs:
                if v is not None:
                    drawing.edges.append((fkey, self._variable_node(drawing, v, param_name, short)))
        return drawing

    def _variable_node(self, drawing, v, param_name, short):
        key = "variable-{}".format(hash(v))   # unlinked twins share buffers, and so a node
        if key not in drawing.nodes:
            is_param = v in param_name
            if is_param:
                lines = [short.get(param_name[v], param_name[v])]
            else:
                lines = [v.name or "h"]
            if self._verbose:
                lines.append("({}, need_grad={})".format(v.shape, v.need_grad))
            fill = "pink" if is_param else (self._vname_color_map or {}).get(v.name, "lightgray")
            drawing.nodes[key] = ("parameter" if is_param else "variable", lines, fill,
                                  "black" if v.need_grad else fill)
        return key

    # ----------------------------------------------------------------------- graphviz
    def create_graphviz_digraph(self, vleaf, params=None, format=None):
        """A ``graphviz.Digraph`` of the graph computing ``vleaf`` (needs the graphviz package;
        ``params`` maps names to parameters, default every registered one)."""
        Digraph = _graphviz_digraph_class()
        if Digraph is None:
            raise ImportError("create_graphviz_digraph needs the graphviz package (pip install graphviz); "
                              "SimpleGraph.save and view draw SVG or PNG without it")
        graph = Digraph(format=format or self._format)
        graph.attr("node", style="filled")
        drawing = self._describe(vleaf, params)
        for key, (kind, lines, fill, border) in drawing.nodes.items():
            if kind == "function":
                graph.node(key, label="\n".join(lines), shape="box" if self._verbose else "square",
                           color=fill, fontcolor="white")
            else:
                graph.node(key, label="\n".join(lines), shape="" if self._verbose else "circle",
                           color=border, fillcolor=fill)
        for a, b in drawing.edges:
            graph.edge(a, b)
        return graph

    # ----------------------------------------------------------------------- files
    def _draw(self, vleaf, base, fmt, params, cleanup):
        """Draw into ``base + '.' + fmt``; returns the file written."""
        fmt = (fmt or self._format).lower()
        if _graphviz_renders():
            return self.create_graphviz_digraph(vleaf, params, fmt).render(base, cleanup=cleanup)
        if fmt not in ("svg", "png"):
            raise ValueError("SimpleGraph: format '{}' needs graphviz (pip install graphviz, and its dot "
                             "program); without it svg and png are available".format(fmt))
        drawing = self._describe(vleaf, params)
        nodes = OrderedDict((key, Node(key, kind, lines))
                            for key, (kind, lines, _, _) in drawing.nodes.items())
        layout = layout_graph(nodes, drawing.edges)
        path = base + "." + fmt
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = "{}.tmp{}.{}".format(base, os.getpid(), fmt)   # matplotlib reads the format off the name
        try:
            if fmt == "svg":
                with open(tmp, "w") as f:
                    f.write(to_svg(layout, vleaf.name or "graph"))
            else:
                save_png(layout, tmp, vleaf.name or "graph")
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def save(self, vleaf, fpath, cleanup=False, format=None):
        """Draw the graph computing ``vleaf`` into ``fpath + '.' + format``; returns that path.
        graphviz also keeps its DOT source at ``fpath`` unless ``cleanup``."""
        return self._draw(vleaf, fpath, format, None, cleanup)

    def view(self, vleaf, fpath=None, cleanup=True, format=None, params=None):
        """Draw the graph (into ``fpath + '.' + format``, default a temporary file) and open it
        in the system's viewer when there is a display; returns the path of the drawing."""
        if fpath is None:
            fpath = os.path.join(tempfile.mkdtemp(prefix="nnabla_jit_graph_"), "graph")
        path = self._draw(vleaf, fpath, format, params, cleanup)
        if not _open_in_viewer(path):
            print("Graph drawn into {}".format(path))
        return path


def _open_in_viewer(path):
    """Open ``path`` with the desktop's viewer without waiting; False where there is none."""
    if os.name == "nt":
        os.startfile(path)
        return True
    if sys.platform == "darwin":
        command = "open"
    elif os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        command = "xdg-open"
    else:
        return False
    if shutil.which(command) is None:
        return False
    subprocess.Popen([command, path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True
