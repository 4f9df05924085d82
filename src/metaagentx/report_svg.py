"""Draw a Mermaid flowchart (``graph TD`` / ``LR``) as inline SVG, with no JavaScript.

    svg = mermaid_to_svg(mermaid_from_script(script))

The report embeds these SVGs so that it opens offline without a 3 MB Mermaid bundle. The
supported subset is what ``metaagentx.mas.render`` writes plus common flowchart syntax: node
shapes ``[ ]``, ``( )``, ``([ ])``, ``(( ))``, ``{ }``, ``{{ }}``, ``[[ ]]``, ``[/ /]``, ``>]``;
quoted labels and ``#quot;`` escapes; edges ``-->``, ``---``, ``-.->``, ``==>`` with
``|label|`` or ``-- label -->``; chains ``a --> b --> c``; ``a & b --> c``; ``;``. Comments,
``subgraph``/``end``, ``classDef``, ``style``, ``click`` and ``linkStyle`` lines are ignored.
Anything else raises ``ValueError`` naming the line (the report then shows the text instead).

Layout: layers by longest path after removing back edges (depth-first, in declaration order);
order within a layer by two barycenter sweeps; straight edges, curved back edges and loops.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from dataclasses import dataclass

SHAPES = [
    ("([", "])", "stadium"),
    ("((", "))", "circle"),
    ("[[", "]]", "subroutine"),
    ("{{", "}}", "hexagon"),
    ("[/", "/]", "parallelogram"),
    ("[\\", "\\]", "parallelogram"),
    ("[(", ")]", "stadium"),
    ("[", "]", "rect"),
    ("(", ")", "round"),
    ("{", "}", "rhombus"),
    (">", "]", "flag"),
]
_ID = re.compile(r"\s*([A-Za-z0-9_][\w.\-]*)")
_ARROW = re.compile(r"\s*(<?-->|<?--[ox]|---|<?-\.+->|-\.+-|<?==+>|===+)\s*(?:\|([^|]*)\|)?")
_TEXT_ARROW = re.compile(r"\s*(--|-\.|==)\s+([^|>]+?)\s+(-->|\.->|==>|---)")
_SKIP = re.compile(
    r"^(%%|classDef\b|class\b|style\b|linkStyle\b|click\b|subgraph\b|end\b|"
    r"direction\b)"
)
CHAR_W, NODE_H, GAP_X, GAP_Y, PAD, MARGIN = 7.4, 36, 28, 70, 16, 44


@dataclass
class Graph:
    direction: str  # TD | LR | BT | RL
    nodes: dict[str, tuple[str, str]]  # id -> (label, shape), in declaration order
    edges: list[tuple[str, str, str, bool]]  # (src, dst, label, dotted)


def _unescape(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), text)
    return html.unescape(re.sub(r"#(\w+);", r"&\1;", text))


def _node(stmt: str, pos: int, g: Graph, lineno: int) -> tuple[list[str], int]:
    """Parse ``id[label] & id2 ...`` at ``pos``; register the nodes; return their ids."""
    ids = []
    while True:
        m = _ID.match(stmt, pos)
        if not m:
            raise ValueError(f"mermaid line {lineno}: expected a node id at {stmt[pos:]!r}")
        nid, pos = m.group(1), m.end()
        for open_, close, shape in SHAPES:
            if stmt.startswith(open_, pos):
                end = stmt.find(close, pos + len(open_))
                if end < 0:
                    raise ValueError(f"mermaid line {lineno}: unclosed {open_!r} in {stmt!r}")
                label = _unescape(stmt[pos + len(open_) : end])
                g.nodes[nid] = (label, shape)
                pos = end + len(close)
                break
        else:
            g.nodes.setdefault(nid, (nid, "rect"))
        ids.append(nid)
        amp = re.match(r"\s*&", stmt[pos:])
        if not amp:
            return ids, pos
        pos += amp.end()


def _statements(line: str) -> list[str]:
    """Split a line at ``;`` outside brackets, quotes and ``|labels|`` (``#quot;`` stays)."""
    out, cur, depth, quote, pipe = [], [], 0, False, False
    for ch in line:
        if ch == '"':
            quote = not quote
        elif not quote and ch == "|":
            pipe = not pipe
        elif not quote and not pipe and ch in "[({":
            depth += 1
        elif not quote and not pipe and ch in "])}":
            depth -= 1
        elif ch == ";" and not (quote or pipe or depth) and not re.search(r"#\w+$", "".join(cur)):
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return [s for s in out if s]


def parse_mermaid(text: str) -> Graph:
    """Mermaid flowchart text -> Graph (raises ValueError naming the offending line)."""
    lines = [ln.strip() for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines or not re.match(r"^(graph|flowchart)\b", lines[0]):
        raise ValueError("mermaid: the first line must be 'graph TD' or 'flowchart TD'")
    head = lines[0].split()
    direction = {"TB": "TD"}.get(head[1], head[1]) if len(head) > 1 else "TD"
    g = Graph(direction if direction in ("TD", "LR", "BT", "RL") else "TD", {}, [])
    for lineno, line in enumerate(lines[1:], start=2):
        for stmt in _statements(line):
            if not stmt or _SKIP.match(stmt):
                continue
            srcs, pos = _node(stmt, 0, g, lineno)
            while pos < len(stmt):
                m = _ARROW.match(stmt, pos) or _TEXT_ARROW.match(stmt, pos)
                if not m:
                    raise ValueError(f"mermaid line {lineno}: cannot read {stmt[pos:]!r}")
                arrow_text = m.group(0)
                label = _unescape(m.group(2) or "")
                dsts, pos = _node(stmt, m.end(), g, lineno)
                for s in srcs:
                    for d in dsts:
                        g.edges.append((s, d, label, ".-" in arrow_text or "-." in arrow_text))
                srcs = dsts
    return g


def _layers(g: Graph) -> dict[str, int]:
    """Longest-path layer of each node, after dropping the edges that close a cycle."""
    succ: dict[str, list[str]] = defaultdict(list)
    for s, d, _, _ in g.edges:
        if s != d:
            succ[s].append(d)
    state: dict[str, int] = {}
    forward: set[tuple[str, str]] = set()

    def dfs(n: str) -> None:
        state[n] = 1
        for d in succ[n]:
            if state.get(d) is None:
                forward.add((n, d))
                dfs(d)
            elif state[d] == 2:
                forward.add((n, d))
        state[n] = 2

    for n in g.nodes:
        if n not in state:
            dfs(n)
    layer = {n: 0 for n in g.nodes}
    for _ in range(len(g.nodes)):
        changed = False
        for s, d in forward:
            if layer[d] < layer[s] + 1:
                layer[d], changed = layer[s] + 1, True
        if not changed:
            break
    return layer


def _order(g: Graph, layer: dict[str, int]) -> list[list[str]]:
    rows: list[list[str]] = [[] for _ in range(max(layer.values(), default=0) + 1)]
    for n in g.nodes:
        rows[layer[n]].append(n)
    nbrs: dict[str, list[str]] = defaultdict(list)
    for s, d, _, _ in g.edges:
        nbrs[s].append(d)
        nbrs[d].append(s)
    for sweep in (range(1, len(rows)), range(len(rows) - 2, -1, -1)):
        for i in sweep:
            pos = {n: k for row in rows for k, n in enumerate(row)}
            ref = i - 1 if sweep.step == 1 else i + 1

            def center(n: str, ref: int = ref, pos: dict = pos) -> float:
                near = [pos[m] for m in nbrs[n] if layer[m] == ref]
                return sum(near) / len(near) if near else pos[n]

            rows[i].sort(key=center)
    return rows


def _shape_svg(shape: str, x: float, y: float, w: float, h: float) -> str:
    cx, cy = x + w / 2, y + h / 2
    if shape == "rhombus":
        pts = f"{cx},{y - 6} {x + w + 8},{cy} {cx},{y + h + 6} {x - 8},{cy}"
        return f'<polygon class="node" points="{pts}"/>'
    if shape == "hexagon":
        pts = f"{x},{cy} {x + 10},{y} {x + w - 10},{y} {x + w},{cy} {x + w - 10},{y + h} {x + 10},{y + h}"
        return f'<polygon class="node" points="{pts}"/>'
    if shape == "parallelogram":
        pts = f"{x + 8},{y} {x + w},{y} {x + w - 8},{y + h} {x},{y + h}"
        return f'<polygon class="node" points="{pts}"/>'
    if shape == "circle":
        return f'<ellipse class="node" cx="{cx}" cy="{cy}" rx="{w / 2}" ry="{h / 2 + 4}"/>'
    radius = {"stadium": h / 2, "round": 10}.get(shape, 3)
    return f'<rect class="node" x="{x}" y="{y}" width="{w}" height="{h}" rx="{radius}"/>' + (
        f'<rect class="node" x="{x + 5}" y="{y}" width="{w - 10}" height="{h}"/>'
        if shape == "subroutine"
        else ""
    )


def mermaid_to_svg(text: str) -> str:
    """Mermaid flowchart text -> a standalone ``<svg>`` element (see module docstring)."""
    g = parse_mermaid(text)
    layer = _layers(g)
    rows = _order(g, layer)
    horizontal = g.direction in ("LR", "RL")
    width = {n: max(60.0, CHAR_W * len(g.nodes[n][0]) + 24) for n in g.nodes}
    box: dict[str, tuple[float, float, float, float]] = {}
    if horizontal:
        col_w = [max((width[n] for n in row), default=60) for row in rows]
        x = PAD
        for row, cw in zip(rows, col_w):
            for k, n in enumerate(row):
                box[n] = (x + (cw - width[n]) / 2, PAD + k * (NODE_H + GAP_X), width[n], NODE_H)
            x += cw + GAP_Y
    else:
        row_w = [sum(width[n] for n in row) + GAP_X * (len(row) - 1) for row in rows]
        full = max(row_w, default=0)
        for i, (row, rw) in enumerate(zip(rows, row_w)):
            x = PAD + MARGIN + (full - rw) / 2
            for n in row:
                box[n] = (x, PAD + i * (NODE_H + GAP_Y), width[n], NODE_H)
                x += width[n] + GAP_X
    W = max((b[0] + b[2] for b in box.values()), default=0) + PAD + MARGIN
    H = max((b[1] + b[3] for b in box.values()), default=0) + PAD + 10
    if g.direction in ("BT", "RL"):
        box = {
            n: ((W - x - w, y, w, h) if horizontal else (x, H - y - h, w, h))
            for n, (x, y, w, h) in box.items()
        }
    parts = [_edge_svg(box, e, horizontal, W / 2) for e in g.edges]
    for n, (label, shape) in g.nodes.items():
        x, y, w, h = box[n]
        parts.append(
            f'<g class="n" data-id="{html.escape(n)}">{_shape_svg(shape, x, y, w, h)}'
            f'<text x="{x + w / 2}" y="{y + h / 2 + 4.5}">{html.escape(label)}</text></g>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="mermaid-svg" width="{W:.0f}" '
        f'height="{H:.0f}" viewBox="0 0 {W:.0f} {H:.0f}" role="img">'
        '<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
        'fill="#555"/></marker></defs>' + "".join(parts) + "</svg>"
    )


def _edge_svg(box: dict, edge: tuple[str, str, str, bool], horizontal: bool, mid: float) -> str:
    s, d, label, dotted = edge
    sx, sy, sw, sh = box[s]
    dx, dy, dw, dh = box[d]
    dash = ' stroke-dasharray="5,4"' if dotted else ""
    if s == d:  # a loop on the node's right side
        x0, y0 = sx + sw, sy + sh / 2
        path = f"M{x0},{y0 - 8} C{x0 + 40},{y0 - 30} {x0 + 40},{y0 + 30} {x0},{y0 + 8}"
        lx, ly = x0 + 34, y0
    elif horizontal:
        x0, y0, x1, y1 = sx + sw, sy + sh / 2, dx, dy + dh / 2
        if x1 <= x0:  # back edge: arc below
            x0, x1 = sx + sw / 2, dx + dw / 2
            y0, y1 = sy + sh, dy + dh
            low = max(y0, y1) + 30
            path = f"M{x0},{y0} C{x0},{low} {x1},{low} {x1},{y1}"
        else:
            path = f"M{x0},{y0} L{x1},{y1}"
        lx, ly = (x0 + x1) / 2, (y0 + y1) / 2
    else:
        x0, y0, x1, y1 = sx + sw / 2, sy + sh, dx + dw / 2, dy
        if y1 <= y0:  # back edge or same layer: curve round the outer side of the source
            left = sx + sw / 2 < mid
            x0, y0 = (sx if left else sx + sw), sy + sh / 2
            x1, y1 = (dx if left else dx + dw), dy + dh / 2
            bend = min(x0, x1) - 36 if left else max(x0, x1) + 36
            path = f"M{x0},{y0} C{bend},{y0} {bend},{y1} {x1},{y1}"
            lx, ly = bend + (8 if left else -8), (y0 + y1) / 2
        else:
            path = f"M{x0},{y0} L{x1},{y1}"
            lx, ly = (x0 + x1) / 2, (y0 + y1) / 2
    out = f'<path class="edge" d="{path}"{dash} marker-end="url(#arr)"/>'
    if label:
        w = CHAR_W * 0.9 * len(label) + 8
        out += (
            f'<rect class="elabel" x="{lx - w / 2}" y="{ly - 9}" width="{w}" height="16"/>'
            f'<text class="elabel" x="{lx}" y="{ly + 3.5}">{html.escape(label)}</text>'
        )
    return out
