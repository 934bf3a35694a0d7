"""Drawing a ``Network`` message without graphviz: a layered layout, written as SVG or (with
matplotlib) PNG.

Variables are ellipses (parameters grey), functions boxes; edges run top to bottom. Layers come
from the longest path from the inputs (a parameter sits just above its first reader); the order
inside a layer is improved by a few barycenter sweeps, which keeps most edges short and
uncrossed for the chain-like graphs neural networks are.
"""
from xml.sax.saxutils import escape

__all__ = ["Node", "Layout", "layout_graph", "layout_network", "to_svg", "save_png"]

_CHAR_W, _LINE_H, _PAD_X, _NODE_H = 7.0, 14.0, 14.0, 40.0
_GAP_X, _GAP_Y, _MARGIN = 24.0, 44.0, 20.0


class Node:
    __slots__ = ("key", "kind", "lines", "layer", "x", "y", "w", "h")

    def __init__(self, key, kind, lines):
        self.key, self.kind, self.lines = key, kind, lines
        self.layer, self.x, self.y = 0, 0.0, 0.0
        self.w = max(len(t) for t in lines) * _CHAR_W + 2 * _PAD_X
        self.h = _NODE_H if len(lines) < 3 else _NODE_H + _LINE_H


class Layout:
    """Nodes with positions (``x``, ``y``: centre) and edges (pairs of node keys)."""

    def __init__(self, nodes, edges, width, height):
        self.nodes, self.edges, self.width, self.height = nodes, edges, width, height


def _shape_text(dims, batch_size):
    return "(" + ", ".join(str(batch_size if d < 0 else d) for d in dims) + ")"


def _graph(network):
    nodes, edges = {}, []
    kinds = {v.name: ("parameter" if v.type == "Parameter" else "variable") for v in network.variable}
    for v in network.variable:
        nodes["v:" + v.name] = Node("v:" + v.name, kinds[v.name],
                                    [v.name, _shape_text(v.shape.dim, network.batch_size)])
    for f in network.function:
        key = "f:" + f.name
        nodes[key] = Node(key, "function", [f.type, f.name] if f.name != f.type else [f.type])
        for n in f.input:
            nodes.setdefault("v:" + n, Node("v:" + n, "variable", [n]))
            edges.append(("v:" + n, key))
        for n in f.output:
            nodes.setdefault("v:" + n, Node("v:" + n, "variable", [n]))
            edges.append((key, "v:" + n))
    return nodes, edges


def _assign_layers(nodes, edges):
    """Longest path from the sources; a source variable (input or parameter) is placed just
    above its first reader, so its edge stays short."""
    preds = {k: [] for k in nodes}
    succs = {k: [] for k in nodes}
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    sources = {k for k, n in nodes.items() if n.kind != "function" and not preds[k]}
    done = {}

    def layer_of(k, stack=()):
        if k in done:
            return done[k]
        if k in stack:       # a cycle would be a broken file; do not recurse forever
            return 0
        done[k] = 1 + max((layer_of(p, stack + (k,)) for p in preds[k] if p not in sources),
                          default=-1)
        return done[k]
    for k, n in nodes.items():
        if k not in sources:
            n.layer = layer_of(k)
    for k in sources:
        readers = [nodes[s].layer for s in succs[k]]
        nodes[k].layer = min(readers) - 1 if readers else 0
    lowest = min((n.layer for n in nodes.values()), default=0)
    for n in nodes.values():
        n.layer -= lowest
    return preds, succs


def _order_layers(nodes, preds, succs):
    layers = {}
    for n in nodes.values():
        layers.setdefault(n.layer, []).append(n)
    ranks = sorted(layers)
    position = {}

    def renumber():
        for layer in layers.values():
            for i, n in enumerate(layer):
                position[n.key] = i
    renumber()
    for sweep in range(4):
        order = ranks if sweep % 2 == 0 else list(reversed(ranks))
        for r in order:
            neighbours = preds if sweep % 2 == 0 else succs

            def barycenter(n):
                ns = [position[k] for k in neighbours[n.key]]
                return sum(ns) / len(ns) if ns else position[n.key]
            layers[r].sort(key=barycenter)
            renumber()
    return [layers[r] for r in ranks]


def layout_network(network):
    """Lay out a ``Network`` message."""
    return layout_graph(*_graph(network))


