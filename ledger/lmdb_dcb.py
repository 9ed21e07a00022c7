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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBReadResponse,
    DCBRecorder,
    DCBSequencedEvent,
)
from eventsourcing.dcb.persistence import DCBInfrastructureFactory, DCBListenNotifySubscription
from eventsourcing.persistence import ProgrammingError

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


class LMDBDCBReadResponse(DCBReadResponse):
    """The events one :meth:`LMDBDCBRecorder.read` selected, and the head it reports.

    ``head`` follows the library's reference recorders: without a limit, the store's last
    position (None when empty); with a limit, the last event returned (None when none).
    """

    def __init__(self, events: list[DCBSequencedEvent], head: int | None) -> None:
        self._events: Iterator[DCBSequencedEvent] = iter(events)
        self._head = head

    @property
    def head(self) -> int | None:
        return self._head

    def __next__(self) -> DCBSequencedEvent:
        return next(self._events)


class LMDBDCBRecorder(LMDBRecorder, DCBRecorder):
    """``DCBRecorder`` over the LMDB ledger (see the module doc)."""

    def __init__(self, datastore: LMDBDatastore) -> None:
        super().__init__(datastore)
        self.application_recorder = LMDBApplicationRecorder(datastore)
        self._stream = (
            DCB_STREAM_ID if datastore.originator_id_type == "uuid" else DCB_TEXT_STREAM_ID
        )

    def read(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
        limit: int | None = None,
    ) -> DCBReadResponse:
        """Events after ``after`` matching ``query`` (all when it has no items), ascending,
        at most ``limit``, read in one snapshot.

        :raises OperationalError: the store's tag index is not built (format 1).
        """
        recorder = self.application_recorder
        index = recorder.tag_index
        events: list[DCBSequencedEvent] = []
        with self.datastore.read() as txn:
            recorder.require_tag_index(txn)
            head = recorder.last_position(txn) or None
            if limit is not None and limit <= 0:
                return LMDBDCBReadResponse(events, None)
            for position in index.matches(txn, query, after or 0):
                packed = pack_position(position)
                record = decode_record(packed, txn.get(packed, db=index.log_db))
                events.append(
                    DCBSequencedEvent(
                        event=DCBEvent(
                            type=record.topic, data=record.state, tags=index.tags_of(txn, packed)
                        ),
                        position=position,
                    )
                )
                if limit is not None and len(events) >= limit:
                    break
        if limit is not None:
            head = events[-1].position if events else None
        return LMDBDCBReadResponse(events, head)

    def append(
        self, events: Sequence[DCBEvent], condition: DCBAppendCondition | None = None
    ) -> int:
        """Append ``events`` in ONE write transaction unless ``condition`` fails; return the
        position of the last one.

        :raises ProgrammingError: ``events`` is empty (as the library's recorders do).
        :raises AppendConditionFailedError: a record matching the condition's query was
            appended after ``condition.after`` (an ``IntegrityError``); nothing is written.
        """
        if len(events) == 0:
            msg = "Should be at least one event. Avoid this elsewhere"
            raise ProgrammingError(msg)
        recorder = self.application_recorder
        prefix = self.datastore.stream_prefix(self._stream)
        tags = [list(e.tags) for e in events]
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

    def subscribe(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
    ) -> LMDBDCBSubscription:
        """Events after ``after`` matching ``query``, blocking for new ones (woken at once by
        commits of this process, by polling for other processes' commits)."""
        return LMDBDCBSubscription(self, query=query, after=after)


class LMDBDCBSubscription(DCBListenNotifySubscription[LMDBDCBRecorder]):
    """DCB subscription woken by in-process commits and by polling every
    ``poll_interval`` seconds (``LMDB_POLL_INTERVAL``) for other processes."""

    def __init__(
        self,
        recorder: LMDBDCBRecorder,
        query: DCBQuery | None = None,
        after: int | None = None,
    ) -> None:
        self._poll_interval = recorder.datastore.poll_interval
        super().__init__(recorder=recorder, query=query, after=after)
        recorder.datastore.listen(self._has_been_notified)

    def _loop_on_pull(self) -> None:
        try:
            self._pull()
            while not self._has_been_stopped:
                self._has_been_notified.wait(timeout=self._poll_interval)
                self._pull()
        except BaseException as e:  # noqa: BLE001 - re-raised by __next__
            if self._thread_error is None:
                self._thread_error = e
            self.stop()

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
