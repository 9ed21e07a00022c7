"""The event catalog (docs/design.md): immutable msgspec Structs, named in past tense.

Every event is a :class:`LedgerEvent`: it carries its stream (``originator_id``), its version
in that stream (``originator_version``), ``recorded_at`` (when the command created it, UTC)
and the ``namespace``. Events satisfy the ``eventsourcing`` library's
``DomainEventProtocol`` and are stored by :class:`memory_ledger.ledger.mapper.MsgspecMapper`.

Streams: one per session (``ids.session_stream_id``) and one per canonical memory item
(``ids.memory_id``). A class that gains fields raises ``class_version`` and adds a static
``upcast_v<N>_v<N+1>(state: dict)``, the library's upcasting convention.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal
from uuid import UUID

import msgspec

from memory_ledger.ledger.ids import Namespace

__all__ = [
    "ActivationDecision",
    "AdmissionRevoked",
    "CandidateExtracted",
    "CandidateRejected",
    "ContextCompacted",
    "DeclinedCandidate",
    "EVENT_CLASSES",
    "SESSION_STREAM_EVENTS",
    "DirectCommandApplied",
    "ExplicitCommandApplied",
    "ExtractedItem",
    "ExtractionAbandoned",
    "ExtractionCompleted",
    "ERASED_NAMESPACE",
    "ERASURE_NAMESPACE",
    "ErasedPayload",
    "NamespaceErased",
    "KnowledgeBound",
    "KnowledgeServed",
    "LedgerEvent",
    "MemoryActivated",
    "MemoryAdmitted",
    "MemoryConflictMarked",
    "MemoryForgotten",
    "MemoryPinned",
    "MemoryPruned",
    "MemoryReinforced",
    "MemorySuperseded",
    "MemoryUsed",
    "NamespaceForgotten",
    "PendingExtraction",
    "RecallServed",
    "RecalledItem",
    "ReconciliationReport",
    "SessionOpened",
    "SessionReconciled",
    "SessionSealed",
    "SnapshotItem",
    "SnapshotPrepared",
    "TranscriptObserved",
    "TurnBegan",
    "TurnCompleted",
    "WorkspaceAttached",
    "WorkspaceHitRecord",
    "WorkspaceReleased",
    "WorkspaceSearched",
    "upcast_item_relations",
]

ItemKind = Literal["semantic", "procedural"]
ItemSource = Literal["fact", "preference", "decision", "workflow", "failure"]
ItemScope = Literal["user", "workspace"]
ActivationDecision = Literal["auto", "manual", "verification"]
ActivationPolicy = Literal["auto", "manual"]


class ExtractedItem(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False
):
    """One memory item as an extractor proposed it (after validation).

    ``importance`` and ``confidence`` are in [0, 1]. ``predicate``/``value`` may be null; a
    null predicate never matches another item in reconciliation. ``evidence`` lists the
    turn or dialogue ids the item rests on; ``supersedes``/``conflicts_with`` hold the memory
    ids the extractor was shown that this item replaces or contradicts (empty: none).

    Before class version 2 of the events that carry an item, ``supersedes`` was one id or
    null; :func:`upcast_item_relations` turns such a stored item into today's shape.
    """

    kind: ItemKind
    subject: str | None
    predicate: str | None = None
    value: str | None = None
    statement: str
    source: ItemSource
    scope: ItemScope
    reason: str
    importance: float
    confidence: float
    tags: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    conflicts_with: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


def upcast_item_relations(state: dict[str, Any]) -> None:
    """Upcast the ``item`` of a stored event (class version 1 -> 2): ``supersedes`` was one
    memory id or null and is now a list of ids (null -> [], ``"id"`` -> ``["id"]``)."""
    item = state.get("item")
    if isinstance(item, dict):
        old = item.get("supersedes")
        item["supersedes"] = [] if old is None else [old] if isinstance(old, str) else old


class LedgerEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Base of every event: stream, version in the stream, recorded time, namespace."""

    class_version: ClassVar[int] = 1
    sealed: ClassVar[bool] = True
    """Whether the mapper seals (encrypts) this class's payloads when the store encrypts
    (``ledger.sealing``); only structural records that hold no user content say False."""

    originator_id: UUID
    originator_version: int
    recorded_at: datetime
    namespace: Namespace

    @property
    def timestamp(self) -> datetime:
        """``recorded_at`` under the name the ``eventsourcing`` library uses."""
        return self.recorded_at


