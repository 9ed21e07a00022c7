"""The id format step (``memory-ledger migrate --store DIR``; ``replay/audit/rekey.py``).

A store of id format 1 (public uuid5 ids) is rewritten with keyed ids: afterwards every
memory, recall answer, history (``explain``) and audit answer (every event, by position)
equals the one before modulo ids, the chain verifies, and no guess of an exact statement or
name matches a digest in the store's files. The format-1 stores here are written by this
release's own format-1 path (a key store that records id format 1 keeps uuid5 ids, as a
store written before keyed digests does), and by the release before (the fixture).
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.ledger import ids
from memory_ledger.ledger.digests import ID_FORMAT_KEYED, ID_FORMAT_UNKEYED, UNKEYED
from memory_ledger.ledger.faults import FAULTS
from memory_ledger.ledger.ids import Namespace, normalize_statement
from memory_ledger.ledger.key_errors import MasterKeyError
from memory_ledger.ledger.key_store import FileKeyStore, KeyStoreState
from memory_ledger.replay import explain, verify_store
from memory_ledger.replay.audit import rekey_ids
from memory_ledger.replay.audit.rekey import IdMigrationError, IdMigrationReport, migrate_ids
from memory_ledger.replay.audit.timeline import event_record, iter_events
from memory_ledger.replay.cli.app import app
from tests.encryption.test_keyed_digests import (
    ERASED,
    FIXTURE,
    FIXTURE_KEY,
    KEPT,
    _attacker_digests,
    _fill,
    _found,
    _guesses,
)

OTHER = Namespace("zorblax", "bartholomew", "work")
QUERIES = ["bees", "tea Lisbon", "born", "Porto", "cello"]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def format1_store(path: Path, master: bytes | None, ledger: str | None = None) -> Path:
    """A store this release writes with id format 1 (its key store records format 1
    before the first write), filled with sessions, supersessions, forgets, a ``forget_all``
    and, encrypted, an erasure. With ``ledger`` (a PostgreSQL URL of an empty schema) the
    ledger and key store are there, ``path`` holds the projection files only."""
    unkeyed = KeyStoreState(id_format=ID_FORMAT_UNKEYED)
    if ledger is None:
        FileKeyStore(path / "keys").update(lambda _: (unkeyed, None))
    else:  # the key store is the ledger's table: written through a first, idle engine
        with MemoryEngine.open(path, sync=False, ledger=ledger) as idle:
            idle.keyring.store.update(lambda _: (unkeyed, None))
    with MemoryEngine.open(path, sync=False, master_key=master, ledger=ledger) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        _fill(engine)
        engine.remember(
            OTHER,
            "Bartholomew lives in Lisbon",
            subject="Bartholomew",
            predicate="lives_in",
            value="Lisbon",
        )
        engine.remember(
            OTHER,
            "Bartholomew lives in Porto",
            subject="Bartholomew",
            predicate="lives_in",
            value="Porto",
        )  # supersedes Lisbon
        engine.remember(OTHER, "Bartholomew plays the cello")
        engine.remember(OTHER, "Bartholomew likes figs")
        engine.forget(OTHER, "Bartholomew likes figs")
        engine.recall(OTHER, "cello", 5)
        if master is not None:
            engine.erase(ERASED.tenant, ERASED.principal)
    return path


def _canonical(value: Any) -> Any:
    """``value`` as builtins with every id renamed by order of first appearance (equal
    results: the same answers with ids mapped one to one)."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"id{len(names)}")

    text = msgspec.json.encode(msgspec.to_builtins(value)).decode()
    return msgspec.json.decode(_UUID.sub(rename, text))


def _answers(store: Path, master: bytes | None, ledger: str | None = None) -> Any:
    """Every memory, recall answer, history and event of the store (its ledger in
    PostgreSQL when ``ledger`` names one), ids renamed."""
    out: dict[str, Any] = {}
    with MemoryEngine.open(store, sync=False, master_key=master, ledger=ledger) as engine:
        out["events"] = [event_record(p, e) for p, e in iter_events(engine)]
        with engine.read_models() as models:
            rows = models.conn.execute(
                "SELECT memory_id, statement, status FROM canonical_memory "
                "ORDER BY statement, status"
            ).fetchall()
        out["memories"] = [r[1:] for r in rows]
        out["history"] = [msgspec.to_builtins(explain(engine, str(r[0]))) for r in rows]
        for ns in (ERASED, KEPT, OTHER):
            docs = engine.retrievable_memories(ns)
            out[f"retrievable {ns}"] = sorted(docs, key=lambda d: d.statement)
            out[f"recall {ns}"] = [
                [(h.statement, round(h.score, 6)) for h in engine.recall(ns, q, 5).results]
                for q in QUERIES
            ]
    for entry in out["history"]:  # positions of reads this snapshot itself appended
        entry.pop("recalls", None)
    return _canonical(out)


