"""Encryption at rest on a PostgreSQL ledger: hosts share the data keys through the ledger's
``<events>_keys`` table (``ledger.postgres_keys``); an erasure on one host is seen by the
other, no plaintext reaches the server, and no row version keeps an erased key."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import MasterKeyError, NamespaceErasedError
from memory_ledger.ledger.key_store import KeyStoreState
from memory_ledger.replay import verify_store
from memory_ledger.replay.audit.migrate import migrate_store
from tests.pg import BASE_URL

ALICE = Namespace("acme", "alice", "chat")
BOB = Namespace("acme", "bob", "chat")


def _server() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(BASE_URL, autocommit=True)


def _table_bytes(schema: str, table: str) -> bytes:
    """Every row of ``schema.table`` as the server returns it (text form), joined."""
    with _server() as conn:
        rows = conn.execute(
            sql.SQL("SELECT t::text FROM {0}.{1} t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
        ).fetchall()
    return "\n".join(str(r[0]) for r in rows).encode()


def _filenode(schema: str) -> int:
    with _server() as conn:
        row = conn.execute(
            "SELECT pg_relation_filenode(%s::regclass)", (f"{schema}.stored_events_keys",)
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


def _data_file(schema: str) -> str | None:
    """The table's data file on the server's disk, if this is the server's machine."""
    with _server() as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT current_setting('data_directory') || '/' || pg_relation_filepath(%s::regclass)",
            (f"{schema}.stored_events_keys",),
        ).fetchone()
    return None if row is None else str(row[0])


def test_hosts_share_keys_and_an_erasure(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    key = os.urandom(32)
    with (
        MemoryEngine.open(tmp_path / "a", ledger=pg_url, master_key=key) as a,
        MemoryEngine.open(tmp_path / "b", ledger=pg_url, master_key=key) as b,
    ):
        a.remember(ALICE, "Alice collects zephyrantine teapots.")
        b.remember(BOB, "Bob restores quillwort bicycles.")
        b.keyring.store.poll_interval = 0  # type: ignore[attr-defined]
        a.keyring.store.poll_interval = 0  # type: ignore[attr-defined]
        # Each host reads the other's sealed events with the shared keys.
        assert [h.statement for h in b.recall(ALICE, "teapots")] == [
            "Alice collects zephyrantine teapots."
        ]
        assert [h.statement for h in a.recall(BOB, "bicycles")] == [
            "Bob restores quillwort bicycles."
        ]
        events = _table_bytes(pg_schema, "stored_events")
        assert b"zephyrantine" not in events and b"quillwort" not in events
        assert b"acme" not in events and b"alice" not in events

        before = _filenode(pg_schema)
        wrapped = [r.wrapped for r in a.keyring.records() if r.wrapped]
        report = a.erase("acme", "alice", requested_by="test")
        assert report.namespaces == 1
        # The other host drops the key at its next refresh and reads nothing of Alice.
        assert list(b.recall(ALICE, "teapots")) == []
        assert [h.statement for h in b.recall(BOB, "bicycles")] == [
            "Bob restores quillwort bicycles."
        ]
        with pytest.raises(NamespaceErasedError):
            b.remember(ALICE, "Alice is back.")
        state = b.keyring.store.read()
        assert isinstance(state, KeyStoreState)
        erased = [r for r in state.keys if r.erased]
        assert len(erased) == 1 and erased[0].wrapped is None
    # VACUUM FULL rewrote the table into a new file: no old row version with the erased key
    # is left in it (when this process may read the server's files, they are searched too).
    assert _filenode(pg_schema) != before
    path = _data_file(pg_schema)
    if path is not None and os.access(path, os.R_OK):
        data = Path(path).read_bytes()
        assert all(w not in data for w in wrapped[:1])
    with MemoryEngine.open(tmp_path / "c", ledger=pg_url, master_key=key) as c:
        report_text = verify_store(c)
        assert report_text.ok, report_text


def test_wrong_master_key_is_refused(pg_url: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url, master_key=os.urandom(32)) as a:
        a.remember(ALICE, "Alice collects teapots.")
    with pytest.raises(MasterKeyError) as wrong:
        MemoryEngine.open(tmp_path / "b", ledger=pg_url, master_key=os.urandom(32))
    assert wrong.value.reason_code == "master_key_mismatch"
    with pytest.raises(MasterKeyError) as missing:
        MemoryEngine.open(tmp_path / "c", ledger=pg_url)
    assert missing.value.reason_code == "master_key_missing"


def test_migrate_carries_the_keys(pg_url: str, tmp_path: Path) -> None:
    key = os.urandom(32)
    store = tmp_path / "store"
    with MemoryEngine.open(store, master_key=key) as engine:
        engine.remember(ALICE, "Alice collects zephyrantine teapots.")
        engine.remember(BOB, "Bob restores quillwort bicycles.")
        engine.erase("acme", "bob")
    with pytest.raises(MasterKeyError):
        migrate_store(store, pg_url)
    report = migrate_store(store, pg_url, master_key=key)
    assert report.ok, report.problem
    with MemoryEngine.open(tmp_path / "host", ledger=pg_url, master_key=key) as host:
        assert [h.statement for h in host.recall(ALICE, "teapots")] == [
            "Alice collects zephyrantine teapots."
        ]
        assert list(host.recall(BOB, "bicycles")) == []
        with pytest.raises(NamespaceErasedError):
            host.remember(BOB, "Bob is back.")


def test_reads_of_an_erased_namespace_write_no_name_on_any_host(
    pg_url: str, pg_schema: str, tmp_path: Path
) -> None:
    """Each host's projection file and recall index (``slot-0.recall``) keep none of an
    erased namespace's names or words, whichever host recalled it before and after the
    erasure, and ``forget_all`` there is refused (issue 34 item 2)."""
    key = os.urandom(32)
    alice = Namespace("acme5", "alice5q", "chat5q")
    hosts = (tmp_path / "h1", tmp_path / "h2")
    for host in hosts:
        with MemoryEngine.open(host, ledger=pg_url, master_key=key) as engine:
            if host == hosts[0]:
                engine.remember(alice, "Alice5 likes Tamarindzz.")
                engine.remember(BOB, "Bob restores quillwort bicycles.")
            assert engine.recall(alice, "Tamarindzz").results
    with MemoryEngine.open(hosts[0], ledger=pg_url, master_key=key) as engine:
        engine.erase("acme5", "alice5q", requested_by="dpo")
    for host in hosts:
        with MemoryEngine.open(host, ledger=pg_url, master_key=key) as engine:
            assert engine.recall(alice, "anything").results == ()
            assert engine.retrievable_memories(alice) == []
            assert engine.count_active_memories(alice) == 0
            with pytest.raises(NamespaceErasedError):
                engine.forget_all(alice)
            assert engine.recall(BOB, "bicycles").results
    for host in hosts:
        for path in host.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert b"alice5q" not in data and b"Tamarindzz" not in data, path