class SessionOpened(LedgerEvent, frozen=True, kw_only=True):
    """A logical conversation started under a namespace (session stream, version 1)."""

    session_id: str
    activation_policy: ActivationPolicy
    extractor_id: str


class TranscriptObserved(LedgerEvent, frozen=True, kw_only=True):
    """Evidence: a finalized turn's redacted transcript, its sha256 ``digest`` and times.

    ``occurred_at`` is when the turn happened in the conversation (host-supplied, may be
    null); ``redactions`` counts secret-shaped spans replaced before recording.
    """

    session_id: str
    turn_id: int
    transcript: str
    digest: str
    occurred_at: datetime | None
    redactions: int = 0


class CandidateExtracted(LedgerEvent, frozen=True, kw_only=True):
    """One validated item the extractor proposed for a turn (what the model said)."""

    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """Version 1 stored ``item.supersedes`` as one id or null."""
        upcast_item_relations(state)

    session_id: str
    turn_id: int
    candidate_id: UUID
    index: int
    extractor_id: str
    item: ExtractedItem
    occurred_at: datetime | None


class CandidateRejected(LedgerEvent, frozen=True, kw_only=True):
    """An extracted item that failed validation: a reason code and detail, no secret text."""

    session_id: str
    turn_id: int
    candidate_id: UUID
    index: int
    extractor_id: str
    reason_code: str
    detail: str


class ExtractionCompleted(LedgerEvent, frozen=True, kw_only=True):
    """The extraction outcome of a turn is complete (written with its candidates).

    A turn with TranscriptObserved but no ExtractionCompleted is pending extraction.
    """

    session_id: str
    turn_id: int
    extractor_id: str
    extracted: int
    rejected: int


class SessionSealed(LedgerEvent, frozen=True, kw_only=True):
    """No further turns are accepted; written by ``finish()`` with the reconciliation."""

    session_id: str


