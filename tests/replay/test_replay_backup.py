"""`memory-ledger backup` / `restore`: a consistent copy taken while a host writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.projections import table_digests
from memory_ledger.replay import backup_store, rebuild_projections, restore_store, verify_store
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item
from tests.replay_story import Story, build_story

runner = CliRunner()


@pytest.fixture
def story(tmp_path: Path) -> Story:
    return build_story(tmp_path / "store")


class Writer:
    """A host appending sessions (each several commands) through its own engine until told
    to stop; ``done`` counts the sessions written (no timing assumption)."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.done = 0
        self.progress = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with MemoryEngine.open(self.store, sync=False) as engine:
            namespace = Namespace("acme", "worker", "assistant")
            n = 0
            while not self.stop.is_set():
                extractor = RecordedExtractor()
                session = engine.session(namespace, f"bg-{n}", extractor=extractor)
                extractor.provide(1, [make_item(f"Worker fact number {n}.", subject="Worker")])
                session.observe_final_transcript(1, f"user: fact {n}")
                session.finish()
                session.close()
                n += 1
                with self.progress:
                    self.done = n
                    self.progress.notify_all()

    def wait_for(self, count: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: self.done >= count, timeout=30)


def test_backup_while_writing_restores_to_the_same_tables(story: Story, tmp_path: Path) -> None:
    writer = Writer(story.store)
    writer.thread.start()
    try:
        writer.wait_for(1)
        with MemoryEngine.open(story.store, create=False) as engine:
            backup = backup_store(engine, tmp_path / "backup")
        writer.wait_for(writer.done + 2)  # writes continue after the backup
    finally:
        writer.stop.set()
        writer.thread.join(60)
    with MemoryEngine.open(story.store, create=False) as source:
        final_head = source.head
        assert story.head < backup.manifest.position < final_head  # writes continued after
        expected = rebuild_projections(source, to=backup.manifest.position)
    restored = restore_store(tmp_path / "backup", tmp_path / "restored")
    assert restored.ok and restored.problem is None
    assert restored.verify.ok and restored.verify.head == backup.manifest.position
    with MemoryEngine.open(tmp_path / "restored", create=False) as engine:
        assert verify_store(engine).ok
        replayed = rebuild_projections(engine)
        engine.catch_up()
        live_after_restore = table_digests(engine.projections.conn)
    assert replayed.position == backup.manifest.position
    assert replayed.digests == expected.digests == live_after_restore
    assert replayed.rows["canonical_memory"] > 3


def test_cli_backup_and_restore(story: Story, tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    taken = runner.invoke(
        app, ["backup", "--store", str(story.store), "--out", str(backup), "--json"]
    )
    assert taken.exit_code == 0, taken.output
    report = json.loads(taken.stdout)
    assert report["manifest"]["position"] == story.head and report["bytes"] > 0
    assert json.loads((backup / "backup.json").read_text())["position"] == story.head
    again = runner.invoke(app, ["backup", "--store", str(story.store), "--out", str(backup)])
    assert again.exit_code == 2 and "not an empty folder" in again.stderr

    restored = tmp_path / "restored"
    done = runner.invoke(app, ["restore", str(backup), "--store", str(restored), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["verify"]["head"] == story.head
    check = runner.invoke(app, ["replay", "--store", str(restored), "--check"])
    assert check.exit_code == 0, check.output
    verified = runner.invoke(app, ["verify", "--store", str(restored)])
    assert verified.exit_code == 0
    over = runner.invoke(app, ["restore", str(backup), "--store", str(restored)])
    assert over.exit_code == 2 and "not an empty folder" in over.stderr
    nothing = runner.invoke(app, ["restore", str(tmp_path), "--store", str(tmp_path / "new")])
    assert nothing.exit_code == 2 and "not a memory-ledger backup" in nothing.stderr


def test_restore_fails_when_the_backup_does_not_match_its_manifest(
    story: Story, tmp_path: Path
) -> None:
    backup = tmp_path / "backup"
    with MemoryEngine.open(story.store, create=False) as engine:
        backup_store(engine, backup)
    manifest = json.loads((backup / "backup.json").read_text())
    manifest["position"] += 1
    (backup / "backup.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["restore", str(backup), "--store", str(tmp_path / "restored")])
    assert result.exit_code == 1
    assert "differs from the backup's" in result.stderr


@pytest.mark.parametrize("offset", [8208, None])  # a page header below the records; a record
def test_a_restore_that_fails_verification_leaves_no_store(
    story: Story, tmp_path: Path, offset: int | None
) -> None:
    """restore checks what ``verify`` checks (every database of the file, not the chain
    alone) and is all or nothing: a backup ``verify`` calls damaged restores nothing, the
    target folder stays empty (no store to open and write to) and the message names it."""
    from memory_ledger.replay import verify_path

    backup, target = tmp_path / "backup", tmp_path / "restored"
    with MemoryEngine.open(story.store, create=False) as engine:
        backup_store(engine, backup)
    data = backup / "ledger" / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = offset if offset is not None else raw.rindex(b"Alice") + 1
    raw[at] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert not verify_path(backup).ok
    result = runner.invoke(app, ["restore", str(backup), "--store", str(target)])
    assert result.exit_code == 1, result.output
    assert "restoring" not in result.stderr
    assert not any(target.iterdir())
    assert not any(p.name.startswith(".restored") for p in tmp_path.iterdir())


def test_backup_of_an_empty_store(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "empty", sync=False) as engine:
        report = backup_store(engine, tmp_path / "backup")
    assert report.manifest.position == 0 and report.manifest.record_hash is None
    restored = restore_store(tmp_path / "backup", tmp_path / "restored")
    assert restored.ok and restored.verify.head == 0
