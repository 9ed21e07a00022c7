"""Store statistics (``memory-ledger stats``): events, namespaces, memories, positions, sizes,
and the semantic channel's maintenance health (vector coverage, indexer lag, failures, last
refresh; :mod:`commands.recall.maintenance`) for every embedding model with vectors in this
process's projection file.

Event counts come from the stored topics (no decoding); namespaces and sessions from the
SessionOpened events and the first record of each direct command's short session
(DirectCommandApplied at version 1; the only ones decoded; those of erased namespaces are counted as
erased sessions, their namespace unreadable); memory counts from the engine's projection,
caught up to the head first. Every projection slot file is listed with its size and position;
a slot that another process holds is reported as in use (DuckDB refuses to open it).

Encryption at rest (:class:`EncryptionStats`): on or off, the master key's id (a fingerprint,
never the key), live and erased data keys, the key store, and how many records are sealed
and how many of those were sealed with an erased key (read from the records' clear headers).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import msgspec
from eventsourcing.utils import get_topic

from memory_ledger.commands.engine.memory_engine import MemoryEngine, check_engine
from memory_ledger.commands.recall.maintenance import MaintenanceHealth, maintenance_health
from memory_ledger.ledger.errors import at_position
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    ErasedPayload,
    LedgerEvent,
    SessionOpened,
)
from memory_ledger.ledger.mapper import RECORD_DAMAGE, may_be_sealed
from memory_ledger.ledger.sealing import SEALED, sealed_key_id
from memory_ledger.projections.vectors import VectorStore
from memory_ledger.replay.audit.filters import EventFilter, filter_events, topic_type

__all__ = [
    "EncryptionStats",
    "NamespaceStats",
    "SlotStats",
    "StoreStats",
    "store_stats",
    "vector_health",
]


class NamespaceStats(msgspec.Struct, frozen=True, kw_only=True):
    """One namespace: its sessions, and its memories by status."""

    tenant: str
    principal: str
    scope_id: str
    sessions: int
    memories: dict[str, int]
    active_memories: int


class SlotStats(msgspec.Struct, frozen=True, kw_only=True):
    """One projection slot file: size, tracked position (None when unreadable or in use)."""

    path: str
    bytes: int
    position: int | None
    in_use: bool
    this_process: bool


class EncryptionStats(msgspec.Struct, frozen=True, kw_only=True):
    """Encryption at rest of a store: ``encrypting`` (new payloads are sealed), the id of
    the master key that wraps its data keys, else of the configured one while no data key
    is written yet (``master_key_recorded`` false; None: no master key at all; never the key
    itself), live and erased data keys, the key store, and records ``sealed`` (of the ledger
    read) and ``erased`` (sealed with a destroyed key: unreadable for good)."""

    encrypting: bool
    master_key_id: str | None
    master_key_recorded: bool = True
    live_keys: int
    erased_keys: int
    key_store: str
    sealed_records: int
    erased_records: int

    @property
    def summary(self) -> str:
        """One line for people: on or off, and what that means."""
        if not self.encrypting and not self.live_keys and not self.erased_keys:
            return "off: payloads are stored in clear (no master key configured)"
        state = "on" if self.encrypting else "off for new payloads"
        if self.master_key_id is None:
            key = "master key not set"
        elif self.master_key_recorded:
            key = f"master key {self.master_key_id}"
        else:
            key = f"master key {self.master_key_id} (configured; bound at the first data key)"
        return f"{state}: {key}, {self.live_keys} live data key(s), {self.erased_keys} erased"


class StoreStats(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``memory-ledger stats`` reports (see the module docstring)."""

    store: str
    ledger_head: int
    projection_position: int
    events: int
    events_by_type: dict[str, int]
    sessions: int
    namespaces: tuple[NamespaceStats, ...]
    memories_by_status: dict[str, int]
    active_memories: int
    first_recorded_at: datetime | None
    last_recorded_at: datetime | None
    ledger_bytes: int
    ledger_used_bytes: int
    projection_files: tuple[SlotStats, ...]
    total_bytes: int
    encryption: EncryptionStats | None = None
    """Encryption at rest (always set by :func:`store_stats`)."""
    erased_sessions: int = 0
    """Sessions of erased namespaces (their namespace is unreadable: not in ``namespaces``)."""
    vectors: tuple[MaintenanceHealth, ...] = ()
    """Maintenance health per embedding model (the attached provider's, else every model
    with vectors in the projection file; empty: no vectors)."""


def _first_and_last(engine: MemoryEngine, head: int) -> tuple[datetime | None, datetime | None]:
    if head <= 0:
        return None, None
    first: LedgerEvent | None = next(
        (e for _, e in filter_events(engine, EventFilter(stop=1))), None
    )
    last: LedgerEvent | None = next(
        (e for _, e in filter_events(engine, EventFilter(start=head, stop=head))), None
    )
    return (
        first.recorded_at if first else None,
        last.recorded_at if last else None,
    )


