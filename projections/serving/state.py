"""The serving state: each namespace's current memories, their keys and source turns, kept
in the process by applying events with the DuckDB fold's own row functions.

A pure function of the event sequence (no clock, no randomness): applying events command by
command, or all at once from position 1 (a rebuild), gives equal states
(:meth:`ServingState.digest`), and the retrievable rows equal the retrievable rows of the
``canonical_memory`` read model caught up to the same position (:func:`rows_digest` of both).

What it holds, per namespace:

- every canonical memory row it ever saw (any status: a supersede, a conflict or a
  reactivation revises an older row), the ``canonical_memory`` columns the fold writes;
- the retrievable ones (``active``, ``conflicted``) by id, and by ``(subject, predicate)``
  key (lowercased and trimmed, as ``CanonicalMemory.same_key`` compares them);
- the source turns of its forgotten memories (they lend no word to any conversation window);
- its observed turns ``(session id, turn id, position)`` (TranscriptObserved; the text stays
  in the ledger and is read when a document is built);
- a change log ``(position, memory id)``, so a reader that built something at a position
  asks only for what changed after it (:meth:`ServingState.changed_since`).

Counters (recalls, admissions, uses) and session bookkeeping are the DuckDB read models'
alone (:data:`~memory_ledger.projections.fold.SERVED_EVENTS`). A ``NamespaceErased``
record drops every structure of the namespaces it names (:meth:`ServingState.erase`).

The state is not thread-safe by itself: callers hold :attr:`ServingState.lock`.
"""

from __future__ import annotations

import bisect
import hashlib
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.utils import get_topic

from memory_ledger.ledger.events import LedgerEvent, NamespaceErased
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import namespace_ids
from memory_ledger.projections.canonical import RETRIEVABLE
from memory_ledger.projections.fold import SERVED_EVENTS, served_handlers
from memory_ledger.projections.tables import CANONICAL_MEMORY, TRANSCRIPTS, ReadModelTable

__all__ = [
    "SERVING_TOPICS",
    "ServingSnapshot",
    "ServingState",
    "SpaceSnapshot",
    "rows_digest",
]

_SERVED_CLASSES: tuple[type[LedgerEvent], ...] = (*SERVED_EVENTS, NamespaceErased)
SERVING_TOPICS: frozenset[str] = frozenset(get_topic(cls) for cls in _SERVED_CLASSES)
"""Topics of the events the serving state applies: a tail of the ledger decodes only
records of these topics."""

_HANDLERS = served_handlers()
_RETRIEVABLE = frozenset(RETRIEVABLE)


def _key_of(subject: str | None, predicate: str | None) -> tuple[str, str]:
    return ((subject or "").strip().lower(), (predicate or "").strip().lower())


class _Space:
    """One namespace's part of the state. After a restore, the structures a read may never
    need (the id set, the ``(subject, predicate)`` keys, the change log) stay in their
    snapshot form until first used (:class:`_StoredSpace`)."""

    __slots__ = (
        "_by_key",
        "_ids",
        "_log",
        "_log_positions",
        "_stored",
        "changed_at",
        "forgotten",
        "namespace",
        "retrievable",
        "turn_list",
        "turns",
    )

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self._stored: _StoredSpace | None = None
        self._ids: set[str] | None = set()
        self.retrievable: dict[str, None] = {}
        self._by_key: dict[tuple[str, str], dict[str, None]] | None = {}
        self.forgotten: dict[str, tuple[int, ...]] = {}
        self.turns: dict[str, tuple[str, int, int]] = {}
        self.turn_list: list[tuple[str, int, int]] | None = []
        self._log: list[str] | None = []
        self._log_positions: list[int] | None = []
        self.changed_at = 0

    @property
    def ids(self) -> set[str]:
        """Every memory id the namespace holds a row of (any status)."""
        if self._ids is None:
            assert self._stored is not None
            self._ids = set(self._stored.ids)
        return self._ids

    @property
    def by_key(self) -> dict[tuple[str, str], dict[str, None]]:
        """Retrievable ids by lowercased, trimmed ``(subject, predicate)``."""
        if self._by_key is None:
            assert self._stored is not None
            stored = _by_key_decoder.decode(self._stored.by_key)
            self._by_key = {(s, p): dict.fromkeys(ids) for s, p, ids in stored}
        return self._by_key

    @property
    def log(self) -> list[str]:
        """Changed memory ids, in position order (see :attr:`log_positions`)."""
        if self._log is None:
            assert self._stored is not None
            self._log = _strings_decoder.decode(self._stored.log)
        return self._log

    @property
    def log_positions(self) -> list[int]:
        """The position of each :attr:`log` entry."""
        if self._log_positions is None:
            assert self._stored is not None
            self._log_positions = _ints_decoder.decode(self._stored.log_positions)
        return self._log_positions

    def sorted_ids(self) -> list[str]:
        """:attr:`ids` sorted (the stored list as it is when the set was never built)."""
        if self._ids is None and self._stored is not None:
            return self._stored.ids
        return sorted(self.ids)

    def raw_by_key(self) -> list[tuple[str, str, list[str]]] | msgspec.Raw:
        """The ``(subject, predicate)`` keys in snapshot form (as read when never used)."""
        if self._by_key is None and self._stored is not None:
            return self._stored.by_key
        return [(s, p, list(holders)) for (s, p), holders in sorted(self.by_key.items())]


