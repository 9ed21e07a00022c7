"""The interchange form: one namespace's memories, each with its versions, times, evidence
and status, as a versioned JSON Lines file that another store reads back
(:mod:`~memory_ledger.replay.imports.interchange_import`).

The file (UTF-8, one JSON object a line)::

    {"format": "memory-ledger.interchange", "version": 3, "memories": N, "digest": "sha256:..."}
    {"key": "...", "status": "active", "pinned": false, "forgotten_at": null, "versions": [V, ...]}
    ...

The first line is the header; each further line is one memory: the chain of values it held,
oldest first (each later value superseded the one before: a correction, or a newer value of
the same subject and predicate). A version ``V`` is ``{"statement", "subject", "predicate",
"value", "kind", "source", "scope", "reason", "importance", "confidence", "tags",
"evidence", "document", "conflicts_with", "occurred_at", "recorded_at"}``. ``document``
(version 2; absent in version 1, read as false) says the value is a document value
(``Remember(document=True)``, such as a LangGraph item's JSON: up to
:data:`~memory_ledger.commands.extraction.validation.MAX_DOCUMENT_VALUE_CHARS` characters,
kept exactly), so the import records it as one; the export marks a value a document when it
could not have been recorded as a plain value (longer than
``MAX_FIELD_CHARS["value"]``, or whitespace a plain value would have collapsed).
``occurred_at`` is the version's valid time
(when it was said; for a value remembered without one, the time the ledger recorded it);
``recorded_at`` is when the exporting store recorded it (information only: an import records
its own). ``conflicts_with`` (version 3; absent before, read as none) lists the versions of
other memories this version was marked as contradicting, each ``{"key": K, "version": I}``:
the line whose ``key`` is K, its version I (0 = oldest); the marks are on both sides, so each
pair appears on both lines. ``status`` is the last version's (``active``, ``conflicted``,
``forgotten``, ``pruned``), ``pinned`` whether it is pinned, ``forgotten_at`` the time of the
forget or prune, ``pruned_rule`` (version 3) the rule a pruned memory was pruned by (null
otherwise). ``key`` is the digest of the line's content without its ``conflicts_with``
(``sha256:`` and 32 hex digits: so lines can name each other). Lines are ordered by the first
version's ``occurred_at``, then ``key``.

No ledger internals: no memory or session ids, positions or namespace (the host that
imports says where the memories go). Two stores hold the same memories, versions and times
exactly when their exports have the same ``digest`` (:func:`interchange_digest`: SHA-256
over the memory lines without ``recorded_at``, and without ``document`` when it is false,
``conflicts_with`` when empty and ``pruned_rule`` when null, so a version 1 or 2 file's
digest still checks).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, cast
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.memory_state import Status
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.extraction.validation import MAX_FIELD_CHARS
from memory_ledger.ledger.events import MemoryForgotten, MemoryPruned
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.derived import write_atomic

__all__ = [
    "INTERCHANGE_FORMAT",
    "INTERCHANGE_VERSION",
    "READABLE_VERSIONS",
    "InterchangeMemory",
    "InterchangePartner",
    "InterchangeReport",
    "InterchangeVersion",
    "export_interchange",
    "collect_memories",
    "interchange_digest",
    "memory_digest_bytes",
    "memory_key",
]

INTERCHANGE_FORMAT = "memory-ledger.interchange"
INTERCHANGE_VERSION = 3
"""The version of the interchange form this module writes (2: versions carry ``document``;
3: versions carry ``conflicts_with`` and lines ``pruned_rule``)."""
READABLE_VERSIONS = frozenset({1, 2, 3})
"""The interchange versions the import reads (1: no ``document`` field, read as false; 1
and 2: no ``conflicts_with`` or ``pruned_rule``, read as none)."""


class InterchangePartner(msgspec.Struct, frozen=True, kw_only=True):
    """A version another memory line holds: the line's ``key`` and the ``version``'s index
    in it (0 = oldest)."""

    key: str
    version: int


class InterchangeVersion(msgspec.Struct, frozen=True, kw_only=True):
    """One value a memory held (see the module docstring)."""

    statement: str
    subject: str | None = None
    predicate: str | None = None
    value: str | None = None
    kind: str = "semantic"
    source: str = "fact"
    scope: str = "user"
    reason: str = ""
    importance: float = 0.9
    confidence: float = 1.0
    tags: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    document: bool = False
    conflicts_with: tuple[InterchangePartner, ...] = ()
    pinned: bool = False
    """(version 3) This value was pinned when a later one superseded it (the last value's pin
    is the line's ``pinned``)."""
    occurred_at: datetime | None = None
    recorded_at: datetime | None = None


MAX_RULE_NAME = 200
"""The longest ``pruned_rule`` a line may carry (characters; a rule's name, not a text)."""


class InterchangeMemory(msgspec.Struct, frozen=True, kw_only=True):
    """One memory line: its versions oldest first, and where the last one stands."""

    key: str
    status: Status
    """Where the last version stands: a status of canonical memory (a line with another is
    refused when read, naming the line)."""
    pinned: bool = False
    forgotten_at: datetime | None = None
    pruned_rule: Annotated[str, msgspec.Meta(max_length=MAX_RULE_NAME)] | None = None
    versions: tuple[InterchangeVersion, ...]


class InterchangeHeader(msgspec.Struct, frozen=True, kw_only=True):
    """The first line of an interchange file."""

    format: str
    version: int
    memories: int = 0
    digest: str = ""


class InterchangeReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`export_interchange` wrote: the file, its memories and versions, the
    digest of its content, the ledger position it reflects and the wall time."""

    path: str
    memories: int
    versions: int
    digest: str
    position: int
    seconds: float


_ENCODER = msgspec.json.Encoder(order="deterministic")


def memory_digest_bytes(memory: InterchangeMemory, *, partners: bool = True) -> bytes:
    """The bytes of ``memory`` that the digest covers: its JSON without the versions'
    ``recorded_at`` and without ``key`` (which is derived from them); ``partners`` False:
    without the versions' ``conflicts_with`` too (what the key covers)."""
    data = msgspec.to_builtins(memory)
    data.pop("key", None)
    if data.get("pruned_rule") is None:
        data.pop("pruned_rule", None)  # as versions 1 and 2 wrote it
    for version in data["versions"]:
        version.pop("recorded_at", None)
        if not version.get("document"):
            version.pop("document", None)  # as version 1 wrote it
        if not version.get("pinned"):
            version.pop("pinned", None)  # as versions 1 and 2 wrote it
        if not partners or not version.get("conflicts_with"):
            version.pop("conflicts_with", None)  # as versions 1 and 2 wrote it
    return _ENCODER.encode(data)


def interchange_digest(memories: Iterable[InterchangeMemory]) -> str:
    """``sha256:`` and the hex SHA-256 over :func:`memory_digest_bytes` of each memory, one
    line each, in order: equal for two stores holding the same memories, versions and
    times."""
    digest = hashlib.sha256()
    for memory in memories:
        digest.update(memory_digest_bytes(memory) + b"\n")
    return "sha256:" + digest.hexdigest()


def memory_key(memory: InterchangeMemory) -> str:
    """The ``key`` of a memory line: ``sha256:`` and the first 32 hex digits of the SHA-256
    of :func:`memory_digest_bytes` without the conflict partners (its content, so the same
    memory has the same key in every store, and lines that name each other have keys)."""
    content = memory_digest_bytes(memory, partners=False)
    return "sha256:" + hashlib.sha256(content).hexdigest()[:32]


_COLUMNS = (
    "memory_id, status, pinned, subject, predicate, value, statement, kind, source, scope, "
    "reason, importance, confidence, tags, evidence, occurred_at, activated_at, supersedes, "
    "superseded_by, conflicts_with, created_position"
)


def _aware(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _rows(engine: MemoryEngine, namespace: Namespace) -> tuple[int, list[dict[str, Any]]]:
    """The canonical memory rows of ``namespace`` (erased rows scrubbed first), and the
    position they reflect."""
    with engine.read_models() as live:
        engine.scrub_erased_projections()
        cursor = live.conn.execute(
            f"SELECT {_COLUMNS} FROM canonical_memory "
            "WHERE tenant = ? AND principal = ? AND scope_id = ? ORDER BY created_position",
            [namespace.tenant, namespace.principal, namespace.scope_id],
        )
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return live.position, rows


def is_document_value(value: str | None) -> bool:
    """Whether ``value`` can only have been recorded as a document value: longer than a
    plain value may be (``MAX_FIELD_CHARS["value"]``), or holding whitespace that a plain
    value's validation collapses (the events do not keep the flag itself)."""
    if value is None:
        return False
    return len(value) > MAX_FIELD_CHARS["value"] or value != " ".join(value.split())


def _version(row: dict[str, Any], *, last: bool) -> InterchangeVersion:
    recorded = _aware(row["activated_at"])
    return InterchangeVersion(
        pinned=bool(row["pinned"]) and not last,
        statement=row["statement"],
        subject=row["subject"],
        predicate=row["predicate"],
        value=row["value"],
        kind=row["kind"] or "semantic",
        source=row["source"] or "fact",
        scope=row["scope"] or "user",
        reason=row["reason"] or "",
        importance=float(row["importance"] if row["importance"] is not None else 0.9),
        confidence=float(row["confidence"] if row["confidence"] is not None else 1.0),
        tags=tuple(row["tags"] or ()),
        evidence=tuple(row["evidence"] or ()),
        document=is_document_value(row["value"]),
        occurred_at=_aware(row["occurred_at"]) or recorded,
        recorded_at=recorded,
    )


def _ended_at(engine: MemoryEngine, memory: str) -> tuple[datetime | None, str | None]:
    """The time of the forget or prune that ended ``memory`` (from its stream), and the
    rule of a prune (None for a forget)."""
    ended, rule = None, None
    for event in engine.load_stream(UUID(memory)):
        if isinstance(event, MemoryForgotten):
            ended, rule = _aware(event.occurred_at) or _aware(event.recorded_at), None
        elif isinstance(event, MemoryPruned):
            ended, rule = _aware(event.prune_time), event.rule
    return ended, rule


def _chains(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows as supersession chains, oldest first: a chain starts at a row that
    supersedes no row of the namespace and follows ``superseded_by``."""
    by_id = {row["memory_id"]: row for row in rows}
    seen: set[str] = set()
    chains = []
    roots = [r for r in rows if not any(s in by_id for s in (r["supersedes"] or ()))]
    for start in [*roots, *rows]:  # then anything a loop left out, on its own
        if start["memory_id"] in seen:
            continue
        chain: list[dict[str, Any]] = []
        row: dict[str, Any] | None = start
        while row is not None and row["memory_id"] not in seen:
            seen.add(row["memory_id"])
            chain.append(row)
            row = by_id.get(row["superseded_by"]) if row["superseded_by"] else None
        chains.append(chain)
    return chains


def collect_memories(
    engine: MemoryEngine, namespace: Namespace
) -> tuple[int, list[InterchangeMemory]]:
    """The memories of ``namespace`` in the interchange form, in file order, and the ledger
    position they reflect."""
    position, rows = _rows(engine, namespace)
    chains = _chains(rows)
    memories = []
    where: dict[str, InterchangePartner] = {}  # memory id -> the line and version holding it
    for chain in chains:
        last = chain[-1]
        status = cast(Status, str(last["status"]))  # the read model holds only these
        ended, rule = (
            _ended_at(engine, last["memory_id"])
            if status in ("forgotten", "pruned")
            else (None, None)
        )
        memory = InterchangeMemory(
            key="",
            status=status,
            pinned=bool(last["pinned"]),
            forgotten_at=ended,
            pruned_rule=rule if status == "pruned" else None,
            versions=tuple(
                _version(row, last=index == len(chain) - 1) for index, row in enumerate(chain)
            ),
        )
        key = memory_key(memory)
        memories.append(msgspec.structs.replace(memory, key=key))
        for index, row in enumerate(chain):
            where[row["memory_id"]] = InterchangePartner(key=key, version=index)
    memories = [
        _with_partners(memory, chain, where) for memory, chain in zip(memories, chains, strict=True)
    ]
    far = datetime.max.replace(tzinfo=UTC)
    memories.sort(key=lambda m: (m.versions[0].occurred_at or far, m.key))
    return position, memories


def _with_partners(
    memory: InterchangeMemory,
    chain: list[dict[str, Any]],
    where: dict[str, InterchangePartner],
) -> InterchangeMemory:
    """``memory`` with each version's conflict partners (``where`` the line and version of
    every memory id of the namespace; a partner not among them is left out), in order."""
    if not any(row["conflicts_with"] for row in chain):
        return memory
    versions = []
    for version, row in zip(memory.versions, chain, strict=True):
        partners = {where[other] for other in row["conflicts_with"] or () if other in where}
        ordered = tuple(sorted(partners, key=lambda p: (p.key, p.version)))
        versions.append(msgspec.structs.replace(version, conflicts_with=ordered))
    return msgspec.structs.replace(memory, versions=tuple(versions))


def export_interchange(
    engine: MemoryEngine, namespace: Namespace, path: str | Path
) -> InterchangeReport:
    """Write the memories of ``namespace`` to the NEW or replaced file ``path`` in the
    interchange form (module docstring), atomically (the old file or the new one, never a
    mix).

    :raises InvalidNamespaceError: a namespace part is empty or invalid.
    :raises OSError: the file cannot be written.
    """
    started = time.perf_counter()
    namespace.validated()
    position, memories = collect_memories(engine, namespace)
    digest = interchange_digest(memories)
    header = InterchangeHeader(
        format=INTERCHANGE_FORMAT,
        version=INTERCHANGE_VERSION,
        memories=len(memories),
        digest=digest,
    )
    encoder = msgspec.json.Encoder(order="deterministic")
    chunks = [encoder.encode(header) + b"\n"]
    chunks += [encoder.encode(memory) + b"\n" for memory in memories]
    write_atomic(Path(path), chunks)
    return InterchangeReport(
        path=str(path),
        memories=len(memories),
        versions=sum(len(m.versions) for m in memories),
        digest=digest,
        position=position,
        seconds=time.perf_counter() - started,
    )
