"""The data of the per-memory views: one memory's lineage and supersession chain, time
travel between two points, and recall explained. Built from the audit library
(:func:`~memory_ledger.replay.explain`, :func:`~memory_ledger.replay.as_of`) and the
engine's recall; no HTML here (see :mod:`.pages`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace

if TYPE_CHECKING:
    from memory_ledger.commands.recall import RecallHit
    from memory_ledger.replay.audit.lineage import Lineage
    from memory_ledger.replay.ui.state import UiState

__all__ = [
    "ChainLink",
    "Difference",
    "ExplainedHit",
    "ExplainedRecall",
    "MemoryPage",
    "Point",
    "explained_recall",
    "memory_page",
    "memory_rows",
    "parse_ui_point",
    "time_travel",
]

Mode = Literal["position", "recorded", "occurred"]
MODES: tuple[Mode, ...] = ("position", "recorded", "occurred")
_RETRIEVABLE = "status IN ('active', 'conflicted')"
_NAMESPACE = "tenant = ? AND principal = ? AND scope_id = ?"
_CHAIN_LIMIT = 50


@dataclass(frozen=True)
class ChainLink:
    """One memory of a supersession chain (oldest first)."""

    memory_id: str
    statement: str
    status: str
    created_position: int


@dataclass(frozen=True)
class MemoryPage:
    """A memory's lineage (:class:`~memory_ledger.replay.Lineage`), its whole
    supersession chain, and the mermaid text of its lineage graph."""

    lineage: Lineage
    chain: list[ChainLink]
    mermaid: str


def _row(state: UiState, memory_id: str) -> dict[str, Any] | None:
    with state.engine.read_models(catch_up=False) as live:
        table = live.conn.sql(
            "SELECT memory_id, statement, status, created_position, supersedes, superseded_by "
            "FROM canonical_memory WHERE memory_id = ?",
            params=[memory_id],
        ).to_arrow_table()
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows[0] if rows else None


def _chain(state: UiState, lineage: Lineage) -> list[ChainLink]:
    """Follow ``supersedes`` back and ``superseded_by`` forward (first link each way)."""
    seen = {lineage.memory_id}
    back: list[ChainLink] = []
    earlier = list(lineage.supersedes)
    while earlier and len(back) < _CHAIN_LIMIT and earlier[0] not in seen:
        row = _row(state, earlier[0])
        if row is None:
            break
        seen.add(row["memory_id"])
        back.append(_link(row))
        earlier = list(row["supersedes"] or ())
    here = _row(state, lineage.memory_id)
    chain = [*reversed(back), *([_link(here)] if here else [])]
    later = lineage.superseded_by
    while later and later not in seen and len(chain) < 2 * _CHAIN_LIMIT:
        row = _row(state, later)
        if row is None:
            break
        seen.add(later)
        chain.append(_link(row))
        later = row["superseded_by"]
    return chain


def _link(row: dict[str, Any]) -> ChainLink:
    return ChainLink(
        memory_id=row["memory_id"],
        statement=row["statement"],
        status=row["status"],
        created_position=int(row["created_position"] or 0),
    )


def memory_page(state: UiState, memory_id: str) -> MemoryPage:
    """The lineage of ``memory_id`` (a full id or a unique prefix).

    :raises UnknownMemoryError: no memory (or several) match.
    """
    from memory_ledger.replay.audit.lineage import explain, render_mermaid

    lineage = explain(state.engine, memory_id)
    return MemoryPage(
        lineage=lineage,
        chain=_chain(state, lineage),
        mermaid=render_mermaid(lineage, fenced=False),
    )


def memory_rows(
    state: UiState, namespace: Namespace, *, before: int | None = None, status: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """One page of ``namespace``'s memories now, newest first, created before ledger
    position ``before`` (keyset paging: a page deep in the list costs what the first one
    does), and how many there are (counted once per ledger head)."""
    where, params = _NAMESPACE, [namespace.tenant, namespace.principal, namespace.scope_id]
    if status:
        where += " AND status = ?"
        params.append(status)

    def count() -> int:
        with state.engine.read_models() as live:
            total = live.conn.execute(
                f"SELECT count(*) FROM canonical_memory WHERE {where}", params
            ).fetchall()[0]
        return int(total[0])

    total = state.cached(f"count:{namespace.key()}:{status}", count)
    page_where = where if before is None else f"{where} AND created_position < {int(before)}"
    with state.engine.read_models() as live:
        rows = live.conn.sql(
            "SELECT memory_id, status, statement, subject, predicate, created_position, "
            f"updated_position FROM canonical_memory WHERE {page_where} "
            f"ORDER BY created_position DESC, memory_id LIMIT {int(state.page_size)}",
            params=params,
        ).to_arrow_table()
    return rows.to_pylist(), total


# Time travel ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A point the user gave: its mode and value, and the text it was read from."""

    mode: Mode
    at: int | datetime
    text: str


def parse_ui_point(text: str, mode: str, parameter: str) -> Point:
    """A point of ``mode``: ``position`` takes digits, ``recorded`` and ``occurred`` an
    ISO 8601 time with a zone (:func:`memory_ledger.replay.parse_point`).

    :raises PointError: text of the wrong kind for ``mode``, or neither kind.
    :raises InvalidArgumentError: an unknown mode.
    """
    from memory_ledger.replay.audit.points import PointError, parse_point

    if mode not in MODES:
        msg = f"mode must be one of {', '.join(MODES)}, got {mode!r}"
        raise InvalidArgumentError(msg, parameter="mode")
    at = parse_point(text, parameter)
    if mode == "position" and not isinstance(at, int):
        raise PointError(f"{parameter} must be a position for mode position", parameter=parameter)
    if mode != "position" and isinstance(at, int):
        msg = f"{parameter} must be a time with a zone for mode {mode} (e.g. 2024-03-04T09:15Z)"
        raise PointError(msg, parameter=parameter)
    return Point(mode=mode, at=at, text=text.strip())


