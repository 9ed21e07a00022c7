"""A memory's lineage as a small layered graph, laid out here and drawn by the page as
inline SVG (no graph library, nothing fetched): evidence and commands on the top row, the
supersession chain (earlier, this memory, later) and conflicts on the middle row, the
sessions that recalled, admitted or used it on the bottom row. Labels are plain text; the
template escapes them like every stored string."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_ledger.replay.ui.text import HIDDEN

if TYPE_CHECKING:
    from memory_ledger.replay.audit.lineage import Lineage

__all__ = ["Edge", "Graph", "Node", "lineage_graph"]

WIDTH = 210
HEIGHT = 46
GAP = 80
ROWS = (16, 126, 236)
LABEL = 30


@dataclass(frozen=True)
class Node:
    """A box: top-left corner, kind (css class), two lines of text, an optional link."""

    x: int
    y: int
    kind: str
    title: str
    detail: str
    memory_id: str | None = None


@dataclass(frozen=True)
class Edge:
    """A line from the bottom or side of one box to another, with a short label."""

    x1: int
    y1: int
    x2: int
    y2: int
    label: str
    dashed: bool = False


@dataclass(frozen=True)
class Graph:
    """Boxes, lines and the drawing's size in CSS pixels."""

    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def _short(text: str, size: int = LABEL) -> str:
    """One line of at most ``size`` characters; hidden characters as ``[U+XXXX]`` (SVG
    text cannot hold the page's mark element)."""
    text = HIDDEN.sub(lambda m: f"[U+{ord(m.group()):04X}]", " ".join(text.split()))
    return text if len(text) <= size else text[: size - 1] + "…"


def _row(items: Sequence[tuple[str, str, str, str | None]], y: int, width: int) -> list[Node]:
    total = len(items) * WIDTH + max(0, len(items) - 1) * GAP
    x = max(8, (width - total) // 2)
    nodes = []
    for kind, title, detail, memory_id in items:
        nodes.append(Node(x, y, kind, _short(title), _short(detail), memory_id))
        x += WIDTH + GAP
    return nodes


def lineage_graph(lineage: Lineage, *, limit: int = 6) -> Graph:
    """The graph of ``lineage`` (at most ``limit`` boxes per row; the rest are counted in
    the last box of the row)."""
    sources: list[tuple[str, str, str, str | None]] = []
    for origin in lineage.origins[:limit]:
        if origin.command is not None:
            sources.append(
                ("command", f"command: {origin.command.intent}", origin.command.statement, None)
            )
        elif origin.transcript is not None:
            t = origin.transcript
            sources.append(("evidence", f"turn {t.turn_id} of {t.session_id}", t.transcript, None))
        else:
            sources.append(
                (
                    "evidence",
                    f"{origin.kind} @{origin.position}",
                    f"session {origin.session_id} turn {origin.turn_id}",
                    None,
                )
            )
    middle: list[tuple[str, str, str, str | None]] = []
    for earlier in lineage.supersedes[:limit]:
        middle.append(("earlier", "superseded", lineage.related.get(earlier, earlier), earlier))
    middle.append(("this", f"{lineage.status} rev {lineage.revision}", lineage.statement, None))
    if lineage.superseded_by:
        later = lineage.superseded_by
        middle.append(("later", "superseded by", lineage.related.get(later, later), later))
    for other in lineage.conflicts_with[:limit]:
        middle.append(("conflict", "conflicts with", lineage.related.get(other, other), other))
    touches: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for recall in lineage.recalls:
        touches[recall.session_id]["recalled"] += 1
    for admission in lineage.admissions:
        touches[admission.session_id]["admitted"] += 1
    for use in lineage.uses:
        touches[use.session_id]["used"] += 1
    bottom = [
        ("session", f"session {session}", ", ".join(f"{k} {n}" for k, n in counts.items()), None)
        for session, counts in list(touches.items())[:limit]
    ]
    widest = max(len(sources), len(middle), len(bottom), 1)
    width = widest * WIDTH + (widest - 1) * GAP + 16
    top_nodes = _row(sources, ROWS[0], width)
    middle_nodes = _row(middle, ROWS[1], width)
    bottom_nodes = _row(bottom, ROWS[2], width) if bottom else []
    this = next(n for n in middle_nodes if n.kind == "this")
    edges: list[Edge] = []
    cx, top, base = this.x + WIDTH // 2, this.y, this.y + HEIGHT
    for node in top_nodes:
        label = "said" if node.kind == "evidence" else "asked"
        edges.append(Edge(node.x + WIDTH // 2, node.y + HEIGHT, cx, top, label))
    for node in middle_nodes:
        mid = node.y + HEIGHT // 2
        if node.kind == "earlier":
            edges.append(Edge(node.x + WIDTH, mid, this.x, mid, "replaced by"))
        elif node.kind == "later":
            edges.append(Edge(this.x + WIDTH, mid, node.x, mid, "replaced by"))
        elif node.kind == "conflict":
            edges.append(Edge(this.x + WIDTH, mid, node.x, mid, "conflict", dashed=True))
    for node in bottom_nodes:
        edges.append(Edge(cx, base, node.x + WIDTH // 2, node.y, "", dashed=True))
    height = (ROWS[2] if bottom_nodes else ROWS[1]) + HEIGHT + 16
    return Graph(top_nodes + middle_nodes + bottom_nodes, edges, width, height)