class SpaceSnapshot(msgspec.Struct, frozen=True, array_like=True):
    """One namespace of a :class:`ServingSnapshot`: its key, the ids of every row it holds
    (sorted) and those rows (each its own msgpack document, concatenated: row ``i`` is
    ``rows[row_offsets[i]:row_offsets[i + 1]]``, offsets as little-endian int64, kept
    undecoded by a restore until a reader or an event touches it), its retrievable ids, its
    ``(subject, predicate)`` keys ``(subject key, predicate key, ids)``, its forgotten
    memories ``(id, transcript positions)``, its change log compacted to ``(id, last
    position)`` in position order, the last position that changed it, and its observed
    turns ``(turn key, session id, turn id, position)``: a restore rebuilds the namespace's
    structures without decoding a row, and leaves the keys and the log undecoded until
    used."""

    key: str
    ids: list[str]
    row_offsets: bytes
    rows: bytes
    retrievable: list[str]
    by_key: list[tuple[str, str, list[str]]] | msgspec.Raw
    forgotten: list[tuple[str, list[int]]]
    log: list[str] | msgspec.Raw
    log_positions: list[int] | msgspec.Raw
    changed_at: int
    turns: list[tuple[str, str, int, int]]


class _StoredSpace(msgspec.Struct, frozen=True, array_like=True):
    """:class:`SpaceSnapshot` as a restore reads it: the rows and offsets as views of the
    snapshot's buffer, the keys and the log undecoded."""

    key: str
    ids: list[str]
    row_offsets: memoryview
    rows: memoryview
    retrievable: list[str]
    by_key: msgspec.Raw
    forgotten: list[tuple[str, list[int]]]
    log: msgspec.Raw
    log_positions: msgspec.Raw
    changed_at: int
    turns: list[tuple[str, str, int, int]]


SNAPSHOT_FORMAT = 3
"""The layout of :class:`ServingSnapshot` (1: every row decoded at restore; 2: rows kept
raw until touched; 3: rows concatenated with an offsets table, keys and log decoded on
first use). A snapshot of another format is refused, and the state rebuilt."""


class ServingSnapshot(msgspec.Struct, frozen=True, array_like=True):
    """The serving state as persisted (msgpack): its format, position and namespaces."""

    format: int
    position: int
    spaces: list[SpaceSnapshot]


class _StoredSnapshot(msgspec.Struct, frozen=True, array_like=True):
    """:class:`ServingSnapshot` as a restore reads it."""

    format: int
    position: int
    spaces: list[_StoredSpace]


_snapshot_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(_StoredSnapshot)
_row_decoder = msgspec.msgpack.Decoder(dict[str, Any])
_by_key_decoder = msgspec.msgpack.Decoder(list[tuple[str, str, list[str]]])
_strings_decoder = msgspec.msgpack.Decoder(list[str])
_ints_decoder = msgspec.msgpack.Decoder(list[int])


