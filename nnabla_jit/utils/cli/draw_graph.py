"""``draw_graph``: draw the networks of an NNP / nntxt file.

With the ``graphviz`` Python package and its ``dot`` program installed, any format graphviz
writes is available; otherwise nnabla_jit lays the graph out itself and writes SVG, or PNG
through matplotlib.
"""
import os
import shutil
from argparse import RawTextHelpFormatter

from ...serialization import nnp
from ...serialization.files import name_as_file_name
from . import CommandError
from .graph_drawing import layout_network, save_png, to_svg

__all__ = ["add_draw_graph_command", "draw_network"]


def _graphviz():
    try:
        import graphviz
    except ImportError:
        return None
    return graphviz if shutil.which("dot") else None


def _draw_with_graphviz(graphviz, network, base, fmt):
    g = graphviz.Digraph(network.name, format=fmt)
    for v in network.variable:
        dims = ", ".join(str(network.batch_size if d < 0 else d) for d in v.shape.dim)
        g.node("v:" + v.name, "{}\n({})".format(v.name, dims), shape="ellipse",
               style="filled", fillcolor="#e6e6e6" if v.type == "Parameter" else "white")
    for f in network.function:
        g.node("f:" + f.name, f.type, shape="box", style="filled,rounded", fillcolor="#cfe2f3")
        for n in f.input:
            g.edge("v:" + n, "f:" + f.name)
        for n in f.output:
            g.edge("f:" + f.name, "v:" + n)
    return g.render(base, cleanup=True)


def draw_network(network, base, fmt):
    """Draw a ``Network`` message to ``base + '.' + fmt``; returns the file written."""
    fmt = fmt.lower()
    graphviz = _graphviz()
    if graphviz is not None:
        return _draw_with_graphviz(graphviz, network, base, fmt)
    if fmt not in ("svg", "png"):
        raise CommandError("format '{}' needs graphviz (pip install graphviz, and the dot program); "
                           "without it svg and png are available".format(fmt))
    layout = layout_network(network)
    path = base + "." + fmt
    if fmt == "svg":
        with open(path, "w") as f:
            f.write(to_svg(layout, network.name))
    else:
        save_png(layout, path, network.name)
    return path


def draw_graph_command(args):
    contents = nnp.read([args.input])
    networks = {n.name: n for n in contents.proto.network}
    if not networks:
        raise CommandError("{} holds no network".format(args.input))
    names = args.network or list(networks)
    for n in names:
        if n not in networks:
            raise CommandError("no network '{}' in {} (it has: {})".format(
                n, args.input, ", ".join(networks)))
    # a name from the file becomes a file name in the output folder, never a path out of it
    files = {n: name_as_file_name(n.replace(" ", "_"), "network name", args.input) for n in names}
    os.makedirs(args.output_dir, exist_ok=True)
    for n in names:
        path = draw_network(networks[n], os.path.join(args.output_dir, files[n]), args.format)
        print("Drew network '{}' into {}".format(n, path))
    return True


def add_draw_graph_command(subparsers):
    sub = subparsers.add_parser(
        "draw_graph", help="Draw a graph in a NNP or nntxt file.",
        formatter_class=RawTextHelpFormatter,
        description="Draw the networks of an NNP or nntxt file (one file per network).\n\n"
                    "Example:\n\n    nnabla_jit draw_graph -o output-folder -f svg model.nnp")
    sub.add_argument("input", help="Path to input nnp or nntxt.")
    sub.add_argument("-o", "--output-dir", default="draw_out", help="Output directory.")
    sub.add_argument("-n", "--network", action="append", help="Network names to be drawn.")
    sub.add_argument("-f", "--format", default="png",
                     help="svg or png (any graphviz format when graphviz is installed).")
    sub.set_defaults(func=draw_graph_command)
    return sub
