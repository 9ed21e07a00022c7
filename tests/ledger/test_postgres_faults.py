"""PostgreSQL restarted or unreachable in the middle of work, through a TCP proxy the test
controls (the shared server itself is never restarted).

Checked: an acknowledged command is never lost; a command in flight is entirely present or
entirely absent, never twice; the caller gets ``LedgerUnavailableError`` (typed, no psycopg
traceback) when the server stays away; the engine reconnects by itself when it is back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, OperationalError, StoredEvent

from memory_ledger.commands import (
    LedgerUnavailableError,
    MemoryEngine,
    MemoryLedgerError,
    Namespace,
    RecordedExtractor,
)
from memory_ledger.ledger.errors import LedgerConnectionError, LedgerIntegrityError
from memory_ledger.ledger.events import SessionOpened, SessionReconciled
from memory_ledger.ledger.faults import FAULTS
from memory_ledger.ledger.postgres import parse_ledger_url
from memory_ledger.replay import check_projections, verify_store
from tests.conftest import make_item
from tests.pg import BASE_URL
from tests.tcp_proxy import ProxyServer

NS = Namespace("acme", "alice", "assistant")


@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    server = parse_ledger_url(BASE_URL)
    srv = ProxyServer((server.host, server.port))
    try:
        yield srv
    finally:
        srv.close()


def through(proxy: ProxyServer, pg_url: str, **params: str) -> str:
    server = parse_ledger_url(BASE_URL)
    url = pg_url.replace(f"{server.host}:{server.port}", f"127.0.0.1:{proxy.port}", 1)
    return url + "".join(f"&{k}={v}" for k, v in params.items())


def remember(engine: MemoryEngine, session: str, statement: str) -> None:
    extractor = RecordedExtractor()
    chat = engine.session(NS, session, extractor=extractor)
    extractor.provide(1, [make_item(statement)])
    chat.observe_final_transcript(1, f"user: {statement}")
    chat.finish()


def events_of(engine: MemoryEngine, cls: type) -> list[object]:
    return [
        n
        for n in engine.recorder.select_notifications(start=1, limit=10_000)
        if n.topic.endswith(cls.__qualname__)
    ]


def check_store(engine: MemoryEngine, sessions: list[str]) -> None:
    """Chain intact, each session opened and reconciled once, projections = a rebuild."""
    assert verify_store(engine).ok
    assert len(events_of(engine, SessionOpened)) == len(sessions)
    assert len(events_of(engine, SessionReconciled)) == len(sessions)
    recalled = {h.statement for h in engine.recall(NS, "Alice", k=50).results}
    assert recalled == {f"Alice fact {s}" for s in sessions}
    assert check_projections(engine).ok


def test_connections_cut_between_commands(proxy: ProxyServer, pg_url: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=through(proxy, pg_url)) as engine:
        remember(engine, "s1", "Alice fact s1")
        proxy.cut()  # as a server restart does
        remember(engine, "s2", "Alice fact s2")
        proxy.cut()
        check_store(engine, ["s1", "s2"])


def test_connection_lost_before_commit_writes_the_batch_once(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=through(proxy, pg_url)) as engine:
        remember(engine, "s1", "Alice fact s1")
        cuts: list[int] = []

        def cut_once() -> None:
            if not cuts:
                cuts.append(1)
                proxy.cut()

        FAULTS["ledger.commit"] = cut_once
        try:
            remember(engine, "s2", "Alice fact s2")
        finally:
            FAULTS.clear()
        assert cuts == [1]
        check_store(engine, ["s1", "s2"])


def test_commit_whose_reply_is_lost_is_recognised_not_repeated(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=through(proxy, pg_url)) as engine:
        remember(engine, "s1", "Alice fact s1")
        head = engine.head
        proxy.cut_after_commit()
        chat = engine.session(NS, "s2", extractor=RecordedExtractor())
        # The SessionOpened batch committed, its reply was lost: the retry finds it.
        assert proxy.trapped_commits == 1
        assert engine.head == head + 1 == chat.last_position
        extractor = RecordedExtractor()
        chat = engine.session(NS, "s2", extractor=extractor)
        extractor.provide(1, [make_item("Alice fact s2")])
        chat.observe_final_transcript(1, "user: Alice fact s2")
        chat.finish()
        check_store(engine, ["s1", "s2"])


def test_server_away_gives_a_typed_error_then_reconnects(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    url = through(proxy, pg_url, connect_timeout="1", append_attempts="2")
    with MemoryEngine.open(tmp_path / "a", ledger=url) as engine:
        remember(engine, "s1", "Alice fact s1")
        head = engine.head
        extractor = RecordedExtractor()
        chat = engine.session(NS, "s2", extractor=extractor)
        extractor.provide(1, [make_item("Alice fact s2")])
        proxy.down()
        with pytest.raises(LedgerUnavailableError) as info:
            chat.observe_final_transcript(1, "user: Alice fact s2")
        assert info.value.__cause__ is None and info.value.__suppress_context__
        assert "psycopg" not in type(info.value).__module__
        proxy.up()
        started = time.monotonic()
        extractor.provide(1, [make_item("Alice fact s2")])
        chat.observe_final_transcript(1, "user: Alice fact s2")  # the retry of the command
        chat.finish()
        assert time.monotonic() - started < 15
        assert engine.head > head + 1
        check_store(engine, ["s1", "s2"])


def test_recorder_errors_are_typed_and_never_show_the_password(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    secret = "s3cret-Pa55word"
    url = through(proxy, pg_url, connect_timeout="1", append_attempts="1")
    user = parse_ledger_url(url).user
    url = url.replace(f"://{user}@", f"://{user}:{secret}@", 1)
    assert secret in url
    with MemoryEngine.open(tmp_path / "a", ledger=url, follow=False) as engine:
        remember(engine, "s1", "Alice fact s1")
        recorder = engine.recorder
        first = recorder.select_notifications(start=1, limit=1)[0]
        again = StoredEvent(first.originator_id, first.originator_version, first.topic, b"x")
        with pytest.raises(LedgerIntegrityError) as conflict:
            recorder.insert_events([again])
        assert isinstance(conflict.value, IntegrityError | MemoryLedgerError)
        proxy.down()
        try:
            with pytest.raises(LedgerConnectionError) as away:
                recorder.max_notification_id()
            error = away.value
            assert isinstance(error, OperationalError) and isinstance(error, MemoryLedgerError)
            assert error.reason_code == "ledger_connection"
            assert secret not in str(error) and secret not in error.path
            assert error.__cause__ is None and error.__suppress_context__
            with pytest.raises(LedgerUnavailableError) as unavailable:
                _ = engine.head
            assert secret not in str(unavailable.value)
        finally:
            proxy.up()
        # The pool reconnects in the background (its first attempts may still time out on a
        # busy machine): the engine recovers within seconds, with typed errors until then.
        deadline = time.monotonic() + 15
        while True:
            try:
                head = engine.head
                break
            except LedgerUnavailableError as still_away:
                assert secret not in str(still_away)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert head == recorder.max_notification_id()


def _terminate_backends(proxy: ProxyServer) -> int:
    """``pg_terminate_backend`` of every server process serving a connection of this test
    (through ``proxy``), as a server restart or an idle-connection cut does; returns how
    many, once the server has ended them all."""
    ports = proxy.upstream_ports()
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE client_port = ANY(%s) AND pid <> pg_backend_pid()",
            (ports,),
        ).fetchall()
        pids = [row[0] for row in rows]
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone() != (0,):
            time.sleep(0.01)  # waits for the server, asserts nothing
    return len(pids)


def test_key_store_writes_retry_on_connections_the_server_dropped(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    """F2: after the server ended the pool's connections, an encrypted store's next new
    namespaces (each a key store write) and a fresh store's first write (it creates the key
    table) go through on new connections, as appends do, instead of failing."""
    url = through(proxy, pg_url)
    with MemoryEngine.open(tmp_path / "a", ledger=url, master_key=os.urandom(32)) as engine:
        engine.remember(NS, "Alice likes tea.")
        for n in range(3):
            assert _terminate_backends(proxy)
            user = Namespace("acme", f"user{n}", "chat")
            engine.remember(user, f"User {n} likes coffee.")
            assert [d.statement for d in engine.retrievable_memories(user)] == [
                f"User {n} likes coffee."
            ]


def test_a_fresh_store_s_first_write_survives_dropped_connections(
    proxy: ProxyServer, pg_url: str, tmp_path: Path
) -> None:
    """F2: a store opened on a new ledger whose connections the server ended before its
    first write (which creates the key table) writes on new connections."""
    url = through(proxy, pg_url)
    with MemoryEngine.open(tmp_path / "b", ledger=url) as engine:
        assert _terminate_backends(proxy)
        engine.remember(NS, "Alice likes tea.")
        assert [d.statement for d in engine.retrievable_memories(NS)] == ["Alice likes tea."]
