"""What the ledger's two DCB recorders share: the read, append and subscription logic.

``ledger.lmdb_dcb`` and ``ledger.postgres_dcb`` both show the ledger's log through the
``eventsourcing`` library's ``DCBRecorder`` interface (a DCB position is a notification id, a
DCB event's ``type`` the record's topic, its ``data`` the stored state, its ``tags`` the
indexed tags). What differs is only how a backend selects tagged records, inserts records
under a condition, and waits for new ones; the rest is here, once, as the library shares
``DCBListenNotifySubscription`` between its own recorders:

- :class:`LedgerDCBRecorder` ``read`` reports the head as the library's reference recorders
  do (without a limit, the store's last position, None when empty; with a limit, the last
  event returned, None when none) and ``append`` refuses an empty batch
  (``ProgrammingError``, as the library's recorders do) before a backend inserts;
- :class:`LedgerDCBSubscription` pulls, waits, pulls again until stopped, and hands an error
  of its thread to ``__next__``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Self

from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBReadResponse,
    DCBRecorder,
    DCBSequencedEvent,
    DCBSubscription,
    TDCBRecorder_co,
)
from eventsourcing.dcb.persistence import DCBListenNotifySubscription
from eventsourcing.persistence import ProgrammingError

__all__ = [
    "EventTags",
    "LedgerDCBReadResponse",
    "LedgerDCBRecorder",
    "LedgerDCBSubscription",
    "sequenced",
]


EventTags = list[list[str]]
"""The tags of each event of a batch, in the batch's order."""


def sequenced(topic: str, state: bytes, tags: list[str], position: int) -> DCBSequencedEvent:
    """A ledger record (``topic``, stored ``state``, indexed ``tags``) at ``position``, as the
    library's DCB event."""
    return DCBSequencedEvent(event=DCBEvent(type=topic, data=state, tags=tags), position=position)


class LedgerDCBReadResponse(DCBReadResponse):
    """The events one :meth:`LedgerDCBRecorder.read` selected, and the head it reports
    (see :meth:`LedgerDCBRecorder.read`)."""

    def __init__(self, events: list[DCBSequencedEvent], head: int | None) -> None:
        self._events: Iterator[DCBSequencedEvent] = iter(events)
        self._head = head

    @property
    def head(self) -> int | None:
        return self._head

    def __next__(self) -> DCBSequencedEvent:
        return next(self._events)


class LedgerDCBRecorder(DCBRecorder):
    """``DCBRecorder`` over the ledger's log; a backend supplies :meth:`_select`,
    :meth:`_insert` and :meth:`_subscribe` (a :class:`LedgerDCBSubscription`)."""

    def read(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
        limit: int | None = None,
    ) -> DCBReadResponse:
        """Events after ``after`` matching ``query`` (all when it has no items), ascending,
        at most ``limit``, read at one head. ``head``: without a limit, the store's last
        position (None when empty); with a limit, the last event returned (None when none).

        :raises OperationalError: the store's tags are not indexed (format 1).
        """
        events, head = self._select(query, after, limit)
        if limit is not None:
            head = events[-1].position if events else None
        return LedgerDCBReadResponse(events, head)

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
        return self._insert(events, [list(e.tags) for e in events], condition)

    def subscribe(
        self,
        query: DCBQuery | None = None,
        *,
        after: int | None = None,
    ) -> DCBSubscription[Self]:
        """Events after ``after`` matching ``query``, blocking for new ones (woken as the
        backend's :meth:`_subscribe` says)."""
        return self._subscribe(query, after)

    @abstractmethod
    def _subscribe(self, query: DCBQuery | None, after: int | None) -> DCBSubscription[Self]:
        """The backend's subscription (a :class:`LedgerDCBSubscription`)."""

    @abstractmethod
    def _select(
        self, query: DCBQuery | None, after: int | None, limit: int | None
    ) -> tuple[list[DCBSequencedEvent], int | None]:
        """The events after ``after`` matching ``query``, ascending, at most ``limit`` (none
        when ``limit <= 0``), and the store's last position (None when empty), read at one
        head."""

    @abstractmethod
    def _insert(
        self, events: Sequence[DCBEvent], tags: EventTags, condition: DCBAppendCondition | None
    ) -> int:
        """Insert the non-empty ``events`` with their ``tags`` in one transaction unless
        ``condition`` fails; the position of the last one."""


class LedgerDCBSubscription(DCBListenNotifySubscription[TDCBRecorder_co]):
    """A DCB subscription that pulls, then waits (:meth:`_wait`) and pulls again until it is
    stopped; an error of its thread is re-raised by ``__next__``. A backend's hooks:
    :meth:`_open` runs before the thread starts, :meth:`_opened` after, :meth:`_finish` when
    the thread ends."""

    def __init__(
        self,
        recorder: TDCBRecorder_co,
        query: DCBQuery | None = None,
        after: int | None = None,
    ) -> None:
        self._recorder = recorder  # as the library's __init__ sets it, before the thread
        self._open()
        super().__init__(recorder=recorder, query=query, after=after)
        self._opened()

    def _open(self) -> None:
        """Prepare what :meth:`_wait` needs from ``self._recorder`` (nothing by default)."""

    def _opened(self) -> None:
        """Act once the thread runs (nothing by default)."""

    def _loop_on_pull(self) -> None:
        try:
            self._pull()
            while not self._has_been_stopped:
                self._wait()
                self._pull()
        except BaseException as e:  # noqa: BLE001 - re-raised by __next__
            if self._thread_error is None:
                self._thread_error = e
            self.stop()
        finally:
            self._finish()

    @abstractmethod
    def _wait(self) -> None:
        """Block until new records may have been appended (or a bounded time passed)."""

    def _finish(self) -> None:
        """Release what the subscription's thread held (nothing by default)."""