class DeclinedCandidate(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A candidate (or explicit command) reconciliation refused, with a reason code.

    ``evidence_predates_forget``: its evidence was observed before the memory it would
    re-activate or reinforce was forgotten (``MemoryForgotten`` is a tombstone), by ledger
    position. ``evidence_older_than_forget``: its evidence was observed after the forget
    but its valid time (``occurred_at``) is earlier than the forget's time
    (``MemoryForgotten.forget_time``): a forget is never undone by older evidence.
    """

    candidate_id: UUID
    memory_id: UUID
    reason_code: str


class PendingExtraction(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A turn whose evidence is recorded but whose extraction outcome is not, and why.

    ``reason_code``: the extractor error's own code where it has one (``unreachable``,
    ``timeout``, ``http_error`` for the OpenAI-compatible extractor), ``extractor_failed``
    for any other error, ``abandoned`` (``close()`` stopped waiting for it), ``running``
    (queued in this process, not finished yet) or ``not_attempted`` (no attempt in this
    process: a crash, or another process observed the turn). ``detail`` is the error's
    message with secret shapes redacted (it names the endpoint, never a key or the
    transcript).
    """

    turn_id: int
    reason_code: str
    detail: str = ""


class ReconciliationReport(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What ``finish()`` did with a session's candidates.

    ``candidates`` counts the session's candidates and ``commands`` its explicit commands;
    the tuples hold the memory ids each outcome touched. ``pending_extractions`` lists the
    turns whose extraction was still pending at finish (their items, if extracted later,
    are not part of this reconciliation). ``already_reconciled`` is true when the report
    is returned from an earlier finish. ``declined`` lists the candidates and commands
    reconciliation refused, each with its reason code.
    """

    session_id: str
    candidates: int
    activated: tuple[UUID, ...] = ()
    reinforced: tuple[UUID, ...] = ()
    superseded: tuple[UUID, ...] = ()
    conflicts: tuple[UUID, ...] = ()
    forgotten: tuple[UUID, ...] = ()
    pinned: tuple[UUID, ...] = ()
    commands: int = 0
    left_as_candidates: int = 0
    position: int = 0
    already_reconciled: bool = False
    pending_extractions: tuple[PendingExtraction, ...] = ()
    declined: tuple[DeclinedCandidate, ...] = ()


class SessionReconciled(LedgerEvent, frozen=True, kw_only=True):
    """The session's candidates were reconciled into canonical memory (exactly once)."""

    session_id: str
    report: ReconciliationReport


class MemoryActivated(LedgerEvent, frozen=True, kw_only=True):
    """A candidate (or an explicit command) became canonical memory (memory stream).

    ``decision`` is ``auto`` (policy), ``manual`` or ``verification`` (host evidence, listed
    in ``decision_evidence``); ``normalized`` is the exact-duplicate key the memory id
    derives from. For an explicit command, ``candidate_id`` is the command id.
    """

    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """Version 1 stored ``item.supersedes`` as one id or null."""
        upcast_item_relations(state)

    session_id: str
    turn_id: int
    candidate_id: UUID
    decision: ActivationDecision
    item: ExtractedItem
    normalized: str
    occurred_at: datetime | None
    decision_evidence: tuple[str, ...] = ()


class MemoryReinforced(LedgerEvent, frozen=True, kw_only=True):
    """An exact normalized duplicate merged into an active memory.

    ``importance`` is the new (maximum) importance; ``tags`` and ``evidence`` the merged sets.
    """

    session_id: str
    turn_id: int
    candidate_id: UUID
    importance: float
    tags: tuple[str, ...]
    evidence: tuple[str, ...]


class MemorySuperseded(LedgerEvent, frozen=True, kw_only=True):
    """An older item was replaced by a newer one (memory stream of the OLD item).

    ``cause`` is ``same_subject_predicate`` (a new value for the same subject and predicate),
    ``declared`` (the extractor cited it in ``supersedes``) or ``correction`` (an explicit
    correct command). The old item stays in history with status superseded.

    ``occurred_at`` (class version 2) is the valid time of the value that retired it: from
    then on the old value is history (``as-of --occurred`` answers it before then). A value
    recorded late (a backfill) whose ``occurred_at`` is earlier than the current value's is
    activated and superseded by the current value in the same command.
    """

    class_version: ClassVar[int] = 2

    session_id: str
    turn_id: int
    superseded_by: UUID
    cause: Literal["same_subject_predicate", "declared", "correction"]
    occurred_at: datetime | None = None

    @staticmethod
    def upcast_v1_v2(state: dict[str, object]) -> None:
        """Version 1 had no valid time of the superseding value."""
        state["occurred_at"] = None


class MemoryConflictMarked(LedgerEvent, frozen=True, kw_only=True):
    """A contradiction kept visible: written on BOTH items, each naming the other."""

    session_id: str
    turn_id: int
    conflicts_with: UUID


class ExplicitCommandApplied(LedgerEvent, frozen=True, kw_only=True):
    """The user said remember / forget / correct / pin (session stream).

    Appended before the session overlay changes; reconciled into canonical memory at finish.
    ``command_id`` is uuid5(session, turn, index of the command in the turn).
    ``occurred_at`` (class version 3) is when the user said it in the conversation
    (host-supplied, else the ``occurred_at`` of the same turn's transcript when that was
    observed first; may be null). A forget's time (its tombstone's valid time, see
    :class:`MemoryForgotten`) is this ``occurred_at``, else this event's ``recorded_at``.
    """

    class_version: ClassVar[int] = 3

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """Version 1 stored ``item.supersedes`` as one id or null."""
        upcast_item_relations(state)

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        """Version 2 had no ``occurred_at``: unknown (a forget's time is then recorded_at)."""
        state["occurred_at"] = None

    session_id: str
    turn_id: int
    command_id: UUID
    intent: Literal["remember", "forget", "correct", "pin"]
    statement: str
    target: UUID | None = None
    item: ExtractedItem | None = None
    occurred_at: datetime | None = None


class DirectCommandApplied(ExplicitCommandApplied, frozen=True, kw_only=True, omit_defaults=True):
    """A direct command (``remember``, ``forget``, ``correct``, ``pin`` called on the engine,
    a batch, the MCP server, the LangGraph store): the explicit command and its short
    session in ONE record of the session stream, turn ``turn_id`` at version ``turn_id``.

    It is an :class:`ExplicitCommandApplied` (what reconciliation and lineage read of a
    command is read unchanged) that also says what the short session's ``SessionOpened``,
    ``SessionSealed`` and ``SessionReconciled`` said: its ``activation_policy`` and
    ``extractor_id`` (on every record), and on the session's last command the
    reconciliation ``report`` (None on the others). The command is reconciled in the same
    append: its memory events follow it in the same transaction, so a session stream of
    these records is never open, never pending: it is sealed and reconciled by its last
    record. Direct commands written before this record (SessionOpened,
    ExplicitCommandApplied..., SessionSealed, memory events, SessionReconciled) read as they
    always did.

    Fields equal to their default are not stored (``omit_defaults``: a record without
    ``activation_policy`` says ``auto``, without ``extractor_id`` says ``direct``, without
    ``target``, ``item``, ``occurred_at`` or ``report`` says None), so a batch's records
    carry the session's facts without their bytes.
    """

    class_version: ClassVar[int] = 1

    activation_policy: ActivationPolicy = "auto"
    extractor_id: str = "direct"
    report: ReconciliationReport | None = None


class MemoryPinned(LedgerEvent, frozen=True, kw_only=True):
    """An item was pinned: protected from pruning (memory stream)."""

    session_id: str
    turn_id: int
    command_id: UUID


class MemoryForgotten(LedgerEvent, frozen=True, kw_only=True):
    """An item was forgotten by explicit command: no longer retrievable (memory stream).

    A tombstone with a position and a time. Evidence observed before the forget (by ledger
    position) can never re-activate or reinforce the item, and neither can evidence whose
    valid time (``occurred_at``) is earlier than the forget's time, whenever it is
    recorded; only evidence that is newer by both can (a new activation).

    The forget's position is ``command_position`` (class version 2), the ledger position of
    the ExplicitCommandApplied that asked for it, or, when 0 (a bulk forget, or a version-1
    event), this event's own position. The forget's time is ``occurred_at`` (class version
    3): the forget command's ``occurred_at`` when it has one, else the command's
    ``recorded_at`` (a bulk forget: its own ``recorded_at``); when null (a version-1 or 2
    event) this event's ``recorded_at``.
    """

    class_version: ClassVar[int] = 3

    session_id: str
    turn_id: int
    command_id: UUID
    command_position: int = 0
    occurred_at: datetime | None = None

    @staticmethod
    def upcast_v1_v2(state: dict[str, object]) -> None:
        """Version 1 had no command position: the event's own position is the tombstone's."""
        state["command_position"] = 0

    @staticmethod
    def upcast_v2_v3(state: dict[str, object]) -> None:
        """Version 2 had no forget time: this event's ``recorded_at`` stands for it."""
        state["occurred_at"] = None

    @property
    def forget_time(self) -> datetime:
        """The tombstone's valid time: ``occurred_at``, else ``recorded_at``."""
        return self.occurred_at if self.occurred_at is not None else self.recorded_at


class NamespaceForgotten(LedgerEvent, frozen=True, kw_only=True):
    """``forget_all``: every retrievable memory of one namespace was forgotten by ONE command.

    Its own stream (``ids.bulk_forget_stream_id``); written in the same transaction as the
    MemoryForgotten of each memory in ``forgotten`` (each carrying ``command_id``), so the
    ledger says what was forgotten and by which command.
    """

    command_id: UUID
    forgotten: tuple[UUID, ...]
    requested_by: str = ""


ERASURE_NAMESPACE = Namespace("memory-ledger", "erasure", "erasure")
"""The namespace :class:`NamespaceErased` records carry (they belong to no user's
namespace: the erased one's names must not be stored in clear)."""

ERASED_NAMESPACE = Namespace("", "", "")
"""The namespace of an :class:`ErasedPayload`: its real one was sealed with it and is gone
(empty parts: it never equals a valid namespace)."""


class NamespaceErased(LedgerEvent, frozen=True, kw_only=True):
    """An erasure (crypto-shredding): the data keys ``key_ids`` of the namespaces
    ``namespace_ids`` were destroyed, so their sealed payloads can never be read again.

    Stored in clear (``sealed = False``) and holding no erased content: the namespaces are
    uuid5 digests (:func:`ledger.keyring.namespace_ids`), ``level`` says whether a tenant, a
    principal or one namespace was named, ``requested_by`` who asked (a free label). Its own
    stream (``ids.erasure_stream_id`` of ``command_id``); ``recorded_at`` is when the keys
    were destroyed. Projections drop the namespaces' rows when they reach it.
    """

    sealed: ClassVar[bool] = False

    command_id: UUID
    level: Literal["tenant", "principal", "namespace"]
    namespace_ids: tuple[UUID, ...]
    key_ids: tuple[UUID, ...]
    requested_by: str = ""


class ErasedPayload(LedgerEvent, frozen=True, kw_only=True):
    """Never stored: what the mapper returns for a sealed payload whose data key was erased.

    It keeps what the record keeps in clear: stream, version, ``recorded_at``, the event's
    ``topic`` and the destroyed ``key_id``; ``namespace`` is :data:`ERASED_NAMESPACE`.
    ``key_id`` is None for an event stored in clear (before the store encrypted) whose
    namespace was erased since: it is hidden the same way, though its bytes remain.
    """

    sealed: ClassVar[bool] = False

    topic: str
    key_id: UUID | None


class MemoryPruned(LedgerEvent, frozen=True, kw_only=True):
    """An item was pruned as stale and low-importance (memory stream). ``rule`` names why.

    ``occurred_at`` (class version 2): when the prune happened where it was decided, for a
    prune carried over from another store (an interchange import restores a pruned memory
    at its original prune time); null for a prune decided here (and in a version-1 event):
    this event's ``recorded_at`` is its time (:attr:`prune_time`).
    """

    class_version: ClassVar[int] = 2

    session_id: str
    rule: str
    occurred_at: datetime | None = None

    @staticmethod
    def upcast_v1_v2(state: dict[str, object]) -> None:
        """Version 1 had no prune time: this event's ``recorded_at`` stands for it."""
        state["occurred_at"] = None

    @property
    def prune_time(self) -> datetime:
        """When the memory was pruned: ``occurred_at``, else ``recorded_at``."""
        return self.occurred_at if self.occurred_at is not None else self.recorded_at


class SnapshotItem(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One memory revision prepared for a turn, with its score."""

    memory_id: UUID
    revision: int
    statement: str
    score: float


class SnapshotPrepared(LedgerEvent, frozen=True, kw_only=True):
    """Items prepared speculatively for a turn (session stream), with the generation."""

    session_id: str
    turn_id: int
    generation: int
    snapshot_id: UUID
    query: str
    items: tuple[SnapshotItem, ...]


class TurnBegan(LedgerEvent, frozen=True, kw_only=True):
    """A turn froze the prepared snapshot it is answered from (session stream)."""

    session_id: str
    turn_id: int
    generation: int
    snapshot_id: UUID | None


class RecalledItem(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One result of a served recall: memory revision, rank and score."""

    memory_id: UUID
    revision: int
    rank: int
    score: float


class RecallServed(LedgerEvent, frozen=True, kw_only=True):
    """What a recall returned and by which path (read-path record: its own stream).

    ``path`` is ``snapshot``, ``live`` or ``fused``. May be buffered and lost in a crash.
    """

    session_id: str
    turn_id: int | None
    query: str
    path: Literal["snapshot", "live", "fused"]
    results: tuple[RecalledItem, ...]


class MemoryAdmitted(LedgerEvent, frozen=True, kw_only=True):
    """A memory revision was admitted into a turn's context after budgeting (session)."""

    session_id: str
    turn_id: int
    memory_id: UUID
    revision: int
    estimated_tokens: int


class AdmissionRevoked(LedgerEvent, frozen=True, kw_only=True):
    """An admission was removed before the model call (stale or inactive revision)."""

    session_id: str
    turn_id: int
    memory_id: UUID
    revision: int
    reason: Literal["stale_revision", "inactive"]


class MemoryUsed(LedgerEvent, frozen=True, kw_only=True):
    """The host reported that an admitted memory was actually used in a turn (session)."""

    session_id: str
    turn_id: int
    memory_id: UUID
    revision: int


class TurnCompleted(LedgerEvent, frozen=True, kw_only=True):
    """A turn finished (session stream)."""

    session_id: str
    turn_id: int


class ExtractionAbandoned(LedgerEvent, frozen=True, kw_only=True):
    """``close()`` gave up waiting for a turn's background extraction (session stream)."""

    session_id: str
    turn_id: int
    reason: str


class KnowledgeBound(LedgerEvent, frozen=True, kw_only=True):
    """A session was bound to one exact knowledge package generation when it started
    (session stream, in the same transaction as SessionOpened). A resumed session must be
    given the same binding (``binding_id`` is the digest of all the fields below)."""

    session_id: str
    binding_id: str
    package_id: str
    version: str
    generation: int
    generation_digest: str
    capability_digest: str
    max_documents: int
    max_document_bytes: int
    max_total_bytes: int


class KnowledgeServed(LedgerEvent, frozen=True, kw_only=True):
    """Validated documents of a bound session's package entered a turn's context
    (read-path record: its own stream; may be buffered). ``citations`` are
    ``package@version#generation:document_id`` labels, ``digests`` their SHA-256 digests."""

    session_id: str
    turn_id: int
    binding_id: str
    request_id: str
    citations: tuple[str, ...]
    digests: tuple[str, ...]
    total_bytes: int


class ContextCompacted(LedgerEvent, frozen=True, kw_only=True):
    """The session compacted its conversation history (session stream): messages
    ``[summarized_from, summarized_to)`` of the history it was given became ``summary``
    (redacted; ``redactions`` counts the spans replaced), the cumulative summary message
    that starts the next history. ``goal`` is the goal pinned outside the model and
    ``goal_restored`` whether the summarizer lost it; token counts are estimates."""

    session_id: str
    turn_id: int | None
    generation: int
    summarized_from: int
    summarized_to: int
    summary: str
    goal: str
    goal_source: str
    goal_restored: bool
    truncated_tool_outputs: int
    tokens_before: int
    tokens_after: int
    trigger_tokens: int
    target_tokens: int
    summarizer_id: str
    redactions: int = 0


class WorkspaceAttached(LedgerEvent, frozen=True, kw_only=True):
    """The session opened workspace retrieval over ``root`` (session stream): the chunking
    strategy, the embedding model (None: lexical only), the admission limits and the
    search modes offered."""

    session_id: str
    root: str
    chunking: str
    model: str | None
    max_file_bytes: int
    max_files: int
    modes: tuple[str, ...]


class WorkspaceHitRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One verified workspace result: path, one-based line range and the file digest."""

    path: str
    line_start: int
    line_end: int
    digest: str


class WorkspaceSearched(LedgerEvent, frozen=True, kw_only=True):
    """What a workspace search served (read-path record: its own stream; may be buffered):
    the redacted query, the mode, the verified hits, how many candidates verification
    dropped, and the semantic degradation reason if any."""

    session_id: str
    turn_id: int | None
    query: str
    mode: str
    k: int
    hits: tuple[WorkspaceHitRecord, ...]
    rejected: int
    degraded: str | None


class WorkspaceReleased(LedgerEvent, frozen=True, kw_only=True):
    """The session closed its workspace retrieval (session stream): the index as it stood
    and whether every vector was released (``release_rate`` is the share freed)."""

    session_id: str
    files_indexed: int
    files_embedded: int
    chunks: int
    failures: int
    release_rate: float | None
    released: bool | None


EVENT_CLASSES: tuple[type[LedgerEvent], ...] = (
    SessionOpened,
    TranscriptObserved,
    CandidateExtracted,
    CandidateRejected,
    ExtractionCompleted,
    ExtractionAbandoned,
    SessionSealed,
    SessionReconciled,
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    MemoryConflictMarked,
    ExplicitCommandApplied,
    DirectCommandApplied,
    MemoryPinned,
    MemoryForgotten,
    NamespaceForgotten,
    NamespaceErased,
    ErasedPayload,
    MemoryPruned,
    SnapshotPrepared,
    TurnBegan,
    RecallServed,
    MemoryAdmitted,
    AdmissionRevoked,
    MemoryUsed,
    TurnCompleted,
    KnowledgeBound,
    KnowledgeServed,
    ContextCompacted,
    WorkspaceAttached,
    WorkspaceSearched,
    WorkspaceReleased,
)
"""Every concrete event class of the catalog that this version writes (and
:class:`ErasedPayload`, which the mapper reads in place of an erased payload)."""

SESSION_STREAM_EVENTS: tuple[type[LedgerEvent], ...] = (
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
    RecallServed,
    MemoryAdmitted,
    AdmissionRevoked,
    MemoryUsed,
    TurnCompleted,
    KnowledgeBound,
    KnowledgeServed,
    ContextCompacted,
    WorkspaceAttached,
    WorkspaceSearched,
    WorkspaceReleased,
)
"""The events of session and recall streams: never in a memory stream and never a change
of canonical memory (dispatch tables of memory-stream consumers ignore them as one set)."""