class ServingState:
    """The serving read models of every namespace (see the module docstring).

    :attr:`position` is the last ledger position applied; :meth:`apply` skips events at or
    before it, so a batch applied twice (the writer, then a tail that raced it) counts once.
    """

    def __init__(self, namespace_id: Callable[[Namespace], UUID] | None = None) -> None:
        self._namespace_id = namespace_id or (lambda namespace: namespace_ids(namespace)[0])
        """The store's namespace id (``Keyring.namespace_id``: keyed in id format 2), what a
        ``NamespaceErased`` record names."""
        self.lock = threading.RLock()
        """Held by every reader and by :meth:`apply` (the state is not thread-safe)."""
        self.position = 0
        """The last ledger position applied (0: none)."""
        self.erasures_applied = 0
        """How many ``NamespaceErased`` records this state applied."""
        self._rows: dict[str, dict[str, Any]] = {}
        self._raw: dict[str, int] = {}
        """Restored rows not decoded yet, by memory id: their slot in :attr:`_blocks` (a
        row is in ``_rows`` or here, never both)."""
        self._blocks: list[tuple[int, array[int], memoryview]] = []
        self._block_starts: list[int] = []
        """The restored namespaces' rows: ``(first slot, offsets, bytes)``, by first slot."""
        self._transcripts: dict[str, int] = {}
        self._spaces: dict[str, _Space] = {}
        self._touched: dict[str, None] = {}
        self._observed: str | None = None

    # The fold's target (projections.fold.FoldTarget) ----------------------------------

    def get(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        """The canonical memory row ``key`` (None: absent; other tables hold nothing)."""
        if table is CANONICAL_MEMORY:
            return self._row(key)
        return None

    def put(self, table: ReadModelTable, key: str, row: dict[str, Any]) -> None:
        """Set a canonical memory row or a transcript row (only its position is kept)."""
        if table is CANONICAL_MEMORY:
            self._raw.pop(key, None)
            self._rows[key] = row
            self._touched[key] = None
        elif table is TRANSCRIPTS:
            self._transcripts[key] = int(row["position"])
            self._observed = key

    def touch(self, table: ReadModelTable, key: str) -> dict[str, Any] | None:
        """The canonical memory row ``key``, marked changed (None: absent)."""
        if table is not CANONICAL_MEMORY:
            return None
        row = self._row(key)
        if row is not None:
            self._touched[key] = None
        return row

    def _row(self, memory_id: str) -> dict[str, Any] | None:
        """The row ``memory_id``, decoded on its first use after a restore (None: absent)."""
        row = self._rows.get(memory_id)
        if row is None:
            slot = self._raw.pop(memory_id, None)
            if slot is not None:
                row = self._rows[memory_id] = _row_decoder.decode(self._raw_bytes(slot))
                _freeze_lists(row)
        return row

    keeps_appends = False
    """Append-only tables (history, outcomes) are the DuckDB read models' alone: the row
    functions build none for this target (:meth:`append` drops what they still give)."""

    def _raw_bytes(self, slot: int) -> memoryview:
        """The stored bytes of restored row ``slot``."""
        start, offsets, rows = self._blocks[bisect.bisect_right(self._block_starts, slot) - 1]
        at = slot - start
        return rows[offsets[at] : offsets[at + 1]]

    def append(self, table: ReadModelTable, row: dict[str, Any]) -> None:
        """Append-only tables (history, outcomes) are the DuckDB read models' alone."""

    def transcript_position(self, turn_key: str) -> int | None:
        """The position of the turn's TranscriptObserved (None: not observed)."""
        return self._transcripts.get(turn_key)

    # Applying events --------------------------------------------------------------------

    def apply(self, events: Iterable[tuple[int, LedgerEvent]], last: int | None = None) -> set[str]:
        """Apply ``(position, event)`` pairs in ascending position order (events at or before
        :attr:`position` are skipped; classes outside the served ones only advance it), then
        move :attr:`position` to ``last`` when given and greater. Returns the keys of the
        namespaces whose retrievable memories may have changed."""
        changed: set[str] = set()
        handlers = _HANDLERS
        last_namespace: Namespace | None = None
        last_key = ""
        for position, event in events:
            if position <= self.position:
                continue
            cls = type(event)
            if isinstance(event, NamespaceErased):
                self.erase(event.namespace_ids)
                changed.add("")
            else:
                handler = handlers.get(cls)
                if handler is not None:
                    handler(self, position, event)
                    namespace = event.namespace
                    if namespace is not last_namespace:  # a command's events share one
                        last_namespace, last_key = namespace, namespace.key()
                    space = self._space(namespace, last_key)
                    if self._touched:
                        self._settle(space, position)
                        changed.add(last_key)
                    elif self._observed is not None:
                        self._observe_turn(space, self._observed, event, position)
                        self._observed = None
            self.position = position
        if last is not None and last > self.position:
            self.position = last
        return changed

    def _space(self, namespace: Namespace, key: str) -> _Space:
        space = self._spaces.get(key)
        if space is None:
            space = self._spaces[key] = _Space(namespace)
        return space

    def _observe_turn(self, space: _Space, turn_key: str, event: Any, position: int) -> None:
        replaced = turn_key in space.turns
        space.turns[turn_key] = (event.session_id, event.turn_id, position)
        if replaced or space.turn_list is None:
            space.turn_list = None
        else:
            space.turn_list.append((event.session_id, event.turn_id, position))

    def _settle(self, space: _Space, position: int) -> None:
        """Move the rows one event touched into the namespace's structures."""
        rows = self._rows
        for memory_id in self._touched:
            row = rows[memory_id]
            _freeze_lists(row)
            space.ids.add(memory_id)
            key = _key_of(row["subject"], row["predicate"])
            status = row["status"]
            if status in _RETRIEVABLE:
                space.retrievable[memory_id] = None
                space.by_key.setdefault(key, {})[memory_id] = None
            else:
                space.retrievable.pop(memory_id, None)
                holders = space.by_key.get(key)
                if holders is not None:
                    holders.pop(memory_id, None)
                    if not holders:
                        del space.by_key[key]
            if status == "forgotten":
                space.forgotten[memory_id] = tuple(row["transcript_positions"] or ())
            else:
                space.forgotten.pop(memory_id, None)
            space.log.append(memory_id)
            space.log_positions.append(position)
        space.changed_at = position
        self._touched.clear()

    def erase(self, erased: Iterable[UUID]) -> bool:
        """Drop every structure of the namespaces whose ids (the store's namespace ids, as
        given at construction) are in ``erased``; returns whether any was held."""
        wanted = set(erased)
        dropped = False
        for key, space in list(self._spaces.items()):
            if self._namespace_id(space.namespace) not in wanted:
                continue
            for memory_id in space.ids:
                self._rows.pop(memory_id, None)
                self._raw.pop(memory_id, None)
            for turn_key in space.turns:
                self._transcripts.pop(turn_key, None)
            del self._spaces[key]
            dropped = True
        self.erasures_applied += 1
        return dropped

    # Persisting --------------------------------------------------------------------------

    def snapshot(self, keep: Callable[[str], bool] | None = None) -> bytes:
        """The state as msgpack bytes (:class:`ServingSnapshot`), only the namespaces whose
        key ``keep`` accepts (default: every one): a derived file leaves erased namespaces
        out (:class:`~memory_ledger.projections.derived.ErasedNamespaces`). Rows a restore
        left undecoded are written back as they were read."""
        spaces = [
            self._space_snapshot(key, space)
            for key, space in sorted(self._spaces.items())
            if keep is None or keep(key)
        ]
        return _snapshot_encoder.encode(ServingSnapshot(SNAPSHOT_FORMAT, self.position, spaces))

    def _space_snapshot(self, key: str, space: _Space) -> SpaceSnapshot:
        ids = space.sorted_ids()
        offsets, parts, size = array("q", [0]), [], 0
        for memory_id in ids:
            slot = self._raw.get(memory_id)
            raw = (
                self._raw_bytes(slot)
                if slot is not None
                else _snapshot_encoder.encode(self._rows[memory_id])
            )
            parts.append(raw)
            size += len(raw)
            offsets.append(size)
        log: list[str] | msgspec.Raw
        positions: list[int] | msgspec.Raw
        if space._log is None and space._stored is not None:  # never used: as it was read
            log, positions = space._stored.log, space._stored.log_positions
        else:
            last: dict[str, int] = {}
            for memory_id, position in zip(space.log, space.log_positions, strict=True):
                last.pop(memory_id, None)
                last[memory_id] = position
            log, positions = list(last), list(last.values())
        if sys.byteorder != "little":
            offsets.byteswap()
        return SpaceSnapshot(
            key,
            ids,
            offsets.tobytes(),
            b"".join(parts),
            sorted(space.retrievable),
            space.raw_by_key(),
            [(m, list(positions)) for m, positions in sorted(space.forgotten.items())],
            log,
            positions,
            space.changed_at,
            [(k, s, t, p) for k, (s, t, p) in space.turns.items()],
        )

    def restore(self, data: bytes | memoryview) -> None:
        """Replace this state's content by the snapshot ``data`` (:meth:`snapshot`),
        in place (readers hold this object). The namespaces' structures are rebuilt from
        the snapshot's lists; every row stays undecoded (a slice of ``data``) until a
        reader or an event touches it.

        :raises msgspec.DecodeError: ``data`` is not a snapshot of :data:`SNAPSHOT_FORMAT`.
        """
        snapshot = _snapshot_decoder.decode(data)  # formats 1 and 2 do not decode: refused
        if snapshot.format != SNAPSHOT_FORMAT:
            raise msgspec.DecodeError("serving snapshot of another format")
        spaces: dict[str, _Space] = {}
        blocks: list[tuple[int, array[int], memoryview]] = []
        slots = 0
        for stored in snapshot.spaces:
            offsets = array("q")
            offsets.frombytes(stored.row_offsets)
            if sys.byteorder != "little":
                offsets.byteswap()
            count = len(stored.ids)
            if len(offsets) != count + 1 or (count and offsets[-1] != len(stored.rows)):
                raise msgspec.DecodeError("serving snapshot rows do not match their ids")
            tenant, principal, scope_id = msgspec.json.decode(stored.key)
            space = spaces[stored.key] = _Space(Namespace(tenant, principal, scope_id))
            space._stored = stored
            space._ids = space._by_key = space._log = space._log_positions = None
            space.retrievable = dict.fromkeys(stored.retrievable)
            space.forgotten = {m: tuple(positions) for m, positions in stored.forgotten}
            space.changed_at = stored.changed_at
            for turn_key, session_id, turn_id, position in stored.turns:
                space.turns[turn_key] = (session_id, turn_id, position)
            space.turn_list = None
            blocks.append((slots, offsets, stored.rows))
            slots += count
        self._rows.clear()
        self._raw.clear()
        self._transcripts.clear()
        self._spaces.clear()
        self._touched.clear()
        self._blocks = blocks
        self._block_starts = [start for start, _, _ in blocks]
        for (start, _, _), space in zip(blocks, spaces.values(), strict=True):
            assert space._stored is not None
            self._raw.update(zip(space._stored.ids, range(start, slots), strict=False))
            for turn_key, (_, _, position) in space.turns.items():
                self._transcripts[turn_key] = position
        self._spaces.update(spaces)
        self.position = snapshot.position

    # Reads (shaped as projections.canonical.CanonicalMemory's) --------------------------

    def namespaces(self) -> list[Namespace]:
        """Every namespace the state holds rows or turns of."""
        return [space.namespace for space in self._spaces.values()]

    def namespace_of(self, namespace_key: str) -> Namespace | None:
        """The namespace of a key :meth:`apply` returned (None: not held)."""
        space = self._spaces.get(namespace_key)
        return space.namespace if space is not None else None

    def changed_at(self, namespace_key: str) -> int:
        """The last position that changed a retrievable row of the namespace (0: none)."""
        space = self._spaces.get(namespace_key)
        return space.changed_at if space is not None else 0

    def row(self, memory_id: str) -> dict[str, Any] | None:
        """The canonical memory row ``memory_id`` (any status, any namespace), or None."""
        return self._row(memory_id)

    def _lookup(self, tenant: str, principal: str, scope_id: str) -> _Space | None:
        return self._spaces.get(Namespace(tenant, principal, scope_id).key())

    def active_memories(
        self, tenant: str, principal: str, scope_id: str, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Retrievable rows of one namespace ordered by ``created_position`` and id (with at
        least ``columns`` when given: then the state's own rows, not to be modified)."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None:
            return []
        rows = sorted(self._rows_of(space.retrievable), key=_created_order)
        return [_columns(row, columns) for row in rows]

    def changed_since(
        self, tenant: str, principal: str, scope_id: str, position: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Rows of one namespace (any status) whose ``updated_position`` is after
        ``position``, ordered by it and id (with at least ``columns`` when given: then the
        state's own rows, not to be modified)."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None:
            return []
        start = bisect.bisect_right(space.log_positions, position)
        found = dict.fromkeys(space.log[start:])
        rows = sorted(
            (row for row in self._rows_of(found) if row["updated_position"] > position),
            key=lambda r: (r["updated_position"], r["memory_id"]),
        )
        return [_columns(row, columns) for row in rows]

    def retrievable_ids(self, tenant: str, principal: str, scope_id: str) -> frozenset[str]:
        """Memory ids of one namespace's retrievable rows (unordered)."""
        space = self._lookup(tenant, principal, scope_id)
        return frozenset(space.retrievable) if space is not None else frozenset()

    def count_namespace(self, tenant: str, principal: str, scope_id: str) -> int:
        """Retrievable rows of one namespace."""
        space = self._lookup(tenant, principal, scope_id)
        return len(space.retrievable) if space is not None else 0

    def count_active(self) -> int:
        """Retrievable rows over every namespace."""
        return sum(len(space.retrievable) for space in self._spaces.values())

    def vocabulary(
        self, tenant: str, principal: str, scope_id: str, field: str
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field (``subject``/``predicate``) of the namespace's
        retrievable rows, most frequent first, then by term (the ``vocabulary`` view's
        order)."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None or field not in ("subject", "predicate"):
            return []
        counts: dict[str, int] = {}
        for row in self._rows_of(space.retrievable):
            term = row[field]
            if term is not None:
                counts[term] = counts.get(term, 0) + 1
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    def same_key(
        self, tenant: str, principal: str, scope_id: str, subject: str, predicate: str
    ) -> list[str]:
        """Ids of retrievable memories whose lowercased, trimmed subject and predicate
        match (sorted)."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None:
            return []
        return sorted(space.by_key.get(_key_of(subject, predicate), ()))

    def forgotten_turns(self, tenant: str, principal: str, scope_id: str) -> frozenset[int]:
        """The transcript positions forgotten memories of one namespace were drawn from."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None:
            return frozenset()
        return frozenset(p for positions in space.forgotten.values() for p in positions)

    def session_turns(
        self, tenant: str, principal: str, scope_id: str
    ) -> list[tuple[str, int, int]]:
        """Every observed turn of one namespace as ``(session_id, turn_id, position)``,
        ordered by position."""
        space = self._lookup(tenant, principal, scope_id)
        if space is None:
            return []
        if space.turn_list is None:
            space.turn_list = sorted(space.turns.values(), key=lambda t: t[2])
        return list(space.turn_list)

    def retrievable_rows(self) -> list[dict[str, Any]]:
        """Every retrievable row of every namespace (for digests and audits)."""
        return [row for space in self._spaces.values() for row in self._rows_of(space.retrievable)]

    def _rows_of(self, memory_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The rows of ``memory_ids`` (all held), decoding those a restore left raw."""
        rows = self._rows
        found = []
        for memory_id in memory_ids:
            row = rows.get(memory_id)
            if row is None:
                row = self._row(memory_id)
                assert row is not None
            found.append(row)
        return found

    def digest(self, columns: Sequence[str]) -> str:
        """:func:`rows_digest` of every retrievable row, ``columns`` and the namespace."""
        return rows_digest(self.retrievable_rows(), columns)


def _created_order(row: Mapping[str, Any]) -> tuple[int, str]:
    return (row["created_position"], row["memory_id"])


def _freeze_lists(row: dict[str, Any]) -> None:
    """Hold ``row``'s list columns (tags, evidence, candidate ids, transcript positions,
    supersedes, conflicts) as tuples. The fold functions never change a list in place (they
    set a new one), so the values read the same; but a tuple of strings and numbers, and
    then the row dict holding only such values, leaves the garbage collector's tracking,
    which otherwise walks six lists and a dict per memory in every full collection (tens of
    milliseconds per 1,000 memories written once the state holds tens of thousands)."""
    for column in _LIST_COLUMNS:  # the schema's list columns, not all 36 of the row
        value = row.get(column)
        if type(value) is list:
            row[column] = tuple(value)


_LIST_COLUMNS = tuple(
    column for column, kind in CANONICAL_MEMORY.column_types if kind.endswith("[]")
)
"""The canonical memory columns of a list type (``VARCHAR[]``, ``BIGINT[]``): the only
columns whose values the fold functions give as lists."""


def _columns(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """The row as a reader gets it: the state's own dict when ``columns`` are named (they
    are all in it; readers never modify a row: the recall index only reads), a copy of
    every column otherwise, its list columns as lists (as the DuckDB read model gives
    them)."""
    if not columns:
        return {k: list(v) if type(v) is tuple else v for k, v in row.items()}
    return row


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, UUID):
        return str(value)
    return value


_NAMESPACE = ("tenant", "principal", "scope_id")
_encoder = msgspec.msgpack.Encoder()


def rows_digest(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """sha256 (hex) over the sorted msgpack encodings of ``rows`` restricted to the namespace
    and ``columns`` (times in UTC, ids as text): the serving state's rows and the
    ``canonical_memory`` rows DuckDB returns digest equal when they hold the same values."""
    wanted = (*_NAMESPACE, *columns)
    encoded = sorted(_encoder.encode([_plain(row[c]) for c in wanted]) for row in rows)
    digest = hashlib.sha256(f"serving:{len(encoded)}".encode())
    for item in encoded:
        digest.update(len(item).to_bytes(4, "big"))
        digest.update(item)
    return digest.hexdigest()
