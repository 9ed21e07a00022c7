"""The columnar fast path of catch-up for events that only create rows.

TranscriptObserved, CandidateExtracted, CandidateRejected and ExtractionCompleted never
change an existing row: each becomes one new row of ``transcripts``, ``candidates`` or
``extractions``. For them, a page skips building event objects and row dicts: the stored
payloads of one event class are decoded in ONE msgspec call into slim view Structs that
read only the fields the tables need (the transcript text is skipped), and the table columns
are built straight from the views into Arrow arrays.

The result is identical to the general fold (``projections.fold``): the same rows in the
same tables (``tests/projections/test_projections.py`` compares both against each other).
Payloads whose stored class version differs from the current class (upcasting), or a mapper
with a cipher or compressor, go through the general fold instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import duckdb
import msgspec
from eventsourcing.utils import get_topic

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
from memory_ledger.ledger.ids import Namespace, session_stream_id
from memory_ledger.projections.tables import (
    CANDIDATE_OUTCOMES,
    CANDIDATES,
    CANONICAL_MEMORY,
    EXTRACTIONS,
    MEMORY_HISTORY,
    TRANSCRIPTS,
    ReadModelTable,
)

if TYPE_CHECKING:  # pyarrow (and numpy behind it) loads with the first page written
    import pyarrow as pa

__all__ = ["FAST_TOPICS", "ROW_TOUCHING_TOPICS", "ColumnarBatch", "uuid_array", "uuid_text"]


class _Item(msgspec.Struct, gc=False):
    kind: str
    subject: str | None
    statement: str
    source: str
    importance: float
    confidence: float
    predicate: str | None = None
    value: str | None = None


class _Transcript(msgspec.Struct, gc=False):
    namespace: Namespace
    recorded_at: datetime
    session_id: str
    turn_id: int
    digest: str
    occurred_at: datetime | None
    redactions: int = 0


class _Candidate(msgspec.Struct, gc=False):
    namespace: Namespace
    session_id: str
    turn_id: int
    candidate_id: bytes
    index: int
    extractor_id: str
    item: _Item


class _Rejected(msgspec.Struct, gc=False):
    namespace: Namespace
    session_id: str
    turn_id: int
    candidate_id: bytes
    index: int
    extractor_id: str
    reason_code: str


class _Extraction(msgspec.Struct, gc=False):
    namespace: Namespace
    session_id: str
    turn_id: int
    extractor_id: str
    extracted: int
    rejected: int


class _FullItem(msgspec.Struct, gc=False):
    kind: str
    subject: str | None
    statement: str
    source: str
    scope: str
    reason: str
    importance: float
    confidence: float
    predicate: str | None = None
    value: str | None = None
    # Tuples, not lists: msgspec leaves tuples of strings untracked by the cyclic garbage
    # collector, so a page of views adds nothing for it to scan (lists made the decoding of
    # activations 2-4x slower under collection).
    tags: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


class _Activation(msgspec.Struct, gc=False):
    namespace: Namespace
    recorded_at: datetime
    session_id: str
    turn_id: int
    candidate_id: bytes
    decision: str
    item: _FullItem
    normalized: str
    occurred_at: datetime | None


_ACTIVATED = get_topic(MemoryActivated)
_ACTIVATION_DECODER = msgspec.msgpack.Decoder(list[_Activation])
_TOUCHES_ROWS: EventDispatch[bool] = EventDispatch(
    "columnar path: events that change existing canonical rows",
    dict.fromkeys(
        (
            MemoryReinforced,
            MemorySuperseded,
            MemoryConflictMarked,
            MemoryPinned,
            MemoryForgotten,
            MemoryPruned,
            RecallServed,
            MemoryAdmitted,
            AdmissionRevoked,
            MemoryUsed,
            NamespaceErased,
        ),
        True,
    ),
    # Activations are what the check guards; the rest creates rows or touches no table.
    ignores=(
        NamespaceForgotten,
        ErasedPayload,
        MemoryActivated,
        SessionOpened,
        TranscriptObserved,
        CandidateExtracted,
        CandidateRejected,
        ExtractionCompleted,
        ExtractionAbandoned,
        SessionSealed,
        SessionReconciled,
        ExplicitCommandApplied,
        DirectCommandApplied,
        SnapshotPrepared,
        TurnBegan,
        TurnCompleted,
        KnowledgeBound,
        KnowledgeServed,
        ContextCompacted,
        WorkspaceAttached,
        WorkspaceSearched,
        WorkspaceReleased,
    ),
)
ROW_TOUCHING_TOPICS = frozenset(get_topic(cls) for cls in _TOUCHES_ROWS.handled)
"""Topics whose events change existing canonical rows: a page holding any of them folds its
activations through the general fold, so those changes see the rows they change."""

_VIEWS: dict[str, tuple[type[Any], int]] = {
    get_topic(TranscriptObserved): (_Transcript, TranscriptObserved.class_version),
    get_topic(CandidateExtracted): (_Candidate, CandidateExtracted.class_version),
    get_topic(CandidateRejected): (_Rejected, CandidateRejected.class_version),
    get_topic(ExtractionCompleted): (_Extraction, ExtractionCompleted.class_version),
}
FAST_TOPICS = frozenset(_VIEWS)
"""Topics the columnar path handles."""

_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    topic: msgspec.msgpack.Decoder(list[view])  # type: ignore[valid-type]
    for topic, (view, _) in _VIEWS.items()
}


@lru_cache(maxsize=65536)
def session_key(namespace: Namespace, session_id: str) -> str:
    """The session stream id as text (the prefix of transcript keys)."""
    return str(session_stream_id(namespace, session_id))


def uuid_text(raw: bytes) -> str:
    """The canonical text form of a UUID given as 16 raw bytes (``str(UUID(bytes=raw))``)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid_array(raws: Sequence[bytes]) -> pa.Array:
    """UUIDs given as 16 raw bytes each, as one Arrow ``arrow.uuid`` array.

    DuckDB reads it as UUID and casts it to the canonical text form on insert into a
    VARCHAR column, so no UUID is formatted in Python. Values that are not 16 bytes long
    (never written by the mapper) are formatted in Python as before.
    """
    import pyarrow as pa

    data = b"".join(raws)
    if len(data) != 16 * len(raws) or (raws and set(map(len, raws)) != {16}):
        return pa.array([uuid_text(r) for r in raws], type=pa.string())
    storage = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), len(raws), [None, pa.py_buffer(data)]
    )
    return pa.ExtensionArray.from_storage(pa.uuid(), storage)