@dataclass(frozen=True)
class Difference:
    """What was current at ``a`` and at ``b`` in one namespace, and the difference: ids
    current only at ``a`` (``gone``), only at ``b`` (``new``); ``rows`` one page of
    ``gone`` then ``new`` with their statements."""

    a: Point
    b: Point
    position_a: int
    position_b: int
    current_a: int
    current_b: int
    gone: int
    new: int
    kept: int
    rows: list[dict[str, Any]]
    offset: int


def time_travel(
    state: UiState, namespace: Namespace, a: Point, b: Point, *, offset: int = 0
) -> Difference:
    """Compare what was current (active or conflicted) in ``namespace`` at both points
    (:meth:`UiState.moment`: the live projection's memory history, no fold; occurred time
    folds, kept for the next pages).

    :raises PointError: a point the ledger cannot be read at.
    :raises PositionOutOfRangeError: a position beyond the head.
    """
    from memory_ledger.replay.audit.moments import changes_between

    namespace.validated()
    with state.moment(a.mode, a.at) as past_a, state.moment(b.mode, b.at) as past_b:
        key = f"diff:{namespace.key()}:{a.mode}:{a.at}:{b.mode}:{b.at}"
        change = state.cached(key, lambda: changes_between(past_a, past_b, namespace))
        offset = max(0, offset)
        gone = change.gone[offset : offset + state.page_size]
        start = max(0, offset - len(change.gone))
        new = change.new[start : start + state.page_size - len(gone)]
        before, status_b, after = (
            past_a.statements(gone),
            past_b.statuses(gone),
            past_b.statements(new),
        )
        position_a, position_b = past_a.position, past_b.position
    rows: list[dict[str, Any]] = [
        {
            "side": "gone",
            "memory_id": i,
            "statement": before.get(i, ""),
            "status_b": status_b.get(i, "not yet stored"),
        }
        for i in gone
    ]
    rows += [
        {"side": "new", "memory_id": i, "statement": after.get(i, ""), "status_b": "current"}
        for i in new
    ]
    return Difference(
        a=a,
        b=b,
        position_a=position_a,
        position_b=position_b,
        current_a=change.current_a,
        current_b=change.current_b,
        gone=len(change.gone),
        new=len(change.new),
        kept=change.kept,
        rows=rows,
        offset=offset,
    )


def change_points(state: UiState, namespace: Namespace, limit: int = 12) -> list[int]:
    """The latest ledger positions at which a memory of ``namespace`` was created or
    changed (handy points to travel to), newest first; computed once per ledger head."""
    params = [namespace.tenant, namespace.principal, namespace.scope_id, limit]

    def compute() -> list[int]:
        with state.engine.read_models() as live:
            rows = live.conn.execute(
                f"SELECT DISTINCT p FROM (SELECT created_position AS p FROM canonical_memory "
                f"WHERE {_NAMESPACE} UNION SELECT updated_position FROM canonical_memory WHERE "
                f"{_NAMESPACE}) WHERE p IS NOT NULL ORDER BY p DESC LIMIT ?",
                [*params[:3], *params],
            ).fetchall()
        return [int(p) for (p,) in rows]

    return state.cached(f"change-points:{namespace.key()}:{limit}", compute)


# Recall explained ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExplainedHit:
    """One hit: the engine's hit, its lexical (BM25) score, its semantic score (None when
    the channel is off or has no vector for it) and the fused score it was ranked by."""

    hit: RecallHit
    lexical: float | None
    semantic: float | None
    fused: float


@dataclass(frozen=True)
class ExplainedRecall:
    """A recall as the engine ranks it, now or as of a point (``point`` None: now)."""

    query: str
    hits: list[ExplainedHit]
    position: int
    semantic_state: str
    point: Point | None


def explained_recall(
    state: UiState, namespace: Namespace, query: str, k: int, point: Point | None = None
) -> ExplainedRecall:
    """``engine.recall`` (or, as of ``point``, the recall of
    :func:`~memory_ledger.replay.audit.past_recall.recall_point`), with each hit's score
    per channel: the lexical one from the same ranking pipeline alone
    (:func:`~memory_ledger.commands.recall.rank_candidates` without the semantic channel,
    over the documents the engine ranked), the fused one the engine's.

    :raises InvalidArgumentError: ``k`` below 1 or a bad query.
    """
    engine = state.engine
    if point is None:
        result = engine.recall(namespace, query, k)
        lexical = {
            doc.memory_id: score
            for doc, score in engine.lexical_ranking(namespace, query, max(k, 50))
        }
        status = result.semantic.state if result.semantic is not None else "off"
    else:
        with state.point(point.mode, point.at) as past:
            result = past.recall(namespace, query, k)
        lexical = {h.memory_id: h.score for h in result.results}  # the past is lexical only
        status = "off"
    hits = [
        ExplainedHit(
            hit=h,
            lexical=lexical.get(h.memory_id),
            semantic=None,
            fused=h.score,
        )
        for h in result.results
    ]
    return ExplainedRecall(
        query=query, hits=hits, position=result.position, semantic_state=status, point=point
    )
