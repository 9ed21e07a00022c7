"""The ``eventsourcing`` library's DCB recorder interface over the PostgreSQL ledger.

:class:`PostgresLedgerDCBRecorder` implements ``eventsourcing.dcb.api.DCBRecorder`` (read,
conditional append, subscribe) on the SAME log, positions and tags table as
:class:`~memory_ledger.ledger.postgres.PostgresLedgerApplicationRecorder`: a DCB position is
a notification id, a DCB event's ``type`` is the record's topic, its ``data`` the record's
stored state and its ``tags`` the record's indexed tags. So a condition written through
either interface sees the records written through the other, and every record stays in the
hash chain. (The library's own ``PostgresDCBRecorderTT`` keeps DCB events in tables of their
own; this one is the ledger's log seen through the DCB interface, as ``ledger.lmdb_dcb`` is
for LMDB.)

A DCB event has no stream of its own; appended through this interface it is stored as
version 1 of a new stream (a random UUID, or its text for text originator ids). Conditions
are checked under the ledger's table lock, in the appending transaction.

It passes the library's own DCB recorder test cases (``eventsourcing/dcb/tests.py``,
``tests/ledger/test_postgres_dcb.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from uuid import uuid4

from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBReadResponse,
    DCBRecorder,
    DCBSequencedEvent,
)
from eventsourcing.dcb.persistence import DCBListenNotifySubscription
from eventsourcing.persistence import ProgrammingError, StoredEvent

from memory_ledger.ledger.postgres import PostgresLedgerApplicationRecorder

__all__ = [
    "PostgresLedgerDCBReadResponse",
    "PostgresLedgerDCBRecorder",
    "PostgresLedgerDCBSubscription",
]


class PostgresLedgerDCBReadResponse(DCBReadResponse):
    """The events one :meth:`PostgresLedgerDCBRecorder.read` selected, and its head: without
    a limit, the ledger's last position (None when empty); with a limit, the last event
    returned (None when none), as the library's reference recorders report it."""

    def __init__(self, events: list[DCBSequencedEvent], head: int | None) -> None:
        self._events: Iterator[DCBSequencedEvent] = iter(events)
        self._head = head

    @property
    def head(self) -> int | None:
        return self._head

    def __next__(self) -> DCBSequencedEvent:
        return next(self._events)


class PostgresLedgerDCBRecorder(DCBRecorder):
    """``DCBRecorder`` over the PostgreSQL ledger (see the module doc).

    :param application_recorder: the ledger's application recorder (its tables exist).
    """

    def __init__(self, application_recorder: PostgresLedgerApplicationRecorder) -> None:
        self.application_recorder = application_recorder
        self._text_ids = application_recorder.datastore.originator_id_type == "text"

    def read(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
        limit: int | None = None,
    ) -> DCBReadResponse:
        """Events after ``after`` matching ``query`` (all when it has no items), ascending,
        at most ``limit``, read at one head.

        :raises OperationalError: the ledger's tags are not indexed (format 1).
        """
        if limit is not None and limit <= 0:
            return PostgresLedgerDCBReadResponse([], None)
        recorder = self.application_recorder
        selection = recorder.select_tagged(query, after=after, limit=limit)
        tags = recorder.tags_at([e.position for e in selection.events])
        events = [
            DCBSequencedEvent(
                event=DCBEvent(
                    type=e.stored_event.topic,
                    data=e.stored_event.state,
                    tags=tags.get(e.position, []),
                ),
                position=e.position,
            )
            for e in selection.events
        ]
        if limit is not None:
            return PostgresLedgerDCBReadResponse(events, events[-1].position if events else None)
        return PostgresLedgerDCBReadResponse(events, selection.head or None)

    def append(
        self, events: Sequence[DCBEvent], condition: DCBAppendCondition | None = None
    ) -> int:
        """Append ``events`` in ONE transaction unless ``condition`` fails; return the
        position of the last one.

        :raises ProgrammingError: ``events`` is empty (as the library's recorders do).
        :raises AppendConditionFailedError: a record matching the condition's query was
            appended after ``condition.after`` (an ``IntegrityError``); nothing is written.
        """
        if len(events) == 0:
            msg = "Should be at least one event. Avoid this elsewhere"
            raise ProgrammingError(msg)
        stored = [
            StoredEvent(str(uuid4()) if self._text_ids else uuid4(), 1, e.type, bytes(e.data))
            for e in events
        ]
        ids = self.application_recorder.insert_events(
            stored, tags=[list(e.tags) for e in events], condition=condition
        )
        assert ids  # noqa: S101 (insert_events returns one id per event)
        return ids[-1]

    def subscribe(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
    ) -> PostgresLedgerDCBSubscription:
        """Events after ``after`` matching ``query``, blocking for new ones (woken by the
        ledger's NOTIFY on every append, from any host)."""
        return PostgresLedgerDCBSubscription(self, query=query, after=after)


class PostgresLedgerDCBSubscription(DCBListenNotifySubscription[PostgresLedgerDCBRecorder]):
    """DCB subscription woken by LISTEN/NOTIFY on the ledger's channel (and reading again
    every 0.1 s, which also bounds how long :meth:`stop` waits)."""

    def __init__(
        self,
        recorder: PostgresLedgerDCBRecorder,
        query: DCBQuery | None = None,
        after: int | None = None,
    ) -> None:
        self._listener = recorder.application_recorder.listen_for_appends()
        super().__init__(recorder=recorder, query=query, after=after)

    def _loop_on_pull(self) -> None:
        try:
            self._pull()
            while not self._has_been_stopped:
                self._listener.wait(0.1)
                self._pull()
        except BaseException as e:  # noqa: BLE001 - re-raised by __next__
            if self._thread_error is None:
                self._thread_error = e
            self.stop()
        finally:
            self._listener.close()
