"""The fold: how a page of ledger events changes the read models.

A pure function of the events (their content and positions): no wall clock, no randomness.
For one page it (1) collects the keys the events touch per table, (2) loads those rows in one
query per table, (3) applies the events in position order to the rows in Python, and (4)
writes every touched table back as one Arrow batch. The caller wraps it in the transaction
that also advances the tracking position.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import duckdb

from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.events import (
    AdmissionRevoked,
    CandidateExtracted,
    CandidateRejected,
    ContextCompacted,
    DirectCommandApplied,
    ErasedPayload,
    ExplicitCommandApplied,
    ExtractionAbandoned,
    ExtractionCompleted,
    KnowledgeBound,
    KnowledgeServed,
    LedgerEvent,
    MemoryActivated,
    MemoryAdmitted,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    MemoryUsed,
    NamespaceErased,
    NamespaceForgotten,
    RecallServed,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
    SnapshotPrepared,
    TranscriptObserved,
    TurnBegan,
    TurnCompleted,
    WorkspaceAttached,
    WorkspaceReleased,
    WorkspaceSearched,
)
from memory_ledger.projections.columnar import session_key
from memory_ledger.projections.tables import (
    ADMISSIONS,
    CANDIDATE_OUTCOMES,
    CANDIDATES,
    CANONICAL_MEMORY,
    EXTRACTIONS,
    MEMORY_HISTORY,
    RECALLS,
    TRANSCRIPTS,
    TURN_SNAPSHOTS,
    USES,
    ReadModelTable,
)

_KEYED = (CANONICAL_MEMORY, TRANSCRIPTS, TURN_SNAPSHOTS, ADMISSIONS)
_APPEND_ONLY = (CANDIDATES, CANDIDATE_OUTCOMES, EXTRACTIONS, USES, RECALLS, MEMORY_HISTORY)

__all__ = [
    "PROJECTED_EVENTS",
    "SERVED_EVENTS",
    "FoldTarget",
    "KnownKeys",
    "fold_page",
    "served_handlers",
]


def _ns(event: LedgerEvent) -> dict[str, Any]:
    ns = event.namespace
    return {"tenant": ns.tenant, "principal": ns.principal, "scope_id": ns.scope_id}


def _session_key(event: LedgerEvent, session_id: str) -> str:
    return session_key(event.namespace, session_id)


def _turn_key(event: LedgerEvent, session_id: str, turn_id: int) -> str:
    return f"{_session_key(event, session_id)}/{turn_id}"


def _admission_key(event: MemoryAdmitted | AdmissionRevoked) -> str:
    turn = _turn_key(event, event.session_id, event.turn_id)
    return f"{turn}/{event.memory_id}/{event.revision}"


class KnownKeys:
    """What one projection file already holds: the keys of each keyed table and the position
    of every transcript.

    Lets a page skip lookups and deletes for rows that cannot exist (a rebuild creates nearly
    every row it touches), so a page's cost does not grow with the size of the tables.
    Loaded once per file (one key scan per table); updated only after a page commits.
    """

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.keys: dict[str, set[str]] = {}
        for table in _KEYED:
            assert table.key is not None
            rows = conn.execute(f"SELECT {table.key} FROM {table.name}").fetchall()
            self.keys[table.name] = {str(r[0]) for r in rows}
        rows = conn.execute("SELECT transcript_key, position FROM transcripts").fetchall()
        self.transcripts: dict[str, int] = {str(k): int(p) for k, p in rows}

    def commit(self, page: _Page) -> None:
        """Record the rows a committed page created."""
        for name, dirty in page.dirty.items():
            self.keys[name] |= dirty
        for key in page.dirty.get(TRANSCRIPTS.name, ()):
            self.transcripts[key] = page.rows[TRANSCRIPTS.name][key]["position"]


class FoldTarget(Protocol):
    """Where the per-event row functions of this module write: a page of the DuckDB fold
    (:func:`fold_page`) or the in-process serving state
    (:class:`~memory_ledger.projections.serving.state.ServingState`), so a rebuild, a
    catch-up and the writer's inline apply run the same functions."""

    keeps_appends: bool
    """Whether :meth:`append` keeps the rows (False: the serving state, which holds no
    append-only table; the row functions then skip building them)."""

    def get(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        """The row of ``table`` under ``key`` (None: absent)."""

    def put(self, table: ReadModelTable, key: str, row: dict[str, Any]) -> None:
        """Set the row of ``table`` under ``key``."""

    def touch(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        """The row under ``key``, marked changed (None: absent); the caller edits it."""

    def append(self, table: ReadModelTable, row: dict[str, Any]) -> None:
        """Add a row to an append-only table."""

    def transcript_position(self, turn_key: str) -> int | None:
        """The ledger position of the turn's TranscriptObserved (None: not observed)."""


class _Page:
    """Rows of one page, loaded once per table and folded in position order."""

    keeps_appends = True

    def __init__(self, conn: duckdb.DuckDBPyConnection, known: KnownKeys) -> None:
        self.conn = conn
        self.known = known
        self.keys: dict[str, set[str]] = {}
        self.rows: dict[str, dict[str, dict[str, Any]]] = {}
        self.appends: dict[str, list[dict[str, Any]]] = {}
        self.dirty: dict[str, set[str]] = {}
        self.existing: dict[str, set[str]] = {}

    def want(self, table: ReadModelTable, key: str) -> None:
        self.keys.setdefault(table.name, set()).add(key)

    def load(self) -> None:
        for table in _KEYED:
            keys = self.keys.get(table.name, set()) & self.known.keys[table.name]
            loaded = table.load(self.conn, keys) if keys else {}
            self.rows[table.name] = loaded
            self.existing[table.name] = set(loaded)

    def get(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        return self.rows[table.name].get(key)

    def put(self, table: ReadModelTable, key: str, row: dict[str, Any]) -> None:
        self.rows[table.name][key] = row
        self.dirty.setdefault(table.name, set()).add(key)

    def touch(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        row = self.rows[table.name].get(key)
        if row is not None:
            self.dirty.setdefault(table.name, set()).add(key)
        return row

    def append(self, table: ReadModelTable, row: dict[str, Any]) -> None:
        self.appends.setdefault(table.name, []).append(row)

    def transcript_position(self, turn_key: str) -> int | None:
        row = self.get(TRANSCRIPTS, turn_key)
        if row is not None:
            return int(row["position"])
        return self.known.transcripts.get(turn_key)

    def write(self) -> None:
        for table in _KEYED:
            dirty = self.dirty.get(table.name)
            if dirty:
                rows = self.rows[table.name]
                table.replace(
                    self.conn, {k: rows[k] for k in dirty}, dirty & self.existing[table.name]
                )
        for table in _APPEND_ONLY:
            table.insert(self.conn, self.appends.get(table.name, []))


_CURRENT = frozenset(("active", "conflicted"))
"""Retrievable statuses (``projections.canonical.RETRIEVABLE``)."""


_HISTORY_COLUMNS = tuple(
    column for column in MEMORY_HISTORY.columns if column not in ("current_delta", "position")
)
"""The ``canonical_memory`` columns each ``memory_history`` row copies."""


def _record_revision(
    page: FoldTarget, position: int, row: dict[str, Any], before: str | None
) -> None:
    """Append the revision ``row`` holds from ``position`` on to the memory's history
    (``memory_history``; ``before``: its status until then, None for a new memory): the
    answer to "what was current at a position", and what recall read of it then. Nothing
    is built for a target that keeps no history (the serving state)."""
    if not page.keeps_appends:
        return
    entry = {column: row[column] for column in _HISTORY_COLUMNS}
    entry["current_delta"] = (row["status"] in _CURRENT) - (before in _CURRENT)
    entry["position"] = position
    page.append(MEMORY_HISTORY, entry)


def _collect_memory(page: _Page, event: LedgerEvent) -> None:
    page.want(CANONICAL_MEMORY, str(event.originator_id))


def _collect_superseded(page: _Page, event: MemorySuperseded) -> None:
    page.want(CANONICAL_MEMORY, str(event.originator_id))
    page.want(CANONICAL_MEMORY, str(event.superseded_by))


def _collect_snapshot(page: _Page, event: SnapshotPrepared | TurnBegan) -> None:
    page.want(TURN_SNAPSHOTS, _turn_key(event, event.session_id, event.turn_id))


def _collect_recall(page: _Page, event: RecallServed) -> None:
    for result in event.results:
        page.want(CANONICAL_MEMORY, str(result.memory_id))


def _collect_admitted(page: _Page, event: MemoryAdmitted) -> None:
    page.want(CANONICAL_MEMORY, str(event.memory_id))
    page.want(ADMISSIONS, _admission_key(event))


def _collect_revoked(page: _Page, event: AdmissionRevoked) -> None:
    page.want(ADMISSIONS, _admission_key(event))


def _collect_used(page: _Page, event: MemoryUsed) -> None:
    page.want(CANONICAL_MEMORY, str(event.memory_id))


_Collect = Callable[[_Page, Any], None]

_COLLECT: EventDispatch[_Collect] = EventDispatch(
    "projection fold: rows to load before a page",
    {
        MemoryActivated: _collect_memory,
        MemoryReinforced: _collect_memory,
        MemorySuperseded: _collect_superseded,
        MemoryConflictMarked: _collect_memory,
        MemoryPinned: _collect_memory,
        MemoryForgotten: _collect_memory,
        MemoryPruned: _collect_memory,
        SnapshotPrepared: _collect_snapshot,
        TurnBegan: _collect_snapshot,
        RecallServed: _collect_recall,
        MemoryAdmitted: _collect_admitted,
        AdmissionRevoked: _collect_revoked,
        MemoryUsed: _collect_used,
    },
    # Row-creating events (nothing to look up first) and events no read model uses.
    ignores=(
        NamespaceForgotten,
        NamespaceErased,
        ErasedPayload,
        TranscriptObserved,
        ExtractionCompleted,
        CandidateExtracted,
        CandidateRejected,
        SessionOpened,
        ExtractionAbandoned,
        SessionSealed,
        SessionReconciled,
        ExplicitCommandApplied,
        DirectCommandApplied,
        TurnCompleted,
        KnowledgeBound,
        KnowledgeServed,
        ContextCompacted,
        WorkspaceAttached,
        WorkspaceSearched,
        WorkspaceReleased,
    ),
)
"""What each event needs loaded before a page is folded."""


def _transcript_position(page: FoldTarget, event: MemoryActivated | MemoryReinforced) -> list[int]:
    position = page.transcript_position(_turn_key(event, event.session_id, event.turn_id))
    return [position] if position is not None else []


def _activate(page: FoldTarget, position: int, event: MemoryActivated) -> None:
    key = str(event.originator_id)
    previous = page.get(CANONICAL_MEMORY, key)
    item = event.item
    ns = event.namespace
    row: dict[str, Any] = {
        "memory_id": key,
        "tenant": ns.tenant,  # _ns(event), without a dict to merge
        "principal": ns.principal,
        "scope_id": ns.scope_id,
        "status": "active",
        "revision": event.originator_version,
        "subject": item.subject,
        "predicate": item.predicate,
        "value": item.value,
        "statement": item.statement,
        "normalized": event.normalized,
        "kind": item.kind,
        "source": item.source,
        "scope": item.scope,
        "reason": item.reason,
        "tags": list(item.tags),
        "importance": item.importance,
        "confidence": item.confidence,
        "evidence": list(item.evidence),
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "decision": event.decision,
        "candidate_ids": [str(event.candidate_id)],
        "transcript_positions": _transcript_position(page, event),
        "supersedes": list(item.supersedes),
        "superseded_by": None,
        "conflicts_with": [],
        "pinned": False,
        "reinforcements": 0,
        "recall_count": 0,
        "admission_count": 0,
        "use_count": 0,
        "occurred_at": event.occurred_at,
        "activated_at": event.recorded_at,
        "created_position": position,
        "updated_position": position,
    }
    if previous is not None:
        # A reactivation keeps the item's history: first position, counters, pin, relations.
        for column in (
            "created_position",
            "pinned",
            "reinforcements",
            "recall_count",
            "admission_count",
            "use_count",
        ):
            row[column] = previous[column]
        row["candidate_ids"] = [*previous["candidate_ids"], str(event.candidate_id)]
        row["transcript_positions"] = [
            *previous["transcript_positions"],
            *row["transcript_positions"],
        ]
    page.put(CANONICAL_MEMORY, key, row)
    _record_revision(page, position, row, previous["status"] if previous is not None else None)
    _resolve_candidate(page, position, event.candidate_id, "activated", key)


def _resolve_candidate(
    page: FoldTarget, position: int, candidate: Any, outcome: str, mid: str
) -> None:
    if not page.keeps_appends:
        return
    page.append(
        CANDIDATE_OUTCOMES,
        {
            "candidate_id": str(candidate),
            "outcome": outcome,
            "memory_id": mid,
            "position": position,
        },
    )


def _candidate_row(event: CandidateExtracted | CandidateRejected, position: int) -> dict[str, Any]:
    return {
        "candidate_id": str(event.candidate_id),
        **_ns(event),
        "session_id": event.session_id,
        "turn_id": event.turn_id,
        "item_index": event.index,
        "extractor_id": event.extractor_id,
        "validation": "accepted",
        "reason_code": None,
        "subject": None,
        "predicate": None,
        "value": None,
        "statement": None,
        "kind": None,
        "source": None,
        "importance": None,
        "confidence": None,
        "position": position,
    }


def _apply_extracted(page: FoldTarget, position: int, event: CandidateExtracted) -> None:
    row = _candidate_row(event, position)
    item = event.item
    row.update(
        subject=item.subject,
        predicate=item.predicate,
        value=item.value,
        statement=item.statement,
        kind=item.kind,
        source=item.source,
        importance=item.importance,
        confidence=item.confidence,
    )
    page.append(CANDIDATES, row)


def _apply_rejected(page: FoldTarget, position: int, event: CandidateRejected) -> None:
    row = _candidate_row(event, position)
    row.update(validation="rejected", reason_code=event.reason_code)
    page.append(CANDIDATES, row)


def _apply_transcript(page: FoldTarget, position: int, event: TranscriptObserved) -> None:
    key = _turn_key(event, event.session_id, event.turn_id)
    page.put(
        TRANSCRIPTS,
        key,
        {
            "transcript_key": key,
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "digest": event.digest,
            "redactions": event.redactions,
            "occurred_at": event.occurred_at,
            "recorded_at": event.recorded_at,
            "position": position,
        },
    )


def _apply_extraction(page: FoldTarget, position: int, event: ExtractionCompleted) -> None:
    page.append(
        EXTRACTIONS,
        {
            "transcript_key": _turn_key(event, event.session_id, event.turn_id),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "extractor_id": event.extractor_id,
            "extracted": event.extracted,
            "rejected": event.rejected,
            "position": position,
        },
    )


def _apply_reinforced(page: FoldTarget, position: int, event: MemoryReinforced) -> None:
    key = str(event.originator_id)
    row = page.touch(CANONICAL_MEMORY, key)
    if row is not None:
        row["importance"] = event.importance
        row["tags"] = list(event.tags)
        row["evidence"] = list(event.evidence)
        row["candidate_ids"] = [*row["candidate_ids"], str(event.candidate_id)]
        row["transcript_positions"] = [
            *row["transcript_positions"],
            *_transcript_position(page, event),
        ]
        row["reinforcements"] += 1
        row["revision"] = event.originator_version
        row["updated_position"] = position
        _record_revision(page, position, row, row["status"])
    _resolve_candidate(page, position, event.candidate_id, "reinforced", key)


def _revise(page: FoldTarget, position: int, event: LedgerEvent) -> dict[str, Any] | None:
    """The memory row an event of its stream revises (revision and position moved), or None
    when the file does not hold it."""
    row = page.touch(CANONICAL_MEMORY, str(event.originator_id))
    if row is not None:
        row["revision"] = event.originator_version
        row["updated_position"] = position
    return row


def _apply_superseded(page: FoldTarget, position: int, event: MemorySuperseded) -> None:
    row = _revise(page, position, event)
    if row is None:
        return
    key = str(event.originator_id)
    row["superseded_by"] = str(event.superseded_by)
    newer = page.touch(CANONICAL_MEMORY, str(event.superseded_by))
    if newer is not None and key not in newer["supersedes"]:
        newer["supersedes"] = [*newer["supersedes"], key]
    before = row["status"]
    row["status"] = "superseded"
    _record_revision(page, position, row, before)


def _apply_conflict(page: FoldTarget, position: int, event: MemoryConflictMarked) -> None:
    row = _revise(page, position, event)
    if row is None:
        return
    other = str(event.conflicts_with)
    if other not in row["conflicts_with"]:
        row["conflicts_with"] = [*row["conflicts_with"], other]
    before = row["status"]
    if before == "active":
        row["status"] = "conflicted"
    _record_revision(page, position, row, before)


def _apply_pinned(page: FoldTarget, position: int, event: MemoryPinned) -> None:
    row = _revise(page, position, event)
    if row is not None:
        row["pinned"] = True
        _record_revision(page, position, row, row["status"])


def _apply_forgotten(page: FoldTarget, position: int, event: MemoryForgotten) -> None:
    row = _revise(page, position, event)
    if row is not None:
        before = row["status"]
        row["status"] = "forgotten"
        _record_revision(page, position, row, before)


def _apply_pruned(page: FoldTarget, position: int, event: MemoryPruned) -> None:
    row = _revise(page, position, event)
    if row is not None:
        before = row["status"]
        row["status"] = "pruned"
        _record_revision(page, position, row, before)


def _apply_recall(page: FoldTarget, position: int, event: RecallServed) -> None:
    for result in event.results:
        row = page.touch(CANONICAL_MEMORY, str(result.memory_id))
        if row is not None:
            row["recall_count"] += 1
    page.append(
        RECALLS,
        {
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "query": event.query,
            "path": event.path,
            "memory_ids": [str(r.memory_id) for r in event.results],
            "position": position,
        },
    )


def _apply_admitted(page: FoldTarget, position: int, event: MemoryAdmitted) -> None:
    row = page.touch(CANONICAL_MEMORY, str(event.memory_id))
    if row is not None:
        row["admission_count"] += 1
    key = _admission_key(event)
    page.put(
        ADMISSIONS,
        key,
        {
            "admission_key": key,
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "memory_id": str(event.memory_id),
            "revision": event.revision,
            "estimated_tokens": event.estimated_tokens,
            "revoked": False,
            "revoke_reason": None,
            "admitted_position": position,
            "revoked_position": None,
        },
    )


def _apply_revoked(page: FoldTarget, position: int, event: AdmissionRevoked) -> None:
    row = page.touch(ADMISSIONS, _admission_key(event))
    if row is not None:
        row["revoked"] = True
        row["revoke_reason"] = event.reason
        row["revoked_position"] = position


def _apply_used(page: FoldTarget, position: int, event: MemoryUsed) -> None:
    row = page.touch(CANONICAL_MEMORY, str(event.memory_id))
    if row is not None:
        row["use_count"] += 1
    page.append(
        USES,
        {
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "memory_id": str(event.memory_id),
            "revision": event.revision,
            "position": position,
        },
    )


def _apply_prepared(page: FoldTarget, position: int, event: SnapshotPrepared) -> None:
    key = _turn_key(event, event.session_id, event.turn_id)
    page.put(
        TURN_SNAPSHOTS,
        key,
        {
            "snapshot_key": key,
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "snapshot_id": str(event.snapshot_id),
            "generation": event.generation,
            "query": event.query,
            "items": [
                {
                    "memory_id": str(i.memory_id),
                    "revision": i.revision,
                    "statement": i.statement,
                    "score": i.score,
                }
                for i in event.items
            ],
            "frozen": False,
            "prepared_position": position,
            "frozen_position": None,
        },
    )


def _apply_began(page: FoldTarget, position: int, event: TurnBegan) -> None:
    key = _turn_key(event, event.session_id, event.turn_id)
    row = page.touch(TURN_SNAPSHOTS, key)
    if row is None:
        row = {
            "snapshot_key": key,
            **_ns(event),
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "snapshot_id": None,
            "generation": event.generation,
            "query": None,
            "items": [],
            "frozen": True,
            "prepared_position": None,
            "frozen_position": position,
        }
        page.put(TURN_SNAPSHOTS, key, row)
        return
    row["frozen"] = True
    row["frozen_position"] = position
    row["generation"] = event.generation
    if event.snapshot_id is None:
        row["snapshot_id"] = None
        row["items"] = []


_Apply = Callable[[FoldTarget, int, Any], None]

_APPLY: EventDispatch[_Apply] = EventDispatch(
    "projection fold: apply an event to the read models",
    {
        TranscriptObserved: _apply_transcript,
        CandidateExtracted: _apply_extracted,
        CandidateRejected: _apply_rejected,
        ExtractionCompleted: _apply_extraction,
        MemoryActivated: _activate,
        MemoryReinforced: _apply_reinforced,
        MemorySuperseded: _apply_superseded,
        MemoryConflictMarked: _apply_conflict,
        MemoryPinned: _apply_pinned,
        MemoryForgotten: _apply_forgotten,
        MemoryPruned: _apply_pruned,
        SnapshotPrepared: _apply_prepared,
        TurnBegan: _apply_began,
        RecallServed: _apply_recall,
        MemoryAdmitted: _apply_admitted,
        AdmissionRevoked: _apply_revoked,
        MemoryUsed: _apply_used,
    },
    # Session bookkeeping no read model shows; erased payloads (their rows went when the
    # runner applied the NamespaceErased record: projections.erasure).
    ignores=(
        NamespaceForgotten,
        NamespaceErased,
        ErasedPayload,
        SessionOpened,
        ExtractionAbandoned,
        SessionSealed,
        SessionReconciled,
        ExplicitCommandApplied,
        DirectCommandApplied,
        TurnCompleted,
        KnowledgeBound,
        KnowledgeServed,
        ContextCompacted,
        WorkspaceAttached,
        WorkspaceSearched,
        WorkspaceReleased,
    ),
)
"""How each event changes the read models."""

PROJECTED_EVENTS: tuple[type[LedgerEvent], ...] = _APPLY.handled
"""Event classes that change some read model; other events only advance the position."""

SERVED_EVENTS: tuple[type[LedgerEvent], ...] = (
    TranscriptObserved,
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    MemoryPinned,
    MemoryForgotten,
    MemoryPruned,
)
"""The events that change what a recall can serve (a memory's row, its source turn): the
serving state (:mod:`memory_ledger.projections.serving`) applies these with the fold's own
functions; counters (recalls, admissions, uses) and session bookkeeping it leaves to the
DuckDB read models."""


def served_handlers() -> dict[type[LedgerEvent], _Apply]:
    """The fold's row functions of :data:`SERVED_EVENTS` (event class -> ``(target,
    position, event) -> None``), for a target other than a DuckDB page."""
    handlers: dict[type[LedgerEvent], _Apply] = {}
    for cls in SERVED_EVENTS:
        handler = _APPLY[cls]
        assert handler is not None
        handlers[cls] = handler
    return handlers


def fold_page(
    conn: duckdb.DuckDBPyConnection,
    events: Sequence[tuple[int, LedgerEvent]],
    known: KnownKeys | None = None,
) -> _Page | None:
    """Apply ``(position, event)`` pairs (ascending positions) to the read models in ``conn``.

    The caller owns the transaction; after it commits, it passes the returned page to
    ``known.commit``. Events of classes outside :data:`PROJECTED_EVENTS` are ignored.
    """
    if not events:
        return None
    page = _Page(conn, known if known is not None else KnownKeys(conn))
    collect, apply = _COLLECT, _APPLY
    for _, event in events:
        wants = collect[type(event)]
        if wants is not None:
            wants(page, event)
    page.load()
    for position, event in events:
        handler = apply[type(event)]
        if handler is not None:
            handler(page, position, event)
    page.write()
    return page