def layout_graph(nodes, edges):
    """Lay out ``nodes`` (``{key: Node}``) joined by ``edges`` (pairs of keys); also used by
    ``nnabla_jit.experimental.viewers`` to draw graphs of Variables."""
    preds, succs = _assign_layers(nodes, edges)
    rows = _order_layers(nodes, preds, succs)
    widths = [sum(n.w for n in row) + _GAP_X * (len(row) - 1) for row in rows]
    width = max(widths, default=0) + 2 * _MARGIN
    y = _MARGIN
    for row, row_w in zip(rows, widths):
        h = max(n.h for n in row)
        x = (width - row_w) / 2
        for n in row:
            n.x, n.y = x + n.w / 2, y + h / 2
            x += n.w + _GAP_X
        y += h + _GAP_Y
    return Layout(list(nodes.values()), edges, width, y - _GAP_Y + _MARGIN)


# ------------------------------------------------------------------------------------ SVG
_FILL = {"function": "#cfe2f3", "variable": "#ffffff", "parameter": "#e6e6e6"}


def to_svg(layout, title=""):
    """The layout as an SVG document (text)."""
    by_key = {n.key: n for n in layout.nodes}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" '
           'viewBox="0 0 {0:.0f} {1:.0f}" font-family="sans-serif" font-size="12">'.format(
               layout.width, layout.height),
           '<title>{}</title>'.format(escape(title)),
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>']
    for a, b in layout.edges:
        s, t = by_key[a], by_key[b]
        y0, y1 = s.y + s.h / 2, t.y - t.h / 2
        mid = (y0 + y1) / 2
        out.append('<path d="M{:.1f},{:.1f} C{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}" fill="none" '
                   'stroke="#444" marker-end="url(#arrow)"/>'.format(s.x, y0, s.x, mid, t.x, mid, t.x, y1))
    for n in layout.nodes:
        fill = _FILL[n.kind]
        if n.kind == "function":
            out.append('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="6" fill="{}" '
                       'stroke="#333"/>'.format(n.x - n.w / 2, n.y - n.h / 2, n.w, n.h, fill))
        else:
            out.append('<ellipse cx="{:.1f}" cy="{:.1f}" rx="{:.1f}" ry="{:.1f}" fill="{}" '
                       'stroke="#333"/>'.format(n.x, n.y, n.w / 2, n.h / 2, fill))
        top = n.y - (len(n.lines) - 1) * _LINE_H / 2
        for i, line in enumerate(n.lines):
            weight = ' font-weight="bold"' if i == 0 and n.kind == "function" else ""
            out.append('<text x="{:.1f}" y="{:.1f}" text-anchor="middle" dominant-baseline="middle"{}>'
                       '{}</text>'.format(n.x, top + i * _LINE_H, weight, escape(line)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ PNG
def save_png(layout, path, title=""):
    """Draw the layout with matplotlib into a PNG file."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Ellipse, FancyArrowPatch, FancyBboxPatch
    dpi = 100.0
    fig = plt.figure(figsize=(max(layout.width, 1) / dpi, max(layout.height, 1) / dpi), dpi=dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, layout.width)
    ax.set_ylim(layout.height, 0)
    ax.axis("off")
    by_key = {n.key: n for n in layout.nodes}
    for a, b in layout.edges:
        s, t = by_key[a], by_key[b]
        ax.add_patch(FancyArrowPatch((s.x, s.y + s.h / 2), (t.x, t.y - t.h / 2), arrowstyle="-|>",
                                     mutation_scale=10, color="#444", linewidth=1))
    for n in layout.nodes:
        if n.kind == "function":
            ax.add_patch(FancyBboxPatch((n.x - n.w / 2, n.y - n.h / 2), n.w, n.h,
                                        boxstyle="round,pad=0,rounding_size=6",
                                        facecolor=_FILL[n.kind], edgecolor="#333"))
        else:
            ax.add_patch(Ellipse((n.x, n.y), n.w, n.h, facecolor=_FILL[n.kind], edgecolor="#333"))
        ax.text(n.x, n.y, "\n".join(n.lines), ha="center", va="center", fontsize=8.5)
    fig.savefig(path, dpi=dpi, metadata={"Title": title} if title else None)
    plt.close(fig)
