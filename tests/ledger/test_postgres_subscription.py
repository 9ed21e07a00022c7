"""The PostgreSQL ledger's subscription (and its append listener) delivers every append,
whenever it commits relative to the ``LISTEN`` (issue 34, item 4).

The library's subscription runs ``LISTEN`` in a thread started beside the first pull: an
append committed after that pull and before ``LISTEN`` held was never delivered. These tests
hold ``LISTEN`` back at the driver (every connection the datastore hands out is wrapped; the
one statement held is ``LISTEN``), commit an append in that gap, then let ``LISTEN`` run.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.postgres import PostgresDatastore

from memory_ledger.ledger.postgres import PostgresLedgerApplicationRecorder, parse_ledger_url
from memory_ledger.ledger.postgres_subscription import PostgresLedgerSubscription
from tests.pg import BASE_URL, fresh_schema

NEVER = 30.0
"""Seconds after which a delivery that has not come is taken as never coming (a bound on a
hang, not a timing assertion: a delivery takes well under a second)."""


class _Gate:
    """Holds every ``LISTEN`` until :meth:`open` and can swallow every notification."""

    def __init__(self) -> None:
        self.at_listen = threading.Event()
        self.released = threading.Event()
        self.deaf = False

    def open(self) -> None:
        self.released.set()


class _Connection:
    """A psycopg connection whose ``LISTEN`` waits for the gate (everything else passes)."""

    def __init__(self, conn: Any, gate: _Gate) -> None:
        self._conn = conn
        self._gate = gate

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        if "LISTEN" in repr(query):
            self._gate.at_listen.set()
            assert self._gate.released.wait(NEVER)
        return self._conn.execute(query, *args, **kwargs)

    def notifies(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for notify in self._conn.notifies(*args, **kwargs):
            if not self._gate.deaf:
                yield notify

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.fixture
def recorder() -> Iterator[PostgresLedgerApplicationRecorder]:
    with fresh_schema() as schema:
        url = parse_ledger_url(BASE_URL)
        datastore = PostgresDatastore(
            dbname=url.dbname,
            host=url.host,
            port=url.port,
            user=url.user,
            password=url.password,
            schema=schema,
            pool_size=4,  # the subscription holds one connection for LISTEN
            max_overflow=4,
        )
        try:
            recorder = PostgresLedgerApplicationRecorder(datastore)
            recorder.create_table()
            yield recorder
        finally:
            datastore.close()


def _gated(recorder: PostgresLedgerApplicationRecorder, monkeypatch: pytest.MonkeyPatch) -> _Gate:
    gate = _Gate()
    original = recorder.datastore.get_connection

    @contextlib.contextmanager
    def get_connection() -> Iterator[Any]:
        with original() as conn:
            yield _Connection(conn, gate)

    monkeypatch.setattr(recorder.datastore, "get_connection", get_connection)
    return gate


def _first_pull_done(
    recorder: PostgresLedgerApplicationRecorder, monkeypatch: pytest.MonkeyPatch
) -> threading.Event:
    pulled = threading.Event()
    original = recorder.select_notifications

    def select_notifications(*args: Any, **kwargs: Any) -> list[Notification]:
        found: list[Notification] = original(*args, **kwargs)
        pulled.set()
        return found

    monkeypatch.setattr(recorder, "select_notifications", select_notifications)
    return pulled


def _append(recorder: PostgresLedgerApplicationRecorder) -> int:
    ids = recorder.insert_events([StoredEvent(uuid4(), 1, "topic", b"state")])
    assert ids
    return ids[-1]


def _next_of(subscription: PostgresLedgerSubscription) -> int | None:
    """The id of the subscription's next notification, or None when none comes."""
    found: queue.Queue[int] = queue.Queue()

    def read() -> None:
        with contextlib.suppress(StopIteration):  # stopped by the test, having found none
            found.put(next(subscription).id)

    threading.Thread(target=read, daemon=True).start()
    try:
        return found.get(timeout=NEVER)
    except queue.Empty:
        return None


def test_an_append_committed_before_listen_holds_is_delivered(
    recorder: PostgresLedgerApplicationRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _append(recorder)
    gate = _gated(recorder, monkeypatch)
    pulled = _first_pull_done(recorder, monkeypatch)
    with recorder.subscribe(gt=before) as subscription:
        try:
            assert pulled.wait(NEVER) and gate.at_listen.wait(NEVER)
            appended = _append(recorder)  # its NOTIFY reaches nobody: LISTEN is held
            gate.open()
            assert _next_of(subscription) == appended, "an append in the LISTEN gap was lost"
        finally:
            gate.open()
            subscription.stop()


def test_a_lost_notification_is_made_up_by_polling(
    recorder: PostgresLedgerApplicationRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PostgresLedgerSubscription, "poll_interval", 0.2)
    gate = _gated(recorder, monkeypatch)
    gate.open()
    with recorder.subscribe(gt=None) as subscription:
        try:
            first = _append(recorder)
            assert _next_of(subscription) == first
            gate.deaf = True  # every NOTIFY from here on is lost
            second = _append(recorder)
            assert _next_of(subscription) == second, "polling did not make up a lost NOTIFY"
        finally:
            subscription.stop()


def test_the_subscription_is_the_ledgers(recorder: PostgresLedgerApplicationRecorder) -> None:
    with recorder.subscribe(gt=None) as subscription:
        try:
            assert isinstance(subscription, PostgresLedgerSubscription)
            appended = [_append(recorder) for _ in range(3)]
            assert [_next_of(subscription) for _ in appended] == appended
        finally:
            subscription.stop()


def test_an_append_listener_hears_an_append_made_before_its_first_wait(
    recorder: PostgresLedgerApplicationRecorder,
) -> None:
    """The follower and the DCB subscription read, then wait: LISTEN must already hold when
    the listener is made, or an append between the read and the first wait wakes nobody
    (the follower's ``wakeups`` stayed 0 in ``test_a_host_follows_other_hosts_appends``)."""
    listener = recorder.listen_for_appends()
    try:
        _append(recorder)
        assert listener.wait(NEVER), "an append before the first wait was not notified"
    finally:
        listener.close()