@contextlib.contextmanager
def _slot_lock(lock_path: Path) -> Iterator[bool]:
    """Try the slot's flock without waiting: yields True when it was free (and is now ours).

    A lock file this process cannot open (a read-only store) yields True: the caller's
    read-only DuckDB open then fails on its own if a process writes the file.
    """
    try:
        handle = open(lock_path, "rb" if lock_path.exists() else "ab")  # noqa: SIM115
    except OSError:
        yield True
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _slot(engine: MemoryEngine, path: Path) -> SlotStats:
    size = path.stat().st_size + sum(
        p.stat().st_size for p in path.parent.glob(path.name + ".wal") if p.is_file()
    )
    if os.path.realpath(path) == os.path.realpath(engine.projection_file):
        return SlotStats(
            path=str(path),
            bytes=size,
            position=engine.projection_position,
            in_use=True,
            this_process=True,
        )
    lock_path = path.with_suffix(".lock")
    with _slot_lock(lock_path) as free:
        if not free:
            return SlotStats(
                path=str(path), bytes=size, position=None, in_use=True, this_process=False
            )
        position: int | None = None
        try:
            conn = duckdb.connect(str(path), read_only=True)
            try:
                rows = conn.execute(
                    "SELECT position FROM projection_tracking WHERE projection = 'read_models'"
                ).fetchall()
                position = int(rows[0][0]) if rows else 0
            finally:
                conn.close()
        except duckdb.Error:
            position = None
    return SlotStats(
        path=str(path), bytes=size, position=position, in_use=False, this_process=False
    )


def store_stats(engine: MemoryEngine) -> StoreStats:
    """Counts, positions and file sizes of the store ``engine`` has open.

    Catches the engine's projection up to the ledger head first.
    """
    check_engine(engine)
    head = engine.head
    with engine.read_models(to=head) as live:
        position = live.position
        memory_rows = live.conn.execute(
            "SELECT tenant, principal, scope_id, status, count(*) FROM canonical_memory "
            "GROUP BY ALL"
        ).fetchall()
    by_type: collections.Counter[str] = collections.Counter()
    opened_topic = get_topic(SessionOpened)
    direct_topic = get_topic(DirectCommandApplied)  # version 1: a direct session's first
    decode = engine.event_decoder()
    sessions: collections.Counter[tuple[str, str, str]] = collections.Counter()
    key_status = engine.keyring.status()
    configured = engine.keyring.master
    configured_key = configured.key_id if configured is not None else None
    erased_keys = {r.key_id.bytes for r in engine.keyring.records() if r.erased}
    sealed = erased = erased_sessions = 0
    after = 0
    while after < head:
        rows = engine.read_records(after, 5000, head)
        if not rows:
            break
        for position, raw_id, version, topic, state in rows:
            by_type[topic_type(topic)] += 1
            try:
                if state and state[0] == SEALED and may_be_sealed(topic):
                    sealed += 1
                    if sealed_key_id(state) in erased_keys:
                        erased += 1
                opens = topic == opened_topic or (topic == direct_topic and version == 1)
                event = decode(topic, state, raw_id, version) if opens else None
            except RECORD_DAMAGE as e:
                raise at_position(e, position) from e
            if event is not None:
                if type(event) is ErasedPayload:
                    erased_sessions += 1
                    continue
                ns = event.namespace
                sessions[(ns.tenant, ns.principal, ns.scope_id)] += 1
        after = rows[-1][0]
    memories: dict[tuple[str, str, str], dict[str, int]] = collections.defaultdict(dict)
    by_status: collections.Counter[str] = collections.Counter()
    for tenant, principal, scope_id, status, count in memory_rows:
        memories[(tenant, principal, scope_id)][status] = int(count)
        by_status[status] += int(count)
    namespaces = tuple(
        NamespaceStats(
            tenant=key[0],
            principal=key[1],
            scope_id=key[2],
            sessions=sessions.get(key, 0),
            memories=dict(sorted(memories.get(key, {}).items())),
            active_memories=sum(
                n for s, n in memories.get(key, {}).items() if s in ("active", "conflicted")
            ),
        )
        for key in sorted(set(sessions) | set(memories))
    )
    ledger_file = engine.path / "ledger" / "data.mdb"
    ledger_bytes = ledger_file.stat().st_size if ledger_file.is_file() else 0
    used = 0
    if ledger_file.is_file():  # an LMDB ledger (a PostgreSQL one has no file here)
        env = engine.lmdb_recorder().datastore.env
        used = (int(env.info()["last_pgno"]) + 1) * int(env.stat()["psize"])
    slots = tuple(
        _slot(engine, p) for p in sorted((engine.path / "projections").glob("slot-*.duckdb"))
    )
    first, last = _first_and_last(engine, head)
    health = vector_health(engine)
    return StoreStats(
        store=str(engine.path),
        ledger_head=head,
        projection_position=position,
        events=sum(by_type.values()),
        events_by_type=dict(sorted(by_type.items())),
        sessions=sum(sessions.values()),
        namespaces=namespaces,
        memories_by_status=dict(sorted(by_status.items())),
        active_memories=by_status["active"] + by_status["conflicted"],
        first_recorded_at=first,
        last_recorded_at=last,
        ledger_bytes=ledger_bytes,
        ledger_used_bytes=used,
        projection_files=slots,
        total_bytes=ledger_bytes + sum(s.bytes for s in slots),
        encryption=EncryptionStats(
            encrypting=key_status.encrypting,
            master_key_id=key_status.master_key_id or configured_key,
            master_key_recorded=key_status.master_key_id is not None or configured_key is None,
            live_keys=key_status.live_keys,
            erased_keys=key_status.erased_keys,
            key_store=key_status.key_store,
            sealed_records=sealed,
            erased_records=erased,
        ),
        erased_sessions=erased_sessions,
        vectors=health,
    )


def vector_health(engine: MemoryEngine) -> tuple[MaintenanceHealth, ...]:
    """Maintenance health of the engine's provider (with its indexer's failure counts), or,
    without one, of every model that has vectors in the projection file (failures unknown:
    they belong to the process that indexes)."""
    if engine.semantic is not None:
        return (engine.maintenance_health(),)
    head = engine.head
    with engine.read_models(to=head) as models:
        vectors = VectorStore(models.conn)
        return tuple(
            maintenance_health(vectors, key, ledger_head=head, projection_position=models.position)
            for key in vectors.model_keys()
        )
