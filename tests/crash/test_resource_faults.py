"""Resource faults: a full LMDB map, a failing write, unwritable and missing store folders, a
damaged projection file.

- The map filling up mid-command grows the map and retries the whole transaction: the
  command's events are written once, where the call says (a real small map, and a full map
  injected between two events' puts through the ``ledger.put`` fault point).
- Any other failure inside the write transaction (injected: an I/O error before the commit)
  writes nothing of the command, and retrying the call completes it.
- A store folder that cannot be created or written raises ``StoreUnavailableError`` naming
  it, and leaves what was stored intact. Root bypasses file modes, so when the tests run as
  root these checks run in a child that dropped the capabilities doing so
  (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), and are skipped, saying why, where it
  cannot drop them.
- A damaged DuckDB projection file is set aside and rebuilt from the ledger, which is left
  byte for byte untouched (the CLI path is
  ``tests/cli/test_cli.py::test_damaged_projection_file_is_rebuilt``).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb
import pytest

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.ledger import faults
from memory_ledger.ledger.errors import LedgerOperationalError
from memory_ledger.projections import table_digests
from memory_ledger.replay import verify_store
from tests.conftest import REPO_ROOT, make_item
from tests.projections.test_projections import fresh_digests

NAMESPACE = Namespace("acme", "alice", "assistant")


@pytest.fixture
def inject() -> Iterator[Callable[[str, Callable[[], None]], None]]:
    """Install a fault for the test; every fault is removed afterwards."""

    def install(point: str, hook: Callable[[], None]) -> None:
        assert point in faults.POINTS
        faults.FAULTS[point] = hook

    yield install
    faults.FAULTS.clear()


def raise_once(error: BaseException, at_call: int = 1) -> Callable[[], None]:
    calls = 0

    def hook() -> None:
        nonlocal calls
        calls += 1
        if calls == at_call:
            raise error

    return hook


def log_bytes(engine: MemoryEngine) -> bytes:
    """Every stored record, hash and body, in order."""
    return b"".join(value for _, value in engine.recorder.iter_log())  # type: ignore[attr-defined]


def check_store(engine: MemoryEngine) -> None:
    report = verify_store(engine)
    assert report.ok and report.checked == engine.head, report
    engine.catch_up()
    assert table_digests(engine.projections.conn) == fresh_digests(engine)


def busy_turn(engine: MemoryEngine, extractor: RecordedExtractor, turn: int, size: int) -> Any:
    session = engine.session(NAMESPACE, "big", extractor=extractor)
    items = [make_item(f"Alice fact {turn}.{k} {'detail ' * size}holds.") for k in range(5)]
    extractor.provide(turn, items)
    return session, session.observe_final_transcript(turn, f"user: {'long line ' * size}{turn}")


# A full map -----------------------------------------------------------------------------------


def test_small_map_fills_up_and_grows_while_commands_run(tmp_path: Path) -> None:
    engine = MemoryEngine.open(tmp_path / "store", sync=False, map_size=32 * 1024)
    try:
        env = engine.factory.datastore.env  # type: ignore[attr-defined]
        initial = env.info()["map_size"]
        extractor = RecordedExtractor()
        for turn in range(1, 31):
            session, outcome = busy_turn(engine, extractor, turn, 150)
            assert outcome.candidates == 5
        report = session.finish()
        assert len(report.activated) == 150
        assert env.info()["map_size"] > 16 * initial
        check_store(engine)
        head, stored = engine.head, log_bytes(engine)
    finally:
        engine.close()
    with MemoryEngine.open(tmp_path / "store", sync=False, map_size=32 * 1024) as reopened:
        assert reopened.head == head and log_bytes(reopened) == stored
        check_store(reopened)


def test_map_full_between_two_puts_grows_and_rewrites_the_whole_command(
    tmp_path: Path, inject: Callable[[str, Callable[[], None]], None]
) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        env = engine.factory.datastore.env  # type: ignore[attr-defined]
        extractor = RecordedExtractor()
        busy_turn(engine, extractor, 1, 1)
        before, size = engine.head, env.info()["map_size"]
        # The map is full after the second event of the extraction outcome was put (the
        # evidence is the first put): LMDB aborts the whole transaction, the map doubles and
        # the transaction runs again from the start.
        inject("ledger.put", raise_once(lmdb.MapFullError("injected: map full"), at_call=3))
        _, outcome = busy_turn(engine, extractor, 2, 1)
        assert outcome.evidence_position == before + 1
        assert outcome.extraction_position == before + 1 + 6 == engine.head
        assert outcome.candidates == 5
        assert env.info()["map_size"] == 2 * size
        check_store(engine)


def test_failure_inside_the_write_transaction_writes_nothing_and_the_retry_completes(
    tmp_path: Path, inject: Callable[[str, Callable[[], None]], None]
) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        extractor = RecordedExtractor()
        session, _ = busy_turn(engine, extractor, 1, 1)
        before, stored = engine.head, log_bytes(engine)
        # The evidence commits; the extraction outcome's transaction fails before its commit.
        inject("ledger.commit", raise_once(lmdb.DiskError("injected: no space left"), 2))
        with pytest.raises(LedgerOperationalError, match="no space left") as raised:
            busy_turn(engine, extractor, 2, 1)
        # the driver's error is translated (naming the store), never raised raw
        assert isinstance(raised.value.__cause__, lmdb.DiskError)
        assert str(tmp_path / "store" / "ledger") in str(raised.value)
        faults.FAULTS.clear()
        assert engine.head == before + 1, "only the evidence command is written"
        assert log_bytes(engine).startswith(stored)
        assert session.pending_extractions() == [2]
        _, outcome = busy_turn(engine, extractor, 2, 1)
        assert outcome.already_observed and outcome.extraction_position == before + 7
        assert session.pending_extractions() == []
        check_store(engine)


# Unwritable and missing store folders -------------------------------------------------------

_PR_CAPBSET_DROP = 24
_DAC_CAPS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER

_OPEN_IN_CHILD = """
import json, sys
from memory_ledger.commands import MemoryEngine
try:
    with MemoryEngine.open(sys.argv[1], sync=False) as engine:
        print(json.dumps({"opened": engine.head}))
