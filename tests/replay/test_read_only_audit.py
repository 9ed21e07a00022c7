"""Audits work on a store the user can only read.

An auditor has no write access: the store's folders and files are read-only (or on a
read-only mount). ``MemoryEngine.open(path, create=False)`` then opens the ledger with
LMDB's ``MDB_RDONLY`` (without the lock file when even ``lock.mdb`` is not writable) and
the read models in a temporary DuckDB file, removed on close. Every audit command
(``verify``, ``stats``, ``events``, ``explain``, ``as-of``, ``export``, ``backup``) and its
Python function works, a command (a new session) is refused with ``LedgerReadOnlyError``,
and no byte of the store changes.

Root bypasses file modes, so the read-only checks run in a child that dropped the
capabilities doing so (as ``tests/crash/test_resource_faults.py`` does), skipped where that is not
possible; ``read_only=True`` is also checked in this process.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.ledger.errors import LedgerReadOnlyError
from memory_ledger.replay import (
    as_of,
    backup_store,
    explain,
    export_store,
    filter_events,
    store_stats,
    verify_store,
)
from tests.conftest import REPO_ROOT, make_item
from tests.crash.test_resource_faults import (
    _drop_dac_capabilities,
    _modes_are_enforced,
    make_read_only,
    make_writable,
)

NS = Namespace("acme", "alice", "assistant")


def build_store(path: Path) -> str:
    """A store with two sessions and an activated memory; returns a memory id."""
    with MemoryEngine.open(path, sync=False) as engine:
        for number, statement in ((1, "Alice likes green tea."), (2, "Alice lives in Lyon.")):
            extractor = RecordedExtractor()
            session = engine.session(NS, f"s{number}", extractor=extractor)
            extractor.provide(1, [make_item(statement)])
            session.observe_final_transcript(1, f"user: {statement}")
            session.finish()
        return str(engine.recall(NS, "green tea").results[0].memory_id)


def digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    path = tmp_path / "store"
    memory_id = build_store(path)
    yield path, memory_id
    make_writable(path)


_AUDIT_IN_CHILD = """
import json, os, sys, tempfile
from pathlib import Path
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.errors import LedgerReadOnlyError
from memory_ledger.replay import (
    as_of, backup_store, explain, export_store, filter_events, store_stats, verify_store,
)

store, memory_id, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
result = {"writable": os.access(store / "ledger", os.W_OK)}
with MemoryEngine.open(store, create=False) as engine:
    result["read_only"] = engine.read_only
    result["projection_file"] = engine.projections.path
    result["head"] = engine.head
    result["verify_ok"] = verify_store(engine).ok
    result["stats_events"] = store_stats(engine).events
    result["events"] = sum(1 for _ in filter_events(engine))
    result["lineage_statement"] = explain(engine, memory_id).statement
    with as_of(engine, engine.head) as past:
        result["as_of_memories"] = len(past.memories())
    result["export_files"] = len(export_store(engine, out / "export").files)
    result["backup_head"] = backup_store(engine, out / "backup").manifest.position
    result["recall"] = [h.statement for h in engine.recall(
        Namespace("acme", "alice", "assistant"), "green tea").results]
    try:
        engine.session(Namespace("acme", "alice", "assistant"), "s3")
    except LedgerReadOnlyError as e:
        result["command"] = [e.reason_code, str(e)]
result["temporary_removed"] = not os.path.exists(result["projection_file"])
print(json.dumps(result))
"""


def run_unprivileged(args: list[str], read_only: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python args`` in a child for which ``read_only``'s file modes are enforced."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    preexec = None
    if not _modes_are_enforced(read_only):
        if os.geteuid() != 0 or sys.platform != "linux":
            pytest.skip("file modes are not enforced for this user: cannot make a store read-only")
        preexec = _drop_dac_capabilities
    try:
        return subprocess.run(
            [sys.executable, *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=preexec,
        )
    except subprocess.SubprocessError as e:
        if preexec is not None:
            pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE: {e}")
        raise


def test_audit_functions_work_on_a_read_only_store(store: tuple[Path, str], tmp_path: Path) -> None:
    path, memory_id = store
    before = digests(path)
    make_read_only(path)
    out = tmp_path / "out"
    out.mkdir()
    done = run_unprivileged(["-c", _AUDIT_IN_CHILD, str(path), memory_id, str(out)], path)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    assert found["writable"] is False
    assert found["read_only"] is True
    assert not found["projection_file"].startswith(str(path)), "a temporary projection file"
    assert found["temporary_removed"] is True
    assert found["verify_ok"] is True
    assert found["head"] == found["stats_events"] == found["events"] == found["backup_head"]
    assert found["lineage_statement"] == "Alice likes green tea."
    assert found["as_of_memories"] == 2
    assert found["export_files"] > 1
    assert found["recall"] == ["Alice likes green tea."]
    assert found["command"][0] == "ledger_read_only"
    assert str(path / "ledger") in found["command"][1]
    make_writable(path)
    assert digests(path) == before, "no byte of the store changed"


@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["stats"],
        ["events"],
        ["explain", "{memory_id}"],
        ["as-of", "3"],
        ["export", "--out", "{out}/export"],
        ["backup", "--out", "{out}/backup"],
    ],
)
def test_audit_commands_work_on_a_read_only_store(
    store: tuple[Path, str], tmp_path: Path, command: list[str]
) -> None:
    path, memory_id = store
    before = digests(path)
    make_read_only(path)
    out = tmp_path / "out"
    out.mkdir()
    args = [part.format(memory_id=memory_id, out=out) for part in command]
    done = run_unprivileged(["-m", "memory_ledger.replay", *args, "--store", str(path)], path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in done.stderr.lower()
    make_writable(path)
    assert digests(path) == before


def test_read_only_true_refuses_commands_and_leaves_the_ledger_alone(
    store: tuple[Path, str], tmp_path: Path
) -> None:
    path, memory_id = store
    data = path / "ledger" / "data.mdb"
    ledger_before = hashlib.sha256(data.read_bytes()).hexdigest()
    with MemoryEngine.open(path, read_only=True) as engine:
        assert engine.read_only
        head = engine.head
        with pytest.raises(LedgerReadOnlyError) as raised:
            engine.session(NS, "s9")
        assert raised.value.reason_code == "ledger_read_only"
        assert verify_store(engine).ok
        assert store_stats(engine).events == head
        assert len(list(filter_events(engine))) == head
        assert explain(engine, memory_id).statement == "Alice likes green tea."
        with as_of(engine, head) as past:
            assert len(past.memories()) == 2
        export_store(engine, tmp_path / "export")
        backup_store(engine, tmp_path / "backup")
    # lock.mdb is writable here, so this reader took a reader slot in it (LMDB's way); the
    # ledger itself is untouched.
    assert hashlib.sha256(data.read_bytes()).hexdigest() == ledger_before


def test_a_missing_store_is_not_created_by_a_read_only_open(tmp_path: Path) -> None:
    from memory_ledger.commands.errors import StoreUnavailableError

    with pytest.raises(StoreUnavailableError) as raised:
        MemoryEngine.open(tmp_path / "absent", read_only=True)
    assert raised.value.reason_code == "no_store"
    assert not (tmp_path / "absent").exists()