def _singletons(values: pa.Array) -> pa.Array:
    """Each value as a one-element list (``[[v] for v in values]`` without Python objects)."""
    import pyarrow as pa

    offsets = pa.array(range(len(values) + 1), type=pa.int32())
    return pa.ListArray.from_arrays(offsets, values)


def _constant(value: Any, type_: pa.DataType, count: int) -> pa.Array:
    import pyarrow as pa

    return pa.repeat(pa.scalar(value, type=type_), count)


def _array_header(count: int) -> bytes:
    return b"\xdd" + count.to_bytes(4, "big")


class ColumnarBatch:
    """The fast-path events of one page, grouped by topic: ``(position, payload)`` lists."""

    def __init__(self) -> None:
        self.payloads: dict[str, list[tuple[int, bytes]]] = {topic: [] for topic in _VIEWS}
        self.activations: list[tuple[int, str, int, bytes]] = []
        self.activated_namespaces: set[Namespace] = set()
        """``(position, memory id bytes, version, payload)`` of first activations."""

    def offer(self, topic: str, position: int, state: bytes) -> bool:
        """Take the event if the fast path can fold it; False leaves it to the general fold."""
        entry = _VIEWS.get(topic)
        if entry is None or not state or state[0] != entry[1]:
            return False
        self.payloads[topic].append((position, state[1:]))
        return True

    def offer_activation(self, position: int, memory_id: str, version: int, state: bytes) -> bool:
        """Take a MemoryActivated of memory ``memory_id`` (text form) for the columnar path
        (the caller has checked that no event of the page touches canonical rows)."""
        if not state or state[0] != MemoryActivated.class_version:
            return False
        self.activations.append((position, memory_id, version, state[1:]))
        return True

    def __len__(self) -> int:
        return sum(len(p) for p in self.payloads.values()) + len(self.activations)

    def _decode(self, topic: str) -> tuple[list[int], list[Any]]:
        entries = self.payloads[topic]
        if not entries:
            return [], []
        positions = [p for p, _ in entries]
        buffer = _array_header(len(entries)) + b"".join(payload for _, payload in entries)
        return positions, _DECODERS[topic].decode(buffer)

    def write(
        self,
        conn: duckdb.DuckDBPyConnection,
        known_transcripts: set[str],
    ) -> dict[str, int]:
        """Insert the rows; return the new transcripts' ``{transcript_key: position}``.

        The caller owns the transaction.
        """
        new_transcripts = self._write_transcripts(conn, known_transcripts)
        self._write_candidates(conn)
        self._write_extractions(conn)
        return new_transcripts

    def write_activations(
        self,
        conn: duckdb.DuckDBPyConnection,
        transcripts: dict[str, int],
    ) -> list[str]:
        """Insert canonical rows and candidate outcomes of the first activations taken by
        :meth:`offer_activation`; return their memory ids. Call after :meth:`write`."""
        import pyarrow as pa

        if not self.activations:
            return []
        buffer = _array_header(len(self.activations)) + b"".join(
            payload for _, _, _, payload in self.activations
        )
        views: list[_Activation] = _ACTIVATION_DECODER.decode(buffer)
        count = len(views)
        self.activated_namespaces.update(v.namespace for v in views)
        positions = [p for p, _, _, _ in self.activations]
        ids = [memory_id for _, memory_id, _, _ in self.activations]
        id_array = pa.array(ids, type=pa.string())
        items = [v.item for v in views]

        def transcript_positions(v: _Activation) -> list[int]:
            found = transcripts.get(f"{session_key(v.namespace, v.session_id)}/{v.turn_id}")
            return [found] if found is not None else []

        candidate_ids = uuid_array([v.candidate_id for v in views])
        canonical_positions = [transcript_positions(v) for v in views]
        zeros = _constant(0, pa.int64(), count)
        _insert(
            conn,
            CANONICAL_MEMORY,
            {
                "memory_id": id_array,
                "tenant": [v.namespace.tenant for v in views],
                "principal": [v.namespace.principal for v in views],
                "scope_id": [v.namespace.scope_id for v in views],
                "status": _constant("active", pa.string(), count),
                "revision": [version for _, _, version, _ in self.activations],
                "subject": [i.subject for i in items],
                "predicate": [i.predicate for i in items],
                "value": [i.value for i in items],
                "statement": [i.statement for i in items],
                "normalized": [v.normalized for v in views],
                "kind": [i.kind for i in items],
                "source": [i.source for i in items],
                "scope": [i.scope for i in items],
                "reason": [i.reason for i in items],
                "tags": [i.tags for i in items],
                "importance": [i.importance for i in items],
                "confidence": [i.confidence for i in items],
                "evidence": [i.evidence for i in items],
                "session_id": [v.session_id for v in views],
                "turn_id": [v.turn_id for v in views],
                "decision": [v.decision for v in views],
                "candidate_ids": _singletons(candidate_ids),
                "transcript_positions": canonical_positions,
                "supersedes": [i.supersedes for i in items],
                "superseded_by": pa.nulls(count, pa.string()),
                "conflicts_with": _constant([], pa.list_(pa.string()), count),
                "pinned": _constant(False, pa.bool_(), count),
                "reinforcements": zeros,
                "recall_count": zeros,
                "admission_count": zeros,
                "use_count": zeros,
                "occurred_at": [v.occurred_at for v in views],
                "activated_at": [v.recorded_at for v in views],
                "created_position": positions,
                "updated_position": positions,
            },
        )
        _insert(
            conn,
            MEMORY_HISTORY,
            {
                "memory_id": id_array,
                "tenant": [v.namespace.tenant for v in views],
                "principal": [v.namespace.principal for v in views],
                "scope_id": [v.namespace.scope_id for v in views],
                "status": _constant("active", pa.string(), count),
                "statement": [i.statement for i in items],
                "current_delta": _constant(1, pa.int64(), count),
                "position": positions,
                "revision": [version for _, _, version, _ in self.activations],
                "subject": [i.subject for i in items],
                "predicate": [i.predicate for i in items],
                "value": [i.value for i in items],
                "scope": [i.scope for i in items],
                "tags": [i.tags for i in items],
                "importance": [i.importance for i in items],
                "evidence": [i.evidence for i in items],
                "occurred_at": [v.occurred_at for v in views],
                "transcript_positions": canonical_positions,
                "created_position": positions,
            },
        )
        _insert(
            conn,
            CANDIDATE_OUTCOMES,
            {
                "candidate_id": candidate_ids,
                "outcome": _constant("activated", pa.string(), count),
                "memory_id": id_array,
                "position": positions,
            },
        )
        return ids

    def _write_transcripts(
        self, conn: duckdb.DuckDBPyConnection, known: set[str]
    ) -> dict[str, int]:
        positions, views = self._decode(get_topic(TranscriptObserved))
        if not views:
            return {}
        keys = [f"{session_key(v.namespace, v.session_id)}/{v.turn_id}" for v in views]
        stale = sorted(set(keys) & known)
        if stale:
            conn.execute(
                "DELETE FROM transcripts WHERE transcript_key IN (SELECT unnest(?))", [stale]
            )
        _insert(
            conn,
            TRANSCRIPTS,
            {
                "transcript_key": keys,
                "tenant": [v.namespace.tenant for v in views],
                "principal": [v.namespace.principal for v in views],
                "scope_id": [v.namespace.scope_id for v in views],
                "session_id": [v.session_id for v in views],
                "turn_id": [v.turn_id for v in views],
                "digest": [v.digest for v in views],
                "redactions": [v.redactions for v in views],
                "occurred_at": [v.occurred_at for v in views],
                "recorded_at": [v.recorded_at for v in views],
                "position": positions,
            },
        )
        return dict(zip(keys, positions, strict=True))

    def _write_candidates(self, conn: duckdb.DuckDBPyConnection) -> None:
        accepted_positions, accepted = self._decode(get_topic(CandidateExtracted))
        rejected_positions, rejected = self._decode(get_topic(CandidateRejected))
        if not accepted and not rejected:
            return
        views: list[Any] = [*accepted, *rejected]
        n_accepted = len(accepted)
        none_rejected: list[Any] = [None] * len(rejected)

        items = [v.item for v in accepted]

        _insert(
            conn,
            CANDIDATES,
            {
                "candidate_id": uuid_array([v.candidate_id for v in views]),
                "tenant": [v.namespace.tenant for v in views],
                "principal": [v.namespace.principal for v in views],
                "scope_id": [v.namespace.scope_id for v in views],
                "session_id": [v.session_id for v in views],
                "turn_id": [v.turn_id for v in views],
                "item_index": [v.index for v in views],
                "extractor_id": [v.extractor_id for v in views],
                "validation": ["accepted"] * n_accepted + ["rejected"] * len(rejected),
                "reason_code": [None] * n_accepted + [v.reason_code for v in rejected],
                "subject": [i.subject for i in items] + none_rejected,
                "predicate": [i.predicate for i in items] + none_rejected,
                "value": [i.value for i in items] + none_rejected,
                "statement": [i.statement for i in items] + none_rejected,
                "kind": [i.kind for i in items] + none_rejected,
                "source": [i.source for i in items] + none_rejected,
                "importance": [i.importance for i in items] + none_rejected,
                "confidence": [i.confidence for i in items] + none_rejected,
                "position": accepted_positions + rejected_positions,
            },
        )

    def _write_extractions(self, conn: duckdb.DuckDBPyConnection) -> None:
        positions, views = self._decode(get_topic(ExtractionCompleted))
        if not views:
            return
        _insert(
            conn,
            EXTRACTIONS,
            {
                "transcript_key": [
                    f"{session_key(v.namespace, v.session_id)}/{v.turn_id}" for v in views
                ],
                "session_id": [v.session_id for v in views],
                "turn_id": [v.turn_id for v in views],
                "extractor_id": [v.extractor_id for v in views],
                "extracted": [v.extracted for v in views],
                "rejected": [v.rejected for v in views],
                "position": positions,
            },
        )


def _insert(
    conn: duckdb.DuckDBPyConnection,
    table: ReadModelTable,
    columns: dict[str, Sequence[Any] | pa.Array],
) -> None:
    """Insert one batch: Python sequences are converted with the table's column types;
    ready Arrow arrays (UUIDs, constants) go in as they are and DuckDB casts them to the
    column's type on insert (UUID to its canonical text, ``arrow.uuid`` lists likewise)."""
    import pyarrow as pa

    arrays = [
        value if isinstance(value, pa.Array) else table.array(field, value)
        for field in table.schema
        for value in (columns[field.name],)
    ]
    batch = pa.Table.from_arrays(arrays, names=list(table.columns))
    table.insert_arrow(conn, batch)
