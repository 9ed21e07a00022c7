"""Reads never write a namespace's names to disk unless it holds memories, and an erasure's
rows leave no DuckDB block behind, even when the erasing process is killed right after
``erase`` returns (issue 34 item 2, a newcomer's report on the first version of it).

- a recall (and every other read) of an erased namespace, or of one never written, leaves
  its names (tenant, principal, scope id) in no file: the persisted recall index
  (``slot-N.recall``) holds only namespaces with memories, whatever the read;
- a secret-shaped namespace part given to a read is never written either;
- ``forget_all`` on an erased namespace raises ``NamespaceErasedError``, as ``remember`` and
  ``forget`` do (Python, async, CLI ``forget --all``);
- ``erase`` rewrites the projection file it deleted rows from before it returns: a DuckDB
  ``DELETE`` leaves the rows' bytes in old blocks, so a process killed with ``kill -9`` right
  after ``erase`` returned left the statements in ``slot-N.duckdb`` until the next open.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import memory_ledger
from memory_ledger import AsyncMemoryEngine, MemoryEngine, Namespace, NamespaceErasedError
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT
from tests.encryption_helpers import bytes_found

ALICE = Namespace("acme5", "alice5q", "chat5q")
BOB = Namespace("acme5", "bob5q", "chat5q")
SECRET = "sk-proj-abcDEF1234567890abcdefGHIJKLmnopqrstuv"
runner = CliRunner()


def erased_store(tmp_path: Path) -> tuple[Path, Path]:
    """An encrypted store where alice (tenant+principal level) was erased and bob was not."""
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    store = tmp_path / "store"
    with memory_ledger.open(store, master_key=key) as engine:
        engine.remember(ALICE, "Alice5 likes Tamarindzz.")
        engine.remember(BOB, "Bob5 likes Rooibos tea.")
        engine.recall(ALICE, "Tamarindzz")  # indexed before the erasure
        engine.erase("acme5", "alice5q", requested_by="dpo")
    assert bytes_found(b"alice5q", store) == []
    assert bytes_found(b"Tamarindzz", store) == []
    return store, key


READS: dict[str, Callable[[MemoryEngine], object]] = {
    "recall": lambda engine: engine.recall(ALICE, "anything"),
    "retrievable_memories": lambda engine: engine.retrievable_memories(ALICE),
    "count_active_memories": lambda engine: engine.count_active_memories(ALICE),
    "recall_then_bob": lambda engine: (engine.recall(ALICE, "x"), engine.recall(BOB, "tea")),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_of_an_erased_namespace_writes_no_name(tmp_path: Path, read: str) -> None:
    store, key = erased_store(tmp_path)
    with memory_ledger.open(store, master_key=key) as engine:
        READS[read](engine)
    assert bytes_found(b"alice5q", store) == []
    assert bytes_found(b"Tamarindzz", store) == []


def test_forget_all_of_an_erased_namespace_is_refused(tmp_path: Path) -> None:
    store, key = erased_store(tmp_path)
    with memory_ledger.open(store, master_key=key) as engine:
        with pytest.raises(NamespaceErasedError) as caught:
            engine.forget_all(ALICE)
        assert caught.value.reason_code == "namespace_erased"
        assert engine.forget_all(BOB) == 1  # another namespace is untouched

    async def forget_all_async() -> None:
        async with AsyncMemoryEngine.open(store, master_key=key) as mem:
            with pytest.raises(NamespaceErasedError):
                await mem.forget_all(ALICE)

    asyncio.run(forget_all_async())
    result = runner.invoke(
        app,
        ["forget", "--all", "--store", str(store), "--master-key-file", str(key)]
        + ["--tenant", "acme5", "--principal", "alice5q", "--scope-id", "chat5q"],
    )
    assert result.exit_code != 0
    assert "erased" in result.output
    assert bytes_found(b"alice5q", store) == []


def test_cli_recall_of_a_restored_backup_writes_no_erased_name(tmp_path: Path) -> None:
    store, key = erased_store(tmp_path)
    backup, restored = tmp_path / "backup", tmp_path / "restored"
    common = ["--master-key-file", str(key)]
    result = runner.invoke(app, ["backup", "--store", str(store), "--out", str(backup), *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["restore", str(backup), "--store", str(restored), *common])
    assert result.exit_code == 0, result.output
    for principal in ("alice5q", "bob5q"):
        result = runner.invoke(
            app,
            ["recall", "--store", str(restored), *common, "--tenant", "acme5"]
            + ["--principal", principal, "--scope-id", "chat5q", "tea"],
        )
        assert result.exit_code == 0, result.output
    assert bytes_found(b"alice5q", store, backup, restored) == []


def test_cli_recall_of_a_secret_shaped_namespace_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with memory_ledger.open(store) as engine:
        engine.remember(BOB, "Bob5 likes Rooibos tea.")
    result = runner.invoke(
        app,
        ["recall", "--store", str(store), "--tenant", SECRET, "--principal", "a"]
        + ["--scope-id", "b", "x"],
    )
    assert SECRET not in result.output
    assert bytes_found(SECRET.encode(), store) == []
    assert bytes_found(b"Rooibos", store)  # the index of a namespace with memories is kept


_part = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=6, max_size=12)


def test_a_read_of_a_namespace_without_memories_leaves_no_state(tmp_path: Path) -> None:
    """Property: whatever namespace a read names, when it holds no memory neither the
    recall index in memory nor any file of the store keeps its names (after the close, and
    after a reopen that reads the persisted index)."""
    store = tmp_path / "store"
    read: list[Namespace] = []
    with memory_ledger.open(store) as engine:
        engine.remember(BOB, "Bob5 likes Rooibos tea.")
        engine.recall(BOB, "tea")

        @settings(max_examples=40, deadline=None, database=None)
        @given(tenant=_part, principal=_part)
        def reads(tenant: str, principal: str) -> None:
            empty = Namespace("zz" + tenant, "zz" + principal, "zzscope")
            read.append(empty)
            assert engine.recall(empty, "tea").results == ()
            assert engine.retrievable_memories(empty) == []
            assert engine.count_active_memories(empty) == 0
            assert empty.key() not in engine.recall_index.loaded

        reads()
    with memory_ledger.open(store) as engine:
        for empty in read[:5]:
            engine.recall(empty, "tea")
        engine.recall(BOB, "tea")
    assert read
    for empty in read:
        assert bytes_found(empty.principal.encode(), store) == []
    assert bytes_found(b"Rooibos", store)


_KILL_CHILD = """
import os, signal, sys
import memory_ledger
m = memory_ledger.open(sys.argv[1], master_key=sys.argv[2])
m.erase("acmek", "alicek9", requested_by="x")
os.kill(os.getpid(), signal.SIGKILL)
"""


def large_store(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    store = tmp_path / "ek"
    with memory_ledger.open(store, master_key=key) as engine:
        alice = Namespace("acmek", "alicek9", "chatk9")
        engine.remember_many(alice, [f"Alicek9 secret Pangolinzz fact {i}." for i in range(3000)])
        engine.remember(Namespace("acmek", "bobk9", "chatk9"), "Bobk9 likes Rooibos tea.")
        engine.recall(alice, "Pangolinzz")
    assert bytes_found(b"Pangolinzz fact", store)
    return store, key


def test_erase_rewrites_the_projection_file_before_it_returns(tmp_path: Path) -> None:
    store, key = large_store(tmp_path)
    with memory_ledger.open(store, master_key=key) as engine:
        engine.erase("acmek", "alicek9", requested_by="x")
        # Still open: the file it holds (and its WAL) hold no byte of the statements.
        assert bytes_found(b"Pangolinzz", store) == []
        assert bytes_found(b"alicek9", store) == []
        assert engine.recall(Namespace("acmek", "bobk9", "chatk9"), "tea").results
        engine.remember(Namespace("acmek", "bobk9", "chatk9"), "Bobk9 plays the oboe.")
    assert bytes_found(b"Pangolinzz", store) == []


def test_kill_right_after_erase_returns_leaves_no_statement(tmp_path: Path) -> None:
    store, key = large_store(tmp_path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_CHILD, str(store), str(key)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert bytes_found(b"Pangolinzz", store) == []  # before any reopen
    with memory_ledger.open(store, master_key=key) as engine:
        assert engine.recall(Namespace("acmek", "bobk9", "chatk9"), "tea").results
    assert bytes_found(b"Pangolinzz", store) == []


def test_a_process_holding_another_slot_rewrites_its_file_when_it_catches_up(
    tmp_path: Path,
) -> None:
    store, key = large_store(tmp_path)
    alice, bob = Namespace("acmek", "alicek9", "chatk9"), Namespace("acmek", "bobk9", "chatk9")
    with (
        memory_ledger.open(store, master_key=key) as first,
        memory_ledger.open(store, master_key=key) as second,
    ):
        assert second.projections.path != first.projections.path  # two slots
        assert second.recall(alice, "Pangolinzz").results
        first.erase("acmek", "alicek9", requested_by="x")
        assert second.recall(bob, "tea").results  # catches up to the erasure
        assert bytes_found(b"Pangolinzz", store) == []
        assert bytes_found(b"alicek9", store) == []
    assert bytes_found(b"Pangolinzz", store) == []
