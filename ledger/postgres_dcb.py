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

This module adds to :mod:`memory_ledger.ledger.dcb_recorder` (read, append and the
subscription loop, shared with ``ledger.lmdb_dcb``) what PostgreSQL does its own way: the
tagged select, the conditional insert and LISTEN/NOTIFY (``PostgresLedgerDCBReadResponse`` is
the shared ``LedgerDCBReadResponse``).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import uuid4

from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBSequencedEvent,
)
from eventsourcing.persistence import StoredEvent

from memory_ledger.ledger.dcb_recorder import (
    EventTags,
    LedgerDCBRecorder,
    LedgerDCBSubscription,
    sequenced,
)
from memory_ledger.ledger.dcb_recorder import LedgerDCBReadResponse as PostgresLedgerDCBReadResponse
from memory_ledger.ledger.postgres import PostgresLedgerApplicationRecorder

__all__ = [
    "PostgresLedgerDCBReadResponse",
    "PostgresLedgerDCBRecorder",
    "PostgresLedgerDCBSubscription",
]


class PostgresLedgerDCBRecorder(LedgerDCBRecorder):
    """``DCBRecorder`` over the PostgreSQL ledger (see the module doc; ``read`` and
    ``append`` are :class:`~memory_ledger.ledger.dcb_recorder.LedgerDCBRecorder`'s).

    :param application_recorder: the ledger's application recorder (its tables exist).
    """

    def __init__(self, application_recorder: PostgresLedgerApplicationRecorder) -> None:
        self.application_recorder = application_recorder
        self._text_ids = application_recorder.datastore.originator_id_type == "text"

    def _select(
        self, query: DCBQuery | None, after: int | None, limit: int | None
    ) -> tuple[list[DCBSequencedEvent], int | None]:
        """Matching events and the head, read at one head (``select_tagged``).

        :raises OperationalError: the ledger's tags are not indexed (format 1).
        """
        if limit is not None and limit <= 0:
            return [], None
        recorder = self.application_recorder
        selection = recorder.select_tagged(query, after=after, limit=limit)
        tags = recorder.tags_at([e.position for e in selection.events])
        events = [
            sequenced(
                e.stored_event.topic, e.stored_event.state, tags.get(e.position, []), e.position
            )
            for e in selection.events
        ]
        return events, selection.head or None

    def _insert(
        self, events: Sequence[DCBEvent], tags: EventTags, condition: DCBAppendCondition | None
    ) -> int:
        """Insert through ``insert_events`` (the condition checked under the ledger's table
        lock); each event is version 1 of a new stream."""
        stored = [
            StoredEvent(str(uuid4()) if self._text_ids else uuid4(), 1, e.type, bytes(e.data))
            for e in events
        ]
        ids = self.application_recorder.insert_events(stored, tags=tags, condition=condition)
        assert ids  # noqa: S101 (insert_events returns one id per event)
        return ids[-1]

    def _subscribe(
        self, query: DCBQuery | None, after: int | None
    ) -> PostgresLedgerDCBSubscription:
        """Woken by the ledger's NOTIFY on every append, from any host."""
        return PostgresLedgerDCBSubscription(self, query=query, after=after)


class PostgresLedgerDCBSubscription(LedgerDCBSubscription[PostgresLedgerDCBRecorder]):
    """DCB subscription woken by LISTEN/NOTIFY on the ledger's channel (and reading again
    every 0.1 s, which also bounds how long :meth:`stop` waits)."""

    def _open(self) -> None:
        self._listener = self._recorder.application_recorder.listen_for_appends()

    def _wait(self) -> None:
        self._listener.wait(0.1)

    def _finish(self) -> None:
        self._listener.close()