def _public_guesses(ns: Namespace) -> list[tuple[str, Any]]:
    return list(_guesses(UNKEYED, ns).items())


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_format_1_store_migrates_to_keyed_ids_with_the_same_answers(
    tmp_path: Path, encrypted: bool
) -> None:
    master = os.urandom(32) if encrypted else None
    store = format1_store(tmp_path / "store", master)
    # Recall appends read-path records: take the answers twice, compare the second ones.
    _answers(store, master)
    before = _answers(store, master)
    assert _found(store, _public_guesses(KEPT))  # the public digests are in the files
    head = before["events"][-1]["position"]
    report = migrate_ids(store, master_key=master)
    assert report.ok and report.migrated and report.head == head
    assert (report.id_format_before, report.id_format_after) == (1, ID_FORMAT_KEYED)
    assert report.verify is not None and report.verify.ok
    assert not (store / ".id-migration").exists()
    after = _answers(store, master)
    assert after["events"][: len(before["events"])] == before["events"]
    assert {k: v for k, v in after.items() if k != "events"} == {
        k: v for k, v in before.items() if k != "events"
    }
    with MemoryEngine.open(store, sync=False, master_key=master) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_KEYED
        assert verify_store(engine).ok
        # The key holder's ids are deterministic: a duplicate reinforces the migrated memory.
        tea = engine.remember(KEPT, "Bartholomew likes green tea.")
        kept = {d.statement: d.memory_id for d in engine.retrievable_memories(OTHER)}
        again = engine.remember(OTHER, "bartholomew plays the cello")
        assert again.report.reinforced == (ids.as_memory_id(kept["Bartholomew plays the cello"]),)
        assert tea.memory_id is not None and tea.memory_id.version == 8  # noqa: PLR2004
    # No public digest of any name or statement is left in the ledger or the key store.
    # (The read models of a live namespace hold its statements in clear, and key their
    # transcript rows by the public session digest: projections/columnar.py session_key.)
    for ns in (ERASED, KEPT, OTHER):
        for part in ("ledger", "keys"):
            assert _found(store / part, _public_guesses(ns)) == [], (ns, part)
    if encrypted:  # erased: no digest of it anywhere, public or keyed under a found key
        assert _found(store, _public_guesses(ERASED)) == []
        state = FileKeyStore(store / "keys", read_only=True).read()
        for digests in _attacker_digests(state):
            assert _found(store, _guesses(digests, ERASED).items()) == []
    assert migrate_ids(store, master_key=master).migrated is False  # idempotent


