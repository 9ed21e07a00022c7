"""Encryption at rest on a PostgreSQL ledger: hosts share the data keys through the ledger's
``<events>_keys`` table (``ledger.postgres_keys``); an erasure on one host is seen by the
other, no plaintext reaches the server, and no row version keeps an erased key."""

from __future__ import annotations

import itertools
import os
import random
import threading
from pathlib import Path
from typing import NamedTuple

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


def _sealed_after(engine: MemoryEngine, position: int, key_ids: set[bytes]) -> list[int]:
    """Positions after ``position`` of records sealed with one of ``key_ids``."""
    recorder = engine.recorder
    return [
        record.notification_id
        for record in recorder.iter_records(position + 1)  # type: ignore[attr-defined]
        if record.state[:1] == b"\xff" and record.state[2:18] in key_ids
    ]


def test_a_stale_keyring_cannot_write_after_an_erasure(pg_url: str, tmp_path: Path) -> None:
    """F1: a host whose keyring has not seen an erasure yet (its key store asks the server
    once a second; here never) still writes nothing to the erased namespace: an append
    sealed under a destroyed key is refused in the appending transaction, whichever write
    it is (a command, a transcript, buffered read-path records); after a refusal the
    keyring rereads the keys, so the next call fails before it reaches the ledger."""
    key = os.urandom(32)
    zelda, yuri, xena = (Namespace("acme", p, "chat") for p in ("zelda", "yuri", "xena"))
    with (
        MemoryEngine.open(tmp_path / "a", ledger=pg_url, master_key=key) as a,
        MemoryEngine.open(tmp_path / "b", ledger=pg_url, master_key=key) as b,
    ):
        b.remember(zelda, "Zelda likes jazz.")
        transcripts = b.session(yuri, "s-yuri")
        transcripts.observe_final_transcript(1, "Yuri: I sail on Sundays.")
        reads = b.session(xena, "s-xena")
        reads.observe_final_transcript(1, "Xena: I keep bees.")
        b.remember(xena, "Xena keeps bees.")
        assert reads.recall("bees").results  # a RecallServed record, buffered
        b.keyring.store.poll_interval = 3600.0  # type: ignore[attr-defined]
        refusals: list[bool] = []
        check = b.recorder.sealed_key_check  # type: ignore[attr-defined]

        def counted(curs: object, key_ids: set[bytes]) -> Exception | None:
            error = check(curs, key_ids)
            refusals.append(error is not None)
            return error  # type: ignore[no-any-return]

        b.recorder.sealed_key_check = counted  # type: ignore[attr-defined]

        def erase(principal: str) -> int:
            b.keyring.refresh()  # what b knew before; it does not ask again meanwhile
            report = a.erase("acme", principal, requested_by="dpo")
            assert report.position is not None
            refusals.clear()
            return report.position

        for principal, write in (
            ("zelda", lambda: b.remember(zelda, "Zelda is back.")),
            ("yuri", lambda: transcripts.observe_final_transcript(2, "Yuri: one more thing.")),
            ("xena", reads.flush_reads),
        ):
            position = erase(principal)
            with pytest.raises(NamespaceErasedError):
                write()
            assert refusals == [True], principal  # refused by the ledger, not by b's keyring
            assert a.head == position  # nothing appended
            with pytest.raises(NamespaceErasedError):  # the keyring reread the keys
                write()
            assert refusals == [True], principal
            assert b.keyring.is_erased(Namespace("acme", principal, "chat"))
        b.remember(BOB, "Bob restores quillwort bicycles.")  # other namespaces write on
        assert refusals == [True, False]


class Outcomes(NamedTuple):
    """What a racing writer saw: ``acked`` (began after ``erase()`` returned, position,
    memory id), ``refused`` (began after ``erase()`` returned) and ``failures``."""

    acked: list[tuple[bool, int, str]]
    refused: list[bool]
    failures: list[BaseException]


def _write_until_refused(
    engine: MemoryEngine,
    victim: Namespace,
    barrier: threading.Barrier,
    erased: threading.Event,
    seen: Outcomes,
) -> None:
    """Write to ``victim`` from the barrier on, until three calls began after ``erased``."""
    try:
        barrier.wait()
        after = 0
        for note in itertools.count():
            began_after = erased.is_set()
            after += began_after
            if after > 2:
                return
            try:
                result = engine.remember(victim, f"{victim.principal} note {note}.")
            except NamespaceErasedError:
                seen.refused.append(began_after)
            else:
                seen.acked.append((began_after, result.position, str(result.memory_id)))
    except BaseException as e:  # noqa: BLE001 (reported by the test thread)
        seen.failures.append(e)


def test_writes_racing_an_erasure_on_another_host(pg_url: str, tmp_path: Path) -> None:
    """F1, a real race: host B keeps writing to a namespace while host A erases it (two
    engines with keyrings of their own, threads started by a barrier, many rounds; B's key
    store does not poll, so only the ledger can stop it). After ``erase()`` returns no write
    of B is acknowledged; every write B got acknowledged is positioned before the
    ``NamespaceErased`` record and erased with the namespace; no record sealed under the
    destroyed key follows the erasure record."""
    key = os.urandom(32)
    rng = random.Random(1605)
    with (
        MemoryEngine.open(tmp_path / "a", ledger=pg_url, master_key=key) as a,
        MemoryEngine.open(tmp_path / "b", ledger=pg_url, master_key=key) as b,
    ):
        b.keyring.store.poll_interval = 3600.0  # type: ignore[attr-defined]
        raced = 0
        for round_ in range(12):
            victim = Namespace("acme", f"zelda{round_}", "chat")
            a.remember(victim, f"Zelda {round_} owns a harp.")
            b.remember(victim, f"Zelda {round_} likes jazz.")
            barrier = threading.Barrier(2)
            erased = threading.Event()
            acked: list[tuple[bool, int, str]] = []
            refused: list[bool] = []
            failures: list[BaseException] = []

            thread = threading.Thread(
                target=_write_until_refused,
                args=(b, victim, barrier, erased, Outcomes(acked, refused, failures)),
            )
            thread.start()
            barrier.wait()
            for n in range(rng.randrange(3)):  # vary where the erasure lands
                a.remember(BOB, f"Bob round {round_} fact {n}.")
            report = a.erase("acme", f"zelda{round_}", requested_by="dpo")
            erased.set()
            thread.join()
            assert not failures, failures
            assert report.position is not None
            assert [a for a in acked if a[0]] == [], "acknowledged after erase() returned"
            assert all(position < report.position for _, position, _ in acked), (
                report.position,
                acked,
            )
            assert refused and all(refused[-2:])
            destroyed = {
                r.key_id.bytes
                for r in a.keyring.records()
                if r.erased and r.namespace_id == a.keyring.namespace_id(victim)
            }
            assert len(destroyed) == 1
            assert _sealed_after(a, report.position, destroyed) == []
            for _, _, memory_id in acked:
                assert a.retrievable_memory(victim, memory_id) is None
            raced += bool(refused and not refused[0])
        # B was writing when the keys went: some refusal came from a call begun before
        # erase() returned (its keyring had not seen the erasure), in some round.
        assert raced
