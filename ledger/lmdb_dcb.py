"""The ``eventsourcing`` library's DCB recorder interface over the LMDB ledger.

:class:`LMDBDCBRecorder` implements ``eventsourcing.dcb.api.DCBRecorder`` (read, conditional
append, subscribe) on the SAME log, positions and tag index as
:class:`~memory_ledger.ledger.lmdb.LMDBApplicationRecorder`: a DCB position is a notification
id, a DCB event's ``type`` is the record's topic, its ``data`` the record's stored state and
its ``tags`` the record's indexed tags. So a condition written through either interface sees
the records written through the other, and every record stays in the hash chain.

A DCB event has no stream of its own; appended through this interface it is stored in the
stream :data:`DCB_STREAM_ID` (``"memory-ledger:dcb"`` for text originator ids) with its
position as its version, so the stream index stays unique without another counter.

It passes the library's own DCB recorder test cases (``eventsourcing/dcb/tests.py``,
``tests/ledger/test_lmdb_dcb.py``). Conditions are checked inside the LMDB write transaction (one
writer at a time across processes), so a check and the append it guards are atomic.

Only the LMDB parts are here (selecting in one read snapshot, inserting in one write
transaction, waking on commits or polls); reading, appending and the subscription loop are
:mod:`memory_ledger.ledger.dcb_recorder`'s, shared with ``ledger.postgres_dcb``
(``LMDBDCBReadResponse`` is its ``LedgerDCBReadResponse``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBRecorder,
    DCBSequencedEvent,
)
from eventsourcing.dcb.persistence import DCBInfrastructureFactory

from memory_ledger.ledger.dcb_recorder import (
    EventTags,
    LedgerDCBRecorder,
    LedgerDCBSubscription,
    sequenced,
)
from memory_ledger.ledger.dcb_recorder import LedgerDCBReadResponse as LMDBDCBReadResponse
from memory_ledger.ledger.lmdb import (
    HASH_SIZE,
    LMDBApplicationRecorder,
    LMDBDatastore,
    LMDBFactory,
    LMDBRecorder,
    LMDBTrackingRecorder,
    decode_record,
    encode_body,
    pack_position,
    pack_version,
)

__all__ = ["DCB_STREAM_ID", "LMDBDCBReadResponse", "LMDBDCBRecorder", "LMDBDCBSubscription"]

DCB_STREAM_ID = uuid5(UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8"), "memory-ledger:dcb")
"""Stream of the events appended through the DCB interface (uuid originator ids)."""

DCB_TEXT_STREAM_ID = "memory-ledger:dcb"
"""The same stream for stores with text originator ids."""


class LMDBDCBRecorder(LMDBRecorder, LedgerDCBRecorder):
    """``DCBRecorder`` over the LMDB ledger (see the module doc; ``read`` and ``append`` are
    :class:`~memory_ledger.ledger.dcb_recorder.LedgerDCBRecorder`'s)."""

    def __init__(self, datastore: LMDBDatastore) -> None:
        super().__init__(datastore)
        self.application_recorder = LMDBApplicationRecorder(datastore)
        self._stream = (
            DCB_STREAM_ID if datastore.originator_id_type == "uuid" else DCB_TEXT_STREAM_ID
        )

    def _select(
        self, query: DCBQuery | None, after: int | None, limit: int | None
    ) -> tuple[list[DCBSequencedEvent], int | None]:
        """Matching events read in one snapshot (the tag index's matches, ascending).

        :raises OperationalError: the store's tag index is not built (format 1).
        """
        recorder = self.application_recorder
        index = recorder.tag_index
        events: list[DCBSequencedEvent] = []
        with self.datastore.read() as txn:
            recorder.require_tag_index(txn)
            head = recorder.last_position(txn) or None
            if limit is not None and limit <= 0:
                return events, head
            for position in index.matches(txn, query, after or 0):
                packed = pack_position(position)
                record = decode_record(packed, txn.get(packed, db=index.log_db))
                tags = index.tags_of(txn, packed)
                events.append(sequenced(record.topic, record.state, tags, position))
                if limit is not None and len(events) >= limit:
                    break
        return events, head

    def _insert(
        self, events: Sequence[DCBEvent], tags: EventTags, condition: DCBAppendCondition | None
    ) -> int:
        """Append in ONE LMDB write transaction, the condition checked inside it; the events
        take the next versions of the DCB stream (their positions)."""
        recorder = self.application_recorder
        prefix = self.datastore.stream_prefix(self._stream)
        for event_tags in tags:
            recorder.tag_index.check(event_tags)

        def insert(txn: Any) -> list[int]:
            last = recorder.last_position(txn)
            prepared = [
                (
                    prefix + pack_version(last + n),
                    encode_body(self._stream, last + n, e.type, bytes(e.data)),
                )
                for n, e in enumerate(events, start=1)
            ]
            return recorder.insert_in_transaction(txn, prepared, None, tags, condition)

        size = sum(len(e.data) + len(e.type) + HASH_SIZE + 64 for e in events)
        return self.datastore.write(insert, size)[-1]

    def _subscribe(self, query: DCBQuery | None, after: int | None) -> LMDBDCBSubscription:
        """Woken at once by commits of this process, by polling for other processes'."""
        return LMDBDCBSubscription(self, query=query, after=after)


class LMDBDCBSubscription(LedgerDCBSubscription[LMDBDCBRecorder]):
    """DCB subscription woken by in-process commits and by polling every
    ``poll_interval`` seconds (``LMDB_POLL_INTERVAL``) for other processes."""

    def _open(self) -> None:
        self._poll_interval = self._recorder.datastore.poll_interval

    def _opened(self) -> None:
        self._recorder.datastore.listen(self._has_been_notified)

    def _wait(self) -> None:
        self._has_been_notified.wait(timeout=self._poll_interval)

    def stop(self) -> None:
        super().stop()
        self._recorder.datastore.unlisten(self._has_been_notified)


class LMDBDCBFactory(LMDBFactory, DCBInfrastructureFactory[LMDBTrackingRecorder]):
    """The LMDB persistence module's factory with the library's DCB interface: its
    :meth:`dcb_recorder` reads and appends the same ledger (same log and positions) as the
    application recorder of :class:`~memory_ledger.ledger.lmdb.LMDBFactory`. Selected with
    ``PERSISTENCE_MODULE=memory_ledger.ledger.lmdb_dcb`` (the shape of the library's own
    backends: the DCB factory subclasses the base, so ``lmdb`` never imports ``lmdb_dcb``).
    """

    def dcb_recorder(self) -> DCBRecorder:
        """The library's DCB recorder interface over this ledger."""
        return LMDBDCBRecorder(self.datastore)


Factory = LMDBDCBFactory
