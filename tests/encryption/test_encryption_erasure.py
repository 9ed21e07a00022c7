"""Erasure that really erases (issue #16, "Done when"), on the LoCoMo conversations.

Three stores are built once for the module, each with a frozen clock so that equal commands
record equal times:

- ``erased``: encrypted; conv-30 ingested into its namespace, then conv-26 into another
  (both through the session-script runner ``memory-ledger run`` uses); then conv-26's
  namespace is erased;
- ``reference``: encrypted; conv-30 only (a store that never held conv-26). conv-30 went
  first into ``erased`` too, so its events sit at the same positions in both;
- ``clear``: the same two ingests without a master key (the control of the raw scan).

What is proved: no distinctive word of conv-26 is in any file of the ledger or key store
folders, before or after the erasure (and the clear control shows every one, so the scan
works); after the erasure no key left on disk opens the erased payloads, the erased key's
wrapped and unwrapped bytes are in no file, the chain verifies, the live projections and a
rebuild hold no row of the namespace and equal (by table digests) the reference store's;
conv-30's recall, explain and as-of are those of the reference store.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.events import ErasedPayload, LedgerEvent, NamespaceErased
from memory_ledger.ledger.key_store import KeyStoreState
from memory_ledger.ledger.master_key import LocalMasterKey
from memory_ledger.ledger.sealing import SealedPayloadError, open_state, sealed_key_id
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.erasure import NAMESPACED_TABLES
from memory_ledger.replay import (
    UnknownMemoryError,
    as_of,
    explain,
    rebuild_projections,
    verify_store,
)
from memory_ledger.replay.scripts.locomo import find_sample, load_samples
from tests.conftest import skip_without_locomo
from tests.encryption_helpers import (
    ERASED_SAMPLE,
    KEPT_SAMPLE,
    bytes_found,
    distinctive_words,
    files_under,
    frozen_clock,
    ingest,
    locomo_namespace,
    words_found,
)

ERASED = locomo_namespace(ERASED_SAMPLE)
KEPT = locomo_namespace(KEPT_SAMPLE)


@dataclass
class World:
    data: Path
    key: bytes
    erased: Path
    reference: Path
    clear: Path
    words: list[str]
    found_before: dict[str, list[str]]
    found_clear: dict[str, list[str]]
    erased_key_id: bytes = b""
    wrapped_before: bytes = b""
    data_key_before: bytes = b""
    sealed_records: list[tuple[str, bytes, int, bytes]] = field(default_factory=list)
    erased_memory_ids: list[str] = field(default_factory=list)
    kept_recall_before: list[Any] = field(default_factory=list)
    report: Any = None
    queries: list[str] = field(default_factory=list)


def rows_of(engine_conn: Any, namespace: Any) -> dict[str, int]:
    """Rows of ``namespace`` in every namespaced table of a projection connection."""
    counts = {}
    present = {row[0] for row in engine_conn.execute("SHOW TABLES").fetchall()}
    for table in NAMESPACED_TABLES:
        if table not in present:
            continue  # memory_vectors: only with a semantic channel
        counts[table] = engine_conn.execute(
            f"SELECT count(*) FROM {table} WHERE tenant = ? AND principal = ? AND scope_id = ?",  # noqa: S608
            [namespace.tenant, namespace.principal, namespace.scope_id],
        ).fetchall()[0][0]
    return counts


def recall_all(engine: MemoryEngine, queries: list[str]) -> list[Any]:
    return [engine.recall(KEPT, q, 10).results for q in queries]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    data = skip_without_locomo()
    base = tmp_path_factory.mktemp("erasure")
    key = os.urandom(32)
    words = distinctive_words(data, ERASED_SAMPLE, KEPT_SAMPLE)
    assert len(words) == 20
    qa = find_sample(load_samples(data), KEPT_SAMPLE)["qa"]
    queries = [str(q["question"]) for q in qa[:15]]
    erased, reference, clear = base / "erased", base / "reference", base / "clear"
    with frozen_clock() as clock:
        with MemoryEngine.open(clear, sync=False) as engine:
            ingest(engine, data, KEPT_SAMPLE)
            ingest(engine, data, ERASED_SAMPLE)
        found_clear = words_found(words, clear / "ledger", clear / "keys")
        clock.reset()
        with MemoryEngine.open(reference, master_key=key, sync=False) as engine:
            ingest(engine, data, KEPT_SAMPLE)
        # The erased store grows from a copy of the reference: the same store key and data
        # key of the kept namespace, so the same (keyed) ids of its streams and memories.
        shutil.copytree(reference, erased)
        with MemoryEngine.open(erased, master_key=key, sync=False) as engine:
            ingest(engine, data, ERASED_SAMPLE)
            found_before = words_found(words, erased / "ledger", erased / "keys")
            world = World(
                data=data,
                key=key,
                erased=erased,
                reference=reference,
                clear=clear,
                words=words,
                found_before=found_before,
                found_clear=found_clear,
                queries=queries,
            )
            [record] = [
                r
                for r in engine.keyring.records()
                if r.namespace_id == engine.keyring.namespace_id(ERASED)
            ]
            assert record.wrapped is not None
            world.erased_key_id = record.key_id.bytes
            world.wrapped_before = record.wrapped
            world.data_key_before = LocalMasterKey(key).unwrap(record.wrapped)
            records = engine.read_records(0, engine.head + 1)
            for _, raw_id, version, topic, state in records:
                if state[:1] == b"\xff" and sealed_key_id(state) == world.erased_key_id:
                    world.sealed_records.append((topic, bytes(raw_id), version, state))  # type: ignore[arg-type]
            with engine.read_models() as live:  # caught up: reads are served from memory
                world.erased_memory_ids = [
                    str(row[0])
                    for row in live.conn.execute(
                        "SELECT memory_id FROM canonical_memory WHERE principal = ?",
                        [ERASED_SAMPLE],
                    ).fetchall()
                ]
            world.kept_recall_before = recall_all(engine, queries)
            world.report = engine.erase("locomo", ERASED_SAMPLE, requested_by="test")
    return world


def test_no_conv26_word_in_ledger_or_key_files_before_or_after_erasure(world: World) -> None:
    # The control: in a clear store every word is in the ledger (so the scan finds words).
    assert sorted(world.found_clear) == sorted(world.words)
    assert all(any("ledger" in p for p in paths) for paths in world.found_clear.values())
    assert world.found_before == {}
    assert words_found(world.words, world.erased / "ledger", world.erased / "keys") == {}
    assert len(world.sealed_records) > 1000  # conv-26's events were all sealed


def test_erased_content_cannot_be_recovered_with_any_key_left_on_disk(world: World) -> None:
    assert world.report.namespaces == 1
    master = LocalMasterKey(world.key)
    key_files = files_under(world.erased / "keys")
    states = []
    for path in key_files:
        try:
            states.append(msgspec.msgpack.decode(path.read_bytes(), type=KeyStoreState))
        except msgspec.DecodeError:
            continue  # the lock file
    assert len(states) == 1
    [erased_record] = [r for r in states[0].keys if r.key_id.bytes == world.erased_key_id]
    assert erased_record.erased and erased_record.wrapped is None
    assert erased_record.erase_command == world.report.command_id
    live = [AESGCM(master.unwrap(r.wrapped)) for r in states[0].keys if r.wrapped is not None]
    assert live  # conv-30's key is still there, and it opens nothing of conv-26
    for topic, raw_id, version, state in world.sealed_records:
        for aead in live:
            with pytest.raises(SealedPayloadError):
                open_state(aead, state, topic, raw_id, version)
    # The control of the check above: the destroyed key did open them.
    topic, raw_id, version, state = world.sealed_records[0]
    assert open_state(AESGCM(world.data_key_before), state, topic, raw_id, version)
    # Neither the wrapped nor the clear data key is left in any file of the store.
    assert bytes_found(world.wrapped_before, world.erased) == []
    assert bytes_found(world.data_key_before, world.erased) == []


def test_erased_events_read_as_erased_and_the_chain_verifies(world: World) -> None:
    with MemoryEngine.open(world.erased, master_key=world.key, sync=False) as engine:
        report = verify_store(engine)
        assert report.ok and report.checked == engine.head, report
        records = engine.read_records(0, engine.head + 1)
        erased_events: list[LedgerEvent] = []
        erasures: list[NamespaceErased] = []
        for _, raw_id, version, topic, state in records:
            event = engine.mapper.decode(topic, state, raw_id, version)  # type: ignore[attr-defined]
            if isinstance(event, ErasedPayload):
                erased_events.append(event)
            elif isinstance(event, NamespaceErased):
                erasures.append(event)
            else:
                assert event.namespace == KEPT
        assert len(erased_events) == len(world.sealed_records)
        assert {e.key_id.bytes for e in erased_events} == {world.erased_key_id}  # type: ignore[attr-defined]
        [erasure] = erasures
        assert erasure.namespace_ids == (engine.keyring.namespace_id(ERASED),)
        assert erasure.command_id == world.report.command_id
        assert erasure.requested_by == "test" and erasure.level == "principal"
        assert engine.recall(ERASED, "Caroline painting", 10).results == ()
        with pytest.raises(UnknownMemoryError):
            explain(engine, world.erased_memory_ids[0])


def test_projections_drop_the_namespace_and_equal_a_store_that_never_held_it(
    world: World,
) -> None:
    with MemoryEngine.open(world.reference, master_key=world.key, sync=False) as reference:
        reference.catch_up()
        expected = table_digests(reference.projections.conn)
        assert rebuild_projections(reference).digests == expected
    with MemoryEngine.open(world.erased, master_key=world.key, sync=False) as engine:
        engine.catch_up()
        assert set(rows_of(engine.projections.conn, ERASED).values()) == {0}
        assert set(rows_of(engine.projections.conn, KEPT).values()) != {0}
        rebuilt = rebuild_projections(engine)
        assert rebuilt.digests == expected
        # The live file, caught up through the erasure, equals the rebuild too.
        assert table_digests(engine.projections.conn) == expected


def test_other_namespace_recall_explain_and_as_of_are_unchanged(world: World) -> None:
    with (
        MemoryEngine.open(world.reference, master_key=world.key, sync=False) as reference,
        MemoryEngine.open(world.erased, master_key=world.key, sync=False) as engine,
    ):
        expected = recall_all(reference, world.queries)
        assert sum(len(r) for r in expected) > 0
        assert recall_all(engine, world.queries) == expected == world.kept_recall_before
        ids = [
            str(row[0])
            for row in reference.projections.conn.execute(
                "SELECT memory_id FROM canonical_memory ORDER BY memory_id LIMIT 8"
            ).fetchall()
        ]
        assert len(ids) == 8
        for memory_id in ids:
            ours = explain(engine, memory_id, KEPT)
            theirs = explain(reference, memory_id, KEPT)
            # ``position`` is the projections' position (each store's head): it differs.
            assert msgspec.structs.replace(ours, position=0) == msgspec.structs.replace(
                theirs, position=0
            )
        # As of the reference's head (conv-30 only, same positions in both) and as of now.
        with as_of(engine, reference.head) as past, as_of(reference, reference.head) as ref:
            assert past.digests() == ref.digests()
        with as_of(engine, engine.head) as now, as_of(reference, reference.head) as ref:
            assert now.digests() == ref.digests()
            for query in world.queries:
                assert now.recall(KEPT, query, 10).results == ref.recall(KEPT, query, 10).results
            assert now.recall(ERASED, "Caroline", 10).results == ()
