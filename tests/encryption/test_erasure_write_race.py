"""A write racing an erasure on an LMDB ledger: it commits before the keys are destroyed (and
is erased with them) or is refused; never acknowledged after ``erase()`` returned, sealed
under a key the erasure destroyed (an acknowledged write nobody can read).

The PostgreSQL ledger closes the same window with the key row locked ``FOR SHARE``
(tests/encryption/test_postgres_encryption.py); here the key store file is replaced under
the ledger's writer lock and every append checks, in its write transaction, the keys its
records were sealed with (:meth:`FileKeyStore.destroyed_key_error`)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import NamespaceErasedError

BOB = Namespace("acme", "bob", "chat")


def _sealed_after(engine: MemoryEngine, position: int, key_ids: set[bytes]) -> list[int]:
    """Positions after ``position`` of records sealed with one of ``key_ids``."""
    return [
        record.notification_id
        for record in engine.recorder.iter_records(position + 1)  # type: ignore[attr-defined]
        if record.state[:1] == b"\xff" and record.state[2:18] in key_ids
    ]


def _destroyed(engine: MemoryEngine, namespace: Namespace) -> set[bytes]:
    return {
        r.key_id.bytes
        for r in engine.keyring.records()
        if r.erased and r.namespace_id == engine.keyring.namespace_id(namespace)
    }


class _HeldAppend:
    """Holds the appends of one thread between sealing and the write transaction: the
    widest form of the window (the writer was descheduled there)."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.recorder: Any = engine.recorder
        self.original = self.recorder.insert_events
        self.thread: int | None = None
        self.sealed = threading.Event()
        self.release = threading.Event()

    def __call__(self, stored: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == self.thread:
            self.sealed.set()
            assert self.release.wait(30)
        return self.original(stored, **kwargs)


@pytest.mark.parametrize("engines", ["one engine", "two engines"])
def test_a_write_sealed_before_an_erasure_that_commits_after_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engines: str
) -> None:
    key = os.urandom(32)
    victim = Namespace("acme", "zelda", "chat")
    with (
        MemoryEngine.open(tmp_path, master_key=key) as a,
        MemoryEngine.open(tmp_path, master_key=key) as other,
    ):
        b = a if engines == "one engine" else other
        b.remember(victim, "Zelda likes jazz.")
        held = _HeldAppend(b)
        monkeypatch.setattr(held.recorder, "insert_events", held)
        outcome: list[object] = []

        def write() -> None:
            held.thread = threading.get_ident()
            try:
                outcome.append(b.remember(victim, "Zelda plays the harp on Sundays."))
            except NamespaceErasedError as e:
                outcome.append(e)

        writer = threading.Thread(target=write)
        writer.start()
        assert held.sealed.wait(30)  # sealed under the live key, not yet written
        report = a.erase("acme", "zelda", requested_by="dpo")
        held.release.set()
        writer.join(30)
        assert report.position is not None
        assert len(outcome) == 1
        assert isinstance(outcome[0], NamespaceErasedError), "acknowledged after erase()"
        assert a.head == report.position  # nothing appended after the erasure record
        assert _sealed_after(a, report.position, _destroyed(a, victim)) == []
        b.remember(BOB, "Bob restores quillwort bicycles.")  # other namespaces write on
        with pytest.raises(NamespaceErasedError):
            b.remember(victim, "Zelda is back.")


def _write_until_refused(
    engine: MemoryEngine,
    victim: Namespace,
    barrier: threading.Barrier,
    erased: threading.Event,
    acked: list[tuple[bool, int]],
    refused: list[bool],
) -> None:
    """Write to ``victim`` from the barrier on, until three calls began after ``erased``:
    ``acked`` gets (began after, position), ``refused`` (began after)."""
    barrier.wait()
    after = 0
    for note in itertools.count():
        began_after = erased.is_set()
        after += began_after
        if after > 3:
            return
        try:
            result = engine.remember(victim, f"{victim.principal} note {note}.")
        except NamespaceErasedError:
            refused.append(began_after)
        else:
            acked.append((began_after, result.position))


def test_appends_racing_an_erasure_leave_nothing_after_it(tmp_path: Path) -> None:
    """A real race, many rounds: a thread of another engine writes to a namespace while it
    is erased (barrier-started). Every acknowledged write is positioned before the erasure
    record (erased with it), none began after ``erase()`` returned, and no record sealed
    under the destroyed key follows the erasure record."""
    key = os.urandom(32)
    with (
        MemoryEngine.open(tmp_path, master_key=key) as a,
        MemoryEngine.open(tmp_path, master_key=key) as b,
    ):
        for round_ in range(8):
            victim = Namespace("acme", f"zelda{round_}", "chat")
            b.remember(victim, f"Zelda {round_} likes jazz.")
            barrier = threading.Barrier(2)
            erased = threading.Event()
            acked: list[tuple[bool, int]] = []
            refused: list[bool] = []

            writer = threading.Thread(
                target=_write_until_refused, args=(b, victim, barrier, erased, acked, refused)
            )
            writer.start()
            barrier.wait()
            report = a.erase("acme", f"zelda{round_}", requested_by="dpo")
            erased.set()
            writer.join(60)
            assert report.position is not None
            assert [p for after, p in acked if after] == [], "acknowledged after erase()"
            assert all(p < report.position for _, p in acked), (report.position, acked)
            assert _sealed_after(a, report.position, _destroyed(a, victim)) == []


def _held_writer(
    folder: str,
    key: bytes,
    sealed: Any,
    release: Any,
    outcome: Any,
) -> None:
    """A child process: seal a remember of zelda's, hold it before the write transaction
    until ``release``, then report ``refused`` or ``acked <position>`` on ``outcome``."""
    with MemoryEngine.open(folder, master_key=key) as engine:
        held = _HeldAppend(engine)
        held.sealed, held.release, held.thread = sealed, release, threading.get_ident()
        engine.recorder.insert_events = held  # type: ignore[method-assign]
        try:
            result = engine.remember(Namespace("acme", "zelda", "chat"), "Zelda sails.")
        except NamespaceErasedError:
            outcome.put("refused")
        else:
            outcome.put(f"acked {result.position}")


def test_a_write_of_another_process_committing_after_an_erasure_is_refused(
    tmp_path: Path,
) -> None:
    """The same window across processes: the writer lock the key file is replaced under is
    LMDB's, which every process on the store shares."""
    key = os.urandom(32)
    victim = Namespace("acme", "zelda", "chat")
    context = multiprocessing.get_context("spawn")
    sealed, release, outcome = context.Event(), context.Event(), context.Queue()
    with MemoryEngine.open(tmp_path, master_key=key) as a:
        a.remember(victim, "Zelda likes jazz.")
        child = context.Process(
            target=_held_writer, args=(str(tmp_path), key, sealed, release, outcome)
        )
        child.start()
        try:
            assert sealed.wait(120)
            report = a.erase("acme", "zelda", requested_by="dpo")
            release.set()
            assert outcome.get(timeout=120) == "refused"
        finally:
            child.join(120)
        assert child.exitcode == 0
        assert report.position is not None
        assert a.head == report.position
        assert _sealed_after(a, report.position, _destroyed(a, victim)) == []