except Exception as e:
    print(json.dumps({"error": [c.__name__ for c in type(e).__mro__], "message": str(e)}))
"""


def _drop_dac_capabilities() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _DAC_CAPS:
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _modes_are_enforced(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.write_bytes(b"")
    except PermissionError:
        return True
    probe.unlink()
    return False


def open_without_write_permission(path: Path, read_only: Path) -> dict[str, Any]:
    """``MemoryEngine.open(path)`` where ``read_only`` is not writable, in a child process.

    The child is unprivileged as far as file modes go: as root, it drops the capabilities
    that bypass them before it starts (skipped, saying why, where that is not possible).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    preexec = None
    if not _modes_are_enforced(read_only):
        if os.geteuid() != 0 or sys.platform != "linux":
            pytest.skip("file modes are not enforced for this user: cannot make a folder read-only")
        preexec = _drop_dac_capabilities
    try:
        done = subprocess.run(
            [sys.executable, "-c", _OPEN_IN_CHILD, str(path)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=preexec,
        )
    except subprocess.SubprocessError as e:
        if preexec is not None:  # prctl refused (no CAP_SETPCAP)
            pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE: {e}")
        raise
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def make_read_only(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(folder, name), stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(folder, 0o555)


def make_writable(root: Path) -> None:
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def stored_store(path: Path) -> tuple[int, str]:
    with MemoryEngine.open(path, sync=False) as engine:
        extractor = RecordedExtractor()
        session = engine.session(NAMESPACE, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes green tea.")])
        session.observe_final_transcript(1, "user: green tea please")
        session.finish()
        return engine.head, hashlib.sha256(log_bytes(engine)).hexdigest()


def test_uncreatable_store_folder_raises_typed_error_naming_it(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    os.chmod(parent, 0o555)
    try:
        found = open_without_write_permission(parent / "store", parent)
    finally:
        os.chmod(parent, 0o755)
    assert "StoreUnavailableError" in found["error"], found
    assert str(parent / "store") in found["message"]
    assert not (parent / "store").exists()


def test_read_only_store_raises_typed_error_naming_it_and_keeps_the_data(tmp_path: Path) -> None:
    store = tmp_path / "store"
    head, digest = stored_store(store)
    make_read_only(store)
    try:
        found = open_without_write_permission(store, store / "ledger")
    finally:
        make_writable(store)
    assert "StoreUnavailableError" in found["error"], found
    assert str(store) in found["message"]
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.head == head
        assert hashlib.sha256(log_bytes(engine)).hexdigest() == digest
        check_store(engine)


def test_read_only_projection_folder_raises_typed_error_naming_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    stored_store(store)
    make_read_only(store / "projections")
    try:
        found = open_without_write_permission(store, store / "projections")
    finally:
        make_writable(store / "projections")
    assert "StoreUnavailableError" in found["error"], found
    assert str(store) in found["message"]


def test_missing_store_with_create_false_raises_typed_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError, match="no memory store") as raised:
        MemoryEngine.open(tmp_path / "absent", create=False)
    assert str(tmp_path / "absent") in str(raised.value)
    assert not (tmp_path / "absent").exists()


# A damaged projection file ------------------------------------------------------------------


def test_damaged_projection_file_is_rebuilt_and_the_ledger_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    head, digest = stored_store(store)
    slot = store / "projections" / "slot-0.duckdb"
    data = bytearray(slot.read_bytes())
    data[:4096] = b"\xde\xad" * 2048
    slot.write_bytes(bytes(data))
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.projections.quarantined, "the damaged file was not set aside"
        assert engine.head == head
        assert hashlib.sha256(log_bytes(engine)).hexdigest() == digest
        check_store(engine)
        assert [h.statement for h in engine.recall(NAMESPACE, "green tea").results] == [
            "Alice likes green tea."
        ]


def test_a_checksum_error_in_a_block_is_damage_not_a_lock(tmp_path: Path) -> None:
    store = tmp_path / "store"
    head, _ = stored_store(store)
    slot = store / "projections" / "slot-0.duckdb"
    data = bytearray(slot.read_bytes())
    assert len(data) > 12_452
    data[12_388:12_452] = b"\xff" * 64  # inside a data block: "checksum ... in block at ..."
    slot.write_bytes(bytes(data))
    with MemoryEngine.open(store, sync=False) as engine:
        # set aside and rebuilt in the same slot, not skipped as if another process held it
        assert engine.projections.path == str(slot)
        assert engine.projections.quarantined
        assert engine.head == head
        assert [h.statement for h in engine.recall(NAMESPACE, "green tea").results] == [
            "Alice likes green tea."
        ]


def test_damage_found_while_in_use_is_a_typed_error_and_the_next_open_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    from memory_ledger.projections.runner import ProjectionRunner
    from memory_ledger.projections.store import ProjectionDamagedError, damage_marker

    store = tmp_path / "store"
    head, digest = stored_store(store)
    slot = store / "projections" / "slot-0.duckdb"

    def short_read(self: ProjectionRunner, to: int | None = None) -> int:
        raise duckdb.IOException(
            f'IO Error: Could not read enough bytes from file "{slot}": attempted to read '
            "262144 bytes from location 2633728"
        )

    with MemoryEngine.open(store, sync=False) as engine:
        monkeypatch.setattr(ProjectionRunner, "catch_up", short_read)
        # Recall is served from memory (the serving read models) and never reads DuckDB...
        assert engine.recall(NAMESPACE, "green tea").results
        # ...a DuckDB reader (SQL, audit, the debugger) finds the damage.
        with pytest.raises(ProjectionDamagedError, match="slot-0.duckdb") as error:
            engine.catch_up()
        assert isinstance(error.value, OSError)
        assert damage_marker(slot).exists()
        monkeypatch.undo()
    with MemoryEngine.open(store, sync=False) as engine:
        assert engine.projections.path == str(slot)
        assert engine.projections.quarantined
        assert not damage_marker(slot).exists()
        assert engine.head == head
        assert hashlib.sha256(log_bytes(engine)).hexdigest() == digest
        assert [h.statement for h in engine.recall(NAMESPACE, "green tea").results] == [
            "Alice likes green tea."
        ]
