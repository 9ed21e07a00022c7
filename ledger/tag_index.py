"""The tag index of an LMDB ledger: which records carry which tags, and DCB query matching.

A record of the log may carry tags (short strings such as ``memory:<id>``). The index lives
in two named databases of the same LMDB environment as the log, and is written in the same
write transaction as the records it indexes (so a tag is never visible without its record
and a record never without its tags):

- ``tags``: ``len(tag) (2 bytes, big-endian) || tag (UTF-8) || position (8 bytes)`` -> empty.
  One entry per (tag, record); a cursor seek to ``tag || position + 1`` finds the first record
  carrying ``tag`` after a position in O(log n).
- ``event_tags``: position (8 bytes) -> msgpack array of the record's tags (only for records
  that carry tags), so a read can return an event's tags.

Queries and append conditions are the ``eventsourcing`` library's dynamic consistency
boundary types (``eventsourcing/dcb/api.py``): a :class:`~eventsourcing.dcb.api.DCBQuery`
is a list of items; a record matches an item when its type (the record's topic) is one of the
item's types (or the item names none) and it carries every tag of the item; it matches the
query when it matches any item (a query without items matches every record). An append
condition fails when a record after ``condition.after`` matches its query. This module gives
the matching for one read or write transaction; :mod:`memory_ledger.ledger.lmdb` calls it.

Tags are an index, not part of the hash-chained record: ``verify`` proves the records, and
an engine that derives its tags from event content can re-derive and compare them.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec
from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery, DCBQueryItem
from eventsourcing.persistence import DataError

from memory_ledger.ledger.errors import LedgerIntegrityError

__all__ = [
    "MAX_TAG_BYTES",
    "AppendConditionFailedError",
    "TagIndex",
]

MAX_TAG_BYTES = 400
"""Longest tag in UTF-8 bytes (an LMDB key holds at most 511 bytes)."""

_ID = struct.Struct(">Q")
_LEN = struct.Struct(">H")
_tags_encoder = msgspec.msgpack.Encoder()
_tags_decoder = msgspec.msgpack.Decoder(list[str])


class AppendConditionFailedError(LedgerIntegrityError):
    """An append condition failed: a record matching its query was appended after the
    condition's position (``position`` is the first such record). Nothing was written.

    A subclass of the library's ``IntegrityError``, which its DCB recorders raise here
    (through :class:`~memory_ledger.ledger.errors.LedgerIntegrityError`).
    """

    reason_code = "append_condition_failed"

    def __init__(self, condition: DCBAppendCondition, position: int) -> None:
        super().__init__(
            f"append condition failed: record {position} matches the condition's query "
            f"and is after position {condition.after or 0}"
        )
        self.condition = condition
        self.position = position


def _tag_prefix(tag: str) -> bytes:
    if not isinstance(tag, str):
        msg = f"a tag must be a string, got {type(tag).__name__}"
        raise DataError(msg)
    raw = tag.encode("utf-8")
    if len(raw) > MAX_TAG_BYTES:
        msg = f"tag is {len(raw)} bytes long, at most {MAX_TAG_BYTES} allowed"
        raise DataError(msg)
    return _LEN.pack(len(raw)) + raw


class TagIndex:
    """Reads and writes the tag index inside a caller's LMDB transaction.

    :param tags_db: handle of the ``tags`` database.
    :param event_tags_db: handle of the ``event_tags`` database.
    :param log_db: handle of the ``log`` database (scanned for items that name no tag).
    :param topic_of: the topic (DCB type) of a stored log value.
    """

    def __init__(
        self, tags_db: Any, event_tags_db: Any, log_db: Any, topic_of: Callable[[bytes], str]
    ) -> None:
        self.tags_db = tags_db
        self.event_tags_db = event_tags_db
        self.log_db = log_db
        self.topic_of = topic_of

    # Writing -------------------------------------------------------------------------------

    @staticmethod
    def check(tags: Sequence[str]) -> list[bytes]:
        """The key prefixes of ``tags``; :class:`DataError` for a non-string or too long tag."""
        return [_tag_prefix(tag) for tag in tags]

    def put(self, txn: Any, packed_position: bytes, tags: Sequence[str]) -> None:
        """Index ``tags`` (already checked) of the record at ``packed_position``."""
        if not tags:
            return
        unique = list(dict.fromkeys(tags))
        for tag in unique:
            txn.put(_tag_prefix(tag) + packed_position, b"", db=self.tags_db)
        txn.put(packed_position, _tags_encoder.encode(unique), db=self.event_tags_db)

    # Reading -------------------------------------------------------------------------------

    def tags_of(self, txn: Any, packed_position: bytes) -> list[str]:
        """The tags of the record at ``packed_position`` (empty when it carries none)."""
        value = txn.get(packed_position, db=self.event_tags_db)
        return [] if value is None else _tags_decoder.decode(value)

    def positions(self, txn: Any, tag: str, after: int) -> Iterator[int]:
        """Positions of the records carrying ``tag`` after ``after``, ascending."""
        prefix = _tag_prefix(tag)
        cursor = txn.cursor(db=self.tags_db)
        found = cursor.set_range(prefix + _ID.pack(after + 1))
        while found:
            key = cursor.key()
            if len(key) != len(prefix) + 8 or not key.startswith(prefix):
                return
            yield _ID.unpack(key[len(prefix) :])[0]
            found = cursor.next()

    def _any_tag(self, txn: Any, tags: list[str], after: int) -> set[int]:
        """Positions after ``after`` of the records carrying any of ``tags`` (one cursor for
        all: a batch's decision reads hundreds of memory tags, most of them absent)."""
        found: set[int] = set()
        cursor = txn.cursor(db=self.tags_db)
        start = _ID.pack(after + 1)
        unpack = _ID.unpack
        for tag in tags:
            prefix = _tag_prefix(tag)
            width = len(prefix) + 8
            more = cursor.set_range(prefix + start)
            while more:
                key = cursor.key()
                if len(key) != width or not key.startswith(prefix):
                    break
                found.add(unpack(key[-8:])[0])
                more = cursor.next()
        return found

    def _has_tag(self, txn: Any, tag: str, packed_position: bytes) -> bool:
        return txn.get(_tag_prefix(tag) + packed_position, db=self.tags_db) is not None

    def _item_matches(self, txn: Any, item: DCBQueryItem, after: int) -> Iterator[int]:
        types = frozenset(item.types)
        if item.tags:
            first, *others = list(dict.fromkeys(item.tags))
            for position in self.positions(txn, first, after):
                packed = _ID.pack(position)
                if others and not all(self._has_tag(txn, t, packed) for t in others):
                    continue
                if types and self.topic_of(txn.get(packed, db=self.log_db)) not in types:
                    continue
                yield position
            return
        cursor = txn.cursor(db=self.log_db)
        found = cursor.set_range(_ID.pack(after + 1))
        while found:
            if not types or self.topic_of(cursor.value()) in types:
                yield _ID.unpack(cursor.key())[0]
            found = cursor.next()

    def matches(self, txn: Any, query: DCBQuery | None, after: int) -> Iterator[int]:
        """Positions after ``after`` of the records matching ``query``, ascending, each once.

        A query without items (or None) matches every record. An item without tags scans
        the log from ``after``; an item with tags seeks its first tag in the index.
        """
        items = query.items if query is not None and query.items else [DCBQueryItem()]
        if len(items) == 1:
            yield from self._item_matches(txn, items[0], after)
            return
        if all(len(item.tags) == 1 and not item.types for item in items):
            yield from sorted(self._any_tag(txn, [item.tags[0] for item in items], after))
            return
        last = None
        for position in heapq.merge(*(self._item_matches(txn, i, after) for i in items)):
            if position != last:
                yield position
                last = position

    def first_match(self, txn: Any, query: DCBQuery | None, after: int) -> int | None:
        """The first position after ``after`` matching ``query``, or None.

        Each item stops at its own first match (no merge, no scan of the others); an item of
        one tag and no types, the shape of every engine condition, is one cursor seek.
        """
        items = query.items if query is not None and query.items else [DCBQueryItem()]
        first: int | None = None
        start = _ID.pack(after + 1)
        cursor = None
        for item in items:
            if len(item.tags) == 1 and not item.types:
                if cursor is None:
                    cursor = txn.cursor(db=self.tags_db)
                prefix = _tag_prefix(item.tags[0])
                if cursor.set_range(prefix + start):
                    key = cursor.key()
                    if len(key) == len(prefix) + 8 and key.startswith(prefix):
                        position = _ID.unpack(key[-8:])[0]
                        if first is None or position < first:
                            first = position
                continue
            for position in self._item_matches(txn, item, after):
                if first is None or position < first:
                    first = position
                break
        return first

    def refuse(self, txn: Any, condition: DCBAppendCondition) -> AppendConditionFailedError | None:
        """The error to raise when ``condition`` fails at this transaction's state, else None."""
        position = self.first_match(txn, condition.fail_if_events_match, condition.after or 0)
        return None if position is None else AppendConditionFailedError(condition, position)
