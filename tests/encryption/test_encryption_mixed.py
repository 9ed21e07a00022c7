"""A store that turned encryption on after events were written in clear: an erasure hides
the namespace's clear events too (from recall, projections, rebuilds and the event list),
and the live projection equals a rebuild."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.events import ErasedPayload
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import MasterKeyError, NamespaceErasedError
from memory_ledger.ledger.key_store import FileKeyStore
from memory_ledger.ledger.sealing import HEADER_SIZE, Sealer, sealed_recorded_at
from memory_ledger.replay import check_projections
from tests.conftest import make_item

ALICE = Namespace("acme", "alice", "chat")
BOB = Namespace("acme", "bob", "chat")


def test_clear_events_of_an_erased_namespace_read_as_erased(tmp_path: Path) -> None:
    key = os.urandom(32)
    with MemoryEngine.open(tmp_path) as clear:
        clear.remember(ALICE, "Alice keeps marmosets.")
        clear.remember(BOB, "Bob keeps otters.")
        head = clear.head
    with MemoryEngine.open(tmp_path, master_key=key) as engine:
        assert engine.keyring.clear_until == 0  # an open alone binds nothing
        engine.remember(ALICE, "Alice keeps wombats.")
        assert engine.keyring.clear_until == head  # the first sealed write did
        assert len(engine.recall(ALICE, "keeps marmosets wombats")) == 2
        engine.erase("acme", "alice")
        assert list(engine.recall(ALICE, "keeps marmosets wombats")) == []
        assert [h.statement for h in engine.recall(BOB, "otters")] == ["Bob keeps otters."]
        decode = engine.event_decoder()
        events = [decode(t, s, i, v) for _, i, v, t, s in engine.read_records(0, 1000)]
        texts = repr([e for e in events if not isinstance(e, ErasedPayload)])
        assert "marmosets" not in texts and "wombats" not in texts
        assert "otters" in texts
        clear_erased = [e for e in events if isinstance(e, ErasedPayload) and e.key_id is None]
        sealed_erased = [e for e in events if isinstance(e, ErasedPayload) and e.key_id]
        assert clear_erased and sealed_erased
        assert all(e.originator_version >= 1 and e.recorded_at for e in clear_erased)
        result = check_projections(engine)
        assert result.ok, result


@pytest.mark.anyio
async def test_async_engine_erases_and_rotates(tmp_path: Path) -> None:
    first, second = os.urandom(32), os.urandom(32)
    async with AsyncMemoryEngine.open(tmp_path, master_key=first) as engine:
        await engine.remember(ALICE, "Alice keeps marmosets.")
        await engine.remember(BOB, "Bob keeps otters.")
        assert await engine.rotate_master_key(second) == 2
        report = await engine.erase("acme", "alice", requested_by="async test")
        assert report.namespaces == 1 and report.position is not None
        assert list(await engine.recall(ALICE, "marmosets")) == []
        with pytest.raises(NamespaceErasedError):
            await engine.remember(ALICE, "Alice is back.")
    with pytest.raises(MasterKeyError):
        MemoryEngine.open(tmp_path, master_key=first)
    with MemoryEngine.open(tmp_path, master_key=second) as engine:
        assert [h.statement for h in engine.recall(BOB, "otters")] == ["Bob keeps otters."]


def test_an_open_session_of_an_erased_namespace_refuses_to_serve(tmp_path: Path) -> None:
    """A session opened before its namespace was erased holds candidates and snapshots in
    memory: every later call is refused, in the erasing process and in another engine."""
    key = os.urandom(32)
    with (
        MemoryEngine.open(tmp_path, master_key=key) as engine,
        MemoryEngine.open(tmp_path, master_key=key) as other,
    ):
        extractor = RecordedExtractor()
        session = engine.session(ALICE, "chat-1", extractor=extractor)
        remote = other.session(ALICE, "chat-2", extractor=RecordedExtractor())
        extractor.provide(1, [make_item("Alice's passport hint is Narwhal.")])
        session.observe_final_transcript(1, "user: my passport hint is Narwhal")
        assert [h.statement for h in session.recall("Narwhal", turn_id=2)] == [
            "Alice's passport hint is Narwhal."
        ]
        engine.erase("acme", "alice")
        with pytest.raises(NamespaceErasedError):
            session.recall("Narwhal", turn_id=3)
        with pytest.raises(NamespaceErasedError):
            remote.recall("Narwhal", turn_id=1)


def test_an_old_key_store_copied_back_does_not_undo_an_erasure(tmp_path: Path) -> None:
    """The ledger's NamespaceErased records win over a key store that still holds the keys
    they destroyed: a read-only open refuses those keys, a writable one destroys them."""
    key = os.urandom(32)
    store = tmp_path / "store"
    with MemoryEngine.open(store, master_key=key) as engine:
        engine.remember(ALICE, "Alice collects narwhals.")
    shutil.copytree(store / "keys", tmp_path / "old-keys")
    with MemoryEngine.open(store, master_key=key) as engine:
        engine.erase("acme", "alice")
    shutil.rmtree(store / "keys")
    shutil.copytree(tmp_path / "old-keys", store / "keys")
    with MemoryEngine.open(store, master_key=key, read_only=True) as audit:
        assert list(audit.recall(ALICE, "narwhals")) == []
        decode = audit.event_decoder()
        events = [decode(t, s, i, v) for _, i, v, t, s in audit.read_records(0, 100)]
        assert "narwhals" not in repr(events)
    assert any(not r.erased for r in FileKeyStore(store / "keys").read().keys)
    with MemoryEngine.open(store, master_key=key) as engine:
        assert list(engine.recall(ALICE, "narwhals")) == []
    assert all(r.erased for r in FileKeyStore(store / "keys").read().keys)


def test_a_sealer_shared_by_threads_never_repeats_a_nonce_or_mixes_headers() -> None:
    """Threads released together seal with one Sealer, each with its own time: every nonce
    is unique, and every header carries its own event's recorded_at."""
    sealer = Sealer(os.urandom(16), AESGCM(os.urandom(32)))
    barrier = threading.Barrier(8)
    found: list[tuple[bytes, datetime, datetime]] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        barrier.wait()
        mine = []
        for i in range(2000):
            when = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=n * 10_000 + i)
            state = sealer.seal(b"payload", "topic", bytes(16), i + 1, when)
            mine.append((state[HEADER_SIZE : HEADER_SIZE + 12], sealed_recorded_at(state), when))
        with lock:
            found.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert len({nonce for nonce, _, _ in found}) == len(found) == 16_000
    assert all(header_time == when for _, header_time, when in found)
