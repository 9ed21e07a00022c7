"""Lineage: the chain of events that made a memory item, and where it was used since.

``explain(engine, memory_id)`` reads the item's own stream from the ledger (activation,
reinforcements, supersede / conflict / pin / forget / prune), follows each activation and
reinforcement to its session stream (the TranscriptObserved evidence of the turn, the
CandidateExtracted item and its extractor, the turn's extraction outcome, the session's
activation policy and reconciliation, and how the session shaped its context before then:
knowledge binding, compactions, workspace retrieval) and adds, from the read models, every
turn the item was recalled in, admitted into and used in. Every step carries its ledger
position.

:func:`render_mermaid` draws the same lineage as a Mermaid flowchart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.commands import errors as commands_errors
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.ledger.dispatch import EventDispatch
from memory_ledger.ledger.errors import at_position
from memory_ledger.ledger.events import (
    SESSION_STREAM_EVENTS,
    CandidateExtracted,
    ContextCompacted,
    DirectCommandApplied,
    ErasedPayload,
    ExplicitCommandApplied,
    ExtractedItem,
    ExtractionCompleted,
    KnowledgeBound,
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
    NamespaceErased,
    NamespaceForgotten,
    SessionOpened,
    SessionReconciled,
    TranscriptObserved,
    WorkspaceAttached,
    WorkspaceReleased,
)
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.mapper import RECORD_DAMAGE
from memory_ledger.replay.audit.filters import describe_event
from memory_ledger.replay.audit.verify import check_records

__all__ = [
    "AdmissionTouch",
    "CandidateSource",
    "CommandSource",
    "ExtractionOutcome",
    "HistoryEntry",
    "Lineage",
    "Origin",
    "RecallTouch",
    "SessionContextEntry",
    "TranscriptEvidence",
    "UnknownMemoryError",
    "UseTouch",
    "explain",
    "render_mermaid",
    "resolve_memory_id",
    "stream_events",
]


class UnknownMemoryError(commands_errors.UnknownMemoryError):
    """No memory has the given id (or id prefix), or a prefix matches several.

    Also the commands' :class:`~memory_ledger.commands.errors.UnknownMemoryError` (one
    ``except`` catches both); ``reason_code`` is ``"unknown_memory"``, ``"not_a_memory_id"``,
    ``"ambiguous_memory_id"`` or ``"memory_erased"`` (a full id of a memory whose namespace
    was erased, asked without a namespace: the operator's ``memory-ledger explain``).
    """

    def __init__(self, message: str, reason_code: str = "unknown_memory") -> None:
        CommandRejectedError.__init__(self, message, reason_code)


class TranscriptEvidence(msgspec.Struct, frozen=True, kw_only=True):
    """The turn a memory rests on: its redacted transcript, sha256 digest and times."""

    position: int
    session_id: str
    turn_id: int
    digest: str
    occurred_at: datetime | None
    recorded_at: datetime
    redactions: int
    transcript: str


class CandidateSource(msgspec.Struct, frozen=True, kw_only=True):
    """The validated item an extractor proposed (CandidateExtracted)."""

    position: int
    candidate_id: str
    index: int
    extractor_id: str
    validation: str
    item: ExtractedItem


class CommandSource(msgspec.Struct, frozen=True, kw_only=True):
    """The explicit user command an item came from (ExplicitCommandApplied)."""

    position: int
    command_id: str
    intent: str
    statement: str


class ExtractionOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The extraction of the evidence turn: how many items passed and failed validation."""

    position: int
    extractor_id: str
    extracted: int
    rejected: int


class SessionContextEntry(msgspec.Struct, frozen=True, kw_only=True):
    """How the session shaped its context before the item was made: its knowledge binding
    (KnowledgeBound), compactions (ContextCompacted) and workspace retrieval
    (WorkspaceAttached / WorkspaceReleased), with their positions."""

    position: int
    type: str
    detail: str


_CONTEXT_EVENTS = (KnowledgeBound, ContextCompacted, WorkspaceAttached, WorkspaceReleased)


class Origin(msgspec.Struct, frozen=True, kw_only=True):
    """One activation or reinforcement of the item and everything that led to it.

    ``decision`` is the activation decision (auto / manual / verification; None for a
    reinforcement); ``activation_policy`` the session's policy; ``reconciled_position`` the
    record holding the report that names the item: the session's SessionReconciled, or for
    a direct command written as one record (DirectCommandApplied) its short session's last
    command record, which carries the report and precedes the memory events of the same
    append.
    """

    kind: Literal["activated", "reinforced"]
    position: int
    recorded_at: datetime
    session_id: str
    turn_id: int
    source_id: str
    decision: str | None = None
    decision_evidence: tuple[str, ...] = ()
    activation_policy: str | None = None
    context: tuple[SessionContextEntry, ...] = ()
    candidate: CandidateSource | None = None
    command: CommandSource | None = None
    transcript: TranscriptEvidence | None = None
    extraction: ExtractionOutcome | None = None
    reconciled_position: int | None = None


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An event of the item's own stream after it was made (supersede, conflict, ...)."""

    position: int
    type: str
    revision: int
    recorded_at: datetime
    session_id: str | None
    turn_id: int | None
    detail: str
    related_memory: str | None = None


class RecallTouch(msgspec.Struct, frozen=True, kw_only=True):
    """A recall that returned the item: where, the query, the path and the item's rank."""

    position: int
    session_id: str
    turn_id: int | None
    query: str
    path: str
    rank: int


class AdmissionTouch(msgspec.Struct, frozen=True, kw_only=True):
    """The item admitted into a turn's context (and whether that was revoked)."""

    position: int
    session_id: str
    turn_id: int
    revision: int
    estimated_tokens: int
    revoked: bool
    revoke_reason: str | None
    revoked_position: int | None


class UseTouch(msgspec.Struct, frozen=True, kw_only=True):
    """The host reported the item as used in a turn."""

    position: int
    session_id: str
    turn_id: int
    revision: int


class Lineage(msgspec.Struct, frozen=True, kw_only=True):
    """The whole story of one memory item (JSON-ready with ``msgspec.json.encode``).

    ``related`` maps every other memory id mentioned (supersedes, superseded_by,
    conflicts_with) to its statement.
    """

    memory_id: str
    namespace: Namespace
    status: str
    revision: int
    subject: str | None
    predicate: str | None
    value: str | None
    statement: str
    evidence: tuple[str, ...]
    importance: float
    pinned: bool
    position: int
    origins: tuple[Origin, ...]
    history: tuple[HistoryEntry, ...]
    supersedes: tuple[str, ...]
    superseded_by: str | None
    conflicts_with: tuple[str, ...]
    recalls: tuple[RecallTouch, ...]
    admissions: tuple[AdmissionTouch, ...]
    uses: tuple[UseTouch, ...]
    related: dict[str, str]


def stream_events(engine: MemoryEngine, stream_id: UUID) -> list[tuple[int, LedgerEvent]]:
    """Every event of one stream with its ledger position, in version order.

    Reads the ledger's stream (LMDB: its stream index; PostgreSQL: the stream's rows).

    :raises LedgerTamperedError: a record read does not chain (changed after it was
        written); it names the first bad position (see ``replay.audit.verify.check_records``).
    :raises LedgerRecordError: a record does not decode (``EventDecodeError``: its event;
        ``SealedPayloadError``: its sealed payload); each names the record's position.
    """
    decode = engine.event_decoder()
    with engine.ledger_guard():
        log = engine.ledger_log()
        records = log.stream_records(stream_id)
        check_records(log, (record.notification_id for record in records))
    events: list[tuple[int, LedgerEvent]] = []
    for record in records:
        try:
            event = decode(
                record.topic, record.state, record.originator_id, record.originator_version
            )
        except RECORD_DAMAGE as e:
            raise at_position(e, record.notification_id) from e
        events.append((record.notification_id, event))
    return events


_ID_TEXT = re.compile(r"^[0-9a-f-]{4,36}$")
_FULL_ID = 36


def _check_erased(engine: MemoryEngine, wanted: str) -> None:
    """Raise ``UnknownMemoryError`` (``memory_erased``) when the full id ``wanted`` names a
    memory stream whose payloads were all erased (crypto-shredding): the operator learns
    that it existed and was erased, never what it said."""
    try:
        stream = UUID(wanted)
    except ValueError:
        return  # a prefix: only a full id finds an erased memory (no read model holds it)
    events = engine.load_stream(stream)
    if not events or not all(isinstance(e, ErasedPayload) for e in events):
        return
    keys = sorted({str(e.key_id) for e in events if isinstance(e, ErasedPayload)})
    msg = (
        f"memory {wanted} was erased: its namespace's data key ({', '.join(keys)}) was "
        f"destroyed; its {len(events)} ledger record(s) remain and read as [erased] "
        "(see memory-ledger events --type NamespaceErased)"
    )
    raise UnknownMemoryError(msg, "memory_erased")


def resolve_memory_id(engine: MemoryEngine, text: str, namespace: Namespace | None = None) -> str:
    """The full memory id for ``text``: a memory id or a unique prefix (>= 4 hex digits),
    among the memories of ``namespace`` when one is given (the Python API's caller: a memory
    of another namespace is then exactly like one that does not exist), else of the store
    (the operator's CLI).

    :raises UnknownMemoryError: no memory matches, or several do (they are named); without
        ``namespace``, a full id of a memory whose namespace was erased says so
        (``memory_erased``).
    """
    wanted = str(text).strip().lower()  # a UUID object (what remember() returns) works too
    if not _ID_TEXT.match(wanted):
        msg = f"{text!r} is not a memory id (a UUID or a prefix of at least 4 hex digits)"
        raise UnknownMemoryError(msg, "not_a_memory_id")
    # A full id is a point lookup (the read model's index); a prefix scans the ids.
    where = "memory_id = ?" if len(wanted) == _FULL_ID else "starts_with(memory_id, ?)"
    params = [wanted]
    if namespace is not None:
        namespace.validated()
        where += " AND tenant = ? AND principal = ? AND scope_id = ?"
        params += [namespace.tenant, namespace.principal, namespace.scope_id]
    with engine.read_models() as live:
        rows = live.conn.execute(
            f"SELECT memory_id FROM canonical_memory WHERE {where} "  # noqa: S608 (fixed text)
            "ORDER BY memory_id LIMIT 6",
            params,
        ).fetchall()
    ids = [str(r[0]) for r in rows]
    if wanted in ids:
        return wanted
    if len(ids) == 1:
        return ids[0]
    if not ids:
        if namespace is None:
            _check_erased(engine, wanted)
        msg = f"no memory with id {text!r} in {str(engine.path)!r}"
        raise UnknownMemoryError(msg)
    msg = f"memory id prefix {text!r} matches several memories: {', '.join(ids[:5])}"
    raise UnknownMemoryError(msg, "ambiguous_memory_id")


def _transcript(position: int, event: TranscriptObserved) -> TranscriptEvidence:
    return TranscriptEvidence(
        position=position,
        session_id=event.session_id,
        turn_id=event.turn_id,
        digest=event.digest,
        occurred_at=event.occurred_at,
        recorded_at=event.recorded_at,
        redactions=event.redactions,
        transcript=event.transcript,
    )


class _Sessions:
    """Session streams read once each, indexed by what lineage looks up."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.cache: dict[UUID, list[tuple[int, LedgerEvent]]] = {}

    def events(self, namespace: Namespace, session_id: str) -> list[tuple[int, LedgerEvent]]:
        stream = self.engine.keyring.digests.session_stream_id(namespace, session_id)
        if stream not in self.cache:
            self.cache[stream] = stream_events(self.engine, stream)
        return self.cache[stream]

    def command(
        self, namespace: Namespace, session_id: str, command_id: UUID
    ) -> CommandSource | None:
        for at, e in self.events(namespace, session_id):
            if isinstance(e, ExplicitCommandApplied) and e.command_id == command_id:
                return CommandSource(
                    position=at,
                    command_id=str(e.command_id),
                    intent=e.intent,
                    statement=e.statement,
                )
        return None

    def origin(
        self, position: int, event: MemoryActivated | MemoryReinforced, memory_id: str
    ) -> Origin:
        session = self.events(event.namespace, event.session_id)
        source = event.candidate_id
        candidate = command = transcript = extraction = None
        policy = reconciled = None
        context: list[SessionContextEntry] = []
        for at, e in session:
            if at <= position and isinstance(e, _CONTEXT_EVENTS):
                context.append(
                    SessionContextEntry(
                        position=at, type=type(e).__name__, detail=describe_event(e)
                    )
                )
            if isinstance(e, CandidateExtracted) and e.candidate_id == source:
                candidate = CandidateSource(
                    position=at,
                    candidate_id=str(e.candidate_id),
                    index=e.index,
                    extractor_id=e.extractor_id,
                    validation="accepted",
                    item=e.item,
                )
            elif isinstance(e, ExplicitCommandApplied) and e.command_id == source:
                command = CommandSource(
                    position=at,
                    command_id=str(e.command_id),
                    intent=e.intent,
                    statement=e.statement,
                )
            elif isinstance(e, TranscriptObserved) and e.turn_id == event.turn_id:
                transcript = _transcript(at, e)
            elif isinstance(e, ExtractionCompleted) and e.turn_id == event.turn_id:
                extraction = ExtractionOutcome(
                    position=at,
                    extractor_id=e.extractor_id,
                    extracted=e.extracted,
                    rejected=e.rejected,
                )
            elif isinstance(e, SessionOpened):
                policy = e.activation_policy
            if isinstance(e, DirectCommandApplied):
                # a direct command's one record: its short session's policy, and on its last
                # record the report (its memory events follow it in the same append)
                policy = e.activation_policy
                report = e.report
            else:
                report = e.report if isinstance(e, SessionReconciled) else None
            if report is not None and reconciled is None:
                touched = {str(m) for m in (*report.activated, *report.reinforced)}
                if memory_id in touched:
                    reconciled = at
        if isinstance(event, MemoryActivated):
            return Origin(
                kind="activated",
                position=position,
                recorded_at=event.recorded_at,
                session_id=event.session_id,
                turn_id=event.turn_id,
                source_id=str(source),
                decision=event.decision,
                decision_evidence=event.decision_evidence,
                activation_policy=policy,
                context=tuple(context),
                candidate=candidate,
                command=command,
                transcript=transcript,
                extraction=extraction,
                reconciled_position=reconciled,
            )
        return Origin(
            kind="reinforced",
            position=position,
            recorded_at=event.recorded_at,
            session_id=event.session_id,
            turn_id=event.turn_id,
            source_id=str(source),
            activation_policy=policy,
            context=tuple(context),
            candidate=candidate,
            command=command,
            transcript=transcript,
            extraction=extraction,
            reconciled_position=reconciled,
        )


def _history(position: int, event: LedgerEvent) -> HistoryEntry | None:
    """The history entry of a memory-stream event (None for activations and
    reinforcements: they are origins)."""
    describe = _HISTORY[type(event)]
    if describe is None:
        return None
    return HistoryEntry(
        position=position,
        type=type(event).__name__,
        revision=event.originator_version,
        recorded_at=event.recorded_at,
        session_id=getattr(event, "session_id", None),
        turn_id=getattr(event, "turn_id", None),
        **describe(event),
    )


def _superseded(event: MemorySuperseded) -> dict[str, Any]:
    return {
        "detail": f"superseded ({event.cause.replace('_', ' ')})",
        "related_memory": str(event.superseded_by),
    }


def _conflict(event: MemoryConflictMarked) -> dict[str, Any]:
    return {"detail": "conflict marked", "related_memory": str(event.conflicts_with)}


def _pinned(event: MemoryPinned) -> dict[str, Any]:
    return {"detail": f"pinned by command {event.command_id}"}


def _forgotten(event: MemoryForgotten) -> dict[str, Any]:
    return {"detail": f"forgotten by command {event.command_id}"}


def _pruned(event: MemoryPruned) -> dict[str, Any]:
    return {"detail": f"pruned ({event.rule})"}


_HISTORY: EventDispatch[Callable[[Any], dict[str, Any]]] = EventDispatch(
    "explain: history entries of a memory stream",
    {
        MemorySuperseded: _superseded,
        MemoryConflictMarked: _conflict,
        MemoryPinned: _pinned,
        MemoryForgotten: _forgotten,
        MemoryPruned: _pruned,
    },
    # Activations and reinforcements are origins; the rest never is in a memory stream.
    ignores=(
        *SESSION_STREAM_EVENTS,
        NamespaceForgotten,
        NamespaceErased,
        ErasedPayload,
        MemoryActivated,
        MemoryReinforced,
    ),
)
"""What each event of a memory stream adds to its history (detail, related memory)."""


def _rows(engine: MemoryEngine, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    with engine.read_models(catch_up=False) as live:
        table = live.conn.sql(sql, params=params).to_arrow_table()
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _statements(engine: MemoryEngine, ids: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = _rows(
        engine,
        "SELECT memory_id, statement FROM canonical_memory WHERE memory_id IN (SELECT unnest(?))",
        [wanted],
    )
    return {r["memory_id"]: r["statement"] for r in rows}


def explain(engine: MemoryEngine, memory_id: str, namespace: Namespace | None = None) -> Lineage:
    """The lineage of one memory item (a full id or a unique prefix of one).

    Catches the engine's projections up to the ledger head first. A host explaining a
    memory to its user passes the user's ``namespace`` (never taken from the request): a
    memory of another namespace then gets exactly the error of an id that does not exist.
    Without it (the operator's ``memory-ledger explain``) any memory of the store is found.

    :returns: a :class:`Lineage` (origins in position order, history, recalls, admissions
        and uses, each with its ledger position).
    :raises UnknownMemoryError: no memory (or several) match ``memory_id`` (in
        ``namespace``, when given).
    """
    full = resolve_memory_id(engine, memory_id, namespace)
    row = _rows(engine, "SELECT * FROM canonical_memory WHERE memory_id = ?", [full])[0]
    position = engine.projection_position
    sessions = _Sessions(engine)
    origins: list[Origin] = []
    history: list[HistoryEntry] = []
    for at, event in stream_events(engine, UUID(full)):
        if at > position:
            break
        if isinstance(event, MemoryActivated | MemoryReinforced):
            origins.append(sessions.origin(at, event, full))
        else:
            entry = _history(at, event)
            if entry is not None and isinstance(event, MemoryPinned | MemoryForgotten):
                command = sessions.command(event.namespace, event.session_id, event.command_id)
                if command is not None:
                    verb = "pinned" if isinstance(event, MemoryPinned) else "forgotten"
                    detail = f"{verb} by command @{command.position}: {command.statement!r}"
                    entry = msgspec.structs.replace(entry, detail=detail)
            if entry is not None:
                history.append(entry)
    recalls = tuple(
        RecallTouch(
            position=r["position"],
            session_id=r["session_id"],
            turn_id=r["turn_id"],
            query=r["query"],
            path=r["path"],
            rank=r["memory_ids"].index(full) + 1,
        )
        for r in _rows(
            engine,
            "SELECT * FROM recalls WHERE list_contains(memory_ids, ?) ORDER BY position",
            [full],
        )
    )
    admissions = tuple(
        AdmissionTouch(
            position=r["admitted_position"],
            session_id=r["session_id"],
            turn_id=r["turn_id"],
            revision=r["revision"],
            estimated_tokens=r["estimated_tokens"],
            revoked=r["revoked"],
            revoke_reason=r["revoke_reason"],
            revoked_position=r["revoked_position"],
        )
        for r in _rows(
            engine,
            "SELECT * FROM admissions WHERE memory_id = ? ORDER BY admitted_position",
            [full],
        )
    )
    uses = tuple(
        UseTouch(
            position=r["position"],
            session_id=r["session_id"],
            turn_id=r["turn_id"],
            revision=r["revision"],
        )
        for r in _rows(engine, "SELECT * FROM uses WHERE memory_id = ? ORDER BY position", [full])
    )
    supersedes = tuple(row["supersedes"] or ())
    conflicts = tuple(row["conflicts_with"] or ())
    mentioned = [*supersedes, *conflicts, *(h.related_memory for h in history if h.related_memory)]
    if row["superseded_by"]:
        mentioned.append(row["superseded_by"])
    return Lineage(
        memory_id=full,
        namespace=Namespace(row["tenant"], row["principal"], row["scope_id"]),
        status=row["status"],
        revision=row["revision"],
        subject=row["subject"],
        predicate=row["predicate"],
        value=row["value"],
        statement=row["statement"],
        evidence=tuple(row["evidence"] or ()),
        importance=row["importance"],
        pinned=row["pinned"],
        position=position,
        origins=tuple(origins),
        history=tuple(history),
        supersedes=supersedes,
        superseded_by=row["superseded_by"],
        conflicts_with=conflicts,
        recalls=recalls,
        admissions=admissions,
        uses=uses,
        related=_statements(engine, mentioned),
    )


# Mermaid ------------------------------------------------------------------------------------


def _label(*lines: str) -> str:
    """A quoted Mermaid node label; quotes and angle brackets escaped, lines joined."""
    escaped = []
    for line in lines:
        text = " ".join(line.split())
        if len(text) > 70:
            text = text[:69] + "…"
        for raw, entity in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
            text = text.replace(raw, entity)
        escaped.append(text)
    return '"' + "<br/>".join(escaped) + '"'


def _edge(text: str) -> str:
    return _label(text)[1:-1].replace("|", "#124;")


def _short_id(memory_id: str) -> str:
    return memory_id[:8]


def render_mermaid(lineage: Lineage, *, fenced: bool = True) -> str:
    """The lineage as a Mermaid ``flowchart`` (in a ```mermaid fence unless ``fenced=False``).

    Evidence turns flow into candidates, candidates into the memory (labelled with the
    activation decision or reinforcement), the memory into later history and related items;
    dotted edges lead to the turns that recalled, admitted and used it.
    """
    lines = ["flowchart TD"]

    def node(name: str, *label: str) -> None:
        lines.append(f"    {name}[{_label(*label)}]")

    def edge(source: str, target: str, text: str | None = None, *, dotted: bool = False) -> None:
        arrow = "-.->" if dotted else "-->"
        lines.append(f"    {source} {arrow}{f'|{_edge(text)}|' if text else ''} {target}")

    evidence = ", ".join(lineage.evidence) or "-"
    node(
        "M",
        f"memory {_short_id(lineage.memory_id)}",
        lineage.statement,
        f"{lineage.status} · revision {lineage.revision} · evidence {evidence}",
    )
    for n, origin in enumerate(lineage.origins, start=1):
        upstream: str | None = None
        if origin.transcript is not None:
            t = origin.transcript
            when = t.occurred_at.isoformat() if t.occurred_at else "no occurred time"
            node(
                f"T{n}",
                f"turn {t.turn_id} of {t.session_id} @{t.position}",
                when,
                f"sha256 {t.digest[:12]}",
                t.transcript,
            )
            upstream = f"T{n}"
        if origin.candidate is not None:
            c = origin.candidate
            node(
                f"C{n}",
                f"candidate #{c.index} @{c.position}",
                c.item.statement,
                f"validation {c.validation}",
            )
            if upstream:
                edge(upstream, f"C{n}", f"extracted by {c.extractor_id}")
            upstream = f"C{n}"
        elif origin.command is not None:
            command = origin.command
            node(f"C{n}", f"command {command.intent} @{command.position}", command.statement)
            if upstream:
                edge(upstream, f"C{n}")
            upstream = f"C{n}"
        if origin.kind == "activated":
            action = f"activated ({origin.decision}) @{origin.position}"
        else:
            action = f"reinforced @{origin.position}"
        if upstream is None:
            node(f"O{n}", f"{origin.session_id} turn {origin.turn_id}")
            upstream = f"O{n}"
        edge(upstream, "M", action)
    for n, entry in enumerate(lineage.history, start=1):
        if entry.related_memory:
            statement = lineage.related.get(entry.related_memory, "")
            node(f"H{n}", f"memory {_short_id(entry.related_memory)}", statement)
            edge("M", f"H{n}", f"{entry.detail} @{entry.position}")
        else:
            node(f"H{n}", f"{entry.detail} @{entry.position}")
            edge("M", f"H{n}")
    for n, older in enumerate(lineage.supersedes, start=1):
        node(f"S{n}", f"memory {_short_id(older)}", lineage.related.get(older, ""))
        edge(f"S{n}", "M", "superseded by")
    touches: list[tuple[str, str]] = []
    for r in lineage.recalls:
        touches.append(
            (
                f"recalled @{r.position} (rank {r.rank})",
                f"{r.session_id} turn {r.turn_id}: {r.query}",
            )
        )
    for a in lineage.admissions:
        revoked = " (revoked)" if a.revoked else ""
        touches.append((f"admitted @{a.position}{revoked}", f"{a.session_id} turn {a.turn_id}"))
    for u in lineage.uses:
        touches.append((f"used @{u.position}", f"{u.session_id} turn {u.turn_id}"))
    for n, (text, label) in enumerate(touches, start=1):
        node(f"U{n}", label)
        edge("M", f"U{n}", text, dotted=True)
    body = "\n".join(lines) + "\n"
    return f"```mermaid\n{body}```\n" if fenced else body