def test_the_stores_of_the_release_before_migrate(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    alice = Namespace("acme", "alice", "chat")
    tea = ids.memory_id(alice, normalize_statement("Alice likes green tea"))
    for name, key in (("clear", None), ("encrypted", FIXTURE_KEY)):
        store = tmp_path / name
        assert _found(store, [("tea", tea)])
        assert migrate_ids(store, master_key=key).ok
        assert _found(store, [("tea", tea)]) == []
        with MemoryEngine.open(store, sync=False, master_key=key) as engine:
            hits = engine.recall(alice, "green tea", 5).results
            assert [h.statement for h in hits] == ["Alice likes green tea"]
            assert hits[0].memory_id != str(tea)


def test_an_encrypted_store_without_its_master_key_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    master = os.urandom(32)
    store = format1_store(tmp_path / "store", master)
    with pytest.raises(MasterKeyError) as e:
        migrate_ids(store)
    assert e.value.reason_code == "master_key_missing"
    with pytest.raises(MasterKeyError) as e:
        migrate_ids(store, master_key=os.urandom(32))
    assert e.value.reason_code == "master_key_mismatch"
    with MemoryEngine.open(store, sync=False, master_key=master) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
    assert not (store / ".id-migration").exists()


def test_a_crash_during_the_copy_leaves_the_old_store_and_a_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = format1_store(tmp_path / "store", None)
    _answers(store, None)
    before = _answers(store, None)
    calls = {"n": 0}
    struct = rekey_ids.IdRewriter.struct

    def failing(self: rekey_ids.IdRewriter, value: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 20:  # noqa: PLR2004
            raise KeyboardInterrupt
        return struct(self, value)

    monkeypatch.setattr(rekey_ids.IdRewriter, "struct", failing)
    with pytest.raises(KeyboardInterrupt):
        migrate_ids(store)
    assert (store / ".id-migration" / "new").exists()  # the half-built copy
    assert _answers(store, None)["memories"] == before["memories"]  # the old store works
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
    monkeypatch.setattr(rekey_ids.IdRewriter, "struct", struct)
    assert migrate_ids(store).migrated
    after = _answers(store, None)
    assert after["memories"] == before["memories"] and after["history"] == before["history"]


def test_a_crash_during_the_swap_refuses_to_open_until_a_rerun_completes(
    tmp_path: Path,
) -> None:
    master = os.urandom(32)
    store = format1_store(tmp_path / "store", master)
    _answers(store, master)
    before = _answers(store, master)

    def crash() -> None:
        raise KeyboardInterrupt

    FAULTS["rekey.swap_part"] = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            migrate_ids(store, master_key=master)
    finally:
        del FAULTS["rekey.swap_part"]
    assert not (store / "ledger").exists()  # the old one moved aside, the new one not in
    with pytest.raises(StoreUnavailableError) as e:
        MemoryEngine.open(store, sync=False, master_key=master)
    assert e.value.reason_code == "id_migration_unfinished"
    assert not (store / "ledger").exists()  # the refused open created nothing
    report = migrate_ids(store, master_key=master)
    assert report.ok and report.resumed and report.id_format_after == ID_FORMAT_KEYED
    after = _answers(store, master)
    assert {k: v for k, v in after.items() if k != "events"} == {
        k: v for k, v in before.items() if k != "events"
    }
    assert not (store / ".id-migration").exists()


def test_the_cli_migrates_a_store_once(tmp_path: Path) -> None:
    store = format1_store(tmp_path / "store", None)
    runner = CliRunner()
    first = runner.invoke(app, ["migrate", "--store", str(store), "--json"])
    assert first.exit_code == 0, first.output
    report = msgspec.json.decode(first.output, type=IdMigrationReport)
    assert report.migrated and report.verify is not None and report.verify.ok
    again = runner.invoke(app, ["migrate", "--store", str(store)])
    assert again.exit_code == 0 and "nothing to do" in again.output
    shutil.rmtree(store / "keys")
    refused = runner.invoke(app, ["migrate", "--store", str(store)])
    assert refused.exit_code != 0 and "Traceback" not in refused.output


def test_records_kept_in_clear_before_an_erasure_stay_hidden(tmp_path: Path) -> None:
    """A store that held clear records before it encrypted, whose namespace was erased
    since: the migrated erasure record names that namespace by its keyed id, so its clear
    records still read as erased."""
    store, master = tmp_path / "store", os.urandom(32)
    FileKeyStore(store / "keys").update(
        lambda _: (KeyStoreState(id_format=ID_FORMAT_UNKEYED), None)
    )
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember(ERASED, "Quintessa likes green tea.")
        engine.remember(KEPT, "Bartholomew likes figs.")
    with MemoryEngine.open(store, sync=False, master_key=master) as engine:
        engine.remember(KEPT, "Bartholomew likes jazz.")
        engine.erase(ERASED.tenant, ERASED.principal)
    _answers(store, master)
    before = _answers(store, master)
    assert migrate_ids(store, master_key=master).ok
    after = _answers(store, master)
    assert after["events"][: len(before["events"])] == before["events"]
    assert after[f"recall {ERASED}"] == before[f"recall {ERASED}"]
    assert all(not hits for hits in after[f"recall {ERASED}"])
    assert after[f"retrievable {KEPT}"] == before[f"retrievable {KEPT}"]


HOLD_OPEN = """
import sys, time
from memory_ledger.commands import MemoryEngine
with MemoryEngine.open(sys.argv[1], create=False):
    print("open", flush=True)
    sys.stdin.readline()
"""


def test_a_store_open_in_another_process_is_refused_until_it_closes(tmp_path: Path) -> None:
    """An idle process holding the store open would keep writing into the old ledger after
    the swap (its writes acknowledged, then lost): the step refuses while it is open."""
    import subprocess
    import sys

    store = format1_store(tmp_path / "store", None)
    before = _answers(store, None)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_OPEN, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(IdMigrationError) as refused:
            migrate_ids(store)
        assert refused.value.reason_code == "store_in_use"
        assert not (store / ".id-migration").exists()
        assert _answers(store, None) == before
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=120)
    assert migrate_ids(store).id_format_after == ID_FORMAT_KEYED


def test_a_swap_whose_new_ledger_does_not_open_puts_the_old_one_back(tmp_path: Path) -> None:
    store = format1_store(tmp_path / "store", None)
    before = _answers(store, None)
    new = store / ".id-migration" / "new" / "ledger"
    new.mkdir(parents=True)
    (new / "data.mdb").write_bytes(b"junk" * 1024)
    (store / ".id-migration" / "swapping").write_bytes(b"")
    with pytest.raises(IdMigrationError) as failed:
        migrate_ids(store)
    assert failed.value.reason_code == "swap_failed"
    assert not (store / ".id-migration").exists()
    assert _answers(store, None) == before  # the old ledger and keys are back, format 1
    with MemoryEngine.open(store, create=False) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
    assert migrate_ids(store).id_format_after == ID_FORMAT_KEYED


def test_a_journal_with_nothing_to_swap_is_ignored_and_the_store_migrates(tmp_path: Path) -> None:
    store = format1_store(tmp_path / "store", None)
    (store / ".id-migration").mkdir()
    (store / ".id-migration" / "swapping").write_bytes(b"")
    report = migrate_ids(store)
    assert report.migrated and not report.resumed
    assert (report.id_format_before, report.id_format_after) == (ID_FORMAT_UNKEYED, ID_FORMAT_KEYED)
    assert report.head > 0 and report.verify is not None and report.verify.ok


def test_a_file_where_the_work_folder_goes_is_refused_by_name(tmp_path: Path) -> None:
    store = format1_store(tmp_path / "store", None)
    (store / ".id-migration").write_text("x")
    with pytest.raises(IdMigrationError) as refused:
        migrate_ids(store)
    assert refused.value.reason_code == "work_folder_blocked"
    assert ".id-migration" in str(refused.value)
